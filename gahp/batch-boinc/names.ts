/**
 * Names of BLAHP jobs (docs/blahp.md, "Job ids"), the same on both `batch boinc` routes
 * (the BOINC_GAHP route's, gahp/blah/, and the scripts', gahp/blahp/).
 *
 * blahpd's job id is `boinc/<job name>`; the BOINC job name is `<batch>_<n>` and the batch
 * `blahp-<app>-<time>-<random>`. blahpd word-splits the id and hands the part after the
 * first `/` to the cancel script and the part after the last `/` to its status cache, so
 * the name holds no `/` and only `[A-Za-z0-9._-]`: both parts are then the job name.
 */
import * as crypto from 'node:crypto';

export const LRMS = 'boinc';
const SAFE = /^[A-Za-z0-9._-]+$/;
/** App names as they can appear inside a batch name. */
const APP = /^[A-Za-z0-9._-]{1,64}$/;

export function appProblem(app: string): string | undefined {
  if (!APP.test(app)) return `the BOINC app name ${JSON.stringify(app.slice(0, 80))} may hold only letters, digits, '.', '_' and '-' (at most 64)`;
  if (app.startsWith('-') || app.startsWith('.')) return `the BOINC app name ${JSON.stringify(app)} must not start with '${app[0]}'`;
  return undefined;
}

export function newBatchName(app: string, now = Date.now()): string {
  return `blahp-${app}-${now.toString(36)}-${crypto.randomBytes(3).toString('hex')}`;
}

export function jobName(batch: string, n: number): string {
  return `${batch}_${n}`;
}

export interface ParsedJobName {
  jobName: string;
  batch: string;
  n: number;
}

/** Parses a job name (`blahp-...-<hex>_<n>`), or undefined when it is not one of ours. */
export function parseJobName(name: string): ParsedJobName | undefined {
  if (!SAFE.test(name) || name.length > 200) return undefined;
  const m = /^(blahp-[A-Za-z0-9._-]+-[0-9a-z]+-[0-9a-f]{6})_(\d{1,7})$/.exec(name);
  if (!m) return undefined;
  return { jobName: name, batch: m[1]!, n: Number(m[2]) };
}

/**
 * The job name from what blahpd passes: the full id `boinc/<name>` (status) or the name
 * alone (cancel, hold, resume).
 */
export function jobNameFromId(id: string): ParsedJobName | undefined {
  const name = id.startsWith(`${LRMS}/`) ? id.slice(LRMS.length + 1) : id;
  return parseJobName(name);
}

export function blahpJobId(name: string): string {
  return `${LRMS}/${name}`;
}

/** A submit call's own key while its job waits for a batch (unique per call). */
export function newSubmitKey(now = Date.now()): string {
  return `${now.toString(36)}-${process.pid.toString(36)}-${crypto.randomBytes(4).toString('hex')}`;
}

/** The identity of a job across its submissions: the JobDirectory without its trailing time. The BOINC_GAHP route reads the submission key with it, the scripts route (gahp/blahp/submit.ts) -D. */
export function identityOf(submissionKey: string): string | undefined {
  const m = /^(.*_[0-9]+\.[0-9]+)_[0-9]+$/.exec(submissionKey);
  return m ? m[1] : undefined;
}

const NOT_SENT = 'job not sent to BOINC: ';

/**
 * The reason a job was left out of BOINC, in the one shape both BLAH routes give it (the
 * job's hold reason): `job not sent to BOINC: <reason>`. A reason from BOINC_SUBMIT names
 * the job by the BOINC job name it would have had (`job <name>: ...`), a name that never
 * existed anywhere a user can look: pass it as `boincName` and it is left out (the hold
 * reason is the job's own already).
 */
export function notSentReason(reason: string, boincName?: string): string {
  let text = reason;
  if (boincName) text = text.split(`job ${boincName}: `).join('').split(`job ${boincName}`).join('the job');
  return text.startsWith(NOT_SENT) ? text : NOT_SENT + text;
}

/** How a log line names a BLAH job: HTCondor's cluster.proc from its sandbox id when there is one, and its directory. */
export function condorJobLabel(identity: string | undefined, iwd: string): string {
  const proc = identity ? /_(\d+\.\d+)$/.exec(identity)?.[1] : undefined;
  return proc ? `HTCondor job ${proc} (sandbox ${identity}, in ${iwd})` : `the HTCondor job in ${iwd}`;
}
