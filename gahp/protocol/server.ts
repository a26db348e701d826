/**
 * The GAHP protocol server: the IO loop, the built-in protocol commands and the life of an
 * async command, from its request line to its result. It knows lines, tokens, prefixes and
 * request ids; what a BOINC_* command does lives in the command modules it is given. Its
 * parts: request-ids.ts (which ids are taken), command-deadline.ts (the command timeout),
 * result-queue.ts (results waiting for RESULTS, the `R`), line-writer.ts (output at the
 * reader's pace), messages.ts (error texts).
 *
 * Invariants:
 * - every request line gets exactly one reply line, written whole, in request order;
 * - the reading loop never awaits anything: async work is queued and answered later
 *   through RESULTS, so VERSION is answered at once whatever is in flight;
 * - output waits for a reader that is behind, and so does the reading of requests: a
 *   client that stops reading costs a bounded amount of memory (readLines);
 * - once RESPONSE_PREFIX has been answered, every line printed carries the prefix;
 * - every token printed is escaped, and every message printed has passed the log's
 *   redaction (the authenticator never reaches stdout) and is cut to a bounded length.
 */
import { setMaxListeners } from 'node:events';
import PQueue from 'p-queue';
import { escapeToken, joinTokens, splitTokensExact } from './escape.js';
import { DEFAULT_MAX_LINE_BYTES, LineFramer, type LineEvent } from './line-reader.js';
import { ArgumentError, type AsyncCommand, type Command, type SyncCommand } from './commands.js';
import { DEFAULT_MAX_MESSAGE_CHARS, checkResultTokens, clip, clipRedacted, cutMessage, errorText } from './messages.js';
import { PendingRequestIds } from './request-ids.js';
import { commandDeadline, type CommandDeadline } from './command-deadline.js';
import { LineWriter } from './line-writer.js';
import { ResultQueue } from './result-queue.js';
import { Logger } from '../log.js';

export interface GahpServerOptions {
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** The BOINC_* (or any other) commands beyond the protocol's own. */
  commands: readonly Command[];
  /** `$GahpVersion: <x.y.z> <Mon> <DD> <YYYY> <escaped description> $` */
  banner: string;
  log?: Logger;
  maxLineBytes?: number;
  /** How many async commands run at once; the rest wait their turn. */
  concurrency?: number;
  /** How long QUIT/EOF waits for in-flight work to stop before exiting anyway. */
  shutdownGraceMs?: number;
  /**
   * Longest time from accepting an async command to its result, in ms (undefined or 0: no
   * limit). When it passes, the command's signal is aborted (its RPCs, uploads included,
   * stop at once) and its result is an error naming the timeout; a handler that has not
   * settled commandTimeoutGraceMs later is abandoned (its late result is dropped).
   */
  commandTimeoutMs?: number;
  /** See commandTimeoutMs (default 2000). */
  commandTimeoutGraceMs?: number;
  /** Longest error message printed in a result or an `E` reply, in characters (the rest is cut). */
  maxMessageChars?: number;
  /** Called once when the server has finished (QUIT, EOF, broken output). */
  onExit?: (code: number) => void;
}

export const PROTOCOL_COMMANDS = [
  'ASYNC_MODE_OFF', 'ASYNC_MODE_ON', 'COMMANDS', 'CONDOR_VERSION', 'QUIT',
  'RESPONSE_PREFIX', 'RESULTS', 'VERSION',
] as const;

export class GahpServer {
  private readonly framer: LineFramer;
  private readonly log: Logger;
  private readonly commands = new Map<string, Command>();
  private readonly queue: PQueue;
  private readonly abort = new AbortController();
  private readonly shutdownHooks: Array<() => Promise<void> | void> = [];
  private readonly maxMessageChars: number;
  private readonly out: LineWriter;
  private readonly requestIds = new PendingRequestIds();
  private readonly results = new ResultQueue(this.requestIds);
  /** Commands running outside the queue (AsyncCommand.queued false). */
  private readonly unqueued = new Set<Promise<void>>();

  private prefix = '';
  private asyncMode = false;
  /** Lines read but not yet handled because the output was busy (see readLines). */
  private heldBack: LineEvent[] = [];
  private inputPaused = false;
  private stopping = false;

