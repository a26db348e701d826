/**
 * A GAHP protocol client: speaks to a GAHP exactly as HTCondor's gridmanager does (start-up
 * sequence, RESPONSE_PREFIX, async mode, `R` notifications answered with RESULTS). The
 * subcommands, `submit`, the interactive prompt and the demo all drive the GAHP through
 * this, so whatever works here works for HTCondor. The GAHP on the other end is either
 * in-process (a GahpServer on in-memory streams) or a child process (bin/boinc-gahp):
 * gahp-transport.ts.
 */
import { PassThrough } from 'node:stream';
import { escapeToken, joinTokens, splitTokens } from '../protocol/escape.js';
import { startGahp } from './run-gahp.js';
import type { GahpRunOptions } from '../create-services.js';
import { childTransport, streamTransport, type Transport } from './gahp-transport.js';
import type { Command } from '../protocol/commands.js';

export type TrafficDirection = 'send' | 'recv';
/** Sees every protocol line, secrets already masked (for the demo and `--trace`). */
export type TrafficListener = (direction: TrafficDirection, line: string) => void;

/** The GAHP answered a request line with something other than `S` (usually `E <message>`). */
export class GahpRequestError extends Error {
  override name = 'GahpRequestError';
  constructor(readonly request: string, readonly reply: string) {
    super(replyMessage(reply));
  }
}

/** An async command's result was an error message instead of `NULL ...`. */
export class GahpResultError extends Error {
  override name = 'GahpResultError';
  /**
   * The batch a `... no batch named <name>` error names, read as HTCondor's gridmanager
   * reads it (docs/gahp-protocol.md, "Names and statuses the client relies on"): the text
   * after the first `no batch named `. Undefined for every other error.
   */
  readonly missingBatch: string | undefined;
  /**
   * Whether the server refused the account: BOINC's `bad authenticator` (docs/boinc-server.md),
   * an answer that does not change until the authenticator does.
   */
  readonly accountRefused: boolean;
  constructor(readonly command: string, message: string) {
    super(message);
    this.missingBatch = missingBatchOf(message);
    this.accountRefused = message.includes(BAD_AUTHENTICATOR);
  }
}

const BAD_AUTHENTICATOR = 'bad authenticator';

const NO_BATCH_NAMED = 'no batch named ';

/** Where an error result's text is read (with accountRefused): see GahpResultError.missingBatch. */
function missingBatchOf(message: string): string | undefined {
  const at = message.indexOf(NO_BATCH_NAMED);
  return at >= 0 ? message.slice(at + NO_BATCH_NAMED.length) : undefined;
}

function replyMessage(reply: string): string {
  const tokens = splitTokens(reply);
  if (tokens[0] === 'E' || tokens[0] === 'F') return tokens.slice(1).join(' ') || 'the GAHP refused the request';
  return `unexpected reply: ${reply.slice(0, 200)}`;
}

interface PendingReply {
  /** RESULTS replies are followed by n result lines. */
  results: boolean;
  /** For RESPONSE_PREFIX: the prefix every line after an `S` reply carries (escaped). */
  newPrefix?: string;
  resolve(line: string): void;
  reject(err: Error): void;
}

export class GahpClient {
  /** The banner line the GAHP printed first. */
  readonly banner: Promise<string>;
  private resolveBanner!: (line: string) => void;
  private rejectBanner!: (err: Error) => void;
  private gotBanner = false;
  /** The response prefix as the GAHP prints it (escaped, like every token). */
  private prefix = '';
  private readonly replies: PendingReply[] = [];
  /** Result lines still expected for the RESULTS reply being read. */
  private resultLinesLeft = 0;
  private readonly resultWaiters = new Map<string, { resolve(t: string[]): void; reject(e: Error): void }>();
  private nextReqId = 1;
  private draining = false;
  private drainAgain = false;
  private closedWhy: string | undefined;
  private readonly secrets = new Set<string>();
  /** Every protocol line, secrets masked. */
  onTraffic: TrafficListener | undefined;
  /** Results for request ids nobody awaits (e.g. typed by hand in interactive mode). */
  onResult: ((reqId: string, tokens: string[]) => void) | undefined;
  /** Lines that fit no request (a GAHP bug, or a missing prefix). */
  onStray: ((line: string) => void) | undefined;
  /** The BOINC_* commands of an in-process GAHP (usage, summary, parse), for help texts. */
  commands: Command[] | undefined;
  /**
   * The in-process GAHP's state directory as it chose it (the configured one, its fallback,
   * or undefined: state in memory; gahp/state-dir.ts). Undefined for a child process.
   */
  stateDir: string | undefined;

