/**
 * A blahpd emulator for tests: runs `<lrms>_submit.sh`, `_status.sh`, `_cancel.sh`,
 * `_ping.sh`, `_hold.sh`, `_resume.sh` exactly as HTCondor's blahpd does, and turns what they
 * print into the results the gridmanager would see. Read from HTCondor's src/blahp
 * (server.c: cmd_submit_job, cmd_status_job, cmd_cancel_job, cmd_ping, hold_resume;
 * job_status.c: get_status; mapped_exec.c: execute_cmd) and condor_gridmanager
 * (gahp-client.cpp: read_argv and the blah_* result checks).
 *
 * API (everything is exported from this module):
 *
 *   const blahpd = new Blahpd({ libexecDir, tmpDir, cwd, env, silenceTimeoutMs });
 *   const sub = await blahpd.submit({ Cmd: '/bin/uppercase', Iwd: dir, Arguments: v2Arguments(['a', 'b c']),
 *                                     TransferInput: 'in.txt', TransferOutput: 'out',
 *                                     TransferOutputRemaps: 'out=out.1.0', Out: 'job.out', Err: 'job.err',
 *                                     Queue: 'uppercase', JobDirectory: dir });
 *   sub.jobId            // 'boinc/...' as the gridmanager stores it, or null (sub.problem says why)
 *   sub.run              // the script run: argv, exitCode, stdout, stderr, silenceTimeout, stdinConsumed, ms
 *   sub.listFiles        // the -I/-O/-R/-C files: path and content as the script was given them
 *   sub.listFilesLeft    // those still on disk after blahpd cleaned up (blahpd deletes them: always [])
 *   const st = await blahpd.status(sub.jobId!);
 *   st.answer            // the one result the gridmanager accepts: { rc, errorString, jobStatus, ad } or null
 *   st.answer?.ad?.get('ExitCode')
 *   st.results, st.problem  // every result line; why there is no answer (none, several, bad argc)
 *   const c = await blahpd.cancel(sub.jobId!);   // c.answer: { rc, errorString } or null; c.problem
 *   await blahpd.ping(); await blahpd.hold(id); await blahpd.resume(id);
 *   await blahpd.execute(commandString)          // the bare execute_cmd, for anything else
 *
 *   wordexp(), blahpdSplitCommand(), escapeWordexpSpecialChars()   (./wordexp.js)
 *   buildSubmitCommand(job, opts)   the submit command line and list files, as blahpd builds them
 *   convertArgs(v2), v2Arguments(list)   the `-- '<args>'` word and the job ad's V2 Arguments
 *   readArgv(line)   the gridmanager's tokenizer for a result line
 *   parseClassAd(), ClassAd   (./classad.js)
 *
 * How a script is run (execute): the command string is escaped and split with
 * wordexp(WRDE_NOCMD); argv[0] is execve()d (no PATH search) in a new session (setsid),
 * with blahpd's environment and working directory. stdin is blahpd's own stdin, which is
 * the gridmanager's command pipe: here a FIFO holding a sentinel command line that stays
 * open, so a script that reads stdin either steals the sentinel (`run.stdinConsumed`) or
 * blocks as it would under blahpd. stdout and stderr are pipes read until one of them
 * reaches end-of-file with nothing left to read; then blahpd waits for the script to exit
 * (after half of `gracefulKillTicks` ticks it sends SIGTERM to the script's process group,
 * at the end SIGKILL). If neither pipe carries anything for `silenceTimeoutMs`
 * (blah_child_poll_timeout, 30 s), blahpd appends "<blah> execute_cmd: 30 seconds timeout
 * expired, killing child process." to stderr and does the same waiting and killing
 * (`run.silenceTimeout`). NUL bytes in the output become '.'. A script killed by a signal
 * has exit code -signal. A script that exits while something in the background still
 * holds its stdout and stderr open is waited for until the silence limit, as blahpd does.
 * Deviation: the emulator notices the script's exit at once where blahpd polls it once a
 * second; background processes a script leaves are not killed (blahpd leaves them too).
 *
 * Results cache: before running `_status.sh` blahpd reads
 * /var/tmp/<lrms>_cache_<user>/blahp_results_cache when it is under 60 s old (lines
 * `<id after the last slash> <anything> <status>`) and answers a status other than 0 and 4
 * from it; `resultsCacheFile` overrides the path (null: never consulted).
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { blahpdSplitCommand, WordexpError } from './wordexp.js';
import { ClassAd, parseClassAd } from './classad.js';
import { blahpPaths } from '../../gahp/blahp/state.js';
import { pidAlive } from '../../gahp/util.js';

export { wordexp, blahpdSplitCommand, escapeWordexpSpecialChars, WordexpError } from './wordexp.js';
export { ClassAd, parseClassAd } from './classad.js';

export interface BlahpdOptions {
  /** blahpd's script location (blah_libexec_directory): where `<lrms>_*.sh` are. */
  libexecDir: string;
  /** The batch system name, the `batch <lrms>` of grid_resource (default 'boinc'). */
  lrms?: string;
  /** blahpd's temporary directory (GAHP_TEMP/TMPDIR): `-T`, and where the list files are written (default os.tmpdir()). */
  tmpDir?: string;
  /** blahpd's working directory, which the scripts inherit (default process.cwd()). */
  cwd?: string;
  /** blahpd's environment, which the scripts get (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** blah_child_poll_timeout in ms (default 30000). */
  silenceTimeoutMs?: number;
  /** merciful_kill's tick (default 1000 ms) and number of ticks (blah_graceful_kill_timeout, default 20). */
  killTickMs?: number;
  gracefulKillTicks?: number;
  /** blah_disable_wn_proxy_renewal: adds `-r no` to submit (default true, as HTCondor's blah.config). */
  disableWnProxyRenewal?: boolean;
  /** Path of blahpd's status cache file; default blahpd's own; null: never consulted. */
  resultsCacheFile?: string | null;
}

