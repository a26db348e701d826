/**
 * `boinc_submit.sh`: one HTCondor job per call, as blahpd submits (docs/blahp.md, "Submit").
 *
 * 1. Everything one job can be checked for alone is checked first, and a failure changes
 *    nothing: the options, the app (from -q, else the basename of Cmd), its arguments
 *    (gahp/staging/validate.ts: what BOINC's create_work can carry), its input files (exist,
 *    readable), their number against the app's input template and the -O names against its
 *    output template (templates cached for a few minutes in the state directory).
 * 2. The job spec is written to `pending/<group>/<key>.json` (group = app and memory bound).
 * 3. Group commit: whoever holds `pending/<group>.lock` is the group's leader. It waits the
 *    gather window, takes every pending spec of the group into a new batch, and runs the
 *    GAHP's BOINC_SUBMIT (gahp/commands/submit.ts: content-addressed staging, repeat-safe)
 *    for all of them at once. Calls arriving meanwhile wait and form the next batch, so
 *    jobs that blahpd submits together share a batch and its round trips, and a lone job
 *    pays only the window.
 * 4. Crash safety: the leader records the batch (`batches/<batch>.json`, state claimed)
 *    and each job's place in it (`claims/<key>`) before moving the specs, and the batch
 *    name in `pending/<group>.inflight` until it is settled. A leader that dies leaves its
 *    lock to be taken over; the next leader first settles the in-flight batch by running
 *    the same BOINC_SUBMIT again, which finds what reached the server and completes it.
 * A job released after its result was kept (fetch.ts: its outputs could not be put in place)
 * comes back with a new -D: it takes that result back (takeKeptResult), no new BOINC job.
 * A job whose submit call ended before it got its id (blahpd killed the call) is never
 * asked for again: a leader drops such a job while it is queued, and aborts it (recorded
 * as cancelled) when its batch was already settled. A waiting call writes a progress line
 * to stderr every 10 s, so blahpd's 30 s silence limit does not hit a long submit.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AppTemplates } from '../../boinc-rpc/types.js';
import type { SubmitJobSpec, SubmitRequest } from '../staging/parse.js';
import { SubmitCheckError } from '../staging/validate.js';
import { checkJob } from '../batch-boinc/job-check.js';
import { startErrorFile } from '../batch-boinc/standard-files.js';
import { stepError } from '../staging/steps.js';
import { abortJobsCommand } from '../commands/abort-jobs.js';
import { submitCommand } from '../commands/submit.js';
import type { BlahpContext } from './context.js';
import { condorJobLabel, identityOf, jobName, newBatchName, newSubmitKey, notSentReason, parseJobName, type ParsedJobName } from '../batch-boinc/names.js';
import { BlahpConfigError } from './config.js';
import { ensureDir, exists, readJson, writeJsonAtomic } from './state.js';
import { tryLockFile, unlockFile } from '../state-files.js';
import { pidAlive, sleep, errorMessage } from '../util.js';
import {
  batchFile, cancelledFile, fetchAttemptsFile, heldFile, jobSpecFile, keptResultFile, resultKept,
  type BatchRecord, type Claim, type JobSpec,
} from './records.js';
import { dropFinalLine, writeFinalRecord } from './quick.js';
import { BlahpUsageError, inputPaths, outputSpecs, parseSubmitArgv, readListFile, show } from './submit-args.js';
import { claimDestinations } from './destinations.js';

/** Template answers are reused this long (an app's templates rarely change). */
const TEMPLATE_TTL_MS = 5 * 60 * 1000;
const KEEPALIVE_MS = 10_000;
const POLL_MS = 100;

