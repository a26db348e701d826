/**
 * HTCondor's gridmanager as a BOINC GAHP client, emulated from its source (HTCondor's
 * `src/condor_gridmanager/gahp-client.cpp`, `boinc-client.cpp`, `boincresource.cpp` and
 * `boincjob.cpp`, removed in 2022; docs/gahp-protocol.md has the facts in our words).
 * It runs the real bin/boinc-gahp as a child process and speaks to it byte for byte the
 * way the gridmanager does:
 *
 * - start-up: reads the banner as `command_version()` does (skips to a `$`, drops
 *   backslashes, at most 150 bytes), then COMMANDS, CONDOR_VERSION (exactly 2 tokens or
 *   it is ignored), RESPONSE_PREFIX GAHP: (its reply read without the prefix) and
 *   ASYNC_MODE_ON;
 * - every line it writes ends in CR LF; arguments are escaped with escapeGahpString
 *   (space, backslash, CR, LF), job names in BOINC_SUBMIT are NOT escaped, empty strings
 *   are empty tokens (two spaces in a row);
 * - `read_argv()`: a backslash makes the next byte literal, unescaped CR is ignored, every
 *   unescaped space ends a token (empty tokens included), a token of 500 KiB or more
 *   aborts, a line without the prefix is thrown away, a lone `R` line triggers a RESULTS
 *   poll, bytes left in the buffer after a reply also do;
 * - a synchronous reply must come within GRIDMANAGER_GAHP_RESPONSE_TIMEOUT (20 s);
 * - BOINC_SELECT_PROJECT is sent before a command for another resource than the last;
 * - a command's reply not starting with `S` aborts the gridmanager (EXCEPT), as does a
 *   result with the wrong number of tokens; a command not answered within the call
 *   timeout (300 s) is given up: its late result is read and dropped;
 * - BoincResource's status logic: full and partial queries, m_lastQueryTime kept on
 *   failure, `no batch named ` parsed out of errors, a batch that may have been
 *   submitted but is empty or missing is submitted again; the job ids are parsed out of
 *   job names after the last `#` and looked up in BaseJob::JobsByProcId, which holds
 *   every job of the gridmanager whatever its batch or resource: an answer for
 *   `<any batch>#16.0` lands on whichever job is 16.0 now (a job held and released is a
 *   new job object in a new batch; the held one left its batch, UnregisterJob).
 *
 * Where the real gridmanager would EXCEPT (abort), this emulation throws GridmanagerAbort
 * and records it in `aborts`: a test fails on it.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GAHP_BIN } from './gahp-process.js';

/** The gridmanager would EXCEPT (exit) here. */
export class GridmanagerAbort extends Error {
  override name = 'GridmanagerAbort';
}

export const GAHP_PREFIX = 'GAHP:';
/** read_argv's static buffer: 1024 * 500 bytes per token. */
const TOKEN_BUFFER = 1024 * 500;
/** m_gahp_version[150] */
const VERSION_BUFFER = 150;

/** escapeGahpString(): space, backslash, CR and LF get a backslash. */
export function escapeGahpString(s: string): string {
  let out = '';
  for (const c of s) out += c === ' ' || c === '\\' || c === '\r' || c === '\n' ? '\\' + c : c;
  return out;
}

/** condor_basename(): the text after the last slash ("" for a name ending in /). */
export function condorBasename(p: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? p : p.slice(i + 1);
}

/** C's atoi: leading whitespace, sign, digits; 0 when there are none. */
export function atoi(s: string): number {
  const m = /^\s*([+-]?[0-9]+)/.exec(s);
  return m ? parseInt(m[1]!, 10) : 0;
}

export interface GridmanagerOptions {
  /** The GAHP's state directory (BOINC_GAHP_STATE_DIR): keep it to restart with the ledger. */
  stateDir: string;
  /** More environment for the GAHP (the gridmanager starts it with no arguments). */
  env?: NodeJS.ProcessEnv;
  /** GRIDMANAGER_GAHP_RESPONSE_TIMEOUT, ms (default 20 s). */
  responseTimeoutMs?: number;
  /** GRIDMANAGER_GAHP_CALL_TIMEOUT, ms (default 300 s). */
  callTimeoutMs?: number;
  /** The CondorVersion string sent with CONDOR_VERSION. */
  condorVersion?: string;
}

/** A BOINC resource as the gridmanager keys it: URL and authenticator file. */
export interface ResourceRef {
  url: string;
  /** The authenticator file's path; read with fscanf(" %79s") on every selection. */
  authenticatorFile: string;
}