/** The job description blahpd gets from the gridmanager (attribute names of its submit ad). */
export interface BlahpJob {
  Cmd?: string;
  Iwd?: string;
  In?: string;
  Out?: string;
  Err?: string;
  /** Comma-separated, as in the job ad (relative names are relative to Iwd). */
  TransferInput?: string;
  TransferOutput?: string;
  /** `name=dest;name2=dest2`, as in the job ad. */
  TransferOutputRemaps?: string;
  /** V2 arguments as the job ad holds them (see v2Arguments). */
  Arguments?: string;
  /** Old-syntax arguments (used only without Arguments). */
  Args?: string;
  /** V2 environment (`-V`); Env is the old syntax (`-v`), used only without Environment. */
  Environment?: string;
  Env?: string;
  /** batch_queue. */
  Queue?: string;
  MICNumber?: number;
  GPUNumber?: number;
  GPUMode?: string;
  GPUModel?: string;
  NodeNumber?: number;
  WholeNodes?: boolean;
  HostNumber?: number;
  SMPGranularity?: number;
  HostSMPSize?: number;
  /** false when transfer_executable = false (`-s no`). */
  StageCmd?: boolean;
  ClientJobId?: string;
  /** The gridmanager always sets it (its per-job directory). */
  JobDirectory?: string;
  BatchProject?: string;
  BatchRuntime?: number;
  BatchExtraSubmitArgs?: string;
  RequestMemory?: number;
  x509UserProxy?: string;
  x509UserProxySubject?: string;
  /** Lines of the CE requirements file (`-C`), e.g. `Foo='bar'`. */
  ceRequirements?: string[];
}

export interface ScriptRun {
  /** The command string blahpd built. */
  command: string;
  /** The argv the script got (after escaping and wordexp); empty if wordexp failed. */
  argv: string[];
  /** wordexp refused the command: blahpd ran nothing. */
  wordexpError?: WordexpError;
  /** blahpd's exit_code: the exit status, -signal when killed by a signal, errno when exec failed. */
  exitCode: number;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** Including what blahpd appends (timeout and signal messages). */
  stderr: string;
  /** blah_child_poll_timeout expired: no output on either pipe for silenceTimeoutMs. */
  silenceTimeout: boolean;
  /** blahpd had to send SIGTERM/SIGKILL to the script's process group. */
  killed: boolean;
  /** What the script read of blahpd's stdin (the gridmanager's commands): '' when untouched. */
  stdinConsumed: string;
  ms: number;
}

export interface ListFile {
  path: string;
  content: string;
}

export interface SubmitOutcome {
  command: string;
  listFiles: { input?: ListFile; output?: ListFile; remaps?: ListFile; ceRequirements?: ListFile };
  /** List files still on disk after blahpd's clean-up (blahpd deletes them all when the script returns). */
  listFilesLeft: string[];
  /** Absent when blahpd failed before running anything (e.g. no Cmd). */
  run?: ScriptRun;
  resultLine: string;
  tokens: string[];
  /** The gridmanager's view: rc, error string, job id ('NULL'/'N/A' mean none). */
  rc: number;
  errorString: string;
  jobId: string | null;
  /** Why this submit would not work with the gridmanager (a failed assertion, no id). */
  problem?: string;
}

export interface StatusAnswer {
  rc: number;
  errorString: string;
  jobStatus: number;
  /** The ad the gridmanager parsed (JobStatus set from the result's status field), or null. */
  ad: ClassAd | null;
}

export interface ResultLine {
  line: string;
  tokens: string[];
}

export interface StatusOutcome {
  command?: string;
  run?: ScriptRun;
  /** Answered from blahpd's results cache file, without running the script. */
  fromCache: boolean;
  results: ResultLine[];
  /** The one result the gridmanager accepts, or null (see problem). */
  answer: StatusAnswer | null;
  problem?: string;
}

export interface SimpleAnswer {
  rc: number;
  errorString: string;
}

export interface SimpleOutcome {
  command?: string;
  run?: ScriptRun;
  results: ResultLine[];
  answer: SimpleAnswer | null;
  problem?: string;
}

const JOBID_MAX_LEN = 512; // blahpd.h: job ids are copied into a buffer of this size
const CAD_LEN = 1024; // job_status.c: a status ad line is cut to CAD_LEN - 1 characters

/** blah_utils.c escape_spaces: `\ ` for spaces and tabs, CR dropped, LF `-` (a final LF dropped). */
export function escapeSpaces(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\r') continue;
    if (c === '\n') {
      if (i + 1 < s.length) out += '-';
      continue;
    }
    out += c === ' ' || c === '\t' ? '\\ ' : c;
  }
  return out;
}

/**
 * The gridmanager's tokenizer for a GAHP result line (gahp-client.cpp read_argv): a
 * backslash makes the next character literal, an unescaped CR is dropped, every unescaped
 * space ends an argument (two spaces give an empty argument).
 */
export function readArgv(line: string): string[] {
  const args: string[] = [];
  let cur = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\') {
      if (i + 1 < line.length) cur += line[++i];
      continue;
    }
    if (c === '\r') continue;
    if (c === '\n') break;
    if (c === ' ') {
      args.push(cur);
      cur = '';
      continue;
    }
    cur += c;
  }
  args.push(cur);
  return args;
}

