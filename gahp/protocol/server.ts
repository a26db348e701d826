/**
 * The GAHP protocol server: the IO loop, the built-in protocol commands and the async
 * result queue. It knows lines, tokens, prefixes and request ids; what a BOINC_* command
 * does lives in the command modules it is given.
 *
 * Invariants:
 * - every request line gets exactly one reply line, written whole, in request order;
 * - the reading loop never awaits anything: async work is queued and answered later
 *   through RESULTS, so VERSION is answered at once whatever is in flight;
 * - once RESPONSE_PREFIX has been answered, every line printed carries the prefix.
 */
import PQueue from 'p-queue';
import { escapeToken, joinTokens, splitTokens } from './escape.js';
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
  /** Longest error message printed in a result, in characters (the rest is cut). */
  maxMessageChars?: number;
  /** Called once when the server has finished (QUIT, EOF, broken output). */
  onExit?: (code: number) => void;
}

const PROTOCOL_COMMANDS = [
  'ASYNC_MODE_OFF', 'ASYNC_MODE_ON', 'COMMANDS', 'CONDOR_VERSION', 'QUIT',
  'RESPONSE_PREFIX', 'RESULTS', 'VERSION',
] as const;

const REQID = /^[0-9]{1,18}$/;

/**
 * Cuts a long message to at most `max` characters, keeping its start and its end: the
 * gridmanager parses the end of some errors (`... no batch named <name>`), and BOINC can
 * return a megabyte of SQL as an error text.
 */
export function cutMessage(message: string, max = 4096): string {
  if (message.length <= max) return message;
  const marker = ` [...${message.length - max} characters cut...] `;
  const head = Math.floor((max - marker.length) / 3);
  const tail = max - marker.length - head;
  return message.slice(0, head) + marker + message.slice(message.length - tail);
}

export class GahpServer {
  private readonly framer: LineFramer;
  private readonly log: Logger;
  private readonly commands = new Map<string, Command>();
  private readonly queue: PQueue;
  private readonly abort = new AbortController();
  private readonly shutdownHooks: Array<() => Promise<void> | void> = [];

  private prefix = '';
  private asyncMode = false;
  /** Result lines (escaped, unprefixed) waiting for RESULTS, in completion order. */
  private results: string[] = [];
  /** Whether an `R` was printed since the last RESULTS. */
  private notified = false;
  /** Request ids in flight or with an undelivered result. */
  private readonly pending = new Set<string>();
  private stopping = false;
  private exited = false;

