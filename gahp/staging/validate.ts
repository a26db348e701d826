/**
 * Checks BOINC_SUBMIT makes before anything is created or uploaded: names and arguments
 * BOINC can carry, input files that exist and can be read, input counts that match the
 * app's template (and the template order of the files).
 */
import * as fs from 'node:fs';
import type { SubmitJobSpec, SubmitRequest } from './parse.js';
import { yieldNow } from '../util.js';

/** A check failed: the batch fails with this message, and nothing was sent. */
export class SubmitCheckError extends Error {
  override name = 'SubmitCheckError';
}

/**
 * Characters an argument may not hold. The current submit_rpc_handler.php writes one line
 * per job to create_work's standard input (`--command_line "<text>"`, no shell), and
 * create_work puts the text into SQL and XML unescaped (docs/boinc-server.md, "Command lines",
 * measured): whitespace splits it, a `"` splits the line, a `'` breaks the SQL insert, a
 * backslash vanishes, `<` `>` `&` corrupt the workunit XML. Control characters (C0, DEL,
 * C1) and Unicode spaces count as whitespace. Everything else (`$`, `*`, `=`, `/`, ...)
 * reaches the app intact.
 */
// Control characters are exactly what this pattern is for.
// eslint-disable-next-line no-control-regex
const BAD_ARG_CHAR = /[\s'"\\<>&\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/u;

/**
 * Job and batch names travel the same way (`--wu_name NAME` on that line, then SQL and
 * XML), so the same characters are refused; and since the server's replies are Latin-1,
 * only printable ASCII is accepted. A leading `-` would read as an option of create_work.
 * HTCondor's `condor#schedd@host#app#time#cluster.proc` names fit.
 */
const GOOD_NAME = /^[\x21-\x7e]+$/;
const BAD_NAME_CHAR = /['"\\<>&]/;

function show(text: string): string {
  const cut = text.length > 60 ? text.slice(0, 60) + '...' : text;
  return JSON.stringify(cut);
}

/** Why a name cannot be carried, or undefined when it can. */
export function nameProblem(name: string): string | undefined {
  if (name.length > 200) return 'is longer than 200 characters';
  if (!GOOD_NAME.test(name)) return 'may hold only printable ASCII characters, no spaces';
  const bad = BAD_NAME_CHAR.exec(name);
  if (bad) return `holds ${bad[0]}, which BOINC's create_work cannot carry intact`;
  if (name.startsWith('-')) return 'starts with -, which create_work would read as an option';
  return undefined;
}

/** Why an argument cannot be carried intact, or undefined when it can. */
export function argumentProblem(arg: string): string | undefined {
  if (arg.length === 0) return 'is empty';
  const m = BAD_ARG_CHAR.exec(arg);
  if (m) {
    const c = m[0];
    const code = c.codePointAt(0)!;
    const what = code < 0x21 || (code >= 0x7f && code <= 0x9f) || /\s/u.test(c) ? `character U+${code.toString(16).toUpperCase().padStart(4, '0')} (whitespace or control)` : `character ${c}`;
    return `holds ${what}, which BOINC's create_work cannot carry intact`;
  }
  return undefined;
}

/**
 * Throws SubmitCheckError for a job parameter that is no number, the first batch name, job
 * name or argument BOINC cannot carry, an input without a name; also for a job name used
 * twice. Pure: no I/O.
 */
export function checkNamesAndArguments(req: SubmitRequest): void {
  checkBatchNames(req);
  const seen = new Set<string>();
  for (const job of req.jobs) {
    const problem = jobProblem(job, seen);
    if (problem) throw new SubmitCheckError(problem);
  }
}

/** The checks of a batch as a whole (its job parameters, batch and app names): a failure fails every job. */
export function checkBatchNames(req: SubmitRequest): void {
  if (req.paramProblem !== undefined) throw new SubmitCheckError(req.paramProblem);
  const bp = nameProblem(req.batchName);
  if (bp) throw new SubmitCheckError(`batch name ${show(req.batchName)} ${bp}`);
  const ap = nameProblem(req.appName);
  if (ap) throw new SubmitCheckError(`app name ${show(req.appName)} ${ap}`);
}

/**
 * Why one job cannot be carried (its name, a name `seen` before it in the batch, an
 * argument, an input without a name), or undefined when it can. Adds its name to `seen`.
 */
export function jobProblem(job: SubmitJobSpec, seen: Set<string>): string | undefined {
  const np = nameProblem(job.name);
  if (np) return `job name ${show(job.name)} ${np}`;
  if (seen.has(job.name)) return `job name ${show(job.name)} appears twice in the batch`;
  seen.add(job.name);
  for (let a = 0; a < job.args.length; a++) {
    const problem = argumentProblem(job.args[a]!);
    if (problem) return `job ${job.name}: argument ${a + 1} ${show(job.args[a]!)} ${problem}`;
  }
  for (let k = 0; k < job.inputs.length; k++) {
    // HTCondor sends the basename of a transfer_input_files entry: empty for `dir/`.
    if (job.inputs[k]!.dst.length === 0) return `job ${job.name}: input file ${k + 1} ${show(job.inputs[k]!.src)} has an empty name (a directory? BOINC takes files only)`;
  }
  return undefined;
}

/** The first job name given twice in the batch, said as jobProblem says it; undefined when none is. */
export function nameTwiceProblem(jobs: readonly SubmitJobSpec[]): string | undefined {
  const seen = new Set<string>();
  for (const job of jobs) {
    if (seen.has(job.name)) return `job name ${show(job.name)} appears twice in the batch`;
    seen.add(job.name);
  }
  return undefined;
}

/** The job's command line as BOINC gets it (arguments already checked). */
export function commandLine(job: SubmitJobSpec): string {
  return job.args.join(' ');
}

/** The distinct source paths, in first-seen order. */
export function uniqueSources(jobs: readonly SubmitJobSpec[]): string[] {
  const seen = new Set<string>();
  for (const job of jobs) for (const input of job.inputs) seen.add(input.src);
  return [...seen];
}

/** Longest stretch of synchronous stat calls before checkInputFiles yields to the event loop. */
const CHECK_SLICE_MS = 8;

/**
 * Checks each path is an existing, readable regular file; returns its stat (bigint, for
 * the hash cache key). Throws SubmitCheckError naming the first bad path.
 *
 * The stat and access calls are synchronous (a few microseconds each on a local disk:
 * 500 paths take ~5 ms, against 30-50 ms through fs.promises and the libuv thread pool),
 * in slices of at most CHECK_SLICE_MS with a yield between, so that many paths, or a slow
 * network filesystem, never hold the protocol loop for long.
 */
export async function checkInputFiles(paths: readonly string[]): Promise<Map<string, fs.BigIntStats>> {
  const { stats, problems } = await statInputFiles(paths, true);
  const first = problems.values().next();
  if (!first.done) throw new SubmitCheckError(first.value);
  return stats;
}

/**
 * checkInputFiles for every path: the stats of the good ones, and why each other one
 * cannot be sent (`firstOnly`: stop at the first problem).
 */
export async function statInputFiles(paths: readonly string[], firstOnly = false): Promise<{ stats: Map<string, fs.BigIntStats>; problems: Map<string, string> }> {
  const stats = new Map<string, fs.BigIntStats>();
  const problems = new Map<string, string>();
  let sliceStart = Date.now();
  for (let i = 0; i < paths.length; i++) {
    if ((i & 63) === 63 && Date.now() - sliceStart >= CHECK_SLICE_MS) {
      await yieldNow();
      sliceStart = Date.now();
    }
    const p = paths[i]!;
    const problem = inputFileProblem(p, stats);
    if (problem) {
      problems.set(p, problem);
      if (firstOnly) break;
    }
  }
  return { stats, problems };
}

/** Why the input file cannot be sent, or undefined (its stat then put in `stats`). */
function inputFileProblem(p: string, stats: Map<string, fs.BigIntStats>): string | undefined {
  if (!p.startsWith('/')) return `input file ${show(p)} is not an absolute path`;
  try {
    const st = fs.statSync(p, { bigint: true });
    if (!st.isFile()) return `input file ${p} is not a regular file`;
    fs.accessSync(p, fs.constants.R_OK);
    stats.set(p, st);
    return undefined;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOENT' ? 'does not exist' : e.code === 'EACCES' ? 'is not readable (permission denied)' : `cannot be read (${e.code ?? e.message})`;
    return `input file ${p} ${why}`;
  }
}

/** Why the job's input count does not fit the app's input template, or undefined when it does. */
export function inputCountProblem(job: SubmitJobSpec, openNames: readonly string[]): string | undefined {
  const want = openNames.length;
  if (job.inputs.length === want) return undefined;
  return `job ${job.name} has ${job.inputs.length} input files, but the app's input template has ${want}${want ? ` (${openNames.join(', ')})` : ''}`;
}

/**
 * Puts each job's inputs into the app's input-template order. When every job names each
 * template open_name exactly once, its files are sorted into template order; otherwise
 * every job keeps HTCondor's order. A job whose input count differs from the template's
 * fails the batch (named in the message).
 */
export function orderInputs(jobs: readonly SubmitJobSpec[], openNames: readonly string[]): { jobs: SubmitJobSpec[]; reordered: boolean } {
  const want = openNames.length;
  for (const job of jobs) {
    const problem = inputCountProblem(job, openNames);
    if (problem) throw new SubmitCheckError(problem);
  }
  const position = new Map<string, number>();
  openNames.forEach((n, i) => position.set(n, i));
  const templateOrder = position.size === want && jobs.every((job) => {
    const used = new Set<string>();
    for (const input of job.inputs) {
      if (!position.has(input.dst) || used.has(input.dst)) return false;
      used.add(input.dst);
    }
    return true;
  });
  if (!templateOrder) return { jobs: [...jobs], reordered: false };
  const ordered = jobs.map((job) => ({
    ...job,
    inputs: [...job.inputs].sort((a, b) => position.get(a.dst)! - position.get(b.dst)!),
  }));
  return { jobs: ordered, reordered: true };
}