/** Parses and checks one submit call's job; throws BlahpUsageError/SubmitCheckError naming the problem. */
export async function prepareJob(ctx: BlahpContext, argv: readonly string[]): Promise<JobSpec> {
  const { values, args } = parseSubmitArgv(argv);
  const cmd = values.get('c');
  if (!cmd) throw new BlahpUsageError('the submit command has no -c <Cmd>');
  const iwd = values.get('w');
  if (!iwd) throw new BlahpUsageError('the submit command has no -w <Iwd>');
  if (!path.isAbsolute(iwd)) throw new BlahpUsageError(`the job's working directory ${show(iwd)} is not an absolute path`);
  const queue = values.get('q')?.trim();
  const app = queue ? queue : path.basename(cmd);
  for (const letter of ['V', 'v']) {
    const env = values.get(letter);
    if (env !== undefined && env.trim() !== '') {
      throw new SubmitCheckError('the job sets environment variables, which a BOINC job cannot be given (remove environment/getenv from the job)');
    }
  }
  const stdin = values.get('i');
  if (stdin !== undefined && stdin !== '' && stdin !== '/dev/null') {
    throw new SubmitCheckError(`the job reads standard input from ${show(stdin)}, which a BOINC app cannot be given (pass it as an input file instead)`);
  }
  let memoryMb: number | undefined;
  const mem = values.get('m');
  if (mem !== undefined && mem !== '') {
    memoryMb = Number(mem);
    if (!Number.isInteger(memoryMb) || memoryMb < 0) throw new BlahpUsageError(`-m (memory in MB) must be a non-negative integer, got ${show(mem)}`);
    if (memoryMb === 0) memoryMb = undefined;
  }

  const inputList = values.get('I');
  const paths = inputList ? inputPaths(readListFile(inputList, 'input file'), iwd) : [];
  const outList = values.get('O');
  const remapList = values.get('R');
  const outputs = outList ? outputSpecs(readListFile(outList, 'output file'), remapList ? readListFile(remapList, 'output remap') : undefined) : null;
  const { inputs } = await checkJob({ app, iwd, cmd, args, inputPaths: paths, outputs }, (a) => appTemplates(ctx, a));

  // The gridmanager's sandbox id (-D, its JobDirectory) is the same for every repeat of one
  // submission: after blahpd or the gridmanager died, the repeat finds the job it has.
  const jobDir = values.get('D')?.trim();
  const key = jobDir ? `jd-${crypto.createHash('sha256').update(`${ctx.cfg.projectUrl}\0${jobDir}`).digest('hex').slice(0, 32)}` : newSubmitKey();
  const spec: JobSpec = {
    v: 1,
    key,
    app,
    group: memoryMb ? `${app}.m${memoryMb}` : app,
    projectUrl: ctx.cfg.projectUrl,
    iwd,
    cmd,
    args,
    inputs,
    outputs,
    pid: process.pid,
    createdAt: Date.now(),
  };
  const out = values.get('o');
  const err = values.get('e');
  if (out) spec.stdout = out;
  if (err) spec.stderr = err;
  if (memoryMb) spec.memoryMb = memoryMb;
  // The same for the job released and submitted again (a new -D differs only in its time).
  const identity = jobDir ? identityOf(jobDir) : undefined;
  if (identity) spec.identity = identity;
  return spec;
}

/** The app's templates: from the cache when recent, else get_templates (an unknown app fails here). */
async function appTemplates(ctx: BlahpContext, app: string): Promise<AppTemplates> {
  const file = path.join(ctx.cfg.paths.templates, `${app}.json`);
  const cached = readJson<AppTemplates & { at: number; projectUrl: string }>(file);
  if (cached && cached.projectUrl === ctx.cfg.projectUrl && Date.now() - cached.at < TEMPLATE_TTL_MS) return cached;
  const { rpc } = await ctx.binding();
  let t: AppTemplates;
  try {
    t = await rpc.getTemplates({ appName: app, signal: ctx.handler('templates', ctx.cfg.rpcTimeoutMs * 2).signal });
  } catch (err) {
    throw new SubmitCheckError(`BOINC app ${app}: ${stepError('get_templates', err).message}`);
  }
  writeJsonAtomic(file, { ...t, at: Date.now(), projectUrl: ctx.cfg.projectUrl });
  return t;
}

/** Submits one job (the whole blahpd submit call); returns its BOINC job name. */
export async function submitJob(ctx: BlahpContext, argv: readonly string[], progress: (line: string) => void): Promise<string> {
  try {
    return await submitOne(ctx, argv, progress);
  } catch (err) {
    // A refused submit is logged (README: every failure is), naming the HTCondor job by what
    // exists (its cluster.proc and sandbox, its directory), and its reason has the one shape
    // of both BLAH routes.
    const reason = notSentReason(errorMessage(err));
    let label = 'a job';
    try {
      const { values } = parseSubmitArgv(argv);
      const jobDir = values.get('D');
      label = condorJobLabel(jobDir ? identityOf(jobDir) : undefined, values.get('w') ?? '(no -w)');
    } catch {
      // an argv that does not parse: its reason says so
    }
    ctx.log.info(`blahp submit: ${label}: ${reason}`);
    throw new (err instanceof BlahpConfigError ? BlahpConfigError : SubmitCheckError)(reason, { cause: err });
  }
}

