/**
 * The GAHP protocol server: the IO loop, the built-in protocol commands and the async
 * result queue. It knows lines, tokens, prefixes and request ids; what a BOINC_* command
 * does lives in the command modules it is given.
 *
 * Invariants:
 * - every request line gets exactly one reply line, written whole, in request order;
 * - the reading loop never awaits anything: async work is queued and answered later
 *   through RESULTS, so VERSION is answered at once whatever is in flight;
 * - once RESPONSE_PREFIX has been answered, every line printed carries the prefix;
 * - every token printed is escaped, and every message printed has passed the log's
 *   redaction (the authenticator never reaches stdout) and is cut to a bounded length.
 */
import { setMaxListeners } from 'node:events';
import PQueue from 'p-queue';
import { escapeToken, joinTokens, splitTokensExact } from './escape.js';
import { DEFAULT_MAX_LINE_BYTES, LineFramer, type LineEvent } from './line-reader.js';
import { ArgumentError, type AsyncCommand, type Command, type SyncCommand } from './commands.js';
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

/** A request id: a non-zero integer (HTCondor sends 1..990000000 and reads ours back with atoi). */
const REQID = /^[+-]?[0-9]{1,18}$/;

/** The identity of a request id for the "still pending" check: `007` and `7` are one id to the client. */
function reqIdKey(reqId: string): string {
  const negative = reqId.startsWith('-');
  const digits = reqId.replace(/^[+-]/, '').replace(/^0+/, '');
  return digits === '' ? '0' : (negative ? '-' : '') + digits;
}

export const DEFAULT_MAX_MESSAGE_CHARS = 4096;

/**
 * Cuts a long message to at most `max` characters, keeping a little of its start and most
 * of its end: the gridmanager parses the end of some errors (`... no batch named <name>`),
 * and BOINC can return a megabyte of SQL as an error text.
 */
