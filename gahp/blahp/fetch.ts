/**
 * The background worker (`boinc-gahp blahp fetch`), started detached by status calls when
 * BOINC reports jobs DONE, or when leases are due or batches finished: it fetches outputs,
 * then renews leases and retires finished batches (RPCs no status call should wait for). One at a time per state directory (`fetch.lock`). For each DONE
 * job without a final record it runs the GAHP's BOINC_FETCH_OUTPUT
 * (gahp/commands/fetch-output.ts: outputs staged as hidden temp files and renamed into
 * place together, remaps applied, the job's stderr appended to Err), makes sure Out exists
 * (BOINC has no standard output), and only then writes the job's done record (and its
 * quick status line, quick.ts): a status call says 4 only after that. A crash mid-fetch
 * leaves no partial output under a real name; the next worker starts that job again.
 *
 * An output the project deleted or moved before it was fetched (gahp/output/gone.ts) holds
 * the job at once with that reason: no attempt brings it back, no result is kept. Any other
 * fetch that fails for a reason other than the transport is tried again on the next
 * rounds; after MAX_ATTEMPTS such failures the job is held with the reason, and its result
 * is kept on BOINC (not aborted, its batch not retired) when the job can come back for it
 * (its identity is known: records.ts); a job released is submitted again and then takes
 * that result back instead of running again (submit.ts, takeKeptResult).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { describeFailedJobs, type FailedJobReport } from '../failed-job.js';
import { fetchOutputCommand, type FetchOutputRequest } from '../commands/fetch-output.js';
import { isOutputGone } from '../output/gone.js';
import { retireBatchCommand } from '../commands/retire-batch.js';
import { releaseDestinations } from './destinations.js';
import { setLeaseCommand } from '../commands/set-lease.js';
import { ensureStdout } from '../batch-boinc/standard-files.js';
import type { BlahpContext } from './context.js';
import { jobName, type ParsedJobName } from '../batch-boinc/names.js';
import {
  batchChore, batchFile, erroredRecord, fetchAttemptsFile, finalRecord, forgetKeptResults, jobSpecFile, keptResultFile, liveBatches,
  type BatchRecord, type Claim, type FinalRecord, type JobSpec, type StatusSnapshot,
} from './records.js';
import { writeFinalRecord } from './quick.js';
import { readJson, writeJsonAtomic } from './state.js';
import { tryLockFile, unlockFile } from '../state-files.js';
import { sleep } from '../util.js';

const MAX_ATTEMPTS = 3;
const CONCURRENCY = 4;
/** A worker with nothing left to do looks again for this long before it exits. */
const LINGER_MS = 3000;
/** A worker never runs longer than this; the next status call starts a new one. */
const MAX_RUN_MS = 30 * 60 * 1000;

type FinishedJob = ParsedJobName & { failed: boolean };

/** DONE and ERROR jobs of the snapshot that have no final record yet. */
function jobsToFetch(ctx: BlahpContext, skip: Set<string>): FinishedJob[] {
  const snap = readJson<StatusSnapshot>(ctx.cfg.paths.statusSnapshot);
  if (!snap) return [];
  const out: FinishedJob[] = [];
  for (const [batch, jobs] of Object.entries(snap.batches)) {
    for (const [name, status] of Object.entries(jobs)) {
      if ((status !== 'DONE' && status !== 'ERROR') || skip.has(name)) continue;
      const m = /_(\d+)$/.exec(name);
      if (!m) continue;
      const job = { jobName: name, batch, n: Number(m[1]), failed: status === 'ERROR' };
      if (!finalRecord(ctx, job)) out.push(job);
    }
  }
  return out;
}

export async function runFetcher(ctx: BlahpContext): Promise<number> {
  if (!tryLockFile(ctx.cfg.paths.fetchLock)) return 0;
  const started = Date.now();
  let fetched = 0;
  try {
    // Jobs that failed this run wait for the next run (a later status call).
    const failed = new Set<string>();
    let idleSince: number | undefined;
    while (Date.now() - started < MAX_RUN_MS) {
      const work = jobsToFetch(ctx, failed);
      if (work.length === 0) {
        idleSince ??= Date.now();
        if (Date.now() - idleSince >= LINGER_MS) break;
        await sleep(250);
        continue;
      }
      idleSince = undefined;
      // Failed jobs batch by batch: one query for all of a batch's (gahp/failed-job.ts).
      const failedByBatch = new Map<string, ParsedJobName[]>();
      for (const job of work) if (job.failed) failedByBatch.set(job.batch, [...(failedByBatch.get(job.batch) ?? []), job]);
      for (const [batch, jobs] of failedByBatch) {
        const later = await holdFailedJobs(ctx, batch, jobs);
        fetched += jobs.length - later.length;
        for (const job of later) failed.add(job.jobName);
      }
      const done = work.filter((job) => !job.failed);
      let next = 0;
      const worker = async () => {
        while (next < done.length) {
          const job = done[next++]!;
          if (await fetchJob(ctx, job)) fetched++;
          else failed.add(job.jobName);
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, done.length) }, worker));
    }
    await batchChores(ctx);
  } finally {
    unlockFile(ctx.cfg.paths.fetchLock);
  }
  return fetched;
}