async function submitOne(ctx: BlahpContext, argv: readonly string[], progress: (line: string) => void): Promise<string> {
  const spec = await prepareJob(ctx, argv);
  const { paths } = ctx.cfg;
  // Before the claim: a repeat of a submission whose taking-back a crash cut short finishes it.
  const kept = await takeKeptResult(ctx, spec);
  if (kept) return kept;
  const claim = readJson<Claim>(path.join(paths.claims, spec.key));
  if (claim) {
    const rec = readJson<BatchRecord>(batchFile(ctx, claim.batch));
    const job = { jobName: jobName(claim.batch, claim.n), batch: claim.batch, n: claim.n };
    if ((rec?.state === 'submitted' || rec?.state === 'retired') && !exists(cancelledFile(ctx, job)) && rec.refused?.[claim.n] === undefined) {
      ctx.log.info(`blahp submit ${spec.key}: repeated; it already is BOINC job ${job.jobName}`);
      return job.jobName;
    }
    // Its batch still on its way (a leader that died: the next one settles it): this call
    // is now the one waiting for the job, so its spec names this process (a job whose
    // submit call is gone is aborted when its batch settles), then it waits.
    if (rec?.state === 'claimed') {
      const file = jobSpecFile(ctx, claim.batch, claim.n);
      const held = readJson<JobSpec>(file);
      if (held) writeJsonAtomic(file, { ...held, pid: process.pid } satisfies JobSpec);
      return waitForBatch(ctx, spec);
    }
    // Failed, refused or cancelled: this repeat is a new job.
    spec.key = newSubmitKey();
  }
  // No job overwrites an unfinished job's output (a remap blahpd dropped: destinations.ts).
  const clash = await claimDestinations(ctx, spec);
  if (clash) throw new SubmitCheckError(clash);
  // This run's Err holds this run's stderr only (HTCondor overwrites each run's files).
  const errProblem = startErrorFile(spec);
  if (errProblem) throw new SubmitCheckError(errProblem);
  ensureDir(path.join(paths.pending, spec.group));
  ensureDir(paths.claims);
  ensureDir(paths.batches);
  writeJsonAtomic(pendingFile(ctx, spec.group, spec.key), spec);
  ctx.log.info(`blahp submit ${spec.key}: app ${spec.app}, ${spec.inputs.length} inputs, queued in group ${spec.group}`);
  const started = Date.now();
  const timer = setInterval(() => progress(`boinc_submit: still submitting (${Math.round((Date.now() - started) / 1000)} s)`), KEEPALIVE_MS);
  try {
    return await waitForBatch(ctx, spec);
  } finally {
    clearInterval(timer);
  }
}

/**
 * A job released after its result was kept (fetch.ts) is submitted again with a new -D: when
 * a result is kept for its identity (schedd, owner, cluster.proc), of the same app, arguments
 * and inputs (the same submission, not another job that got the number), in a batch whose
 * lease has not run out, the job takes it back instead of running again on BOINC: its record
 * becomes this submission's (key, Iwd, outputs, Out, Err), and its final records go, so the
 * background worker fetches the result into the places this submission names. Returns the
 * BOINC job, or undefined for a new one. Each step can be done again: a crash part-way
 * leaves the kept-result file, and the repeated submission takes the result back anew.
 */
async function takeKeptResult(ctx: BlahpContext, spec: JobSpec): Promise<string | undefined> {
  if (!spec.identity) return undefined;
  const keptFile = keptResultFile(ctx, spec.identity);
  let kept: Claim | undefined;
  try {
    kept = readJson<Claim>(keptFile);
  } catch {
    // Unreadable (another user's, in a shared state directory): not this job's.
    return undefined;
  }
  if (!kept) return undefined;
  const job = { jobName: jobName(kept.batch, kept.n), batch: kept.batch, n: kept.n };
  const rec = readJson<BatchRecord>(batchFile(ctx, kept.batch));
  const was = readJson<JobSpec>(jobSpecFile(ctx, kept.batch, kept.n));
  if (rec?.state !== 'submitted' || (rec.leaseExpiresAt ?? 0) <= Date.now() / 1000 || !was || !resultKept(ctx, job)) return undefined;
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (was.identity !== spec.identity || was.app !== spec.app || !same(was.args, spec.args) || !same(was.inputs, spec.inputs)) return undefined;
  // This submission's destinations and Err, as for a new job.
  const clash = await claimDestinations(ctx, spec);
  if (clash) throw new SubmitCheckError(clash);
  const errProblem = startErrorFile(spec);
  if (errProblem) throw new SubmitCheckError(errProblem);
  writeJsonAtomic(jobSpecFile(ctx, kept.batch, kept.n), spec);
  writeJsonAtomic(path.join(ctx.cfg.paths.claims, spec.key), kept);
  fs.rmSync(fetchAttemptsFile(ctx, job), { force: true });
  fs.rmSync(heldFile(ctx, job), { force: true });
  dropFinalLine(ctx, job);
  fs.rmSync(keptFile, { force: true });
  ctx.log.info(`blahp submit ${spec.key}: released job ${spec.identity} takes back its kept result, BOINC job ${job.jobName}: fetched again, no new BOINC job`);
  return job.jobName;
}