interface Pending {
  command: string;
  resolve: (argv: string[] | 'timeout') => void;
  timer: NodeJS.Timeout;
}

/**
 * The GahpServer side: one GAHP child, the byte reader, the request table, RESULTS
 * polling. Operations on the pipe are serialised like the single-threaded daemon's.
 */
export class GridmanagerGahp {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every request line written (as sent, without CR LF; the authenticator replaced by XXXXXXXX). */
  readonly sent: string[] = [];
  /** Every line read (raw, without LF). */
  readonly received: string[] = [];
  /** Where the real gridmanager would have EXCEPTed. */
  readonly aborts: GridmanagerAbort[] = [];
  stderr = '';
  version = '';
  condorVersionReply: string | undefined;
  commands: string[] = [];
  usePrefix = false;
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;
  private eof = false;
  private wake: (() => void) | undefined;
  private busy: Promise<unknown> = Promise.resolve();
  private reading = false;
  private inResults = false;
  private skipNextR = false;
  private pollPending = false;
  private nextReqId = 1;
  /** requestTable: reqid -> pending entry, or null for a command given up on (its late result is dropped). */
  private readonly requests = new Map<number, Pending | null>();
  private currentResource: ResourceRef | undefined;
  private readonly responseTimeoutMs: number;
  readonly callTimeoutMs: number;
  /** Late results dropped after their command timed out. */
  droppedResults = 0;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(private readonly opts: GridmanagerOptions) {
    this.responseTimeoutMs = opts.responseTimeoutMs ?? 20_000;
    this.callTimeoutMs = opts.callTimeoutMs ?? 300_000;
    this.child = spawn(GAHP_BIN, [], {
      env: { ...process.env, BOINC_GAHP_STATE_DIR: opts.stateDir, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.buf = this.pos >= this.buf.length ? chunk : Buffer.concat([this.buf.subarray(this.pos), chunk]);
      this.pos = 0;
      // pipe_ready(): data while nobody reads it means results are waiting.
      if (!this.reading) {
        this.skipNextR = true;
        this.pollRealSoon();
      }
      this.wake?.();
    });
    this.child.stdout.on('end', () => {
      this.eof = true;
      this.wake?.();
    });
    this.child.stderr.setEncoding('utf8');
    this.child.stderr.on('data', (s: string) => {
      this.stderr += s;
    });
    this.child.stdin.on('error', () => undefined);
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Starts the GAHP and runs GahpServer::Startup()'s sequence. */
  static async start(opts: GridmanagerOptions): Promise<GridmanagerGahp> {
    const gm = new GridmanagerGahp(opts);
    await gm.exclusive(() => gm.startup());
    return gm;
  }

  private abort(message: string): never {
    const err = new GridmanagerAbort(message);
    this.aborts.push(err);
    throw err;
  }

  /** Runs fn with the pipe to itself (the daemon is single-threaded). */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.busy.then(fn, fn);
    this.busy = run.catch(() => undefined);
    return run;
  }

  private async startup(): Promise<void> {
    this.version = await this.readVersion();
    this.writeLine('COMMANDS');
    const cmds = await this.readArgv();
    if (cmds.length === 0 || cmds[0]![0] !== 'S') this.abort('GAHP command COMMANDS failed (start-up fails)');
    this.commands = cmds.slice(1);
    if (this.supports('CONDOR_VERSION')) {
      this.writeLine(`CONDOR_VERSION ${escapeGahpString(this.opts.condorVersion ?? '$CondorVersion: 9.0.17 Sep 29 2022 BuildID: 123 $')}`);
      const r = await this.readArgv();
      // Not fatal: a wrong reply only means the version is unknown.
      if (r.length === 2 && r[0]![0] === 'S') this.condorVersionReply = r[1];
    }
    if (this.supports('RESPONSE_PREFIX')) {
      this.writeLine(`RESPONSE_PREFIX ${escapeGahpString(GAHP_PREFIX)}`);
      const r = await this.readArgv();
      this.usePrefix = r.length > 0 && r[0]![0] === 'S';
    }
    if (!this.supports('ASYNC_MODE_ON')) this.abort('GAHP lacks ASYNC_MODE_ON: the gridmanager would poll every 5 s instead (not emulated)');
    this.writeLine('ASYNC_MODE_ON');
    const r = await this.readArgv();
    if (r.length === 0 || r[0]![0] !== 'S') this.abort('ASYNC_MODE_ON failed (not emulated)');
  }

  supports(command: string): boolean {
    return this.commands.some((c) => c.toUpperCase() === command.toUpperCase());
  }

  private writeLine(line: string, shown = line): void {
    this.sent.push(shown);
    this.child.stdin.write(line + '\r\n');
  }

  /** The next byte, waiting for it; undefined at EOF. Times out like read_argv. */
  private async byte(deadline: number): Promise<number | undefined> {
    while (this.pos >= this.buf.length) {
      if (this.eof) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) this.abort(`Gahp Server (pid=${this.child.pid}) unresponsive for ${this.responseTimeoutMs / 1000} seconds`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = undefined;
    }
    return this.buf[this.pos++];
  }

  private buffered(): number {
    return this.buf.length - this.pos;
  }

  /** command_version(): the start-up greeting. */
  private async readVersion(): Promise<string> {
    this.reading = true;
    try {
      const deadline = Date.now() + this.responseTimeoutMs;
      const out: number[] = [];
      while (out.length < VERSION_BUFFER) {
        const b = await this.byte(deadline);
        if (b === undefined) this.abort('EOF before the GAHP version');
        if (out.length === 0 && b !== 0x24) continue; // skip to '$'
        if (b === 0x5c) continue; // backslashes dropped
        if (b === 0x0a) {
          const v = Buffer.from(out).toString('latin1');
          this.received.push(v);
          return v;
        }
        out.push(b);
      }
      return this.abort(`the GAHP version line is ${VERSION_BUFFER} bytes or longer: "Failed to read GAHP server version"`);
    } finally {
      this.reading = false;
    }
  }

  /** read_argv(): one reply line as tokens (prefix stripped); [] at EOF. */
  private async readArgv(): Promise<string[]> {
    this.reading = true;
    try {
      const deadline = Date.now() + this.responseTimeoutMs;
      for (;;) {
        const args: string[] = [];
        let token: number[] = [];
        let escape = false;
        let raw: number[] = [];
        for (;;) {
          const b = await this.byte(deadline);
          if (b === undefined) return [];
          raw.push(b);
          if (token.length >= TOKEN_BUFFER) this.abort(`a token of ${TOKEN_BUFFER} bytes or more: ASSERT(ibuf < buf_size) fails`);
          if (escape) {
            token.push(b);
            escape = false;
            continue;
          }
          if (b === 0x5c) {
            escape = true;
            continue;
          }
          if (b === 0x0d) continue;
          if (b === 0x20) {
            args.push(Buffer.from(token).toString('utf8'));
            token = [];
            continue;
          }
          if (b === 0x0a) {
            args.push(Buffer.from(token).toString('utf8'));
            break;
          }
          token.push(b);
        }
        this.received.push(Buffer.from(raw.slice(0, -1)).toString('utf8'));
        raw = [];
        let trash = false;
        if (this.usePrefix) {
          if (args.length > 0 && args[0]!.startsWith(GAHP_PREFIX)) args[0] = args[0]!.slice(GAHP_PREFIX.length);
          else trash = true;
        }
        if (!trash && args.length === 1 && args[0]![0] === 'R') {
          if (this.skipNextR) this.skipNextR = false;
          else this.pollRealSoon();
          trash = true;
        }
        if (trash) continue;
        if (!this.inResults && this.buffered() > 0) {
          this.skipNextR = true;
          this.pollRealSoon();
        }
        return args;
      }
    } finally {
      this.reading = false;
    }
  }

  private pollRealSoon(): void {
    if (this.pollPending) return;
    this.pollPending = true;
    setImmediate(() => {
      void this.exclusive(() => this.poll()).catch(() => undefined);
    });
  }

  /** GahpServer::poll(): RESULTS, then each result to its request (dropped if given up). */
  async poll(): Promise<void> {
    this.pollPending = false;
    if (this.eof) return;
    this.inResults = true;
    const lines: string[][] = [];
    try {
      this.writeLine('RESULTS');
      const head = await this.readArgv();
      if (head.length < 2 || head[0]![0] !== 'S') return; // logged, not fatal
      const n = atoi(head[1]!);
      if (n < 0) this.abort('ASSERT(num_results >= 0)');
      for (let i = 0; i < n; i++) lines.push(await this.readArgv());
    } finally {
      this.inResults = false;
    }
    if (this.buffered() > 0) {
      this.skipNextR = true;
      this.pollRealSoon();
    }
    for (const argv of lines) {
      const reqid = argv.length > 0 ? atoi(argv[0]!) : 0;
      if (reqid === 0) continue; // "GAHP - Bad RESULTS line"
      const entry = this.requests.get(reqid);
      this.requests.delete(reqid);
      if (entry === null) this.droppedResults++;
      if (!entry) continue;
      clearTimeout(entry.timer);
      entry.resolve(argv);
    }
  }

  /** useBoincResource() + command_boinc_select_project(). */
  private async useResource(resource: ResourceRef): Promise<void> {
    if (this.currentResource && this.currentResource.url === resource.url && this.currentResource.authenticatorFile === resource.authenticatorFile) return;
    const m = /^\s*(\S{1,79})/.exec(fs.readFileSync(resource.authenticatorFile, 'latin1'));
    if (!m) this.abort('useBoincResource() failed! (no authenticator in the file)');
    const auth = Buffer.from(m[1]!, 'latin1').toString('utf8');
    const line = `BOINC_SELECT_PROJECT ${escapeGahpString(resource.url)} `;
    this.writeLine(line + escapeGahpString(auth), line + 'XXXXXXXX');
    const r = await this.readArgv();
    if (r.length === 0 || r[0]![0] !== 'S') this.abort(`useBoincResource() failed! (BOINC_SELECT_PROJECT answered ${JSON.stringify(r)})`);
    this.currentResource = resource;
  }

  /**
   * now_pending() + the wait for the result: selects the resource, writes the command with
   * a new request id, requires `S`; resolves to the result's tokens (reqid first), or
   * 'timeout' when the call timeout passed first (the late result is then dropped).
   */
  call(resource: ResourceRef, command: string, args: string | null, timeoutMs = this.callTimeoutMs): Promise<string[] | 'timeout'> {
    let resolveResult!: (argv: string[] | 'timeout') => void;
    const result = new Promise<string[] | 'timeout'>((resolve) => {
      resolveResult = resolve;
    });
    const sent = this.exclusive(async () => {
      if (!this.supports(command)) this.abort(`${command} not in COMMANDS`);
      await this.useResource(resource);
      const reqid = this.nextReqId++;
      this.writeLine(`${command} ${reqid}${args !== null ? ' ' + args : ''}`);
      const r = await this.readArgv();
      if (r.length === 0 || r[0]![0] !== 'S') this.abort(`Bad ${command} Request: ${r.length ? r[0] : 'Empty response'} (${JSON.stringify(r.slice(1))})`);
      const timer = setTimeout(() => {
        // check_pending_timeout() -> clear_pending(): keep the id, forget the caller.
        this.requests.set(reqid, null);
        resolveResult('timeout');
      }, timeoutMs);
      this.requests.set(reqid, { command, resolve: resolveResult, timer });
    });
    return sent.then(() => result);
  }

  /** Polls now (the gridmanager also polls every 60 s whatever it has seen). */
  pollNow(): Promise<void> {
    return this.exclusive(() => this.poll());
  }

  /** The GAHP died or was killed: the gridmanager EXCEPTs in its reaper. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.child.kill(signal);
    await this.exited;
  }

  /** Gridmanager shutdown: QUIT, then wait for the GAHP to exit. */
  async quit(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    for (const p of this.requests.values()) if (p) clearTimeout(p.timer);
    if (this.child.exitCode === null && this.child.signalCode === null) {
      await this.exclusive(async () => {
        this.writeLine('QUIT');
        await this.readArgv().catch(() => []);
      }).catch(() => undefined);
      this.child.stdin.end();
    }
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    const r = await this.exited;
    clearTimeout(t);
    return r;
  }
}

// ---------------------------------------------------------------------------------------
// GahpClient::boinc_* : the request lines and the result checks, as in gahp-client.cpp.

export interface CallOutcome {
  /** 0 success, 1 error result, 'timeout' the call timeout passed. */
  rc: 0 | 1 | 'timeout';
  error?: string;
}

function simpleResult(gm: GridmanagerGahp, command: string, r: string[] | 'timeout'): CallOutcome {
  if (r === 'timeout') return { rc: 'timeout', error: `${command} timed out` };
  if (r.length !== 2) gmAbort(gm, `Bad ${command} Result: ${r.length} tokens ${JSON.stringify(r).slice(0, 300)}`);
  return r[1] === 'NULL' ? { rc: 0 } : { rc: 1, error: r[1]! };
}

function gmAbort(gm: GridmanagerGahp, message: string): never {
  const err = new GridmanagerAbort(message);
  gm.aborts.push(err);
  throw err;
}

export async function boincPing(gm: GridmanagerGahp, res: ResourceRef): Promise<CallOutcome> {
  return simpleResult(gm, 'BOINC_PING', await gm.call(res, 'BOINC_PING', null));
}

/** One grid job as BoincJob sees its job ad. */
export interface GridJob {
  cluster: number;
  proc: number;
  /** Cmd: the BOINC app name. */
  app: string;
  /** Arguments as ArgList gives them (each escaped separately). */
  args: string[];
  /** Iwd (absolute). */
  iwd: string;
  /** TransferInput entries (relative to iwd or absolute). */
  transferInput: string[];
  /** In (stdin), when set. */
  input?: string;
  /** TransferOutput, when set: SOME; unset: ALL. */
  transferOutput?: string[];
  /** TransferOutputRemaps "src = dst; ..." */
  remaps?: string;
  /** Out / Err as in the job ad (relative or absolute). */
  out?: string;
  err?: string;
  /** rsc_fpops_est ... app_version_num: string attributes of the job ad. */
  vars?: Partial<Record<'rsc_fpops_est' | 'rsc_fpops_bound' | 'rsc_memory_bound' | 'rsc_disk_bound' | 'delay_bound' | 'app_version_num', string>>;
  /** GridJobStatus as last reported. */
  remoteState: string;
  /**
   * Every status NewBoincState() gave this job object, in order: an ERROR among them puts
   * a submitted job on hold when it is next evaluated, even if a later answer in the same
   * pass says otherwise.
   */
  statuses?: string[];
  remoteBatchName?: string;
}

export function remoteJobName(job: GridJob): string {
  return `${job.remoteBatchName}#${job.cluster}.${job.proc}`;
}

/** BoincJob::GetInputFilenames(). */
export function inputFilenames(job: GridJob): Array<[string, string]> {
  const list = [...job.transferInput];
  if (job.input && job.input !== '/dev/null' && !list.includes(job.input)) list.push(job.input);
  return list.map((f) => [f.startsWith('/') ? f : `${job.iwd}/${f}`, condorBasename(f)]);
}

/** GahpClient::boinc_submit()'s request line (after the request id). */
export function submitArgs(batchName: string, jobs: GridJob[]): string {
  let line = `${escapeGahpString(batchName)} ${escapeGahpString(jobs[0]!.app)} ${jobs.length}`;
  for (const job of jobs) {
    line += ` ${remoteJobName(job)} ${job.args.length}`; // job name NOT escaped, as HTCondor does
    for (const a of job.args) line += ' ' + escapeGahpString(a);
    const inputs = inputFilenames(job);
    line += ` ${inputs.length}`;
    for (const [src, dst] of inputs) line += ` ${escapeGahpString(src)} ${escapeGahpString(dst)}`;
  }
  const v = jobs[0]!.vars ?? {};
  for (const k of ['rsc_fpops_est', 'rsc_fpops_bound', 'rsc_memory_bound', 'rsc_disk_bound', 'delay_bound', 'app_version_num'] as const) {
    line += v[k] !== undefined && v[k] !== '' ? ' ' + escapeGahpString(v[k]) : ' NULL';
  }
  return line;
}

export async function boincSubmit(gm: GridmanagerGahp, res: ResourceRef, batchName: string, jobs: GridJob[]): Promise<CallOutcome> {
  return simpleResult(gm, 'BOINC_SUBMIT', await gm.call(res, 'BOINC_SUBMIT', submitArgs(batchName, jobs)));
}

export interface QueryOutcome extends CallOutcome {
  serverTime?: string;
  /** Per batch in the result, its (job name, status) pairs. */
  batches?: Array<Array<[string, string]>>;
}

export async function boincQueryBatches(gm: GridmanagerGahp, res: ResourceRef, names: string[], lastQueryTime: string, timeoutMs?: number): Promise<QueryOutcome> {
  // formatstr("%s %d", last_query_time, n): the time is not escaped.
  let line = `${lastQueryTime} ${names.length}`;
  for (const n of names) line += ' ' + escapeGahpString(n);
  const r = await gm.call(res, 'BOINC_QUERY_BATCHES', line, timeoutMs);
  if (r === 'timeout') return { rc: 'timeout', error: 'BOINC_QUERY_BATCHES timed out' };
  if (r.length < 2) gmAbort(gm, 'Bad BOINC_QUERY_BATCHES Result');
  if (r[1] !== 'NULL') return { rc: 1, error: r[1]! };
  if (r.length < 3) gmAbort(gm, 'Bad BOINC_QUERY_BATCHES Result');
  const batches: Array<Array<[string, string]>> = [];
  let i = 3;
  while (i < r.length) {
    const n = atoi(r[i]!);
    i++;
    const jobs: Array<[string, string]> = [];
    for (let j = 0; j < n; j++) {
      // The real client reads past the end of argv here (undefined behaviour, a crash).
      if (i + 1 >= r.length) gmAbort(gm, `BOINC_QUERY_BATCHES result announces ${n} jobs, the line ends first`);
      jobs.push([r[i]!, r[i + 1]!]);
      i += 2;
    }
    batches.push(jobs);
  }
  return { rc: 0, serverTime: r[2]!, batches };
}

/** BoincJob::BuildOutputInfo(). */
export function outputInfo(job: GridJob): { iwd: string; stdErr: string; transferAll: boolean; outputs: Array<[string, string]> } {
  const iwd = job.iwd || '/';
  const stdErr = job.err ?? '/dev/null';
  const outputs: Array<[string, string]> = [];
  if (job.transferOutput === undefined) return { iwd, stdErr, transferAll: true, outputs };
  const remaps = new Map<string, string>();
  for (const part of (job.remaps ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) remaps.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  for (const f of job.transferOutput) outputs.push([f, remaps.get(f) ?? condorBasename(f)]);
  if (job.out && job.out !== '/dev/null') {
    outputs.push([condorBasename(job.out), job.out]);
    if (stdErr !== job.out) outputs.push([condorBasename(stdErr), stdErr]);
  }
  return { iwd, stdErr, transferAll: false, outputs };
}

export interface FetchOutcome extends CallOutcome {
  exitStatus?: number;
  wallclock?: number;
  cpu?: number;
}

/** GahpClient::boinc_fetch_output() with BuildOutputInfo()'s arguments. */
export function fetchArgs(job: GridJob): string {
  const info = outputInfo(job);
  let line = `${escapeGahpString(remoteJobName(job))} ${escapeGahpString(info.iwd)} ${escapeGahpString(info.stdErr)} `;
  line += info.transferAll ? 'ALL ' : 'SOME ';
  line += `${info.outputs.length}`;
  for (const [src, dst] of info.outputs) line += ` ${escapeGahpString(src)} ${escapeGahpString(dst)}`;
  return line;
}

export async function boincFetchOutput(gm: GridmanagerGahp, res: ResourceRef, job: GridJob): Promise<FetchOutcome> {
  const r = await gm.call(res, 'BOINC_FETCH_OUTPUT', fetchArgs(job));
  if (r === 'timeout') return { rc: 'timeout', error: 'BOINC_FETCH_OUTPUT timed out' };
  if (r.length < 2) gmAbort(gm, 'Bad BOINC_FETCH_OUTPUT Result');
  if (r[1] !== 'NULL') return { rc: 1, error: r[1]! };
  if (r.length !== 5) gmAbort(gm, `Bad BOINC_FETCH_OUTPUT Result: ${r.length} tokens`);
  return { rc: 0, exitStatus: atoi(r[2]!), wallclock: parseFloat(r[3]!), cpu: parseFloat(r[4]!) };
}

/** holdReason[1024] in BoincJob's GM_HOLD: at most 1023 bytes are kept. */
const HOLD_REASON_BYTES = 1023;

/**
 * The hold reason GM_HOLD gives a job after a failed command: after BOINC_FETCH_OUTPUT
 * (GM_STAGE_OUT -> GM_CLEAR_REQUEST, which holds a job whose remote job name is set)
 * `BOINC error: <error>`; after a BOINC_SUBMIT that failed (BatchFailed: every job of the
 * batch) the error itself. Either cut to the buffer.
 */
export function holdReason(error: string, after: 'fetch' | 'submit'): string {
  const bytes = Buffer.from(after === 'fetch' ? `BOINC error: ${error}` : error, 'utf8');
  return bytes.subarray(0, HOLD_REASON_BYTES).toString('utf8');
}

export async function boincAbortJobs(gm: GridmanagerGahp, res: ResourceRef, jobNames: string[]): Promise<CallOutcome> {
  return simpleResult(gm, 'BOINC_ABORT_JOBS', await gm.call(res, 'BOINC_ABORT_JOBS', jobNames.map(escapeGahpString).join(' ')));
}

export async function boincRetireBatch(gm: GridmanagerGahp, res: ResourceRef, batchName: string): Promise<CallOutcome> {
  return simpleResult(gm, 'BOINC_RETIRE_BATCH', await gm.call(res, 'BOINC_RETIRE_BATCH', escapeGahpString(batchName)));
}

export async function boincSetLease(gm: GridmanagerGahp, res: ResourceRef, batchName: string, leaseTime: number): Promise<CallOutcome> {
  // formatstr("%s %d", batch, (int)new_lease_time)
  return simpleResult(gm, 'BOINC_SET_LEASE', await gm.call(res, 'BOINC_SET_LEASE', `${escapeGahpString(batchName)} ${Math.trunc(leaseTime) | 0}`));
}

// ---------------------------------------------------------------------------------------
// BoincResource: batches and the status logic of boincresource.cpp.

export type BatchSubmitStatus = 'Unsubmitted' | 'MaybeSubmitted' | 'Submitting' | 'Submitted' | 'Failed';

export interface BoincBatch {
  name: string;
  app: string;
  status: BatchSubmitStatus;
  needFullQuery: boolean;
  leaseTime: number;
  errorMessage: string;
  jobs: GridJob[];
}

export const DEFAULT_LEASE_DURATION = 6 * 60 * 60;

/** BaseJob::JobsByProcId: `cluster.proc` -> the gridmanager's job, over all its resources. */
export type JobsByProcId = Map<string, GridJob>;

const procIdOf = (cluster: number, proc: number) => `${cluster}.${proc}`;

export class BoincResourceEmu {
  readonly batches: BoincBatch[] = [];
  lastQueryTime = '0';
  needFullQuery = false;
  /** Every status pass's queries: min_mod_time sent, batches asked, outcome. */
  readonly queries: Array<{ minModTime: string; names: string[]; outcome: QueryOutcome }> = [];

  constructor(
    readonly gm: GridmanagerGahp,
    readonly ref: ResourceRef,
    readonly scheddName = 'schedd@submit.example.org',
    /** Shared by the resources of one gridmanager (by default this resource's own). */
    readonly jobsByProcId: JobsByProcId = new Map(),
  ) {}

  /** BaseJob's constructor: the job object registers under its cluster.proc. */
  private register(job: GridJob): void {
    this.jobsByProcId.set(procIdOf(job.cluster, job.proc), job);
  }

  /**
   * The job object is deleted (held, removed, done): UnregisterJob() takes it out of its
   * batch, and a batch left empty is deleted; JobsByProcId forgets it.
   */
  unregister(job: GridJob): void {
    const id = procIdOf(job.cluster, job.proc);
    if (this.jobsByProcId.get(id) === job) this.jobsByProcId.delete(id);
    for (let i = 0; i < this.batches.length; i++) {
      const b = this.batches[i]!;
      const at = b.jobs.indexOf(job);
      if (at < 0) continue;
      b.jobs.splice(at, 1);
      if (b.jobs.length === 0) this.batches.splice(i, 1);
      break;
    }
  }

  /** JoinBatch() for a new job (no batch name yet): the batch of its app not yet submitted. */
  joinNew(job: GridJob, now = Math.floor(Date.now() / 1000)): BoincBatch {
    let batch = this.batches.find((b) => b.app === job.app && b.status === 'Unsubmitted');
    if (!batch) {
      batch = { name: `condor#${this.scheddName}#${job.app}#${now}`, app: job.app, status: 'Unsubmitted', needFullQuery: true, leaseTime: 0, errorMessage: '', jobs: [] };
      this.batches.push(batch);
    }
    batch.jobs.push(job);
    batch.needFullQuery = true;
    this.needFullQuery = true;
    job.remoteBatchName = batch.name;
    this.register(job);
    return batch;
  }

  /** JoinBatch() for a job recovered from the schedd with a GridJobId (gridmanager restart). */
  joinRecovered(job: GridJob): BoincBatch {
    const name = job.remoteBatchName!;
    let batch = this.batches.find((b) => b.name === name);
    if (!batch) {
      batch = { name, app: job.app, status: 'MaybeSubmitted', needFullQuery: true, leaseTime: 0, errorMessage: '', jobs: [] };
      this.batches.push(batch);
    }
    if (batch.status === 'Unsubmitted') batch.status = 'MaybeSubmitted';
    if (batch.status === 'MaybeSubmitted' && job.remoteState !== '') batch.status = 'Submitted';
    batch.jobs.push(job);
    this.register(job);
    batch.needFullQuery = true;
    this.needFullQuery = true;
    return batch;
  }

  batch(name: string): BoincBatch {
    const b = this.batches.find((x) => x.name === name);
    if (!b) throw new Error(`no batch ${name} in the gridmanager`);
    return b;
  }

  /** DoBatchSubmits() for one batch: BOINC_SUBMIT, then Submitted or Failed. */
  async submit(batch: BoincBatch): Promise<CallOutcome> {
    if (batch.status !== 'Unsubmitted') throw new Error(`batch ${batch.name} is ${batch.status}, not Unsubmitted`);
    batch.status = 'Submitting';
    const r = await boincSubmit(this.gm, this.ref, batch.name, batch.jobs);
    if (r.rc === 0) batch.status = 'Submitted';
    else {
      batch.status = 'Failed';
      batch.errorMessage = r.error ?? '';
    }
    return r;
  }

  /** UpdateBoincLeases() for one batch: a new 6-hour lease. */
  async renewLease(batch: BoincBatch, now = Math.floor(Date.now() / 1000)): Promise<CallOutcome> {
    const lease = now + DEFAULT_LEASE_DURATION;
    const r = await boincSetLease(this.gm, this.ref, batch.name, lease);
    if (r.rc === 0) batch.leaseTime = lease;
    return r;
  }

  /** StartBatchStatus() + FinishBatchStatus(): one status pass. */
  async statusPass(timeoutMs?: number): Promise<'done' | 'error'> {
    let names: string[] = [];
    for (const b of this.batches) {
      if (b.status !== 'Submitted' && b.status !== 'MaybeSubmitted') continue;
      if (this.needFullQuery && !b.needFullQuery) continue;
      names.push(b.name);
    }
    const doingFull = this.needFullQuery;
    this.needFullQuery = false;
    for (;;) {
      if (names.length === 0) return 'done';
      const oldQueryTime = doingFull ? '0' : this.lastQueryTime;
      const outcome = await boincQueryBatches(this.gm, this.ref, names, oldQueryTime, timeoutMs);
      this.queries.push({ minModTime: oldQueryTime, names: [...names], outcome });
      if (outcome.rc !== 0) {
        const err = outcome.error ?? '';
        const at = err.indexOf('no batch named ');
        if (at >= 0) {
          const missing = err.slice(at + 15);
          const batch = this.batches.find((b) => b.name === missing);
          names = names.filter((n) => n !== missing);
          if (batch && batch.status === 'MaybeSubmitted') batch.status = 'Unsubmitted';
          if (!batch) {
            // "Failed to find batch": the same query goes out again and again.
            if (this.queries.filter((q) => q.outcome.error === err).length > 3) gmAbort(this.gm, `"no batch named " is followed by ${JSON.stringify(missing)}, no batch of ours: the gridmanager re-sends this query forever`);
          }
          continue; // FinishBatchStatus() recurses with the rest
        }
        for (const b of this.batches) if (b.status === 'MaybeSubmitted' && b.errorMessage === '') b.errorMessage = err;
        return 'error';
      }
      if (!doingFull) this.lastQueryTime = outcome.serverTime!;
      const results = outcome.batches!;
      if (results.length > names.length) gmAbort(this.gm, `ASSERT(batch_name): ${results.length} batches in the result, ${names.length} asked`);
      for (let k = 0; k < results.length; k++) {
        const batch = this.batches.find((b) => b.name === names[k]);
        const jobs = results[k]!;
        if (batch && batch.status === 'MaybeSubmitted') {
          batch.status = jobs.length === 0 ? 'Unsubmitted' : 'Submitted';
          break; // as the real code does: the rest of this answer is not looked at
        }
        for (const [jobName, status] of jobs) {
          const hash = jobName.lastIndexOf('#');
          if (hash < 0) continue; // "Failed to find job id"
          const m = /^\s*([+-]?\d+)\.([+-]?\d+)/.exec(jobName.slice(hash + 1));
          if (!m) continue; // "Failed to parse job id"
          const job = this.findJob(Number(m[1]), Number(m[2]));
          if (job) {
            job.remoteState = status;
            (job.statuses ??= []).push(status);
          }
        }
      }
      return 'done';
    }
  }

  /** BaseJob::JobsByProcId.find(): by cluster.proc alone, whatever batch the answer was for. */
  findJob(cluster: number, proc: number): GridJob | undefined {
    return this.jobsByProcId.get(procIdOf(cluster, proc));
  }
}

/** Writes an authenticator file as a site keeps it (mode 0600). */
export function writeAuthenticatorFile(dir: string, name: string, authenticator: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, authenticator + '\n', { mode: 0o600 });
  return p;
}
