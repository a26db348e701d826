/**
 * A lean driver for the real bin/boinc-gahp, spoken to as HTCondor's gridmanager does.
 * Unlike test/support/gahp-process.ts it is built for volume: lines are queued with a head
 * index (no Array.shift over 100k entries), requests can be written in bulk, and result
 * lines are only parsed as far as their request id.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchTempDir, onCleanup, removeTempDir } from './tmp.js';

/** The checkout: the nearest directory above this file holding bin/boinc-gahp (works from dist/ and from sources). */
export const REPO_ROOT = findRoot(path.dirname(fileURLToPath(import.meta.url)));

function findRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'bin', 'boinc-gahp')) && fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no bin/boinc-gahp above ${from}`);
  }
}
export const GAHP_BIN = path.join(REPO_ROOT, 'bin', 'boinc-gahp');

export interface DriverOptions {
  /** The GAHP executable (default: this checkout's bin/boinc-gahp). */
  bin?: string;
  /** Extra CLI arguments for bin/boinc-gahp. */
  args?: string[];
  /** State directory; default a fresh temp dir removed by close(). */
  stateDir?: string;
  /** Extra environment variables (older GAHPs ignore ones they do not know, unlike options). */
  env?: NodeJS.ProcessEnv;
  /**
   * Another GAHP's whole command line (executable and arguments, no shell), run in a fresh
   * temp dir (`stateDir`, removed by close()) instead of this checkout's GAHP. Such a GAHP
   * may answer an async command's `S` without the response prefix and CONDOR_VERSION with
   * `E` (BOINC's C++ GAHP does both): the driver takes these, as HTCondor's gridmanager
   * would need to.
   */
  command?: readonly string[];
}

let started = 0;

export class GahpDriver {
  readonly child: ChildProcessWithoutNullStreams;
  readonly stateDir: string;
  prefix = '';
  stderr = '';
  private lines: string[] = [];
  private head = 0;
  /** The pieces of a line not yet ended by LF, in order. */
  private partial: string[] = [];
  private waiter: (() => void) | undefined;
  private closed = false;
  private nextId = 1;
  /** An `R` was read (and skipped) by readReply since the last nextR(). */
  private pendingR = false;
  /** Another GAHP's command (DriverOptions.command): its quirks are taken. */
  private lenient = false;
  private readonly ownsStateDir: boolean;
  private readonly unregister: () => void;
  readonly exited: Promise<number | null>;

  private constructor(child: ChildProcessWithoutNullStreams, stateDir: string, owns: boolean) {
    this.child = child;
    this.stateDir = stateDir;
    this.ownsStateDir = owns;
    child.stdout.setEncoding('utf8');
    // A BOINC_QUERY_BATCHES result of 100,000 jobs is one 6 MB line arriving in ~100 chunks:
    // its pieces are kept apart until its LF and joined once. Splitting the text so far
    // again with each chunk copied the growing line every time: a second of this process's
    // CPU per such line, half of query_100k_s, while the GAHP's synchronous write to the
    // pipe waited for it (the gridmanager reads with a buffer).
    child.stdout.on('data', (chunk: string) => {
      let from = 0;
      for (let lf = chunk.indexOf('\n'); lf >= 0; lf = chunk.indexOf('\n', from)) {
        this.partial.push(chunk.slice(from, lf));
        this.lines.push(this.partial.length === 1 ? this.partial[0]! : this.partial.join(''));
        this.partial = [];
        from = lf + 1;
      }
      if (from < chunk.length) this.partial.push(chunk.slice(from));
      this.wake();
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (c: string) => {
      this.stderr = (this.stderr + c).slice(-20000);
    });
    child.stdin.on('error', () => undefined);
    this.exited = new Promise((resolve) =>
      child.on('exit', (code) => {
        this.closed = true;
        this.wake();
        resolve(code);
      }),
    );
    this.unregister = onCleanup(() => {
      if (!this.closed) child.kill('SIGKILL');
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  static async start(opts: DriverOptions = {}): Promise<GahpDriver> {
    const stateDir = opts.stateDir ?? benchTempDir('state');
    // BENCH_GAHP_LOG_DIR=<dir>: each GAHP writes its debug log there (for diagnosis; the
    // log costs time, so figures taken with it are not comparable).
    const logDir = process.env.BENCH_GAHP_LOG_DIR;
    const logArgs = logDir ? ['--log', path.join(logDir, `gahp-${process.pid}-${++started}.log`), '--log-level', 'debug'] : [];
    // BENCH_GAHP_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/x": node flags for each GAHP.
    const nodeArgs = (process.env.BENCH_GAHP_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);
    const [file, ...args] = opts.command ?? [process.execPath, ...nodeArgs, opts.bin ?? GAHP_BIN, '--state-dir', stateDir, ...logArgs, ...(opts.args ?? [])];
    const child = spawn(file!, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(opts.command ? { cwd: stateDir } : {}),
      ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}),
    });
    const d = new GahpDriver(child, stateDir, opts.stateDir === undefined);
    d.lenient = opts.command !== undefined;
    child.on('error', (err) => {
      d.stderr += `cannot run ${file}: ${err.message}`;
    });
    const banner = await d.readLine();
    if (!banner.startsWith('$GahpVersion:')) throw new Error(`unexpected banner ${banner}`);
    return d;
  }

  /** HTCondor's start-up sequence, ending in async mode with prefix `GAHP:`. */
  async startup(): Promise<void> {
    await this.expect('COMMANDS', /^S /);
    await this.expect('CONDOR_VERSION $CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $', this.lenient ? /^[SE]/ : /^S /);
    await this.expect('RESPONSE_PREFIX GAHP:', /^S$/);
    this.prefix = 'GAHP:';
    await this.expect('ASYNC_MODE_ON', /^S$/);
  }

  async selectProject(url: string, authenticator: string): Promise<void> {
    await this.expect(`BOINC_SELECT_PROJECT ${url} ${authenticator}`, /^S$/);
  }

  reqId(): string {
    return String(this.nextId++);
  }

  send(line: string): void {
    this.child.stdin.write(line + '\n');
  }

  /** Writes many request lines at once (one write per ~1 MiB). */
  async sendMany(lines: readonly string[]): Promise<void> {
    let buf = '';
    for (const l of lines) {
      buf += l + '\n';
      if (buf.length > 1 << 20) {
        if (!this.child.stdin.write(buf)) await new Promise((r) => this.child.stdin.once('drain', r));
        buf = '';
      }
    }
    if (buf) this.child.stdin.write(buf);
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** Next raw stdout line. */
  async readLine(timeoutMs = 600_000): Promise<string> {
    while (this.head >= this.lines.length) {
      if (this.closed) throw new Error(`GAHP exited; stderr: ${this.stderr.slice(-2000)}`);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
        this.waiter = () => resolve(false);
      });
      clearTimeout(timer);
      if (timedOut) throw new Error(`timed out waiting for the GAHP; stderr: ${this.stderr.slice(-2000)}`);
    }
    const line = this.lines[this.head++]!;
    if (this.head > 65536 && this.head * 2 > this.lines.length) {
      this.lines = this.lines.slice(this.head);
      this.head = 0;
    }
    return line;
  }

  /** Number of lines already received and not yet read. */
  get buffered(): number {
    return this.lines.length - this.head;
  }

  /** Next line that is not an `R`, prefix checked and stripped. */
  async readReply(timeoutMs?: number): Promise<string> {
    for (;;) {
      const line = await this.readLine(timeoutMs);
      if (!line.startsWith(this.prefix)) {
        if (this.lenient && line === 'S') return line;
        throw new Error(`line without prefix: ${line.slice(0, 200)}`);
      }
      const body = line.slice(this.prefix.length);
      if (body !== 'R') return body;
      this.pendingR = true;
    }
  }

  /** Waits for the GAHP's `R` (results ready), unless readReply has already skipped one. */
  async nextR(timeoutMs?: number): Promise<void> {
    while (!this.pendingR) {
      const line = await this.readLine(timeoutMs);
      if (line !== this.prefix + 'R') throw new Error(`expected R, got ${line.slice(0, 200)}`);
      this.pendingR = true;
    }
    this.pendingR = false;
  }

  async expect(line: string, re: RegExp, timeoutMs?: number): Promise<string> {
    this.send(line);
    const reply = await this.readReply(timeoutMs);
    if (!re.test(reply)) throw new Error(`${line.slice(0, 80)} answered ${reply.slice(0, 300)}`);
    return reply;
  }

  /**
   * One RESULTS: returns the raw result lines (prefix stripped). `onLine` sees each line
   * as it is read (to stop a clock at the last one).
   */
  async results(): Promise<string[]> {
    const head = await this.expect('RESULTS', /^S \d+$/);
    const n = Number(head.slice(2));
    const out = new Array<string>(n);
    for (let i = 0; i < n; i++) out[i] = await this.readReply();
    return out;
  }

  /** Polls RESULTS until every id in `ids` has a result; returns id -> raw result line. */
  async waitFor(ids: Iterable<string>, timeoutMs = 600_000, pollMs = 10): Promise<Map<string, string>> {
    const want = new Set(ids);
    const got = new Map<string, string>();
    const deadline = Date.now() + timeoutMs;
    while (want.size > 0) {
      if (Date.now() > deadline) throw new Error(`no result for ${want.size} requests; stderr: ${this.stderr.slice(-2000)}`);
      for (const line of await this.results()) {
        const id = line.slice(0, line.indexOf(' '));
        if (want.delete(id)) got.set(id, line);
      }
      if (want.size > 0) await new Promise((r) => setTimeout(r, pollMs));
    }
    return got;
  }

  /** Sends an async command (reqid inserted after the word), checks the `S`; returns the reqid. */
  async submitAsync(word: string, rest: string): Promise<string> {
    const id = this.reqId();
    await this.expect(`${word} ${id}${rest ? ' ' + rest : ''}`, /^S$/);
    return id;
  }

  /** Runs an async command to completion; returns its result line after the reqid. */
  async call(word: string, rest: string, timeoutMs?: number): Promise<string> {
    const id = await this.submitAsync(word, rest);
    const line = (await this.waitFor([id], timeoutMs)).get(id)!;
    return line.slice(id.length + 1);
  }

  /**
   * Sends one async command and waits for its result the way the gridmanager does: `S`,
   * then the `R` notification, then one RESULTS. Only valid when nothing else is in flight.
   * Returns the result line after the reqid.
   */
  async callNotified(word: string, rest: string): Promise<string> {
    const id = this.reqId();
    this.send(`${word} ${id}${rest ? ' ' + rest : ''}`);
    const s = await this.readReply();
    if (s !== 'S') throw new Error(`${word} answered ${s.slice(0, 300)}`);
    for (;;) {
      const line = await this.readLine();
      if (line === this.prefix + 'R') break;
      throw new Error(`expected R, got ${line.slice(0, 200)}`);
    }
    const results = await this.results();
    const mine = results.find((l) => l.startsWith(id + ' '));
    if (!mine) throw new Error(`RESULTS did not hold request ${id}`);
    return mine.slice(id.length + 1);
  }

  async close(): Promise<void> {
    if (!this.closed) {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
      try {
        this.child.stdin.end('QUIT\n');
      } catch {
        this.child.kill('SIGKILL');
      }
      await this.exited;
      clearTimeout(timer);
    }
    this.unregister();
    if (this.ownsStateDir) removeTempDir(this.stateDir);
  }
}

/**
 * Sends `lines.length` BOINC_FETCH_OUTPUT commands keeping `inFlight` outstanding, reading
 * results as the gridmanager does (on each R, one RESULTS); returns the result line of each.
 */
export async function pumpFetches(gahp: GahpDriver, lines: readonly string[], inFlight: number): Promise<string[]> {
  const results = new Array<string>(lines.length);
  const index = new Map<string, number>();
  let next = 0;
  let done = 0;
  const sendNext = async () => {
    const id = gahp.reqId();
    index.set(id, next);
    await gahp.expect(`BOINC_FETCH_OUTPUT ${id} ${lines[next++]}`, /^S$/);
  };
  while (next < Math.min(inFlight, lines.length)) await sendNext();
  while (done < lines.length) {
    await gahp.nextR();
    for (const line of await gahp.results()) {
      const sp = line.indexOf(' ');
      const i = index.get(line.slice(0, sp));
      if (i === undefined) continue;
      results[i] = line.slice(sp + 1);
      done++;
      if (next < lines.length) await sendNext();
    }
  }
  return results;
}
