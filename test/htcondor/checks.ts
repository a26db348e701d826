/**
 * The checks run against a real HTCondor, one function each (docs/htcondor-check.md). A
 * check resolves with a short note for its pass line or throws the reason it failed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run, signal, waitFor } from './processes.js';
import {
  checkOutputs,
  finishedJobs,
  gridSubmitFile,
  jobDir,
  liveBoincJobsSince,
  terminatedEvents,
  waitLeftQueue,
  waitOnBoinc,
  waitStatus,
  type CheckContext,
} from './jobs.js';

export interface Check {
  title: string;
  run(ctx: CheckContext): Promise<string>;
}

const remapped = (cluster: number) => (p: number) => `out.${cluster}.${p}`;

/** 3 grid jobs with output, error, log and remaps: outputs, both std files, log events. */
async function threeJobCluster(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'three-jobs');
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 3));
  await waitLeftQueue(ctx, cluster);
  await finishedJobs(ctx, cluster, 3, 4);
  checkOutputs(ctx, dir, [0, 1, 2], remapped(cluster), true);
  if (fs.existsSync(path.join(dir, 'out'))) throw new Error(`${dir}/out exists: a remap was not applied`);
  const events = terminatedEvents(path.join(dir, 'job.log'));
  if (events !== 3) throw new Error(`job.log has ${events} "Job terminated" events, expected 3`);
  return `cluster ${cluster}`;
}

/** condor_rm of 2 jobs running on BOINC: both removed, both aborted on the server. */
async function remove(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'remove');
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 2));
  const jobs = await waitOnBoinc(ctx, cluster, 2);
  await ctx.pool.act('condor_rm', cluster);
  await waitLeftQueue(ctx, cluster, ctx.waitMs, true);
  await finishedJobs(ctx, cluster, 2, 3);
  await waitAborted(ctx, jobs.map((j) => j.GridJobId));
  return `cluster ${cluster}`;
}

/** Waits until the BOINC jobs named by these GridJobIds read ERROR (aborted) on the server. */
async function waitAborted(ctx: CheckContext, gridJobIds: unknown[]): Promise<void> {
  const wanted = gridJobIds.map((id) => ctx.route.boincJob(id)!);
  let seen = '';
  await waitFor('the BOINC jobs to be aborted on the server', 60_000, async () => {
    const jobs = await ctx.project.jobsOf([...new Set(wanted.map((w) => w.batch))]);
    const status = new Map(jobs.map((j) => [j.name, j.status]));
    seen = wanted.map((w) => `${w.job} ${status.get(w.job) ?? 'missing'}`).join(', ');
    return wanted.every((w) => status.get(w.job) === 'ERROR') ? true : undefined;
  }, 2000, () => seen);
}

/** condor_hold of a job running on BOINC (aborted there), condor_release: it completes. */
async function holdAndRelease(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'hold-release');
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 1));
  const [before] = await waitOnBoinc(ctx, cluster, 1);
  await ctx.pool.act('condor_hold', cluster);
  await waitStatus(ctx, cluster, 1, 5);
  await waitAborted(ctx, [before!.GridJobId]);
  await ctx.pool.act('condor_release', cluster);
  await waitLeftQueue(ctx, cluster);
  const [after] = await finishedJobs(ctx, cluster, 1, 4);
  checkOutputs(ctx, dir, [0], remapped(cluster));
  const oldJob = ctx.route.boincJob(before!.GridJobId)!.job;
  const newJob = ctx.route.boincJob(after!.GridJobId)?.job;
  return `cluster ${cluster}; BOINC job ${oldJob} aborted, ${newJob ?? 'the new one'} completed`;
}

/**
 * kill -9 of the gridmanager as soon as every job has its BOINC job id: the schedd starts a
 * new gridmanager, which must find the jobs on BOINC rather than submit them again.
 */
async function killGridmanager(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'kill-gridmanager');
  const since = Date.now();
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 3));
  await waitFor('every job to have a BOINC job id', ctx.waitMs, async () => {
    const jobs = await ctx.pool.queue(cluster);
    return jobs.length === 3 && jobs.every((j) => ctx.route.boincJob(j.GridJobId)) ? true : undefined;
  }, 500);
  const gridmanagers = ctx.pool.processes().filter((p) => p.name === 'condor_gridmanager');
  if (gridmanagers.length === 0) throw new Error('no condor_gridmanager process to kill');
  for (const p of gridmanagers) signal(p.pid, 'SIGKILL');
  await waitLeftQueue(ctx, cluster);
  await finishedJobs(ctx, cluster, 3, 4);
  checkOutputs(ctx, dir, [0, 1, 2], remapped(cluster));
  const { live } = await liveBoincJobsSince(ctx, since);
  if (live !== 3) throw new Error(`${live} live BOINC jobs for 3 HTCondor jobs: submitted twice`);
  return `cluster ${cluster}; killed gridmanager pid ${gridmanagers.map((p) => p.pid).join(', ')}; 3 BOINC jobs`;
}

/** 200 jobs sharing one input: every output right, one BOINC job each. */
async function manyJobs(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'two-hundred');
  const since = Date.now();
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 200));
  await waitLeftQueue(ctx, cluster, ctx.waitMs * 4);
  await finishedJobs(ctx, cluster, 200, 4);
  checkOutputs(ctx, dir, Array.from({ length: 200 }, (_, p) => p), remapped(cluster));
  const { live, batches } = await liveBoincJobsSince(ctx, since);
  if (live !== 200) throw new Error(`${live} live BOINC jobs for 200 HTCondor jobs`);
  return `cluster ${cluster}; 200 BOINC jobs in ${batches} batch${batches === 1 ? '' : 'es'}`;
}