/** Renews the leases that are due and retires the batches whose jobs are all finished (records.ts, batchChore). */
async function batchChores(ctx: BlahpContext): Promise<void> {
  const services = await ctx.services();
  const nowS = Math.floor(Date.now() / 1000);
  for (const rec of liveBatches(ctx)) {
    const chore = batchChore(ctx, rec, nowS);
    if (chore === 'give-up-kept') ctx.log.info(`blahp: batch ${rec.batch}: its lease ran out with results kept that no job came back for; retiring it`);
    if (chore === 'retire' || chore === 'give-up-kept') {
      await retireBatch(ctx, rec);
    } else if (chore === 'renew') {
      const until = nowS + ctx.cfg.leaseSeconds;
      try {
        await setLeaseCommand(services).run(await ctx.bound({ batchName: rec.batch, expireTime: until }), ctx.handler('lease', ctx.cfg.rpcTimeoutMs * 3));
        writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, leaseExpiresAt: until } satisfies BatchRecord);
      } catch (err) {
        ctx.log.warn(`blahp: renewing the lease of ${rec.batch} failed: ${(err as Error).message}`);
      }
    }
  }
}

/**
 * Retires a batch every job of which has its final record (BOINC may then delete its
 * files); a failure is logged and the background worker tries again later.
 */
export async function retireBatch(ctx: BlahpContext, rec: BatchRecord): Promise<boolean> {
  try {
    await retireBatchCommand(await ctx.services()).run(await ctx.bound({ batchName: rec.batch }), ctx.handler('retire', ctx.cfg.rpcTimeoutMs * 3));
    writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, state: 'retired' } satisfies BatchRecord);
    ctx.log.info(`blahp: retired batch ${rec.batch}: every job finished`);
    releaseDestinations(ctx, rec);
    forgetKeptResults(ctx, rec);
    return true;
  } catch (err) {
    ctx.log.warn(`blahp: retiring ${rec.batch} failed: ${(err as Error).message}`);
    return false;
  }
}

/** After a cancel: retires the job's batch at once when that was its last unfinished job. */
export async function retireIfFinished(ctx: BlahpContext, batch: string): Promise<void> {
  const rec = readJson<BatchRecord>(batchFile(ctx, batch));
  if (rec?.state !== 'submitted') return;
  const chore = batchChore(ctx, rec);
  if (chore === 'retire' || chore === 'give-up-kept') await retireBatch(ctx, rec);
}

/** Fetches one job's outputs and writes its done record; false when it must be tried again later. */
export async function fetchJob(ctx: BlahpContext, job: ParsedJobName): Promise<boolean> {
  const spec = readJson<JobSpec>(jobSpecFile(ctx, job.batch, job.n));
  if (!spec) {
    hold(ctx, job, `the job's record is missing from the state directory (${path.join(ctx.cfg.paths.jobs, job.batch)}): its outputs cannot be placed`);
    return true;
  }
  const req: FetchOutputRequest = {
    jobName: jobName(job.batch, job.n),
    iwd: spec.iwd,
    stderrPath: spec.stderr ?? '/dev/null',
    mode: spec.outputs ? 'SOME' : 'ALL',
    specs: spec.outputs ?? [],
  };
  const t0 = Date.now();
  try {
    const tokens = await fetchOutputCommand(await ctx.services()).run(await ctx.bound(req), ctx.handler(`fetch ${job.jobName}`, ctx.cfg.rpcTimeoutMs * 30));
    ensureStdout(spec);
    const rec: FinalRecord = {
      kind: 'done',
      at: Date.now(),
      exitCode: Number(tokens[1] ?? 0),
      wallClock: Number(tokens[2] ?? 0),
      cpu: Number(tokens[3] ?? 0),
    };
    writeFinalRecord(ctx, job, rec);
    fs.rmSync(fetchAttemptsFile(ctx, job), { force: true });
    ctx.log.info(`blahp fetch: ${job.jobName}: outputs in ${spec.iwd} (${Date.now() - t0} ms), exit code ${rec.exitCode}`);
    return true;
  } catch (err) {
    const msg = (err as Error).message;
    const transport = err instanceof BoincRpcError && err.kind === 'transport';
    ctx.log.warn(`blahp fetch: ${job.jobName}: ${msg}`);
    if (transport) return false;
    if (isOutputGone(err)) {
      // Deleted or moved by the project: no attempt can bring it back, nothing is kept.
      hold(ctx, job, `BOINC finished job ${job.jobName} but ${msg}`);
      fs.rmSync(fetchAttemptsFile(ctx, job), { force: true });
      return true;
    }
    const attempts = (readJson<{ attempts: number }>(fetchAttemptsFile(ctx, job))?.attempts ?? 0) + 1;
    if (attempts >= MAX_ATTEMPTS) {
      if (spec.identity) keepResult(ctx, job, spec.identity, `BOINC finished job ${job.jobName} but its outputs could not be put in place (${attempts} attempts): ${msg}`);
      else hold(ctx, job, `fetching the outputs of BOINC job ${job.jobName} failed ${attempts} times: ${msg}`);
      fs.rmSync(fetchAttemptsFile(ctx, job), { force: true });
      return true;
    }
    writeJsonAtomic(fetchAttemptsFile(ctx, job), { attempts, error: msg });
    return false;
  }
}