  constructor(private readonly opts: GahpServerOptions) {
    this.framer = new LineFramer(opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
    this.log = opts.log ?? Logger.silent();
    this.queue = new PQueue({ concurrency: opts.concurrency ?? 32 });
    this.maxMessageChars = opts.maxMessageChars ?? DEFAULT_MAX_MESSAGE_CHARS;
    this.out = new LineWriter(opts.output, this.log, () => this.readLines([]));
    // Every in-flight handler may listen for the abort: hundreds are normal, not a leak.
    setMaxListeners(0, this.abort.signal);
    for (const c of opts.commands) {
      const name = c.name.toUpperCase();
      if ((PROTOCOL_COMMANDS as readonly string[]).includes(name)) throw new Error(`command ${name} would shadow a protocol command`);
      this.commands.set(name, c);
    }
  }

  /** Prints the banner and starts reading requests. */
  start(): void {
    this.out.write([this.opts.banner], '');
    const input = this.opts.input;
    input.on('data', (chunk: Buffer | string) => {
      if (this.stopping) return;
      this.readLines(this.framer.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    });
    input.on('end', () => {
      if (this.stopping) return;
      // EOF means QUIT: every line read before it is answered now, even if the client is
      // slow to read (shutdown then waits a bounded time for the output to go).
      const lines = this.heldBack.concat(this.framer.end());
      this.heldBack = [];
      for (const ev of lines) if (!this.stopping) this.handleEvent(ev);
      if (this.stopping) return;
      this.log.info('stdin closed: shutting down');
      void this.shutdown();
    });
    input.on('error', (err: Error) => {
      this.log.error(`stdin error: ${err.message}`);
      void this.shutdown();
    });
    this.opts.output.on('error', (err: Error) => {
      // The gridmanager went away (EPIPE): nobody can read our results any more.
      this.out.close();
      this.log.error(`stdout error: ${err.message}`);
      void this.shutdown();
    });
  }

  /** Work to do on shutdown after in-flight commands settle (close connections, flush). */
  onShutdown(hook: () => Promise<void> | void): void {
    this.shutdownHooks.push(hook);
  }

  /** The signal handed to command handlers; aborted on QUIT/EOF. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /**
   * Handles the lines read, in order, while the output keeps up. A client that does not read
   * our replies gets no more of them: once the output is busy, the lines left wait (at most
   * one chunk of input) and stdin is paused until the output drains, so nothing piles up
   * here, neither replies nor new work. The gridmanager reads every reply right after its
   * request and a RESULTS reply whole, so it never waits on us for this.
   */
  private readLines(events: LineEvent[]): void {
    const lines = this.heldBack.length > 0 ? this.heldBack.concat(events) : events;
    this.heldBack = [];
    for (let i = 0; i < lines.length; i++) {
      if (this.stopping) return;
      if (this.out.busy) {
        this.heldBack = lines.slice(i);
        break;
      }
      this.handleEvent(lines[i]!);
    }
    const pause = this.heldBack.length > 0 || this.out.busy;
    if (pause !== this.inputPaused && !this.stopping) {
      this.inputPaused = pause;
      if (pause) this.opts.input.pause();
      else this.opts.input.resume();
    }
  }

  private handleEvent(ev: LineEvent): void {
    try {
      switch (ev.kind) {
        case 'line':
          this.handleLine(ev.text);
          return;
        case 'overlong':
          this.log.warn(`< [line of ${ev.bytes} bytes dropped: over the limit]`);
          this.replyError(`line too long (${ev.bytes} bytes)`);
          return;
        case 'invalid-utf8':
          this.log.warn('< [line that is not valid UTF-8 dropped]');
          this.replyError('line is not valid UTF-8');
          return;
      }
    } catch (err) {
      // Last line of defence: a request never takes the process down.
      this.log.error(`internal error: ${(err as Error)?.stack ?? String(err)}`);
    }
  }

  private handleLine(line: string): void {
    const tokens = splitTokensExact(line);
    const word = tokens[0]!.toUpperCase();
    const command = this.commands.get(word);
    this.logInbound(line, tokens, command);
    if (tokens.every((t) => t.length === 0)) {
      this.replyError('empty request');
      return;
    }
    const args = tokens.slice(1);
    try {
      if ((PROTOCOL_COMMANDS as readonly string[]).includes(word)) {
        this.runProtocolCommand(word, args);
      } else if (command === undefined) {
        this.replyError(`unknown command ${tokens[0]!.slice(0, 100)}`);
      } else if (command.kind === 'sync') {
        this.runSync(command, args);
      } else {
        this.startAsync(command, args);
      }
    } catch (err) {
      // Defensive: nothing a request says may take the process down.
      this.log.error(`internal error on ${word.slice(0, 100)}: ${(err as Error)?.stack ?? String(err)}`);
      this.replyError(`internal error: ${errorText(err)}`);
    }
  }

  private runProtocolCommand(word: string, args: string[]): void {
    switch (word) {
      case 'COMMANDS': {
        const names = [...new Set([...PROTOCOL_COMMANDS, ...this.commands.keys()])].sort();
        this.reply(['S', ...names]);
        return;
      }
      case 'VERSION':
        // The banner as printed at start-up, after `S ` (the client reads it the same way).
        this.out.write(['S ' + this.opts.banner], this.prefix);
        return;
      case 'CONDOR_VERSION':
        // The client wants exactly two tokens back: S and our version string (escaped).
        if (args.length !== 1) return this.replyError('usage: CONDOR_VERSION <version>');
        // The banner as the client reads it (escapes removed), printed as one escaped token.
        this.reply(['S', this.opts.banner.replace(/\\([\s\S])/g, '$1')]);
        return;
      case 'RESPONSE_PREFIX': {
        if (args.length !== 1) return this.replyError('usage: RESPONSE_PREFIX <prefix>');
        // A prefix with a line break would break every later line in two.
        if (/[\r\n]/.test(args[0]!)) return this.replyError('the prefix must not contain CR or LF');
        // This reply still goes out under the old prefix: the client reads it before
        // it switches.
        this.reply(['S']);
        // Printed escaped: the client splits the line before it strips the prefix, so a
        // prefix with a space must come out as `\ ` to stay part of the first token.
        this.prefix = escapeToken(args[0]!);
        return;
      }
      case 'ASYNC_MODE_ON':
      case 'ASYNC_MODE_OFF':
        if (args.length !== 0) return this.replyError(`${word} takes no arguments`);
        this.asyncMode = word === 'ASYNC_MODE_ON';
        this.reply(['S']);
        this.notifyIfNeeded();
        return;
      case 'RESULTS':
        if (args.length !== 0) return this.replyError('RESULTS takes no arguments');
        this.out.write(this.results.deliver(), this.prefix);
        return;
      case 'QUIT':
        this.reply(['S']);
        this.log.info('QUIT: shutting down');
        void this.shutdown();
        return;
    }
  }

  private runSync(command: SyncCommand, args: string[]): void {
    try {
      command.run(args, { log: this.log });
    } catch (err) {
      this.replyError(errorText(err));
      return;
    }
    this.reply(['S']);
  }

  private startAsync(command: AsyncCommand, args: string[]): void {
    const reqId = args[0];
    const id = this.requestIds.check(reqId);
    if ('refused' in id) {
      this.replyError(id.refused === 'pending'
        ? `request id ${reqId} is still pending`
        : `${command.name}: the first argument must be a non-zero integer request id; usage: ${command.name} ${command.usage}`);
      return;
    }
    let request: unknown;
    try {
      request = command.parse(args.slice(1));
    } catch (err) {
      const msg = err instanceof ArgumentError ? err.message : `bad arguments: ${errorText(err)}`;
      if (!(err instanceof ArgumentError)) this.log.error(`${command.name} parser failed: ${(err as Error)?.stack ?? String(err)}`);
      this.replyError(`${command.name}: ${msg}; usage: ${command.name} ${command.usage}`);
      return;
    }
    this.requestIds.add(id.key);
    this.reply(['S']);
    // The timeout counts from now, the wait for a turn included (the client's call timeout does).
    const deadline = commandDeadline(this.opts.commandTimeoutMs, this.opts.commandTimeoutGraceMs ?? 2000, this.abort.signal);
    const run = () => this.runAsync(command, request, reqId!, id.key, deadline);
    const settled = (command.queued === false ? this.runUnqueued(run) : this.queue.add(run))
      .catch((err) => this.log.error(`queue failure: ${errorText(err)}`))
      .finally(() => deadline?.dispose());
    void settled;
  }

  /** Runs a command that takes no concurrency slot (AsyncCommand.queued false); shutdown waits for it too. */
  private runUnqueued(run: () => Promise<void>): Promise<void> {
    const work = run();
    this.unqueued.add(work);
    void work.finally(() => this.unqueued.delete(work)).catch(() => undefined);
    return work;
  }

  /** Runs an accepted command when its turn comes, and queues its result (or error) line. */
  private async runAsync(command: AsyncCommand, request: unknown, reqId: string, key: string, deadline: CommandDeadline | undefined): Promise<void> {
    if (this.abort.signal.aborted) return;
    let tokens: string[];
    try {
      if (deadline?.expired) throw new Error(`${deadline.reason} before the command could start`);
      const work = command.run(request, { signal: deadline?.signal ?? this.abort.signal, reqId, log: this.log, deadlinePassed: () => deadline?.expired === true });
      if (deadline) work.catch(() => undefined); // may be abandoned below
      tokens = checkResultTokens(await (deadline ? Promise.race([work, deadline.abandon]) : work));
    } catch (err) {
      let text = errorText(err);
      if (deadline?.expired && !this.abort.signal.aborted && !text.includes(deadline.reason)) text = `${deadline.reason}: ${text}`;
      text = this.safeMessage(text);
      tokens = command.errorResult ? command.errorResult(text) : [text];
      // At info: a failed command is what an admin looks for when jobs are held. One the
      // shutdown (QUIT, EOF) cut off did not fail: nobody will read its result, and the
      // gridmanager asks again after its restart.
      if (this.abort.signal.aborted && isAbort(err, this.abort.signal)) this.log.info(`${command.name} ${reqId} cut off at shutdown (not a failure: its result is not read)`);
      else this.log.info(`${command.name} ${reqId} failed: ${text}`);
    } finally {
      deadline?.dispose();
    }
    if (this.stopping) return;
    this.results.push(key, reqId, tokens);
    this.notifyIfNeeded();
  }

  private notifyIfNeeded(): void {
    if (this.results.notificationDue(this.asyncMode)) this.out.write(['R'], this.prefix);
  }

  /** One reply line from tokens: the first (S/E) as is, the rest escaped. */
  private reply(tokens: string[]): void {
    const [head, ...rest] = tokens;
    this.out.write([rest.length ? head + ' ' + joinTokens(rest) : head!], this.prefix);
  }

  /** `E <message>`: the client only looks at the first character; the message is one escaped token. */
  private replyError(message: string): void {
    this.reply(['E', this.safeMessage(message)]);
  }

  /** A message fit to print: secrets redacted, cut to the configured length, never empty. */
  private safeMessage(message: string): string {
    const text = cutMessage(this.log.redact(message), this.maxMessageChars);
    return text.length > 0 ? text : 'unknown error';
  }

  private logInbound(line: string, tokens: string[], command: Command | undefined): void {
    if (!this.log.enabled) return;
    const secret = command?.secretArgs;
    if (secret?.length) {
      // Hide the secret positions and anything after the first of them: a malformed line
      // may have the secret shifted to another position.
      const first = Math.min(...secret);
      const shown = tokens.map((t, i) => (i - 1 >= first || secret.includes(i - 1) ? '***' : t));
      this.log.debug(`< ${clip(joinTokens(shown))}`);
    } else {
      this.log.debug(`< ${clipRedacted(this.log, line)}`);
    }
  }

  /** Stops reading, aborts in-flight work, waits a little for it, then exits. */
  async shutdown(code = 0): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.input.removeAllListeners('data');
    this.heldBack = [];
    this.queue.clear();
    this.abort.abort();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => { timer = setTimeout(resolve, this.opts.shutdownGraceMs ?? 3000); });
    try {
      await Promise.race([Promise.all([this.queue.onIdle(), ...this.unqueued]), deadline]);
      for (const hook of this.shutdownHooks) {
        try {
          await Promise.race([Promise.resolve().then(hook), deadline]);
        } catch (err) {
          this.log.error(`shutdown hook failed: ${errorText(err)}`);
        }
      }
      // Let the last reply reach the pipe before we go (bounded: a client that stopped
      // reading must not keep us alive).
      await Promise.race([this.out.flushed(), deadline]);
      await Promise.race([this.log.flush(), deadline]);
    } finally {
      clearTimeout(timer);
    }
    this.out.close();
    this.opts.onExit?.(code);
  }
}

/** Whether a command failed because its signal fired (the shutdown), not for a reason of its own. */
function isAbort(err: unknown, signal: AbortSignal): boolean {
  if (err === signal.reason) return true;
  const e = err as { name?: unknown; code?: unknown; aborted?: unknown } | null | undefined;
  return e?.name === 'AbortError' || e?.code === 'ABORT_ERR' || e?.aborted === true;
}
