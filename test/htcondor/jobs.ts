/**
 * What the checks share: a job directory with its input, the submit file of a grid cluster,
 * waiting for a cluster to leave the queue, and what a finished job must have left behind.
 * Each helper throws an Error whose message is the check's failure line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincProject, INPUT_TEXT } from './boinc-project.js';
import type { JobAd, PersonalPool } from './pool.js';
import { waitFor } from './processes.js';
import type { Route } from './routes.js';

export interface CheckContext {
  pool: PersonalPool;
  project: BoincProject;
  route: Route;
  /** Where each check makes its job directory. */
  jobsDir: string;
  /** The longest wait for a small cluster to finish (ms). */
  waitMs: number;
}

/** A fresh directory for one check's jobs, holding the input file `in`. */
export function jobDir(ctx: CheckContext, name: string): string {
  const dir = path.join(ctx.jobsDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'in'), INPUT_TEXT);
  return dir;
}

/**
 * A grid-universe cluster of `count` jobs of the app: input `in`, output `out` remapped to
 * out.<cluster>.<proc> (no blanks around `=`: blahpd drops such an entry), `output`,
 * `error` and `log` set, as a user would write it.
 */
export function gridSubmitFile(ctx: CheckContext, count: number): string {
  return [
    'universe = grid',
    ...ctx.route.submitLines,
    `executable = ${ctx.project.settings.app}`,
    'transfer_executable = false',
    'arguments = -n $(Process)',
    'transfer_input_files = in',
    'transfer_output_files = out',
    'transfer_output_remaps = "out=out.$(Cluster).$(Process)"',
    'output = job.$(Process).out',
    'error = job.$(Process).err',
    'log = job.log',
    'notification = never',
    `queue ${count}`,
    '',
  ].join('\n');
}

function describe(jobs: JobAd[]): string {
  const counts = new Map<string, number>();
  for (const j of jobs) counts.set(String(j.JobStatus), (counts.get(String(j.JobStatus)) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${n} with JobStatus ${s}`).join(', ') || 'none';
}

/**
 * Waits until no job of the cluster is in the queue. A held job fails the wait at once with
 * its HoldReason, unless `heldIsFine`.
 */
export async function waitLeftQueue(ctx: CheckContext, cluster: number, timeoutMs = ctx.waitMs, heldIsFine = false): Promise<void> {
  let last: JobAd[] = [];
  await waitFor(
    `cluster ${cluster} to leave the queue`,
    timeoutMs,
    async () => {
      last = await ctx.pool.queue(cluster);
      const held = last.find((j) => j.JobStatus === 5);
      if (held && !heldIsFine) throw new Error(`job ${cluster}.${String(held.ProcId)} was held: ${String(held.HoldReason)}`);
      return last.length === 0 ? true : undefined;
    },
    2000,
    () => describe(last),
  );
}

/** Waits until every job of the cluster is in the queue with the given JobStatus. */
export async function waitStatus(ctx: CheckContext, cluster: number, count: number, status: number): Promise<JobAd[]> {
  let last: JobAd[] = [];
  return waitFor(
    `${count} job(s) of cluster ${cluster} with JobStatus ${status}`,
    ctx.waitMs,
    async () => {
      last = await ctx.pool.queue(cluster);
      return last.length === count && last.every((j) => j.JobStatus === status) ? last : undefined;
    },
    1000,
    () => describe(last),
  );
}

/**
 * Waits until every job of the cluster is known to BOINC: its GridJobId names a BOINC job
 * and the gridmanager has seen the job's remote status (GridJobStatus, or running).
 */
export async function waitOnBoinc(ctx: CheckContext, cluster: number, count: number): Promise<JobAd[]> {
  let last: JobAd[] = [];
  return waitFor(
    `${count} job(s) of cluster ${cluster} to be running on BOINC`,
    ctx.waitMs,
    async () => {
      last = await ctx.pool.queue(cluster);
      const seen = last.filter((j) => ctx.route.boincJob(j.GridJobId) && (j.GridJobStatus !== undefined || j.JobStatus === 2));
      return last.length === count && seen.length === count ? last : undefined;
    },
    1000,
    () => `${describe(last)}; GridJobIds ${last.map((j) => String(j.GridJobId)).join(', ')}`,
  );
}

/** The cluster's jobs in the history: `count` of them, each with the JobStatus expected. */
export async function finishedJobs(ctx: CheckContext, cluster: number, count: number, status: 3 | 4): Promise<JobAd[]> {
  // The schedd writes the history file a moment after a job leaves the queue.
  let last: JobAd[] = [];
  await waitFor(`${count} job(s) of cluster ${cluster} in the history`, 30_000, async () => {
    last = await ctx.pool.history(cluster);
    return last.length >= count ? true : undefined;
  }, 1000, () => describe(last));
  if (last.length !== count) throw new Error(`cluster ${cluster}: ${last.length} jobs in the history, expected ${count}`);
  const wrong = last.filter((j) => j.JobStatus !== status || (status === 4 && j.ExitCode !== undefined && j.ExitCode !== 0));
  if (wrong.length > 0) {
    const j = wrong[0]!;
    throw new Error(`job ${cluster}.${String(j.ProcId)} ended with JobStatus ${String(j.JobStatus)}, ExitCode ${String(j.ExitCode)} (expected JobStatus ${status})`);
  }
  return last;
}

/**
 * What a finished job leaves in its directory: its output under `outName` (byte for byte
 * when the app's output is known), and with `stdFiles` both `job.<proc>.out` and
 * `job.<proc>.err` (HTCondor users expect them to exist after a job, empty when there is
 * nothing to say; the 3-job and router checks look at them, the others at their own point).
 */
export function checkOutputs(ctx: CheckContext, dir: string, procs: number[], outName: (proc: number) => string, stdFiles = false): void {
  for (const p of procs) {
    const out = path.join(dir, outName(p));
    if (!fs.existsSync(out)) throw new Error(`job ${p}: its output ${out} is missing`);
    const expected = ctx.project.expectedOutput(p);
    if (expected !== undefined && fs.readFileSync(out, 'latin1') !== expected) {
      throw new Error(`job ${p}: ${out} holds ${JSON.stringify(fs.readFileSync(out, 'latin1').slice(0, 80))}, expected ${JSON.stringify(expected)}`);
    }
    for (const name of stdFiles ? [`job.${p}.out`, `job.${p}.err`] : []) {
      if (!fs.existsSync(path.join(dir, name))) throw new Error(`job ${p}: ${path.join(dir, name)} does not exist after the job`);
    }
  }
}

/** The number of "Job terminated" events in a user log. */
export function terminatedEvents(logFile: string): number {
  if (!fs.existsSync(logFile)) return 0;
  return fs.readFileSync(logFile, 'utf8').split('\n').filter((l) => /^005 \(/.test(l)).length;
}

/**
 * The BOINC jobs of the batches this route created since `sinceMs` that are not aborted
 * (aborted jobs read ERROR): one per HTCondor job, or some job was submitted twice.
 */
export async function liveBoincJobsSince(ctx: CheckContext, sinceMs: number): Promise<{ live: number; batches: number }> {
  const batches = BoincProject.batchesCreatedSince(ctx.route.stateDir, sinceMs);
  const jobs = await ctx.project.jobsOf(batches);
  return { live: jobs.filter((j) => j.status !== 'ERROR').length, batches: batches.length };
}