  constructor(private readonly opts: GahpServerOptions) {
    this.framer = new LineFramer(opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
    this.log = opts.log ?? Logger.silent();
    this.queue = new PQueue({ concurrency: opts.concurrency ?? 32 });
    for (const c of opts.commands) this.commands.set(c.name.toUpperCase(), c);
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
      this.log.info('stdin closed: shutting down');
      void this.shutdown();
    });
    input.on('error', (err) => {
      this.log.error(`stdin error: ${err.message}`);
      void this.shutdown();
    });
    this.opts.output.on('error', (err: Error) => {
      // The gridmanager went away (EPIPE): nobody can read our results any more.
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
    switch (ev.kind) {
      case 'line':
        this.handleLine(ev.text);
        return;
      case 'overlong':
        this.log.warn(`< [line of ${ev.bytes} bytes dropped: over the limit]`);
        this.reply(['E', `line too long (${ev.bytes} bytes)`]);
        return;
      case 'invalid-utf8':
        this.log.warn('< [line that is not valid UTF-8 dropped]');
        this.reply(['E', 'line is not valid UTF-8']);
        return;
    }
  }

  private handleLine(line: string): void {
    let tokens: string[];
    try {
      tokens = splitTokens(line);
    } catch {
      tokens = [];
    }
    const word = tokens.length > 0 ? tokens[0]!.toUpperCase() : '';
    const command = this.commands.get(word);
    this.logInbound(line, tokens, command);
    if (tokens.length === 0) {
      this.reply(['E', 'empty request']);
      return;
    }
    const args = tokens.slice(1);
    try {
      if ((PROTOCOL_COMMANDS as readonly string[]).includes(word)) {
        this.runProtocolCommand(word, args);
      } else if (command === undefined) {
        this.reply(['E', `unknown command ${tokens[0]!.slice(0, 100)}`]);
      } else if (command.kind === 'sync') {
        this.runSync(command, args);
      } else {
        this.startAsync(command, args);
      }
    } catch (err) {
      // Defensive: nothing a request says may take the process down.
      this.log.error(`internal error on ${word}: ${(err as Error)?.stack ?? String(err)}`);
      this.reply(['E', `internal error: ${(err as Error)?.message ?? String(err)}`]);
    }
  }

  private runProtocolCommand(word: string, args: string[]): void {
    switch (word) {
      case 'COMMANDS': {
        const names = [...PROTOCOL_COMMANDS, ...this.commands.keys()].sort();
        this.reply(['S', ...names]);
        return;
      }
      case 'VERSION':
        this.writeLines(['S ' + this.opts.banner]);
        return;
      case 'CONDOR_VERSION':
        if (args.length !== 1) return this.reply(['E', 'usage: CONDOR_VERSION <version>']);
        this.reply(['S', this.opts.banner]);
        return;
      case 'RESPONSE_PREFIX': {
        if (args.length !== 1) return this.reply(['E', 'usage: RESPONSE_PREFIX <prefix>']);
        // This reply still goes out under the old prefix: the client reads it before
        // it switches.
        this.reply(['S']);
        this.prefix = args[0]!;
        return;
      }
      case 'ASYNC_MODE_ON':
        if (args.length !== 0) return this.reply(['E', 'ASYNC_MODE_ON takes no arguments']);
        this.asyncMode = true;
        this.reply(['S']);
        this.notifyIfNeeded();
        return;
      case 'ASYNC_MODE_OFF':
        if (args.length !== 0) return this.reply(['E', 'ASYNC_MODE_OFF takes no arguments']);
        this.asyncMode = false;
        this.reply(['S']);
        return;
      case 'RESULTS': {
        if (args.length !== 0) return this.reply(['E', 'RESULTS takes no arguments']);
        const delivered = this.results;
        this.results = [];
        this.notified = false;
        for (const line of delivered) this.pending.delete(line.slice(0, line.indexOf(' ')));
        const lines = new Array<string>(delivered.length + 1);
        lines[0] = `S ${delivered.length}`;
        for (let i = 0; i < delivered.length; i++) lines[i + 1] = delivered[i]!;
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
      this.reply(['S']);
    } catch (err) {
      this.reply(['E', errorText(err)]);
    }
  }

  private startAsync(command: AsyncCommand, args: string[]): void {
    const reqId = args[0];
    if (reqId === undefined || !REQID.test(reqId) || /^0+$/.test(reqId)) {
      this.reply(['E', `${command.name}: the first argument must be a non-zero request id`]);
      return;
    }
    if (this.pending.has(reqId)) {
      this.reply(['E', `request id ${reqId} is still pending`]);
      return;
    }
    let request: unknown;
    try {
      request = command.parse(args.slice(1));
    } catch (err) {
      const msg = err instanceof ArgumentError ? err.message : `bad arguments: ${errorText(err)}`;
      this.reply(['E', `${command.name}: ${msg}; usage: ${command.name} ${command.usage}`]);
      return;
    }
    this.pending.add(reqId);
    this.reply(['S']);
    const ctx = { signal: this.abort.signal, reqId, log: this.log };
    void this.queue.add(async () => {
      let tokens: string[];
      try {
        if (this.abort.signal.aborted) return;
        tokens = await command.run(request, ctx);
        if (tokens.length === 0) tokens = ['NULL'];
      } catch (err) {
        const text = cutMessage(this.log.redact(errorText(err)), this.opts.maxMessageChars ?? 4096);
        tokens = [text];
        this.log.debug(`${command.name} ${reqId} failed: ${text}`);
      }
      this.queueResult(reqId, tokens);
    });
  }

  private queueResult(reqId: string, tokens: string[]): void {
    if (this.stopping) return;
    this.results.push(reqId + ' ' + joinTokens(tokens));
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

  private writeLines(lines: string[]): void {
    if (this.exited) return;
    let text = '';
    for (const l of lines) text += this.prefix + l + '\n';
    this.writeRaw(text);
    if (this.log.enabled) {
      for (const l of lines.length > 20 ? lines.slice(0, 20) : lines) this.log.debug(`> ${this.prefix}${clip(l)}`);
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
    if (command?.secretArgs?.length) {
      const shown = tokens.map((t, i) => (command.secretArgs!.includes(i - 1) ? '***' : t));
      this.log.debug(`< ${clip(joinTokens(shown))}`);
    } else {
      this.log.debug(`< ${clip(line)}`);
    }
  }

  /** Stops reading, aborts in-flight work, waits a little for it, then exits. */
  async shutdown(code = 0): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.input.removeAllListeners('data');
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
    } finally {
      clearTimeout(timer);
    }
    // Let the last reply reach the pipe before we go.
    await new Promise<void>((resolve) => {
      try {
        this.opts.output.write('', () => resolve());
      } catch {
        resolve();
      }
    });
    this.exited = true;
    this.opts.onExit?.(code);
  }
}

/**
 * A human-readable message as one line: CR/LF would be escaped correctly, but they make
 * logs and line-oriented readers of the protocol harder to follow, so they become spaces.
 */
function errorText(err: unknown): string {
  const text = (err instanceof Error ? err.message : String(err)).replace(/[\r\n\t]+/g, ' ').trim();
  return text.length > 0 ? text : 'unknown error';
}

function clip(line: string): string {
  return line.length > 2000 ? line.slice(0, 2000) + `...[${line.length} chars]` : line;
}

/** Exposed for tests and the interactive CLI: escape one token as the server does. */
export { escapeToken };