  private constructor(private readonly transport: Transport) {
    this.banner = new Promise((resolve, reject) => {
      this.resolveBanner = resolve;
      this.rejectBanner = reject;
    });
    this.banner.catch(() => undefined);
    transport.onLine((line) => this.handleLine(line));
    transport.onClose((why) => this.handleClose(why));
  }

  /** A GAHP running inside this process on in-memory streams (same server, same commands). */
  static inProcess(opts: Omit<GahpRunOptions, 'input' | 'output'> = {}): GahpClient {
    const toGahp = new PassThrough();
    const fromGahp = new PassThrough();
    const running = startGahp({ ...opts, input: toGahp, output: fromGahp });
    const client = GahpClient.overStreams(toGahp, fromGahp, {
      exited: running.exited.then((code) => ({ code, why: 'the GAHP exited' })),
      kill: () => void running.server.shutdown(),
    });
    client.commands = running.commands;
    client.stateDir = running.services.config.stateDir;
    return client;
  }

  /**
   * A GAHP at the other end of two streams: `toGahp` is its input, `fromGahp` its output.
   * `exited` (default: the output ends) says when and how it stopped; `kill` stops it.
   */
  static overStreams(
    toGahp: NodeJS.WritableStream,
    fromGahp: NodeJS.ReadableStream,
    control: { exited?: Promise<{ code: number | null; why: string }>; kill?: () => void } = {},
  ): GahpClient {
    return new GahpClient(streamTransport(toGahp, fromGahp, control));
  }

  /** bin/boinc-gahp as a child process, exactly what HTCondor starts. */
  static spawn(args: string[] = [], opts: { env?: NodeJS.ProcessEnv; onStderr?: (text: string) => void } = {}): GahpClient {
    return new GahpClient(childTransport(args, opts));
  }

  /**
   * Strings never shown by onTraffic (the authenticator): as given, and escaped as a token
   * (the form it has on the wire when it holds a backslash).
   */
  addSecret(secret: string): void {
    if (secret.length === 0) return;
    // The escaped form first: masking the raw form inside it would leave its escapes behind.
    this.secrets.add(escapeToken(secret));
    this.secrets.add(secret);
  }

  mask(line: string): string {
    let out = line;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('***');
    return out;
  }

  private trace(direction: TrafficDirection, line: string): void {
    if (this.onTraffic) this.onTraffic(direction, this.mask(line));
  }

  private handleLine(raw: string): void {
    this.trace('recv', raw);
    if (!this.gotBanner) {
      // Like the gridmanager: skip anything before a line starting with `$`.
      if (raw.startsWith('$')) {
        this.gotBanner = true;
        this.resolveBanner(raw);
      }
      return;
    }
    let line = raw;
    if (this.prefix) {
      if (!line.startsWith(this.prefix)) {
        this.onStray?.(raw);
        return;
      }
      line = line.slice(this.prefix.length);
    }
    if (this.resultLinesLeft > 0) {
      this.resultLinesLeft--;
      this.dispatchResult(line);
      return;
    }
    if (line === 'R') {
      void this.drainResults();
      return;
    }
    const pending = this.replies.shift();
    if (!pending) {
      this.onStray?.(raw);
      return;
    }
    // The reply to RESPONSE_PREFIX comes under the old prefix; everything after it under the new.
    if (pending.newPrefix !== undefined && line === 'S') this.prefix = pending.newPrefix;
    if (pending.results) {
      const m = /^S ([0-9]+)$/.exec(line);
      if (m) this.resultLinesLeft = Number(m[1]);
    }
    pending.resolve(line);
  }

  private dispatchResult(line: string): void {
    const tokens = splitTokens(line);
    const reqId = tokens.shift() ?? '';
    const waiter = this.resultWaiters.get(reqId);
    if (waiter) {
      this.resultWaiters.delete(reqId);
      waiter.resolve(tokens);
    } else {
      this.onResult?.(reqId, tokens);
    }
  }