/**
 * server.c ConvertArgs(arguments, ' '): a job ad's V2 Arguments string as ONE double-quoted
 * shell word holding every argument double-quoted: `a 'b c'` -> `"\"a\" \"b c\""`.
 * Returns null for an empty string (blahpd then passes no `--` at all).
 */
export function convertArgs(original: string): string | null {
  if (original.length === 0) return null;
  let out = '"\\"';
  let inQuotes = false;
  for (let i = 0; i < original.length; i++) {
    const c = original[i]!;
    if (c === "'" && !inQuotes) inQuotes = true;
    else if (c === "'") {
      if (original[i + 1] === "'") out += original[i++];
      else inQuotes = false;
    } else if (c === ' ') out += inQuotes ? ' ' : '\\" \\"';
    else if (c === '"') out += '\\\\\\"';
    else if (c === '(' || c === ')' || c === '&') out += '\\' + c;
    else out += c;
  }
  return out + '\\""';
}

/**
 * The job ad's V2 Arguments string for a list of arguments (HTCondor's ArgList V2 raw form):
 * arguments separated by spaces; one containing a space or a single quote, or empty, is
 * wrapped in single quotes with each single quote doubled.
 */
export function v2Arguments(args: string[]): string {
  return args.map((a) => (a === '' || /[ '\t]/.test(a) ? `'${a.replace(/'/g, "''")}'` : a)).join(' ');
}

/**
 * server.c outputfileRemaps(), step for step (HTCondor's src/blahp/src/server.c): each
 * TransferOutput name is replaced by its destination in TransferOutputRemaps, if any.
 * - A name matches only where it starts the remap string or follows a `;` directly, and
 *   is followed directly by `=`: `out=out.0` remaps, `out = out.0` does not (nor does
 *   `b=y` in `a=x; b=y`), silently. The destination runs to the next `;`, blanks kept.
 * - Names are cut at commas, not trimmed; the last one is taken when the loop reaches the
 *   last character, so a TransferOutput ending in a comma gives a last name WITH that
 *   comma, which matches no remap.
 * - Every name, the last too, is followed by a comma, which becomes a newline in the file:
 *   the -R file ends in an empty line.
 * Returns null where blahpd's buffer stays NULL (an empty TransferOutput): it then fails
 * the submit ("Out of memory computing file remaps").
 */
export function remapOutputs(outputs: string, remaps: string): string | null {
  let out: string | null = null;
  let begin = 0;
  const len = outputs.length;
  for (let i = 0; i < len; i++) {
    if (outputs[i] !== ',' && i !== len - 1) continue;
    const end = i === len - 1 ? i : i - 1;
    const name = outputs.slice(begin, end + 1);
    begin = i + 1;
    out = (out ?? '') + remapOf(name, remaps) + ',';
  }
  return out;
}

function remapOf(name: string, remaps: string): string {
  for (let j = 0; j <= remaps.length; ) {
    const at = remaps.indexOf(name, j);
    if (at < 0) break;
    if ((at > 0 && remaps[at - 1] !== ';') || remaps[at + name.length] !== '=') {
      j = at + 1;
      continue;
    }
    const from = at + name.length + 1;
    const to = remaps.indexOf(';', from);
    return remaps.slice(from, to < 0 ? undefined : to);
  }
  return name;
}

export interface BuiltSubmit {
  /** Null when blahpd refuses the job before building a command (resultLine says why). */
  command: string | null;
  listFiles: SubmitOutcome['listFiles'];
  /** For a refusal: blahpd's result line. */
  refusal?: string;
}

let listFileSerial = 0;

/**
 * The submit command line, exactly as blahpd's cmd_submit_job builds it (and the list files
 * it writes into tmpDir first): `<libexec>/<lrms>_submit.sh [-x <proxy> -u "<subject>"] [-r no]
 * -c <Cmd> -T <tmp> [-I f] [-O f] [-R f] [-C f] [-i In] [-o Out] [-e Err] [-w Iwd] [-q ..]
 * [-P ..] [-g ..] [-G ..] [-M '..'] [-n ..] [-z yes|no] [-h ..] [-S ..] [-N ..] [-s yes|no]
 * [-j ..] [-D ..] [-A ..] [-t ..] [-a '..'] [-m ..] [-V <env word> | -v '<Env>']
 * [-- <args word> | -- '<Args>']`. String values are inserted raw (no quoting: a space in
 * Iwd splits it), as blahpd does.
 */
export function buildSubmitCommand(
  job: BlahpJob,
  opts: { libexecDir: string; lrms?: string; tmpDir?: string; reqId?: string; cwd?: string; disableWnProxyRenewal?: boolean },
): BuiltSubmit {
  const lrms = opts.lrms ?? 'boinc';
  const tmp = opts.tmpDir ?? os.tmpdir();
  const reqId = opts.reqId ?? '1';
  const listFiles: SubmitOutcome['listFiles'] = {};
  const nonEmpty = (v: string | undefined): v is string => v !== undefined && v.length > 0;
  let cmd = `${opts.libexecDir}/${lrms}_submit.sh`;
  if (job.x509UserProxy !== undefined) cmd += ` -x ${job.x509UserProxy} -u "${job.x509UserProxySubject ?? '(null)'}" `;
  else if (job.x509UserProxySubject !== undefined) cmd += ` -u "${job.x509UserProxySubject}" `;
  if (opts.disableWnProxyRenewal ?? true) cmd += ' -r no';
  if (!nonEmpty(job.Cmd)) {
    return { command: null, listFiles, refusal: `${reqId} 7 Cannot\\ parse\\ Cmd\\ attribute\\ in\\ classad N/A` };
  }
  cmd += ` -c ${job.Cmd}`;
  cmd += ` -T ${tmp}`;
  const stamp = () => {
    const t = Date.now();
    return `${Math.floor(t / 1000)}${(t % 1000) * 1000 + (listFileSerial++ % 1000)}`;
  };
  const write = (prefix: string, content: string): ListFile => {
    const p = `${tmp}/${prefix}_${reqId}_${stamp()}`;
    fs.writeFileSync(p, content);
    return { path: p, content };
  };
  if (job.TransferInput !== undefined) {
    const iwd = job.Iwd ?? opts.cwd ?? process.cwd();
    let content = '';
    for (const p of job.TransferInput.split(',')) {
      if (p.length > 0) content += p.startsWith('/') ? `${p}\n` : `${iwd}/${p}\n`;
    }
    listFiles.input = write('InputFileList', content);
    cmd += ` -I ${listFiles.input.path}`;
  }
  if (job.TransferOutput !== undefined) {
    listFiles.output = write('OutputFileList', job.TransferOutput.replace(/,/g, '\n') + '\n');
    cmd += ` -O ${listFiles.output.path}`;
    if (job.TransferOutputRemaps !== undefined) {
      const remapped = remapOutputs(job.TransferOutput, job.TransferOutputRemaps);
      if (remapped === null) return { command: null, listFiles, refusal: `${reqId} 1 Out\\ of\\ memory\\ computing\\ file\\ remaps N/A` };
      listFiles.remaps = write('OutputFileListRemaps', remapped.replace(/,/g, '\n') + '\n');
      cmd += ` -R ${listFiles.remaps.path}`;
    }
  }
  if (job.ceRequirements && job.ceRequirements.length > 0) {
    const t = Date.now();
    const p = `${tmp}/ce-req-file-${Math.floor(t / 1000)}${(t % 1000) * 1000 + (listFileSerial++ % 1000)}`;
    const content = job.ceRequirements.map((l) => l + '\n').join('');
    fs.writeFileSync(p, content);
    listFiles.ceRequirements = { path: p, content };
    cmd += ` -C ${p}`;
  }
  const str = (v: string | undefined, opt: string, quote = false) => {
    if (nonEmpty(v)) cmd += quote ? ` ${opt} '${v}'` : ` ${opt} ${v}`;
  };
  const int = (v: number | undefined, opt: string) => {
    if (v !== undefined) cmd += ` ${opt} ${Math.trunc(v)}`;
  };
  const bool = (v: boolean | undefined, opt: string) => {
    if (v !== undefined) cmd += ` ${opt} ${v ? 'yes' : 'no'}`;
  };
  str(job.In, '-i');
  str(job.Out, '-o');
  str(job.Err, '-e');
  str(job.Iwd, '-w');
  str(job.Queue, '-q');
  int(job.MICNumber, '-P');
  int(job.GPUNumber, '-g');
  str(job.GPUMode, '-G');
  str(job.GPUModel, '-M', true);
  int(job.NodeNumber, '-n');
  bool(job.WholeNodes, '-z');
  int(job.HostNumber, '-h');
  int(job.SMPGranularity, '-S');
  int(job.HostSMPSize, '-N');
  bool(job.StageCmd, '-s');
  str(job.ClientJobId, '-j');
  str(job.JobDirectory, '-D');
  str(job.BatchProject, '-A');
  int(job.BatchRuntime, '-t');
  str(job.BatchExtraSubmitArgs, '-a', true);
  int(job.RequestMemory, '-m');
  if (job.Environment !== undefined) {
    const conv = convertArgs(job.Environment);
    if (conv !== null) cmd += ` -V ${conv}`;
  } else {
    str(job.Env, '-v', true);
  }
  if (job.Arguments !== undefined) {
    const conv = convertArgs(job.Arguments);
    if (conv !== null) cmd += ` -- ${conv}`;
  } else {
    str(job.Args, '--', true);
  }
  return { command: cmd, listFiles };
}

const SIGNAL_TEXT: Record<string, string> = {
  SIGTERM: 'Terminated',
  SIGKILL: 'Killed',
  SIGINT: 'Interrupt',
  SIGHUP: 'Hangup',
  SIGSEGV: 'Segmentation fault',
  SIGABRT: 'Aborted',
  SIGPIPE: 'Broken pipe',
};

const STDIN_SENTINEL = 'BLAH_JOB_STATUS 4242 boinc/stdin-sentinel\r\n';

export class Blahpd {
  readonly lrms: string;
  private reqSerial = 0;

  constructor(readonly options: BlahpdOptions) {
    this.lrms = options.lrms ?? 'boinc';
  }

  private nextReqId(): string {
    return String(++this.reqSerial);
  }

  /** execute_cmd: run one command string as blahpd runs a script. */
  async execute(command: string): Promise<ScriptRun> {
    const o = this.options;
    const env = { ...(o.env ?? process.env) };
    const cwd = o.cwd ?? process.cwd();
    const started = Date.now();
    const base: ScriptRun = {
      command, argv: [], exitCode: 0, signal: null, stdout: '', stderr: '', silenceTimeout: false, killed: false, stdinConsumed: '', ms: 0,
    };
    let argv: string[];
    try {
      argv = blahpdSplitCommand(command, { env, cwd });
    } catch (err) {
      if (err instanceof WordexpError) return { ...base, wordexpError: err, exitCode: -1, ms: Date.now() - started };
      throw err;
    }
    base.argv = argv;
    if (argv.length === 0) return { ...base, exitCode: 14, stderr: '(null): Bad address', ms: Date.now() - started };

    // blahpd's stdin: the gridmanager's command pipe, open for as long as blahpd runs.
    const fifoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'blahpd-stdin-'));
    const fifo = path.join(fifoDir, 'gridmanager-commands');
    const mk = spawnSync('mkfifo', ['-m', '600', fifo]);
    if (mk.status !== 0) throw new Error(`mkfifo failed: ${String(mk.stderr)}`);
    const childStdin = fs.openSync(fifo, fs.constants.O_RDWR);
    const peek = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    fs.writeSync(childStdin, STDIN_SENTINEL);

    try {
      // execve: no PATH search; a name without a slash is relative to the working directory.
      const file = argv[0]!.includes('/') ? argv[0]! : path.join(cwd, argv[0]!);
      const result = await this.runChild(file, argv, env, cwd, childStdin);
      let left = '';
      const buf = Buffer.alloc(4096);
      for (;;) {
        let n = 0;
        try {
          n = fs.readSync(peek, buf, 0, buf.length, null);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'EAGAIN') break;
          throw err;
        }
        if (n <= 0) break;
        left += buf.subarray(0, n).toString('latin1');
      }
      const consumed = left === STDIN_SENTINEL ? '' : STDIN_SENTINEL.slice(0, STDIN_SENTINEL.length - left.length);
      return { ...base, ...result, stdinConsumed: consumed, ms: Date.now() - started };
    } finally {
      fs.closeSync(peek);
      fs.closeSync(childStdin);
      fs.rmSync(fifoDir, { recursive: true, force: true });
    }
  }

  private runChild(
    file: string, argv: string[], env: NodeJS.ProcessEnv, cwd: string, stdinFd: number,
  ): Promise<Pick<ScriptRun, 'exitCode' | 'signal' | 'stdout' | 'stderr' | 'silenceTimeout' | 'killed'>> {
    const o = this.options;
    const silenceMs = o.silenceTimeoutMs ?? 30000;
    const tickMs = o.killTickMs ?? 1000;
    const ticks = o.gracefulKillTicks ?? 20;
    return new Promise((resolve) => {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let errSuffix = '';
      let silenceTimeout = false;
      let killed = false;
      let reading = true;
      let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
      let execErrno: number | null = null;
      const child = spawn(file, argv.slice(1), {
        argv0: argv[0], cwd, env, detached: true, stdio: [stdinFd, 'pipe', 'pipe'],
      });
      const pid = child.pid;
      const exitWaiters: Array<() => void> = [];
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        if (exited) return;
        exited = { code, signal };
        for (const w of exitWaiters.splice(0)) w();
      };
      child.on('exit', onExit);
      child.on('error', (e: NodeJS.ErrnoException) => {
        // fork succeeded, execve failed: blahpd's child prints "<path>: <strerror>" and exit(errno).
        const errnoOf: Record<string, number> = { ENOENT: 2, EACCES: 13, ENOEXEC: 8, ENOTDIR: 20, EISDIR: 21 };
        execErrno = errnoOf[e.code ?? ''] ?? 1;
        err.push(Buffer.from(`${argv[0]}: ${e.message.replace(/^spawn \S+ /, '')}`));
        onExit(execErrno, null);
      });

      const killGroup = (sig: NodeJS.Signals) => {
        if (pid === undefined) return;
        killed = true;
        try {
          process.kill(-pid, sig);
        } catch {
          // already gone
        }
      };

      let silenceTimer: NodeJS.Timeout | undefined;
      const armSilence = () => {
        clearTimeout(silenceTimer);
        silenceTimer = setTimeout(() => {
          silenceTimeout = true;
          errSuffix += ` <blah> execute_cmd: ${Math.round(silenceMs / 1000)} seconds timeout expired, killing child process.\n`;
          stopReading();
        }, silenceMs);
      };
      armSilence();

      const finish = () => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        const e = exited!;
        let exitCode = e.code ?? 0;
        let stderrText = decode(err) + errSuffix;
        if (e.signal) {
          const num = os.constants.signals[e.signal] ?? 0;
          stderrText += ` <blah> killed by signal ${SIGNAL_TEXT[e.signal] ?? e.signal} ${num}.\n`;
          exitCode = -num;
        }
        resolve({ exitCode, signal: e.signal, stdout: decode(out), stderr: stderrText, silenceTimeout, killed });
      };

      // merciful_kill: wait for the script; SIGTERM its group after half the ticks, SIGKILL at the end.
      const mercifulKill = () => {
        if (exited) return finish();
        let tick = 0;
        const timer = setInterval(() => {
          if (exited) return;
          tick++;
          if (tick > ticks / 2 && tick < ticks) killGroup('SIGTERM');
          if (tick >= ticks) {
            clearInterval(timer);
            killGroup('SIGKILL');
          }
        }, tickMs);
        exitWaiters.push(() => {
          clearInterval(timer);
          finish();
        });
      };

      function stopReading() {
        if (!reading) return;
        reading = false;
        clearTimeout(silenceTimer);
        mercifulKill();
      }

      const onData = (into: Buffer[]) => (chunk: Buffer) => {
        if (!reading) return;
        into.push(chunk);
        armSilence();
      };
      if (child.stdout && child.stderr) {
        child.stdout.on('data', onData(out));
        child.stderr.on('data', onData(err));
        // blahpd stops at the first poll that finds a hang-up and nothing to read: give the
        // other pipe a moment to deliver what it already holds.
        let ended = 0;
        const onEnd = () => {
          ended++;
          if (ended === 2) return stopReading();
          setTimeout(stopReading, 50);
        };
        child.stdout.on('end', onEnd);
        child.stderr.on('end', onEnd);
      } else {
        stopReading();
      }
    });
  }

  /** BLAH_JOB_SUBMIT. */
  async submit(job: BlahpJob): Promise<SubmitOutcome> {
    const reqId = this.nextReqId();
    const o = this.options;
    const built = buildSubmitCommand(job, {
      libexecDir: o.libexecDir, lrms: this.lrms, tmpDir: o.tmpDir, reqId, cwd: o.cwd, disableWnProxyRenewal: o.disableWnProxyRenewal,
    });
    const files = Object.values(built.listFiles).map((f) => f.path);
    let run: ScriptRun | undefined;
    let resultLine: string;
    try {
      if (built.command === null) {
        resultLine = built.refusal!;
      } else {
        run = await this.execute(built.command);
        if (run.wordexpError) {
          resultLine = `${reqId} 3 Error\\ executing\\ the\\ submission\\ command:\\ ${escapeSpaces(run.wordexpError.message)}`;
        } else if (run.exitCode !== 0) {
          resultLine = `${reqId} ${run.exitCode} submission\\ command\\ failed\\ (exit\\ code\\ =\\ ${run.exitCode})\\ (stdout:${escapeSpaces(run.stdout)})\\ (stderr:${escapeSpaces(run.stderr)}) N/A`;
        } else {
          const m = /(^|\n)BLAHP_JOBID_PREFIX([^\n]*)/.exec(run.stdout);
          if (!m) {
            resultLine = `${reqId} 8 no\\ jobId\\ in\\ submission\\ script's\\ output\\ (stdout:${escapeSpaces(run.stdout)})\\ (stderr:${escapeSpaces(run.stderr)}) N/A`;
          } else {
            resultLine = `${reqId} 0 No\\ error ${m[2]!.slice(0, JOBID_MAX_LEN - 1)}`;
          }
        }
      }
    } finally {
      // blahpd's clean-up: the list files go as soon as the script returned.
      for (const f of files) fs.rmSync(f, { force: true });
    }
    const tokens = readArgv(resultLine);
    const outcome: SubmitOutcome = {
      command: built.command ?? '', listFiles: built.listFiles, listFilesLeft: files.filter((f) => fs.existsSync(f)),
      run, resultLine, tokens, rc: Number.parseInt(tokens[1] ?? '', 10), errorString: tokens[2] ?? '', jobId: null,
    };
    if (tokens.length !== 4) {
      outcome.problem = `the gridmanager asserts argc == 4 for BLAH_JOB_SUBMIT and got ${tokens.length}: ${JSON.stringify(tokens)}`;
    } else if (outcome.rc === 0) {
      outcome.jobId = tokens[3] === 'NULL' ? null : tokens[3]!;
      if (outcome.jobId === null) outcome.problem = 'no job id';
    } else {
      outcome.problem = `submit failed: rc ${outcome.rc}: ${outcome.errorString}`;
    }
    return outcome;
  }

  private resultsCachePath(proxyId: string): string | null {
    if (this.options.resultsCacheFile !== undefined) return this.options.resultsCacheFile;
    const user = os.userInfo().username;
    const at = proxyId.indexOf('@');
    const dir = `/var/tmp/${this.lrms}_cache_${user}`;
    return at >= 0 ? `${dir}/blahp_results_cache-${proxyId.slice(at + 1)}` : `${dir}/blahp_results_cache`;
  }

  /** get_status + cmd_status_job for one job id (`<lrms>/<id>`), as the gridmanager asks. */
  async status(jobId: string, opts: { workerNode?: boolean } = {}): Promise<StatusOutcome> {
    const reqId = this.nextReqId();
    const { lines, run, command, fromCache, failure } = await this.getStatus(jobId, opts.workerNode ?? false);
    const results: string[] = [];
    if (failure) {
      results.push(`${reqId} ${failure.code} ${escapeSpaces(failure.text)} 0 N/A`);
    } else {
      lines.forEach((entry, i) => {
        const id = lines.length > 1 ? `${reqId}.${i}` : reqId;
        if (entry.ad) {
          const st = entry.ad.get('JobStatus');
          const jobStatus = typeof st === 'number' ? Math.trunc(st) : 'UNINITIALISED';
          results.push(`${id} 0 No\\ Error ${jobStatus} ${escapeSpaces(entry.ad.unparse())}`);
        } else {
          results.push(`${id} 1 Error\\ parsing\\ classad\\ or\\ job\\ not\\ found 0 N/A`);
        }
      });
    }
    const outcome: StatusOutcome = { command, run, fromCache, results: results.map((line) => ({ line, tokens: readArgv(line) })), answer: null };
    const mine = outcome.results.filter((r) => r.tokens[0] === reqId);
    if (outcome.results.length === 0) {
      outcome.problem = 'no result at all: the gridmanager waits for this status forever';
    } else if (mine.length !== outcome.results.length || mine.length !== 1) {
      outcome.problem = `${outcome.results.length} results (${outcome.results.map((r) => r.tokens[0]).join(', ')}): the gridmanager knows only request ${reqId}`;
    } else if (mine[0]!.tokens.length !== 5) {
      outcome.problem = `the gridmanager asserts argc == 5 for BLAH_JOB_STATUS and got ${mine[0]!.tokens.length}: ${JSON.stringify(mine[0]!.tokens)}`;
    } else {
      const t = mine[0]!.tokens;
      const jobStatus = Number.parseInt(t[3]!, 10);
      let ad: ClassAd | null = null;
      if (t[4]!.toUpperCase() !== 'NULL') {
        ad = parseClassAd(t[4]!);
        if (ad) ad.set('JobStatus', { type: 'integer', value: jobStatus, text: String(jobStatus) });
      }
      outcome.answer = { rc: Number.parseInt(t[1]!, 10), errorString: t[2]!, jobStatus, ad };
      if (t[3] === 'UNINITIALISED') outcome.problem = 'the status ad has no JobStatus: blahpd would send an uninitialised number';
      else if (outcome.answer.rc === 0 && !ad) outcome.problem = `the gridmanager could not parse the status ad: ${t[4]}`;
    }
    return outcome;
  }

  private async getStatus(jobId: string, workerNode: boolean): Promise<{
    lines: Array<{ ad: ClassAd | null }>; run?: ScriptRun; command?: string; fromCache: boolean; failure?: { code: number; text: string };
  }> {
    const slash = jobId.indexOf('/');
    if (slash < 0) return { lines: [], fromCache: false, failure: { code: 255, text: 'Malformed jobId or out of memory' } };
    const lrms = jobId.slice(0, slash);
    const lastSlash = jobId.lastIndexOf('/');
    const proxyId = lrms.startsWith('con') ? jobId.slice(slash + 1).split('/')[0]! : jobId.slice(lastSlash + 1);

    const cacheFile = this.resultsCachePath(proxyId);
    if (cacheFile) {
      try {
        const st = fs.statSync(cacheFile);
        if (st.mtimeMs > Date.now() - 60_000) {
          const id = proxyId.split('@')[0]!;
          const words = fs.readFileSync(cacheFile, 'latin1').split(/\s+/).filter((w) => w.length > 0);
          for (let k = 0; k + 2 < words.length; k += 3) {
            if (!/^[+-]?\d+$/.test(words[k + 2]!)) break;
            if (words[k]!.slice(0, 63) === id) {
              const status = Number.parseInt(words[k + 2]!, 10);
              if (status !== 4 && status !== 0) {
                const ad = parseClassAd(`[JobStatus=${status};BatchJobId="${words[k]!.slice(0, 63)}"]`);
                return { lines: [{ ad }], fromCache: true };
              }
              break;
            }
          }
        }
      } catch {
        // no cache file: run the script
      }
    }

    const command = `${this.options.libexecDir}/${lrms}_status.sh ${workerNode ? '-w' : ''} ${jobId}`;
    const run = await this.execute(command);
    if (run.wordexpError) return { lines: [], run, command, fromCache: false, failure: { code: 255, text: `error invoking status command: ${run.wordexpError.message}` } };
    if (run.exitCode !== 0) return { lines: [], run, command, fromCache: false, failure: { code: 255, text: `status command failed: ${run.stderr}` } };
    const lines: Array<{ ad: ClassAd | null }> = [];
    const complete = run.stdout.split('\n').slice(0, -1); // a last line without its newline gives nothing
    for (const line of complete) {
      if (line[0] === '1') {
        lines.push({ ad: null });
        continue;
      }
      const ad = parseClassAd(line.slice(1, CAD_LEN));
      if (!ad) return { lines: [], run, command, fromCache: false, failure: { code: 1, text: 'Error allocating memory' } };
      lines.push({ ad });
    }
    return { lines, run, command, fromCache: false };
  }

  /** BLAH_JOB_CANCEL: `<lrms>_cancel.sh <id after the first slash>`, each output line appended to the request id. */
  async cancel(jobId: string): Promise<SimpleOutcome> {
    const reqId = this.nextReqId();
    const slash = jobId.indexOf('/');
    if (slash < 0) return this.simple(reqId, [`${reqId} 2 Malformed\\ jobId\\ ${jobId}\\ or\\ out\\ of\\ memory`]);
    const command = `${this.options.libexecDir}/${jobId.slice(0, slash)}_cancel.sh ${jobId.slice(slash + 1)}`;
    const run = await this.execute(command);
    let lines: string[];
    if (run.wordexpError) {
      lines = [`${reqId} 3 Error\\ executing\\ the\\ cancel\\ command:\\ ${escapeSpaces(run.wordexpError.message)}`];
    } else if (run.exitCode !== 0) {
      lines = [`${reqId} ${run.exitCode} Cancellation\\ command\\ failed\\ (stdout:${escapeSpaces(run.stdout)})\\ (stderr:${escapeSpaces(run.stderr)})`];
    } else {
      lines = run.stdout.split('\n').slice(0, -1).map((l) => reqId + l);
    }
    return this.simple(reqId, lines, command, run, 'BLAH_JOB_CANCEL');
  }

  /** BLAH_PING: `<lrms>_ping.sh`; its output's leading number is the result code, the rest the message. */
  async ping(): Promise<SimpleOutcome> {
    const reqId = this.nextReqId();
    const command = `${this.options.libexecDir}/${this.lrms}_ping.sh`;
    const run = await this.execute(command);
    let line: string;
    if (run.wordexpError) line = `${reqId} 3 Error\\ executing\\ the\\ ping\\ command:\\ ${escapeSpaces(run.wordexpError.message)}`;
    else if (run.exitCode !== 0) line = `${reqId} ${run.exitCode} Ping\\ command\\ failed\\ (stdout:${escapeSpaces(run.stdout)})\\ (stderr:${escapeSpaces(run.stderr)})`;
    else {
      const m = /^\s*([+-]?\d*)/.exec(run.stdout)!;
      const code = m[1] && m[1] !== '+' && m[1] !== '-' ? Number.parseInt(m[1], 10) : 0;
      const rest = run.stdout.slice(m[1] && m[1] !== '+' && m[1] !== '-' ? m[0].length : 0).replace(/^\s+/, '');
      line = `${reqId} ${code} ${escapeSpaces(rest)}`;
    }
    return this.simple(reqId, [line], command, run, 'BLAH_PING');
  }

  /** BLAH_JOB_HOLD: a status first; idle (1) or running (2) jobs get `<lrms>_hold.sh <id> <status>`. */
  hold(jobId: string): Promise<SimpleOutcome> {
    return this.holdResume(jobId, 'hold');
  }

  /** BLAH_JOB_RESUME: only a held (5) job gets `<lrms>_resume.sh <id>`. */
  resume(jobId: string): Promise<SimpleOutcome> {
    return this.holdResume(jobId, 'resume');
  }

  private async holdResume(jobId: string, action: 'hold' | 'resume'): Promise<SimpleOutcome> {
    const reqId = this.nextReqId();
    const st = await this.getStatus(jobId, false);
    if (st.failure) return this.simple(reqId, [`${reqId} ${st.failure.code} ${st.failure.text}`], st.command, st.run);
    if (st.lines.length !== 1) return this.simple(reqId, [], st.command, st.run, undefined, `status gave ${st.lines.length} lines`);
    const status = st.lines[0]!.ad?.get('JobStatus');
    const names = ['IDLE', 'RUNNING', 'REMOVED', 'COMPLETED', 'HELD'];
    const fixed: Record<number, string> = {
      3: `${reqId} 1 Job\\ Removed\\ jobId\\ ${jobId}`,
      4: `${reqId} 1 Job\\ Completed\\ jobId\\ ${jobId}`,
    };
    if (typeof status !== 'number') return this.simple(reqId, [`${reqId} 1 Error parsing classad or job not found`]);
    if (fixed[status]) return this.simple(reqId, [fixed[status]]);
    const runs = (action === 'hold' && (status === 1 || status === 2)) || (action === 'resume' && status === 5);
    if (!runs) {
      if (action === 'resume') return this.simple(reqId, [status === 1 ? `${reqId} 1 Job\\ Idle\\ jobId\\ ${jobId}` : `${reqId} 1 \\ Job\\ Running\\ jobId\\ ${jobId}`]);
      return this.simple(reqId, [`${reqId} 0 Job\\ Held\\ jobId\\ ${jobId}`]);
    }
    const slash = jobId.indexOf('/');
    const lrms = jobId.slice(0, slash);
    const scriptId = jobId.slice(slash + 1);
    const command = action === 'hold'
      ? `${this.options.libexecDir}/${lrms}_hold.sh ${scriptId} ${status}`
      : `${this.options.libexecDir}/${lrms}_resume.sh ${scriptId}`;
    const run = await this.execute(command);
    let line: string;
    if (run.wordexpError) line = `${reqId} 1 Cannot\\ execute\\ ${command}\\ script`;
    else if (run.exitCode !== 0) {
      line = `${reqId} ${run.exitCode} Job\\ ${names[status - 1]}:\\ ${lrms}\\ ${action}\\ command\\ failed\\ (stdout:${escapeSpaces(run.stdout)})\\ (stderr:${escapeSpaces(run.stderr)})`;
    } else line = `${reqId} 0 No\\ error`;
    return this.simple(reqId, [line], command, run, action === 'hold' ? 'BLAH_JOB_HOLD' : 'BLAH_JOB_RESUME');
  }

  /** The gridmanager's view of a command whose result has 3 arguments: reqid, code, message. */
  private simple(reqId: string, lines: string[], command?: string, run?: ScriptRun, what = 'this command', extraProblem?: string): SimpleOutcome {
    const results = lines.map((line) => ({ line, tokens: readArgv(line) }));
    const outcome: SimpleOutcome = { command, run, results, answer: null };
    const mine = results.filter((r) => r.tokens[0] === reqId);
    if (extraProblem) outcome.problem = extraProblem;
    else if (results.length === 0) outcome.problem = `no result at all: the gridmanager waits for ${what} forever`;
    else if (mine.length === 0) outcome.problem = `no result for request ${reqId} (got ${results.map((r) => JSON.stringify(r.tokens[0])).join(', ')}): the gridmanager waits forever`;
    else if (results.length > 1) outcome.problem = `${results.length} results for one request: ${results.map((r) => JSON.stringify(r.line)).join(', ')}`;
    else if (mine[0]!.tokens.length !== 3) outcome.problem = `the gridmanager asserts argc == 3 for ${what} and got ${mine[0]!.tokens.length}: ${JSON.stringify(mine[0]!.tokens)}`;
    if (mine.length >= 1 && mine[0]!.tokens.length === 3) {
      outcome.answer = { rc: Number.parseInt(mine[0]!.tokens[1]!, 10), errorString: mine[0]!.tokens[2]! };
    }
    return outcome;
  }
}

function decode(chunks: Buffer[]): string {
  const b = Buffer.concat(chunks);
  for (let i = 0; i < b.length; i++) if (b[i] === 0) b[i] = 0x2e; // read_data: a NUL becomes '.'
  return b.toString('utf8');
}

/**
 * Kills the BLAHP's detached background worker (`boinc-gahp blahp fetch`, started by status
 * calls) of a state directory, if one runs, and waits until it is gone. It outlives the
 * test that made it: its last writes would race the removal of the test's directory
 * (ENOTEMPTY). Its pid is in its lock file.
 */
export async function stopBlahpFetcher(stateDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(blahpPaths(stateDir).fetchLock, 'utf8').trim());
  } catch {
    return;
  }
  if (pid === process.pid || !pidAlive(pid)) return;
  process.kill(pid, 'SIGKILL');
  for (const until = Date.now() + 5000; pidAlive(pid) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
}
