/**
 * BOINC_SUBMIT's argument list, as HTCondor's gridmanager builds it:
 *
 *   <batch_name> <app_name> <njobs>
 *   then per job: <job_name> <nargs> <arg>... <ninputs> (<src_path> <dst_name>)...
 *   then (newer clients) six job parameters, each a number or NULL:
 *   <rsc_fpops_est> <rsc_fpops_bound> <rsc_memory_bound> <rsc_disk_bound> <delay_bound> <app_version_num>
 *
 * Parsing is one linear pass over the tokens (lines can hold thousands of jobs). It checks
 * the shape only; whether BOINC can carry the names and arguments is validate.ts's job.
 * A job parameter comes from a string attribute of the job ad (`+rsc_memory_bound = "2GB"`
 * reaches us as it is): a bad one is the submit's error result, found by validate.ts, not an
 * `E`, which would make the gridmanager EXCEPT (docs/gahp-protocol.md).
 */
import { ArgumentError, parseCount, parseNumber } from '../protocol/commands.js';
import type { JobParams } from '../../boinc-rpc/types.js';

export interface SubmitInput {
  /** Absolute path of the local file, as HTCondor sent it. */
  src: string;
  /** The name the job expects (an open_name of the app's input template). */
  dst: string;
}

export interface SubmitJobSpec {
  name: string;
  args: string[];
  inputs: SubmitInput[];
}

export interface SubmitRequest {
  batchName: string;
  appName: string;
  jobs: SubmitJobSpec[];
  /** Unset parameters are absent. */
  jobParams: JobParams;
  appVersionNum?: number;
  /** Why a job parameter cannot be used (the submit then fails with it), if one cannot. */
  paramProblem?: string;
}

/** A count token of job `name` (`field`: nargs or ninputs); the message is built only on failure. */
function count(text: string, name: string, field: string): number {
  if (/^[0-9]{1,7}$/.test(text)) return Number(text);
  return parseCount(text, `${field} of job ${name}`);
}

/** The line ended where `what` was due (after `at` arguments). */
function missing(what: string, at: number): never {
  throw new ArgumentError(`missing ${what} (the line ends after ${at} arguments)`);
}

/** The six trailing parameters, in the order HTCondor sends them. */
const PARAM_NAMES = ['rsc_fpops_est', 'rsc_fpops_bound', 'rsc_memory_bound', 'rsc_disk_bound', 'delay_bound', 'app_version_num'] as const;
const PARAM_KEYS = {
  rsc_fpops_est: 'rscFpopsEst',
  rsc_fpops_bound: 'rscFpopsBound',
  rsc_memory_bound: 'rscMemoryBound',
  rsc_disk_bound: 'rscDiskBound',
  delay_bound: 'delayBound',
} as const;

export function parseSubmitArgs(args: string[]): SubmitRequest {
  const n = args.length;
  // Messages are built only on failure (lines hold ~100k tokens): no closure per token.
  if (n < 1) missing('batch_name', 0);
  if (n < 2) missing('app_name', 1);
  if (n < 3) missing('njobs', 2);
  const batchName = args[0]!;
  // HTCondor 10.0 sends the job's executable as it was written: `executable =
  // /usr/local/bin/uppercase` (with transfer_executable = false) names app `uppercase`, as
  // the batch boinc route does. A BOINC app name never holds a `/`.
  const appName = args[1]!.slice(args[1]!.lastIndexOf('/') + 1) || args[1]!;
  const njobs = parseCount(args[2], 'njobs');
  let i = 3;
  if (njobs === 0) throw new ArgumentError('njobs must be at least 1');
  // A job takes at least 3 tokens, which bounds njobs by the line itself.
  if (njobs * 3 > n - i) throw new ArgumentError(`${njobs} jobs announced, but only ${n - i} arguments follow`);

  const jobs = new Array<SubmitJobSpec>(njobs);
  for (let j = 0; j < njobs; j++) {
    if (i >= n) missing(`job_name of job ${j + 1}`, i);
    const name = args[i++]!;
    if (i >= n) missing(`nargs of job ${name}`, i);
    const nargs = count(args[i++]!, name, 'nargs');
    if (nargs > n - i) throw new ArgumentError(`job ${name}: ${nargs} arguments announced, only ${n - i} follow`);
    const jobArgs = args.slice(i, i + nargs);
    i += nargs;
    if (i >= n) missing(`ninputs of job ${name}`, i);
    const ninputs = count(args[i++]!, name, 'ninputs');
    if (ninputs * 2 > n - i) throw new ArgumentError(`job ${name}: ${ninputs} input files announced, only ${n - i} arguments follow`);
    const inputs = new Array<SubmitInput>(ninputs);
    for (let k = 0; k < ninputs; k++) {
      inputs[k] = { src: args[i]!, dst: args[i + 1]! };
      i += 2;
    }
    jobs[j] = { name, args: jobArgs, inputs };
  }

  const rest = args.length - i;
  const jobParams: JobParams = {};
  let appVersionNum: number | undefined;
  let paramProblem: string | undefined;
  if (rest === PARAM_NAMES.length) {
    const values = PARAM_NAMES.map((what) => {
      const t = args[i++]!;
      if (t === 'NULL') return undefined;
      try {
        return parseNumber(t, what);
      } catch (err) {
        paramProblem ??= (err as Error).message;
        return undefined;
      }
    });
    const [est, bound, mem, disk, delay, version] = values;
    for (const [k, v] of [['rsc_fpops_est', est], ['rsc_fpops_bound', bound], ['rsc_memory_bound', mem], ['rsc_disk_bound', disk], ['delay_bound', delay]] as const) {
      if (v === undefined) continue;
      if (v < 0) paramProblem ??= `${k} must not be negative, got ${v}`;
      else jobParams[PARAM_KEYS[k]] = v;
    }
    if (version !== undefined) {
      if (!Number.isInteger(version) || version < 0) paramProblem ??= `app_version_num must be a non-negative integer, got ${version}`;
      else appVersionNum = version;
    }
  } else if (rest !== 0) {
    throw new ArgumentError(`expected 6 job parameters (or none) after the ${njobs} jobs, got ${rest} more arguments`);
  }
  const req: SubmitRequest = { batchName, appName, jobs, jobParams };
  if (appVersionNum !== undefined) req.appVersionNum = appVersionNum;
  if (paramProblem !== undefined) req.paramProblem = `job parameter ${paramProblem}`;
  return req;
}
