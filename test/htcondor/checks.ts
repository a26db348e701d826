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

/** HTCondor's defaults (condor_gridmanager/baseresource.cpp) for the settings a pool may leave out. */
const GRIDMANAGER_DEFAULTS: Record<string, number> = { GRIDMANAGER_RESOURCE_PROBE_INTERVAL: 300, GRIDMANAGER_JOB_PROBE_INTERVAL: 60 };

/** A gridmanager setting of the pool in seconds, and whether the pool's configuration or HTCondor's default gave it. */
async function gridmanagerSetting(ctx: CheckContext, name: string): Promise<{ seconds: number; from: string }> {
  const r = await ctx.pool.tool('condor_config_val', [name]);
  const value = Number(r.stdout.trim());
  if (r.code === 0 && Number.isInteger(value) && value > 0) return { seconds: value, from: 'the pool\'s configuration' };
  return { seconds: GRIDMANAGER_DEFAULTS[name]!, from: 'HTCondor\'s default' };
}

/**
 * The resource's GridResourceUnavailableReason in the last ad the gridmanager sent to the
 * collector: with GRIDMANAGER_DEBUG = D_FULLDEBUG it writes each ad it sends into its log
 * ("BaseResource::UpdateResource:", one `Name = value` line per attribute), which is the
 * text `condor_status -grid -l` shows (read here whether or not there is a condor_status).
 */
export function lastResourceUnavailableReason(gridmanagerLog: string): string | undefined {
  const found = [...gridmanagerLog.matchAll(/^GridResourceUnavailableReason = "((?:[^"\\]|\\.)*)"$/gm)];
  const last = found[found.length - 1];
  return last ? last[1]!.replace(/\\(.)/g, '$1') : undefined;
}

/**
 * condor_status, to ask the collector for the resource's ad as an administrator would
 * (`condor_status -grid`): HTCONDOR_CHECK_CONDOR_STATUS, else the install's bin/condor_status;
 * undefined when there is none (docs/htcondor-check.md's install has no condor_status).
 */
function condorStatus(prefix: string): string | undefined {
  const named = process.env.HTCONDOR_CHECK_CONDOR_STATUS;
  if (named) return path.resolve(named);
  const own = path.join(prefix, 'bin/condor_status');
  return fs.existsSync(own) ? own : undefined;
}

/** Seconds since t0, one decimal. */
const secondsSince = (t0: number): number => Math.round((Date.now() - t0) / 100) / 10;

/**
 * Issue 44, item 1, through the real gridmanager, on the BOINC_GAHP route in a pool of its
 * own (the GAHP must start with the file unreadable; the gridmanager keeps one GAHP per job
 * owner). `file` is the authenticator file the pool's BOINC_GAHP_AUTHENTICATOR_FILE names,
 * the user's own, made mode 0000 before the pool started (the check runs as an ordinary
 * user, for whom modes count). A job submitted then must stay idle, not held, while the
 * GAHP's ping fails: the gridmanager marks the resource down, and the resource's
 * GridResourceUnavailableReason must name the file and the error, in the ad the gridmanager
 * sends (its log) and, when there is a condor_status, in `condor_status -grid` (the job's
 * own ad has only GridResourceUnavailableTime). Then chmod 0640 (the README's mode) and
 * nothing else, no condor_rm, no restart: a down resource is pinged again every
 * GRIDMANAGER_RESOURCE_PROBE_INTERVAL (the gridmanager pings no sooner, whatever the GAHP
 * does), and the same GAHP must take the job to BOINC within two such intervals (plus
 * PROBE_SLACK_S for a loaded machine); the job then completes with its output.
 */
export function unreadableAuthenticatorAtStart(file: string): Check {
  return {
    title: 'an authenticator file unreadable when the GAHP starts: the resource says why; chmod 0640, the idle job goes to BOINC, no condor_rm, no restart',
    run: (ctx) => unreadableAuthenticator(ctx, file),
  };
}

/** Slack on top of two resource probe intervals: a loaded 2-core machine, the submit itself. */
const PROBE_SLACK_S = 60;