/**
 * A job whose input the project cannot take (4 MB, over PHP's default upload_max_filesize
 * of 2M that BOINC's real server keeps), submitted together with a good cluster of the same
 * app (so the gridmanager gathers them): that job alone is held, its reason naming its
 * file; the good cluster completes (issue 38, item 1).
 */
async function uploadLimitAlone(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'upload-limit');
  const bigDir = path.join(dir, 'big');
  fs.mkdirSync(bigDir);
  fs.writeFileSync(path.join(bigDir, 'in'), 'x'.repeat(4 * 1024 * 1024) + '\n');
  const [good, big] = await Promise.all([
    ctx.pool.submit(dir, gridSubmitFile(ctx, 2)),
    ctx.pool.submit(dir, gridSubmitFile(ctx, 1).replace('universe = grid', 'universe = grid\ninitialdir = big'), 'big.sub'),
  ]);
  const [held] = await waitStatus(ctx, big, 1, 5);
  const reason = String(held!.HoldReason);
  if (!reason.includes(path.join(bigDir, 'in')) || !reason.includes('upload_max_filesize')) throw new Error(`job ${big}.0 held with ${JSON.stringify(reason)}: not its own reason`);
  await waitLeftQueue(ctx, good);
  await finishedJobs(ctx, good, 2, 4);
  checkOutputs(ctx, dir, [0, 1], remapped(good));
  await ctx.pool.act('condor_rm', big);
  return `cluster ${good} completed; ${big}.0 held: ${reason.slice(0, 100)}...`;
}

/**
 * The job router's route (pool config, as the README gives it) turns marked vanilla jobs
 * into grid jobs; each job has its own initialdir (the router drops TransferOutputRemaps).
 */
async function routedVanillaJobs(ctx: CheckContext): Promise<string> {
  const dir = jobDir(ctx, 'router');
  for (const p of [0, 1, 2]) {
    fs.mkdirSync(path.join(dir, `run${p}`));
    fs.copyFileSync(path.join(dir, 'in'), path.join(dir, `run${p}`, 'in'));
  }
  const cluster = await ctx.pool.submit(
    dir,
    [
      'universe = vanilla',
      `executable = ${ctx.project.settings.app}`,
      'transfer_executable = false',
      '+WantBOINC = true',
      `+BoincApp = "${ctx.project.settings.app}"`,
      'initialdir = run$(Process)',
      'arguments = -n $(Process)',
      'should_transfer_files = YES',
      'when_to_transfer_output = ON_EXIT',
      'transfer_input_files = in',
      'transfer_output_files = out',
      'output = job.$(Process).out',
      'error = job.$(Process).err',
      'log = ../job.log',
      'notification = never',
      'queue 3',
      '',
    ].join('\n'),
  );
  await waitLeftQueue(ctx, cluster, ctx.waitMs * 2);
  await finishedJobs(ctx, cluster, 3, 4);
  for (const p of [0, 1, 2]) checkOutputs(ctx, path.join(dir, `run${p}`), [p], () => 'out', true);
  const routed = (await ctx.pool.history('RoutedFromJobId =!= undefined')).filter((j) => String(j.RoutedFromJobId).startsWith(`${cluster}.`));
  const grid = routed.filter((j) => j.JobUniverse === 9 && ctx.route.boincJob(j.GridJobId));
  if (grid.length !== 3) throw new Error(`${grid.length} routed grid jobs through ${ctx.route.name} in the history, expected 3`);
  return `cluster ${cluster}, routed as ${grid.map((j) => `${String(j.ClusterId)}.${String(j.ProcId)}`).join(' ')}`;
}

/** The README's set-up check for the BLAHP scripts: boinc_ping.sh of blahpd's folder, run as blahpd runs it (BLAHPD_LOCATION set). */
export const blahpPing: Check = {
  title: 'boinc_ping.sh in $(RELEASE_DIR)/libexec/blahp with BLAHPD_LOCATION set prints "0 No error"',
  async run(ctx) {
    const env = { ...ctx.pool.toolEnv(), BLAHPD_LOCATION: ctx.pool.prefix };
    const r = await run(path.join(ctx.pool.prefix, 'libexec/blahp/boinc_ping.sh'), [], { env, timeoutMs: 60_000 });
    if (r.code !== 0 || r.stdout.trim() !== '0 No error') throw new Error(`exit ${r.code}: ${(r.stdout + r.stderr).trim()}`);
    return 'ok';
  },
};

/** Every check of one route, in the order they run. */
export const GRID_CHECKS: Check[] = [
  { title: '3-job grid cluster: output, error, log, transfer_output_remaps', run: threeJobCluster },
  { title: 'condor_rm of jobs running on BOINC', run: remove },
  { title: 'condor_hold and condor_release', run: holdAndRelease },
  { title: 'kill -9 of the gridmanager mid-run: no job submitted twice', run: killGridmanager },
  { title: '200-job cluster', run: manyJobs },
  { title: 'an input over the upload limit beside a good cluster: held alone, the cluster completes', run: uploadLimitAlone },
  { title: 'job router route: vanilla jobs become grid jobs', run: routedVanillaJobs },
];