function pendingFile(ctx: BlahpContext, group: string, key: string): string {
  return path.join(ctx.cfg.paths.pending, group, `${key}.json`);
}

async function waitForBatch(ctx: BlahpContext, spec: JobSpec): Promise<string> {
  const lock = path.join(ctx.cfg.paths.pending, `${spec.group}.lock`);
  for (;;) {
    const claim = readJson<Claim>(path.join(ctx.cfg.paths.claims, spec.key));
    if (claim) {
      const rec = readJson<BatchRecord>(batchFile(ctx, claim.batch));
      const refused = rec?.refused?.[claim.n];
      if (refused !== undefined) throw new SubmitCheckError(refused);
      if (rec?.state === 'submitted' || rec?.state === 'retired') return jobName(claim.batch, claim.n);
      if (rec?.state === 'failed') throw new Error(rec.error ?? 'the batch submission failed');
    }
    if (tryLockFile(lock)) {
      try {
        await leadGroup(ctx, spec.group, spec.app);
      } finally {
        unlockFile(lock);
      }
      const c = readJson<Claim>(path.join(ctx.cfg.paths.claims, spec.key));
      if (!c && !exists(pendingFile(ctx, spec.group, spec.key))) throw new Error('the job vanished from the submit queue (state directory changed meanwhile?)');
      continue;
    }
    await sleep(POLL_MS);
  }
}

/** The leader's work: settle a batch a dead leader left, then submit what is pending. */
async function leadGroup(ctx: BlahpContext, group: string, app: string): Promise<void> {
  const { paths, cfg } = { paths: ctx.cfg.paths, cfg: ctx.cfg };
  const inflightFile = path.join(paths.pending, `${group}.inflight`);
  const inflight = readJson<{ batch: string }>(inflightFile);
  if (inflight) {
    ctx.log.warn(`blahp submit: settling batch ${inflight.batch} left by an earlier leader of group ${group}`);
    await submitClaimed(ctx, inflight.batch);
    fs.rmSync(inflightFile, { force: true });
  }
  const dir = path.join(paths.pending, group);
  if (pendingKeys(dir).length === 0) return;
  if (cfg.gatherMs > 0) await sleep(cfg.gatherMs);
  const keys = pendingKeys(dir).filter((key) => {
    // A job whose submit call is gone (blahpd killed it) would never be asked for again.
    const spec = readJson<JobSpec>(path.join(dir, `${key}.json`));
    if (!spec || pidAlive(spec.pid)) return true;
    ctx.log.warn(`blahp submit: dropping queued job ${key}: its submit call (pid ${spec.pid}) has ended`);
    fs.rmSync(path.join(dir, `${key}.json`), { force: true });
    return false;
  }).slice(0, cfg.maxBatchJobs);
  if (keys.length === 0) return;
  const first = readJson<JobSpec>(path.join(dir, `${keys[0]}.json`));
  const batch = newBatchName(first?.app ?? app);
  const rec: BatchRecord = {
    v: 1, batch, app: first?.app ?? app, group, projectUrl: cfg.projectUrl, keys, state: 'claimed', createdAt: Date.now(),
    ...(first?.memoryMb ? { memoryMb: first.memoryMb } : {}),
  };
  writeJsonAtomic(batchFile(ctx, batch), rec);
  writeJsonAtomic(inflightFile, { batch });
  await submitClaimed(ctx, batch);
  fs.rmSync(inflightFile, { force: true });
}

function pendingKeys(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => n.endsWith('.json') && !n.startsWith('.')).map((n) => n.slice(0, -5)).sort();
}