async function unreadableAuthenticator(ctx: CheckContext, file: string): Promise<string> {
  if ((fs.statSync(file).mode & 0o777) !== 0) throw new Error(`${file} is not mode 0000 at the start`);
  const resourceProbe = await gridmanagerSetting(ctx, 'GRIDMANAGER_RESOURCE_PROBE_INTERVAL');
  const jobProbe = await gridmanagerSetting(ctx, 'GRIDMANAGER_JOB_PROBE_INTERVAL');
  const status = condorStatus(ctx.pool.prefix);
  const dir = jobDir(ctx, 'unreadable-authenticator');
  const t0 = Date.now();
  const cluster = await ctx.pool.submit(dir, gridSubmitFile(ctx, 1));

  // What HTCondor shows while the file cannot be read: the job idle on a resource that is down, and why.
  let state = 'nothing yet';
  const reason = await waitFor('the resource to be down with a reason naming the file and EACCES', ctx.waitMs, async () => {
    const [job] = await ctx.pool.queue(cluster);
    if (!job) throw new Error(`job ${cluster}.0 left the queue while the authenticator file could not be read`);
    if (job.JobStatus === 5) throw new Error(`job ${cluster}.0 was held: ${String(job.HoldReason)}`);
    if (ctx.route.boincJob(job.GridJobId)) throw new Error(`job ${cluster}.0 went to BOINC (${String(job.GridJobId)}) while the authenticator file could not be read`);
    const said = lastResourceUnavailableReason(ctx.pool.logText('GridmanagerLog'));
    // What the collector has: one line per grid resource of the pool.
    const shown = status ? (await ctx.pool.tool(status, ['-grid', '-af', 'GridResourceUnavailableReason'])).stdout.trim() : undefined;
    state = `JobStatus ${String(job.JobStatus)}, GridResourceUnavailableTime ${String(job.GridResourceUnavailableTime)}, reason in the ad sent ${JSON.stringify(said)}` +
      (status ? `, condor_status -grid: ${JSON.stringify(shown)}` : '');
    const names = (text: string | undefined) => text !== undefined && text.includes(file) && text.includes('EACCES');
    return names(said) && (!status || shown === said) && job.JobStatus === 1 && job.GridResourceUnavailableTime !== undefined ? said : undefined;
  }, 2000, () => state);
  const downAfter = secondsSince(t0);
  const gahps = ctx.pool.processes().filter((p) => p.name === 'node').map((p) => p.pid).sort();
  const gridmanagers = ctx.pool.processes().filter((p) => p.name === 'condor_gridmanager').map((p) => p.pid).sort();
  if (gahps.length === 0) throw new Error('no GAHP process (node) of the pool is running');

  // The fix an administrator makes, and nothing else.
  fs.chmodSync(file, 0o640);
  const fixedAt = Date.now();
  let upAfter: number | undefined;
  let last = 'nothing yet';
  const bound = 2 * resourceProbe.seconds + PROBE_SLACK_S;
  await waitFor(`job ${cluster}.0 to be sent to BOINC after the chmod`, (bound + 120) * 1000, async () => {
    if (upAfter === undefined && /resource .*is now up/.test(ctx.pool.logText('GridmanagerLog'))) upAfter = secondsSince(fixedAt);
    const [job] = await ctx.pool.queue(cluster);
    if (job?.JobStatus === 5) throw new Error(`job ${cluster}.0 was held after the chmod: ${String(job.HoldReason)}`);
    last = job ? `JobStatus ${String(job.JobStatus)}, GridJobId ${String(job.GridJobId)}` : 'left the queue';
    return !job || ctx.route.boincJob(job.GridJobId) ? true : undefined;
  }, 1000, () => last);
  const submittedAfter = secondsSince(fixedAt);
  const gahpsNow = ctx.pool.processes().filter((p) => p.name === 'node').map((p) => p.pid).sort();
  const gridmanagersNow = ctx.pool.processes().filter((p) => p.name === 'condor_gridmanager').map((p) => p.pid).sort();
  if (gahpsNow.join() !== gahps.join() || gridmanagersNow.join() !== gridmanagers.join()) {
    throw new Error(`the GAHP or the gridmanager was restarted: GAHP pids ${gahps.join()} then ${gahpsNow.join()}, gridmanager ${gridmanagers.join()} then ${gridmanagersNow.join()}`);
  }
  await waitOnBoinc(ctx, cluster, 1);
  const onBoincAfter = secondsSince(fixedAt);
  await waitLeftQueue(ctx, cluster);
  const completedAfter = secondsSince(fixedAt);
  await finishedJobs(ctx, cluster, 1, 4);
  checkOutputs(ctx, dir, [0], remapped(cluster));
  const userLog = fs.readFileSync(path.join(dir, 'job.log'), 'utf8');
  const downEvents = userLog.split('Detected Down Grid Resource').length - 1;
  const upEvents = userLog.split('Grid Resource Back Up').length - 1;
  const times = `resource probe interval ${resourceProbe.seconds} s (${resourceProbe.from}), job probe interval ${jobProbe.seconds} s (${jobProbe.from}); ` +
    `down with the reason ${downAfter} s after condor_submit; after chmod 0640: resource up ${upAfter ?? '?'} s, job sent to BOINC ${submittedAfter} s, seen on BOINC ${onBoincAfter} s, completed ${completedAfter} s`;
  if (submittedAfter > bound) throw new Error(`the job went to BOINC ${submittedAfter} s after the chmod, more than two resource probe intervals and ${PROBE_SLACK_S} s (${bound} s): ${times}`);
  if (downEvents === 0) throw new Error(`job.log has no "Detected Down Grid Resource" event: ${times}`);
  return `cluster ${cluster}; ${times}; GAHP pid ${gahps.join()} and gridmanager pid ${gridmanagers.join()} throughout; job.log: ${downEvents} down, ${upEvents} back up; GridResourceUnavailableReason (${status ? 'condor_status -grid and ' : ''}the ad in GridmanagerLog): ${reason}`;
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
