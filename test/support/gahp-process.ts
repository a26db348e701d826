/**
 * Test harness: the real bin/boinc-gahp as a child process over pipes, spoken to the way
 * HTCondor's gridmanager speaks to it. Every test that exercises the GAHP goes through this.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { splitTokens } from '../../gahp/protocol/escape.js';
import { LineFramer } from '../../gahp/protocol/line-reader.js';
import { StringDecoder } from 'node:string_decoder';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const GAHP_BIN = path.join(REPO_ROOT, 'bin', 'boinc-gahp');

export interface GahpStartOptions {
  /** Extra CLI arguments. */
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** State directory (default: a fresh temp dir, removed by close()). */
  stateDir?: string;
  /** Debug log file path (passed as --log, with --log-level debug). */
  logFile?: string;
  /** Working directory of the process (default: inherited). */
  cwd?: string;
  /** Run as this user and group (the test runner must be root). */
  uid?: number;
  gid?: number;
}

export function makeTempDir(prefix = 'boinc-gahp-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export class GahpProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly stateDir: string;
  private readonly ownsStateDir: boolean;
  /** Every line read from stdout, in order (for byte-for-byte assertions). */
  readonly transcript: string[] = [];
  private lines: string[] = [];
  private waiters: Array<() => void> = [];
  /** The GAHP's own framing (an escaped LF stays inside its line; UTF-8 decoded per line). */
  private readonly framer = new LineFramer();
  private readonly rawDecoder = new StringDecoder('utf8');
  private closed = false;
  stderr = '';
  /** Everything read from stdout, byte for byte (as UTF-8 text). */
  rawStdout = '';
  /** Prefix the GAHP uses now (set by startup()/setPrefix()). */
  prefix = '';
  /** Results received through RESULTS but not yet claimed, by reqid: unescaped tokens after reqid. */
  private results = new Map<string, string[]>();
  /** R notifications seen (count). */
  notifications = 0;
  private nextReqId = 1;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(child: ChildProcessWithoutNullStreams, stateDir: string, ownsStateDir: boolean) {
    this.child = child;
    this.stateDir = stateDir;
    this.ownsStateDir = ownsStateDir;
    child.stdout.on('data', (chunk: Buffer) => {
      this.rawStdout += this.rawDecoder.write(chunk);
      for (const ev of this.framer.push(chunk)) {
        const p = ev.kind === 'line' ? ev.text : `[GAHP printed a line the protocol forbids: ${ev.kind}]`;
        this.transcript.push(p);
        this.lines.push(p);
      }
      this.wake();
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.closed = true;
        this.wake();
        resolve({ code, signal });
      });
    });
    child.stdin.on('error', () => undefined);
  }

  static async start(opts: GahpStartOptions = {}): Promise<GahpProcess> {
    const stateDir = opts.stateDir ?? makeTempDir('boinc-gahp-state-');
    const args = [GAHP_BIN, '--state-dir', stateDir, ...(opts.logFile ? ['--log', opts.logFile, '--log-level', 'debug'] : []), ...(opts.args ?? [])];
    const child = spawn(process.execPath, args, {
      env: { ...withoutProxies(process.env), ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
      ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
    });
    const gahp = new GahpProcess(child, stateDir, opts.stateDir === undefined);
    const banner = await gahp.readLine();
    if (!banner.startsWith('$GahpVersion:')) throw new Error(`unexpected banner: ${banner}`);
    return gahp;
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(line: string): void {
    this.child.stdin.write(line + '\n');
  }

  /** Sends a line ended by CR LF, as HTCondor's gridmanager does. */
  sendCrlf(line: string): void {
    this.child.stdin.write(line + '\r\n');
  }

  /** Writes bytes as they are (no line end added). */
  sendRaw(data: string | Buffer): void {
    this.child.stdin.write(data);
  }

  /** Whether the process has exited. */
  get hasExited(): boolean {
    return this.closed;
  }

  /** Lines already read from stdout but not yet consumed by readLine(). */
  get unreadLines(): number {
    return this.lines.length;
  }

  /** Next stdout line (prefix not stripped). */
  async readLine(timeoutMs = 15000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.lines.length === 0) {
      if (this.closed) throw new Error(`GAHP exited while a line was awaited; stderr: ${this.stderr.slice(-2000)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for a line from the GAHP; stderr: ${this.stderr.slice(-2000)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.lines.shift()!;
  }

  /** Next line that is not an async `R` notification, with the prefix checked and stripped. */
  async readReply(timeoutMs?: number): Promise<string> {
    for (;;) {
      const line = await this.readLine(timeoutMs);
      if (!line.startsWith(this.prefix)) throw new Error(`line without prefix ${JSON.stringify(this.prefix)}: ${JSON.stringify(line)}`);
      const body = line.slice(this.prefix.length);
      if (body === 'R') {
        this.notifications++;
        continue;
      }
      return body;
    }
  }

  /** Sends one request and returns its (unprefixed) reply line. */
  async request(line: string, timeoutMs?: number): Promise<string> {
    this.send(line);
    return this.readReply(timeoutMs);
  }

  /** HTCondor's start-up sequence; returns the replies in order. */
  async startup(prefix = 'GAHP:'): Promise<string[]> {
    const replies = [];
    replies.push(await this.request('COMMANDS'));
    replies.push(await this.request('CONDOR_VERSION $CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $'));
    replies.push(await this.request(`RESPONSE_PREFIX ${prefix}`));
    this.prefix = prefix;
    replies.push(await this.request('ASYNC_MODE_ON'));
    return replies;
  }

  async selectProject(url: string, authenticator: string): Promise<void> {
    const reply = await this.request(`BOINC_SELECT_PROJECT ${url} ${authenticator}`);
    if (reply !== 'S') throw new Error(`BOINC_SELECT_PROJECT answered ${reply}`);
  }

  /** A fresh request id. */
  reqId(): string {
    return String(this.nextReqId++);
  }

  /** Sends RESULTS and files the delivered results; returns how many came. */
  async drainResults(): Promise<number> {
    const head = await this.request('RESULTS');
    const m = /^S (\d+)$/.exec(head);
    if (!m) throw new Error(`RESULTS answered ${head}`);
    const n = Number(m[1]);
    for (let i = 0; i < n; i++) {
      const line = await this.readReply();
      const tokens = splitTokens(line);
      const id = tokens.shift()!;
      if (this.results.has(id)) throw new Error(`result for ${id} delivered twice`);
      this.results.set(id, tokens);
    }
    return n;
  }

  /** Waits until the result of reqId has arrived (polling RESULTS); returns its tokens after the reqid. */
  async waitResult(reqId: string, timeoutMs = 30000): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = this.results.get(reqId);
      if (r) {
        this.results.delete(reqId);
        return r;
      }
      if (Date.now() > deadline) throw new Error(`no result for request ${reqId} within ${timeoutMs} ms; stderr: ${this.stderr.slice(-2000)}`);
      await this.drainResults();
      if (!this.results.has(reqId)) await new Promise((r2) => setTimeout(r2, 20));
    }
  }

  /**
   * Runs an async command: `words` is the command line without the reqid (it is inserted).
   * Checks the immediate `S`, then returns the result tokens after the reqid.
   */
  async call(words: string, timeoutMs?: number): Promise<string[]> {
    const id = this.reqId();
    const sp = words.indexOf(' ');
    const line = sp < 0 ? `${words} ${id}` : `${words.slice(0, sp)} ${id}${words.slice(sp)}`;
    const reply = await this.request(line);
    if (reply !== 'S') throw new Error(`${words.slice(0, 60)}... answered ${reply}`);
    return this.waitResult(id, timeoutMs);
  }

  /** QUIT, then wait for exit; returns the exit code. */
  async quit(): Promise<number | null> {
    if (!this.closed) {
      this.send('QUIT');
      this.child.stdin.end();
    }
    const { code } = await this.exited;
    return code;
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<unknown> {
    this.child.kill(signal);
    return this.exited;
  }

  /** Ends the process (QUIT, else SIGKILL) and removes the temp state dir it created. */
  async close(): Promise<void> {
    if (!this.closed) {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await this.quit().catch(() => undefined);
      clearTimeout(timer);
    }
    if (this.ownsStateDir) fs.rmSync(this.stateDir, { recursive: true, force: true });
  }
}

/**
 * The environment without the proxy variables of the machine the tests run on: the GAHP
 * reads them as curl does, and the tests talk to 127.0.0.1 directly (a test that wants a
 * proxy sets its own).
 */
export function withoutProxies(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const name of ['http_proxy', 'https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY', 'no_proxy', 'NO_PROXY', 'BOINC_GAHP_PROXY', 'BOINC_GAHP_NO_PROXY']) delete out[name];
  return out;
}
