/**
 * Test harness: a GahpServer in this process on PassThrough streams, with test-only
 * commands. For tests of the protocol framework itself (thousands of requests, exact
 * completion orders); anything about the real program uses gahp-process.ts instead.
 */
import { PassThrough } from 'node:stream';
import { GahpServer, type GahpServerOptions } from '../../gahp/protocol/server.js';
import { ArgumentError, expectArgCount, type AsyncCommand, type Command, type SyncCommand } from '../../gahp/protocol/commands.js';
import { Logger, type LogSink } from '../../gahp/log.js';
import { LineFramer } from '../../gahp/protocol/line-reader.js';

export const TEST_BANNER = '$GahpVersion: 9.9.9 Jan 01 2030 test\\ gahp $';

export class InProcessGahp {
  readonly input = new PassThrough();
  readonly output = new PassThrough();
  readonly server: GahpServer;
  /** Every line printed, in order. */
  readonly transcript: string[] = [];
  /** Everything the debug log received. */
  readonly logLines: string[] = [];
  private lines: string[] = [];
  /** The server's own framing, for its output too (an escaped LF stays inside its line). */
  private readonly framer = new LineFramer();
  private waiters: Array<() => void> = [];
  exitCode: number | undefined;
  readonly exited: Promise<number>;
  prefix = '';

  constructor(commands: Command[], opts: Partial<GahpServerOptions> = {}) {
    this.output.on('data', (chunk: Buffer) => {
      for (const ev of this.framer.push(chunk)) {
        const p = ev.kind === 'line' ? ev.text : `[the server printed a line the protocol forbids: ${ev.kind}]`;
        this.transcript.push(p);
        this.lines.push(p);
      }
      this.wake();
    });
    const sink: LogSink = { write: (l) => { this.logLines.push(l); } };
    let onExit!: (code: number) => void;
    this.exited = new Promise((resolve) => { onExit = resolve; });
    this.server = new GahpServer({
      input: this.input,
      output: this.output,
      commands,
      banner: TEST_BANNER,
      log: new Logger(sink, 'debug'),
      onExit: (code) => {
        this.exitCode = code;
        onExit(code);
        this.wake();
      },
      ...opts,
    });
    this.server.start();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(line: string): void {
    this.input.write(line + '\n');
  }

  sendRaw(data: string | Buffer): void {
    this.input.write(data);
  }

  /** Lines available right now (without waiting). */
  get buffered(): number {
    return this.lines.length;
  }

  async readLine(timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.lines.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a line');
      if (this.exitCode !== undefined) throw new Error('server exited while a line was awaited');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
    return this.lines.shift()!;
  }

  /** Lets queued microtasks and timers run, then returns all lines printed meanwhile. */
  async settle(ms = 0): Promise<string[]> {
    await new Promise((r) => setTimeout(r, ms));
    await new Promise((r) => setImmediate(r));
    const out = this.lines;
    this.lines = [];
    return out;
  }

  async request(line: string): Promise<string> {
    this.send(line);
    return this.readLine();
  }
}

/** A deferred promise the test settles by hand. */
export interface Deferred {
  promise: Promise<string[]>;
  resolve(tokens: string[]): void;
  reject(err: unknown): void;
}

export function deferred(): Deferred {
  let resolve!: (t: string[]) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<string[]>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

/**
 * TEST_WAIT <reqid>: completes when the test settles its deferred (created on parse, so it
 * can be settled before the handler starts). Tracks how many handlers run at once.
 */
export function waitCommand() {
  const byReqId = new Map<string, Deferred>();
  const stats = { running: 0, maxRunning: 0, started: 0 };
  const command: AsyncCommand<Record<string, never>> = {
    kind: 'async',
    name: 'TEST_WAIT',
    usage: '<reqid>',
    summary: 'test: completes when the test says so',
    parse(args) {
      expectArgCount(args, 0);
      return {};
    },
    async run(_req, ctx) {
      let d = byReqId.get(ctx.reqId);
      if (!d) byReqId.set(ctx.reqId, (d = deferred()));
      stats.running++;
      stats.started++;
      stats.maxRunning = Math.max(stats.maxRunning, stats.running);
      try {
        return await d.promise;
      } finally {
        stats.running--;
        byReqId.delete(ctx.reqId);
      }
    },
  };
  const get = (reqId: string): Deferred => {
    let d = byReqId.get(reqId);
    if (!d) byReqId.set(reqId, (d = deferred()));
    return d;
  };
  return { command, get, stats };
}

/** TEST_SLEEP <reqid> <ms>: completes with `NULL <ms>` after ms milliseconds (or on abort, with an error). */
export const sleepCommand: AsyncCommand<number> = {
  kind: 'async',
  name: 'TEST_SLEEP',
  usage: '<reqid> <ms>',
  summary: 'test: sleeps',
  parse(args) {
    expectArgCount(args, 1);
    const ms = Number(args[0]);
    if (!/^[0-9]{1,9}$/.test(args[0]!)) throw new ArgumentError('ms must be a non-negative integer');
    return ms;
  },
  run(ms, ctx) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => resolve(['NULL', String(ms)]), ms);
      ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); }, { once: true });
    });
  },
};

/** TEST_FAIL <reqid> <how>: a handler that fails in the way asked. */
export const failCommand: AsyncCommand<string> = {
  kind: 'async',
  name: 'TEST_FAIL',
  usage: '<reqid> <how>',
  summary: 'test: fails',
  parse(args) {
    expectArgCount(args, 1);
    if (args[0] === 'parse-crash') throw new TypeError('parser bug');
    return args[0]!;
  },
  async run(how) {
    switch (how) {
      case 'throw': throw new Error('it broke\nacross lines');
      // The server must cope with a handler that throws something other than an Error.
      case 'throw-string': throw 'a string'; // eslint-disable-line @typescript-eslint/only-throw-error
      case 'throw-undefined': throw undefined; // eslint-disable-line @typescript-eslint/only-throw-error
      case 'empty-message': throw new Error('');
      case 'long': throw new Error('S'.repeat(1_000_000) + ' no batch named condor#x#y#1');
      case 'empty-token': return ['NULL', ''];
      case 'not-array': return 'NULL' as unknown as string[];
      case 'no-tokens': return [];
      case 'spaces': return ['NULL', 'a b\\c\r\nd'];
      default: return ['NULL'];
    }
  },
};

/** TEST_SECRET <url> <secret>: a sync command with a secret argument, registering it like BOINC_SELECT_PROJECT. */
export const secretCommand: SyncCommand = {
  kind: 'sync',
  name: 'TEST_SECRET',
  usage: '<url> <secret>',
  summary: 'test: takes a secret',
  secretArgs: [1],
  run(args, ctx) {
    expectArgCount(args, 2);
    ctx.log.addSecret(args[1]!);
    if (args[0] === 'fail') throw new Error(`rejected secret ${args[1]}`);
  },
};