export function cutMessage(message: string, max = DEFAULT_MAX_MESSAGE_CHARS): string {
  if (message.length <= max) return message;
  const marker = ` [...${message.length - max} characters cut...] `;
  if (marker.length >= max) {
    const cut = message.length - max;
    return message.slice(isLowSurrogate(message.charCodeAt(cut)) ? cut + 1 : cut);
  }
  let head = Math.floor((max - marker.length) / 3);
  let tail = max - marker.length - head;
  // Never cut a surrogate pair in two (it would print as garbage).
  if (isHighSurrogate(message.charCodeAt(head - 1))) head--;
  if (isLowSurrogate(message.charCodeAt(message.length - tail))) tail--;
  return message.slice(0, head) + marker + message.slice(message.length - tail);
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

export class GahpServer {
  private readonly framer: LineFramer;
  private readonly log: Logger;
  private readonly commands = new Map<string, Command>();
  private readonly queue: PQueue;
  private readonly abort = new AbortController();
  private readonly shutdownHooks: Array<() => Promise<void> | void> = [];
  private readonly maxMessageChars: number;

  private prefix = '';
  private asyncMode = false;
  /** Result lines (escaped, unprefixed) waiting for RESULTS, in completion order. */
  private results: Array<{ key: string; line: string }> = [];
  /** Whether an `R` was printed since the last RESULTS. */
  private notified = false;
  /** Request ids (canonical keys) in flight or with an undelivered result. */
  private readonly pending = new Set<string>();
  private stopping = false;
  private exited = false;

  constructor(private readonly opts: GahpServerOptions) {
    this.framer = new LineFramer(opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
    this.log = opts.log ?? Logger.silent();
    this.queue = new PQueue({ concurrency: opts.concurrency ?? 32 });
    this.maxMessageChars = opts.maxMessageChars ?? DEFAULT_MAX_MESSAGE_CHARS;
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
    this.writeRaw(this.opts.banner + '\n');
    this.log.debug(`> ${this.opts.banner}`);
    const input = this.opts.input;
    input.on('data', (chunk: Buffer | string) => {
      if (this.stopping) return;
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      for (const ev of this.framer.push(buf)) {
        if (this.stopping) return;
        this.handleEvent(ev);
      }
    });
    input.on('end', () => {
      if (this.stopping) return;
      for (const ev of this.framer.end()) this.handleEvent(ev);
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
      this.exited = true;
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
        this.writeLines(['S ' + this.opts.banner]);
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
        if (args.length !== 0) return this.replyError('ASYNC_MODE_ON takes no arguments');
        this.asyncMode = true;
        this.reply(['S']);
        this.notifyIfNeeded();
        return;
      case 'ASYNC_MODE_OFF':
        if (args.length !== 0) return this.replyError('ASYNC_MODE_OFF takes no arguments');
        this.asyncMode = false;
        this.reply(['S']);
        return;
      case 'RESULTS': {
        if (args.length !== 0) return this.replyError('RESULTS takes no arguments');
        const delivered = this.results;
        this.results = [];
        this.notified = false;
        const lines = new Array<string>(delivered.length + 1);
        lines[0] = `S ${delivered.length}`;
        for (let i = 0; i < delivered.length; i++) {
          this.pending.delete(delivered[i]!.key);
          lines[i + 1] = delivered[i]!.line;
        }
        this.writeLines(lines);
        return;
      }
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
    if (reqId === undefined || !REQID.test(reqId) || reqIdKey(reqId) === '0') {
      this.replyError(`${command.name}: the first argument must be a non-zero integer request id; usage: ${command.name} ${command.usage}`);
      return;
    }
    const key = reqIdKey(reqId);
    if (this.pending.has(key)) {
      this.replyError(`request id ${reqId} is still pending`);
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
    this.pending.add(key);
    this.reply(['S']);
    const deadline = this.deadline();
    const ctx = { signal: deadline?.signal ?? this.abort.signal, reqId, log: this.log };
    void this.queue.add(async () => {
      let tokens: string[];
      try {
        if (this.abort.signal.aborted) return;
        if (deadline?.expired) throw new Error(`${deadline.reason} before the command could start`);
        const work = command.run(request, ctx);
        if (deadline) work.catch(() => undefined); // may be abandoned below
        tokens = checkResultTokens(await (deadline ? Promise.race([work, deadline.abandon]) : work));
      } catch (err) {
        let text = errorText(err);
        if (deadline?.expired && !this.abort.signal.aborted && !text.includes(deadline.reason)) text = `${deadline.reason}: ${text}`;
        text = this.safeMessage(text);
        tokens = [text];
        this.log.debug(`${command.name} ${reqId} failed: ${text}`);
      } finally {
        deadline?.dispose();
      }
      this.queueResult(key, reqId, tokens);
    }).catch((err) => this.log.error(`queue failure: ${errorText(err)}`))
      .finally(() => deadline?.dispose());
  }

  /**
   * The command timeout of one command (none when not configured): a signal aborted when
   * the timeout passes or the GAHP shuts down, and a promise that rejects a grace period
   * after the timeout, for a handler that does not stop.
   */
  private deadline(): { signal: AbortSignal; readonly expired: boolean; reason: string; abandon: Promise<never>; dispose(): void } | undefined {
    const ms = this.opts.commandTimeoutMs;
    if (!ms || ms <= 0) return undefined;
    const reason = `the command timeout of ${+(ms / 1000).toFixed(3)} s passed`;
    const ctl = new AbortController();
    setMaxListeners(0, ctl.signal);
    let expired = false;
    let graceTimer: NodeJS.Timeout | undefined;
    let giveUp: (err: Error) => void = () => undefined;
    const abandon = new Promise<never>((_, reject) => { giveUp = reject; });
    abandon.catch(() => undefined);
    const timer = setTimeout(() => {
      expired = true;
      ctl.abort(new Error(reason));
      graceTimer = setTimeout(() => giveUp(new Error(`${reason}; the command did not stop, its result is dropped`)), this.opts.commandTimeoutGraceMs ?? 2000);
      graceTimer.unref();
    }, ms);
    timer.unref();
    const dispose = () => {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      this.abort.signal.removeEventListener('abort', onStop);
    };
    const onStop = () => {
      dispose();
      ctl.abort(this.abort.signal.reason);
    };
    if (this.abort.signal.aborted) onStop();
    else this.abort.signal.addEventListener('abort', onStop, { once: true });
    return { signal: ctl.signal, get expired() { return expired; }, reason, abandon, dispose };
  }

  private queueResult(key: string, reqId: string, tokens: string[]): void {
    if (this.stopping) return;
    this.results.push({ key, line: reqId + ' ' + joinTokens(tokens) });
    this.notifyIfNeeded();
  }

  private notifyIfNeeded(): void {
    if (this.asyncMode && !this.notified && this.results.length > 0) {
      this.notified = true;
      this.writeLines(['R']);
    }
  }

  /** One reply line from tokens: the first (S/E) as is, the rest escaped. */
  private reply(tokens: string[]): void {
    const [head, ...rest] = tokens;
    this.writeLines([rest.length ? head + ' ' + joinTokens(rest) : head!]);
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

  private writeLines(lines: string[]): void {
    if (this.exited) return;
    let text = '';
    for (const l of lines) text += this.prefix + l + '\n';
    this.writeRaw(text);
    if (this.log.enabled) {
      for (const l of lines.length > 20 ? lines.slice(0, 20) : lines) this.log.debug(`> ${this.prefix}${this.clipRedacted(l)}`);
      if (lines.length > 20) this.log.debug(`> [${lines.length - 20} more lines]`);
    }
  }

  private writeRaw(text: string): void {
    try {
      this.opts.output.write(text);
    } catch (err) {
      this.log.error(`write failed: ${(err as Error).message}`);
    }
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
      this.log.debug(`< ${this.clipRedacted(line)}`);
    }
  }

  /**
   * A line cut for the log, redacted before it is cut (so a cut never leaves half a
   * secret) but without scanning all of a multi-MiB line.
   */
  private clipRedacted(line: string): string {
    return clip(this.log.redact(line.length > 8192 ? line.slice(0, 8192) : line), line.length);
  }

  /** Stops reading, aborts in-flight work, waits a little for it, then exits. */
  async shutdown(code = 0): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.input.removeAllListeners('data');
    this.queue.clear();
    this.abort.abort();
    const grace = this.opts.shutdownGraceMs ?? 3000;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => { timer = setTimeout(resolve, grace); });
    try {
      await Promise.race([this.queue.onIdle(), deadline]);
      for (const hook of this.shutdownHooks) {
        try {
          await Promise.race([Promise.resolve().then(hook), deadline]);
        } catch (err) {
          this.log.error(`shutdown hook failed: ${errorText(err)}`);
        }
      }
      // Let the last reply reach the pipe before we go (bounded: a client that stopped
      // reading must not keep us alive).
      await Promise.race([
        new Promise<void>((resolve) => {
          try {
            if (this.exited) resolve();
            else this.opts.output.write('', () => resolve());
          } catch {
            resolve();
          }
        }),
        deadline,
      ]);
      await Promise.race([this.log.flush(), deadline]);
    } finally {
      clearTimeout(timer);
    }
    this.exited = true;
    this.opts.onExit?.(code);
  }
}

/**
 * A handler's result must be a non-empty list of non-empty strings: an empty token cannot
 * be printed (it would vanish and shift every later token), so such a result is a bug,
 * reported as an error result of one token, which the client takes as a failure.
 */
function checkResultTokens(tokens: unknown): string[] {
  if (!Array.isArray(tokens)) throw new Error('internal error: the command returned no result tokens');
  if (tokens.length === 0) return ['NULL'];
  for (const t of tokens) {
    if (typeof t !== 'string' || t.length === 0) throw new Error('internal error: the command returned an empty or non-text result token');
  }
  return tokens as string[];
}

/**
 * A human-readable message as one line: CR/LF would be escaped correctly, but they make
 * logs and line-oriented readers of the protocol harder to follow, so they become spaces.
 */
function errorText(err: unknown): string {
  let raw: string;
  try {
    raw = err instanceof Error ? err.message : String(err);
  } catch {
    raw = 'unprintable error';
  }
  const text = String(raw).replace(/[\r\n\t]+/g, ' ').trim();
  return text.length > 0 ? text : 'unknown error';
}

function clip(line: string, fullLength = line.length): string {
  return line.length > 2000 ? line.slice(0, 2000) + `...[${fullLength} chars]` : line;
}