/** Moves a claimed batch's specs into place (idempotent) and runs BOINC_SUBMIT for it. */
async function submitClaimed(ctx: BlahpContext, batch: string): Promise<void> {
  const file = batchFile(ctx, batch);
  const rec = readJson<BatchRecord>(file);
  if (!rec || rec.state !== 'claimed') return;
  const jobsDir = path.join(ctx.cfg.paths.jobs, batch);
  ensureDir(jobsDir);
  const jobs: SubmitJobSpec[] = [];
  const orphans: ParsedJobName[] = [];
  rec.keys.forEach((key, n) => {
    writeJsonAtomic(path.join(ctx.cfg.paths.claims, key), { batch, n } satisfies Claim);
    const pending = pendingFile(ctx, rec.group, key);
    const dest = jobSpecFile(ctx, batch, n);
    if (exists(pending)) fs.renameSync(pending, dest);
    const spec = readJson<JobSpec>(dest);
    if (!spec) {
      ctx.log.warn(`blahp submit: job ${key} of batch ${batch} has no spec any more; left out`);
      return;
    }
    jobs.push({ name: jobName(batch, n), args: spec.args, inputs: spec.inputs });
    if (!pidAlive(spec.pid)) orphans.push({ jobName: jobName(batch, n), batch, n });
  });
  if (jobs.length === 0) {
    writeJsonAtomic(file, { ...rec, state: 'failed', error: 'no job left to submit' } satisfies BatchRecord);
    return;
  }
  const req: SubmitRequest = {
    batchName: batch,
    appName: rec.app,
    jobs,
    jobParams: rec.memoryMb ? { rscMemoryBound: rec.memoryMb * 1024 * 1024 } : {},
  };
  const t0 = Date.now();
  try {
    const { refused } = await submitCommand(await ctx.services()).submitJobs(await ctx.bound(req), ctx.handler(`submit ${batch}`));
    const now = Date.now();
    // A job with a problem of its own the checks at submit could not see (an input over the
    // project's upload limits, one deleted since) is left out alone: its submit call fails
    // with its reason (waitForBatch), and a held record makes it final for the batch.
    const refusedByN: Record<string, string> = {};
    for (const r of refused) {
      const job = parseJobName(r.name);
      if (!job) continue;
      refusedByN[job.n] = notSentReason(r.reason, r.name);
      writeFinalRecord(ctx, job, { kind: 'held', at: now, reason: refusedByN[job.n]!, code: 0 });
    }
    const extra = refused.length > 0 ? { refused: refusedByN } : {};
    if (refused.length === jobs.length) {
      writeJsonAtomic(file, { ...rec, ...extra, state: 'failed', error: `every job of batch ${batch} was refused` } satisfies BatchRecord);
      return;
    }
    writeJsonAtomic(file, { ...rec, ...extra, state: 'submitted', submittedAt: now, leaseExpiresAt: Math.floor(now / 1000) + ctx.cfg.leaseSeconds } satisfies BatchRecord);
    ctx.log.info(`blahp submit: batch ${batch}: ${jobs.length - refused.length} jobs submitted in ${now - t0} ms`);
    const gone = orphans.filter((o) => refusedByN[o.n] === undefined);
    if (gone.length > 0) await abortOrphans(ctx, gone);
  } catch (err) {
    const msg = errorMessage(err);
    writeJsonAtomic(file, { ...rec, state: 'failed', error: `BOINC_SUBMIT of batch ${batch} (${jobs.length} jobs) failed: ${msg}` } satisfies BatchRecord);
    ctx.log.error(`blahp submit: batch ${batch} failed: ${msg}`);
  }
}


/**
 * Jobs of a settled batch whose submit calls ended before printing their ids (a leader that
 * died, or waiters killed meanwhile): blahpd never learnt of them, so they are aborted and
 * recorded as cancelled (the batch can then finish and be retired).
 */
async function abortOrphans(ctx: BlahpContext, jobs: ParsedJobName[]): Promise<void> {
  const names = jobs.map((j) => j.jobName);
  try {
    await abortJobsCommand(await ctx.services()).run(await ctx.bound({ jobNames: names }), ctx.handler('abort orphans', ctx.cfg.rpcTimeoutMs * 2));
    for (const j of jobs) writeFinalRecord(ctx, j, { kind: 'cancelled', at: Date.now() });
    ctx.log.warn(`blahp submit: aborted ${names.length} jobs whose submit calls had ended: ${names.slice(0, 5).join(', ')}`);
  } catch (err) {
    ctx.log.error(`blahp submit: aborting jobs whose submit calls had ended failed: ${(err as Error).message}`);
  }
}