  private handleClose(why: string): void {
    if (this.closedWhy) return;
    this.closedWhy = why;
    const err = new Error(why);
    if (!this.gotBanner) this.rejectBanner(err);
    for (const p of this.replies.splice(0)) p.reject(err);
    for (const w of this.resultWaiters.values()) w.reject(err);
    this.resultWaiters.clear();
  }

  private async drainResults(): Promise<void> {
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = true;
    try {
      do {
        this.drainAgain = false;
        await this.send('RESULTS');
      } while (this.drainAgain);
    } catch {
      /* closed: waiters were rejected */
    } finally {
      this.draining = false;
    }
  }

  /**
   * Sends one raw request line; resolves with its reply line (prefix stripped). For RESULTS
   * the result lines that follow are delivered to their waiters (or onResult).
   */
  send(line: string): Promise<string> {
    if (this.closedWhy) return Promise.reject(new Error(this.closedWhy));
    const word = (splitTokens(line)[0] ?? '').toUpperCase();
    return new Promise<string>((resolve, reject) => {
      const pending: PendingReply = { results: word === 'RESULTS', resolve, reject };
      if (word === 'RESPONSE_PREFIX') pending.newPrefix = escapeToken(splitTokens(line)[1] ?? '');
      this.replies.push(pending);
      this.trace('send', line);
      this.transport.write(line);
    });
  }

  /** Sends a request built from tokens (escaped); throws GahpRequestError unless the reply is `S`. */
  async request(tokens: string[]): Promise<string> {
    const line = joinTokens(tokens);
    const reply = await this.send(line);
    if (reply !== 'S' && !reply.startsWith('S ')) throw new GahpRequestError(line, reply);
    return reply;
  }

  /** A request id not in use. */
  allocReqId(): string {
    for (;;) {
      const id = String(this.nextReqId++);
      if (!this.resultWaiters.has(id)) return id;
    }
  }

  /** Marks reqId as awaited: its result resolves the promise instead of going to onResult. */
  awaitResult(reqId: string): Promise<string[]> {
    return new Promise((resolve, reject) => {
      if (this.closedWhy) return reject(new Error(this.closedWhy));
      this.resultWaiters.set(reqId, { resolve, reject });
    });
  }

  /**
   * Runs an async BOINC_* command: assigns a request id, checks the immediate `S`, waits for
   * the result. Resolves with the tokens after `NULL`; rejects with GahpResultError when
   * the result is an error message.
   */
  async call(command: string, args: string[]): Promise<string[]> {
    const reqId = this.allocReqId();
    const result = this.awaitResult(reqId);
    try {
      await this.request([command, reqId, ...args]);
    } catch (err) {
      this.resultWaiters.delete(reqId);
      throw err;
    }
    const tokens = await result;
    if (tokens[0] === 'NULL') return tokens.slice(1);
    throw new GahpResultError(command, tokens.join(' ') || 'failed without a message');
  }

  /** HTCondor's start-up sequence: COMMANDS, CONDOR_VERSION, RESPONSE_PREFIX, ASYNC_MODE_ON. Returns COMMANDS' list. */
  async startup(prefix = 'GAHP:'): Promise<string[]> {
    await this.banner;
    const commands = splitTokens(await this.request(['COMMANDS'])).slice(1);
    if (commands.includes('CONDOR_VERSION')) await this.send('CONDOR_VERSION $CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $');
    if (commands.includes('RESPONSE_PREFIX')) await this.request(['RESPONSE_PREFIX', prefix]);
    await this.request(['ASYNC_MODE_ON']);
    return commands;
  }

  async selectProject(url: string, authenticator: string): Promise<void> {
    this.addSecret(authenticator);
    await this.request(['BOINC_SELECT_PROJECT', url, authenticator]);
  }

  /** QUIT (if still running), then wait for the GAHP to exit. */
  async close(): Promise<number | null> {
    if (!this.closedWhy) this.send('QUIT').catch(() => undefined);
    return this.transport.end();
  }

  kill(): void {
    this.transport.kill();
  }
}