/**
 * Jobs of one batch that BOINC gave up on: held, the reason saying what the server reports
 * of each (gahp/failed-job.ts: one query_batch for all of them; its exit status, the
 * instances' states, or that it was aborted on the server). A job whose failed instance has
 * a stderr to keep (Err given) is also asked for it through BOINC_FETCH_OUTPUT, which
 * appends it to Err: a server that reports failed instances answers, the real one does not
 * (docs/boinc-server.md, "Querying"). Returns the jobs to try again later: the server
 * could not be reached.
 */
export async function holdFailedJobs(ctx: BlahpContext, batch: string, jobs: ParsedJobName[]): Promise<ParsedJobName[]> {
  let reports: Map<string, FailedJobReport> | undefined;
  let unknown = '';
  try {
    const { rpc } = await ctx.binding();
    const { signal } = ctx.handler(`failed jobs of ${batch}`, ctx.cfg.rpcTimeoutMs * 3);
    reports = await describeFailedJobs(rpc, batch, jobs.map((j) => j.jobName), { signal });
  } catch (err) {
    if (err instanceof BoincRpcError && err.kind === 'transport') return jobs;
    unknown = `its instances failed or it was aborted on the server; what the server reports of it could not be had: ${(err as Error).message}`;
    ctx.log.warn(`blahp: no details of the failed jobs of ${batch}: ${(err as Error).message}`);
  }
  const later: ParsedJobName[] = [];
  for (const job of jobs) {
    const report = reports?.get(job.jobName);
    let what = report?.text ?? unknown;
    if (report?.exitStatus !== undefined) {
      const stderr = await failedInstanceStderr(ctx, job);
      if (stderr === undefined) {
        later.push(job);
        continue;
      }
      what += stderr;
    }
    const rec = erroredRecord(job, what);
    writeFinalRecord(ctx, job, rec);
    ctx.log.info(`blahp: held ${job.jobName}: ${rec.reason}`);
  }
  return later;
}

/**
 * The failed instance's stderr appended to the job's Err, when the server reports it:
 * `; its stderr is in <Err>` then, '' when there is none to be had, undefined when the
 * server could not be reached (try again later).
 */
async function failedInstanceStderr(ctx: BlahpContext, job: ParsedJobName): Promise<string | undefined> {
  const spec = readJson<JobSpec>(jobSpecFile(ctx, job.batch, job.n));
  if (!spec?.stderr || spec.stderr === '/dev/null') return '';
  const req: FetchOutputRequest = { jobName: job.jobName, iwd: spec.iwd, stderrPath: spec.stderr, mode: 'SOME', specs: [] };
  try {
    await fetchOutputCommand(await ctx.services()).run(await ctx.bound(req), ctx.handler(`failed ${job.jobName}`, ctx.cfg.rpcTimeoutMs * 3));
    return `; its stderr is in ${spec.stderr}`;
  } catch (err) {
    if (err instanceof BoincRpcError && err.kind === 'transport') return undefined;
    ctx.log.debug(`blahp: no stderr of failed job ${job.jobName}: ${(err as Error).message}`);
    return '';
  }
}

/**
 * Holds a DONE job whose outputs could not be put in place, its result kept on BOINC for the
 * job's return after a release (issue 38, item 2: a finished result is never run again).
 * The kept-result file first, then the held record: a crash between them leaves a file that
 * names a job with no kept result, which submit.ts ignores.
 */
function keepResult(ctx: BlahpContext, job: ParsedJobName, identity: string, what: string): void {
  writeJsonAtomic(keptResultFile(ctx, identity), { batch: job.batch, n: job.n } satisfies Claim);
  const reason = `${what}. The result is kept on BOINC until its batch's lease runs out (boinc_lease_hours): fix the cause and release the job to fetch it`;
  writeFinalRecord(ctx, job, { kind: 'held', at: Date.now(), reason, code: 0, resultKept: true });
  ctx.log.info(`blahp fetch: ${job.jobName}: held, its result kept on BOINC for the job's release`);
}

function hold(ctx: BlahpContext, job: ParsedJobName, reason: string): void {
  writeFinalRecord(ctx, job, { kind: 'held', at: Date.now(), reason, code: 0 });
}

