/**
 * The BLAHP side's records in the state directory (docs/blahp.md, "State directory"):
 * job specs, batch records, claims, the status snapshot's shape, and a job's final state
 * kept beside its spec (`jobs/<batch>/<n>.<kind>.json`) once known: done (outputs in
 * place: exit code and times), cancelled (boinc_cancel.sh succeeded), held (BOINC gave up
 * on it, or its outputs could not be fetched). All written whole and renamed into place;
 * a done record only after the outputs are in place. Light: status calls load this.
 *
 * A DONE job whose outputs could not be put in place is held with its result kept on BOINC
 * (issue 38, item 2): `kept/<hash>` names it by the job's identity, for the job's return
 * after a release (submit.ts), and its batch is not retired (retiring lets BOINC delete the
 * result) until its lease, no longer renewed for it, has run out (batchChore).
 */
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BlahpContext } from './context.js';
import { jobName, type ParsedJobName } from '../batch-boinc/names.js';
import { readJson } from './state.js';
import { lockFileHeld } from '../state-files.js';
import type { OutputSpec } from '../batch-boinc/job-check.js';

/** What the job needs later (status, outputs), kept since blahpd deletes its list files. */
export interface JobSpec {
  v: 1;
  key: string;
  app: string;
  group: string;
  projectUrl: string;
  iwd: string;
  cmd: string;
  args: string[];
  inputs: Array<{ src: string; dst: string }>;
  /** The -O/-R outputs; null: every output of the app (no -O list). */
  outputs: OutputSpec[] | null;
  /** Out and Err as blahpd gave them (relative to iwd unless absolute); absent: none. */
  stdout?: string;
  stderr?: string;
  memoryMb?: number;
  /**
   * The job across its submissions: the gridmanager's sandbox id (-D) without its time
   * (gahp/batch-boinc/names.ts, identityOf), the same when a released job is submitted again.
   * Absent when -D is not one: such a job's result is never kept.
   */
  identity?: string;
  /** The submit call's process: when it is gone before the job got its id, nobody will ask for the job. */
  pid: number;
  createdAt: number;
}

export type BatchState = 'claimed' | 'submitted' | 'failed' | 'retired';

export interface BatchRecord {
  v: 1;
  batch: string;
  app: string;
  group: string;
  projectUrl: string;
  /** Submit keys in job order: job n is keys[n]. */
  keys: string[];
  state: BatchState;
  error?: string;
  /** Job number -> why BOINC_SUBMIT left that job out (its own problem; the others went). */
  refused?: Record<string, string>;
  memoryMb?: number;
  createdAt: number;
  submittedAt?: number;
  leaseExpiresAt?: number;
}

export interface Claim {
  batch: string;
  n: number;
}

export function batchFile(ctx: BlahpContext, batch: string): string {
  return path.join(ctx.cfg.paths.batches, `${batch}.json`);
}

export function jobSpecFile(ctx: BlahpContext, batch: string, n: number): string {
  return path.join(ctx.cfg.paths.jobs, batch, `${n}.json`);
}

export interface StatusSnapshot {
  v: 1;
  projectUrl: string;
  /** When the query was answered (ms). */
  fetchedAt: number;
  serverTime: string;
  /** batch -> job name -> BOINC status word (NOT_STARTED, IN_PROGRESS, DONE, ERROR). */
  batches: Record<string, Record<string, string>>;
  /** Batches the server said it does not have. */
  gone: string[];
  /**
   * Jobs DONE or ERROR in this snapshot that an earlier snapshot had running (carried from
   * snapshot to snapshot): until its final record such a job is answered running (2), any
   * other idle (1), so a job never answered running gets no 'Job executing' event only to
   * have its outputs fetched (issue 38, item 6).
   */
  ran?: string[];
  /** The last refresh attempt failed at this time (ms), with this error: not retried for a while. */
  failedAt?: number;
  error?: string;
}

export type FinalRecord =
  | { kind: 'done'; at: number; exitCode: number; wallClock: number; cpu: number }
  | { kind: 'cancelled'; at: number }
  | { kind: 'held'; at: number; reason: string; code: number; resultKept?: boolean };

function recordFile(ctx: BlahpContext, job: ParsedJobName, kind: string): string {
  return path.join(ctx.cfg.paths.jobs, job.batch, `${job.n}.${kind}.json`);
}

export const doneFile = (ctx: BlahpContext, job: ParsedJobName) => recordFile(ctx, job, 'done');
export const cancelledFile = (ctx: BlahpContext, job: ParsedJobName) => recordFile(ctx, job, 'cancelled');
export const heldFile = (ctx: BlahpContext, job: ParsedJobName) => recordFile(ctx, job, 'held');
/** Failed fetch attempts (not final). */
export const fetchAttemptsFile = (ctx: BlahpContext, job: ParsedJobName) => recordFile(ctx, job, 'fetch');

/** The job's final record, if any (a cancel wins over what the server said after it). */
export function finalRecord(ctx: BlahpContext, job: ParsedJobName): FinalRecord | undefined {
  return readJson<FinalRecord>(cancelledFile(ctx, job)) ?? readJson<FinalRecord>(doneFile(ctx, job)) ?? readJson<FinalRecord>(heldFile(ctx, job));
}

/** Whether the job is held with its result kept on BOINC for its return (fetch.ts). */
export function resultKept(ctx: BlahpContext, job: ParsedJobName): boolean {
  const rec = finalRecord(ctx, job);
  return rec?.kind === 'held' && rec.resultKept === true;
}

/**
 * The file naming the job (a Claim: batch and number) whose result is kept for this identity.
 * Hashed with the project URL: another project's job is not this one.
 */
export function keptResultFile(ctx: BlahpContext, identity: string): string {
  return path.join(ctx.cfg.paths.kept, crypto.createHash('sha256').update(`${ctx.cfg.projectUrl}\0${identity}`).digest('hex').slice(0, 40));
}

/** Removes the kept-result files that name jobs of this batch (it is retired or gone: nothing is kept any more). */
export function forgetKeptResults(ctx: BlahpContext, rec: BatchRecord): void {
  rec.keys.forEach((_, n) => {
    const identity = readJson<JobSpec>(jobSpecFile(ctx, rec.batch, n))?.identity;
    if (!identity) return;
    const file = keptResultFile(ctx, identity);
    const kept = readJson<Claim>(file);
    if (kept?.batch === rec.batch && kept.n === n) fs.rmSync(file, { force: true });
  });
}

/**
 * A job BOINC gave up on: held. `what`: what the server reports of it (gahp/failed-job.ts),
 * or why that is not known.
 */
export function erroredRecord(job: ParsedJobName, what: string): Extract<FinalRecord, { kind: 'held' }> {
  return { kind: 'held', at: Date.now(), reason: `BOINC gave up on job ${job.jobName}: ${what}`, code: 0 };
}

/**
 * Starts the background worker (`boinc-gahp blahp fetch`: outputs, leases, retirements) unless one runs: a detached process
 * in its own session, stdin, stdout and stderr on /dev/null (blahpd waits for EOF on the
 * script's pipes, so nothing of ours may keep them open).
 */
export function ensureFetcher(ctx: BlahpContext): void {
  if (lockFileHeld(ctx.cfg.paths.fetchLock)) return;
  const entry = process.argv[1];
  if (!entry) return;
  try {
    const child = spawn(process.execPath, [entry, 'blahp', 'fetch'], { detached: true, stdio: 'ignore', env: process.env, cwd: '/' });
    child.on('error', (err) => ctx.log.error(`blahp: could not start the background worker: ${err.message}`));
    child.unref();
    ctx.log.debug(`blahp: started the background worker (pid ${child.pid})`);
  } catch (err) {
    ctx.log.error(`blahp: could not start the background worker: ${(err as Error).message}`);
  }
}

/** Batches still worth asking about: submitted and not retired. */
export function liveBatches(ctx: BlahpContext): BatchRecord[] {
  let names: string[];
  try {
    names = fs.readdirSync(ctx.cfg.paths.batches);
  } catch {
    return [];
  }
  const out: BatchRecord[] = [];
  for (const n of names) {
    if (!n.endsWith('.json') || n.startsWith('.')) continue;
    const rec = readJson<BatchRecord>(path.join(ctx.cfg.paths.batches, n));
    if (rec && rec.state === 'submitted' && rec.projectUrl === ctx.cfg.projectUrl) out.push(rec);
  }
  return out;
}

/** Whether a batch's lease should be renewed (less than half of it left). */
export function leaseDue(ctx: BlahpContext, rec: BatchRecord, nowS = Math.floor(Date.now() / 1000)): boolean {
  return rec.leaseExpiresAt === undefined || rec.leaseExpiresAt - nowS < ctx.cfg.leaseSeconds / 2;
}

/**
 * What a live batch needs from the background worker:
 * - 'renew' its lease (less than half left) while a job has no final record;
 * - 'retire' it once every job has one (BOINC may then delete its files);
 * - 'give-up-kept': every job has one, some hold a kept result, and the lease has run out:
 *   nobody came back for them (a condor_rm, a job never released), so it is retired too.
 * A kept result alone does not renew the lease: it waits for its job only until the lease
 * runs out (docs/blahp.md, "Kept results").
 */
export type BatchChore = 'renew' | 'retire' | 'give-up-kept' | undefined;

export function batchChore(ctx: BlahpContext, rec: BatchRecord, nowS = Math.floor(Date.now() / 1000)): BatchChore {
  let kept = false;
  for (let n = 0; n < rec.keys.length; n++) {
    const f = finalRecord(ctx, { jobName: jobName(rec.batch, n), batch: rec.batch, n });
    if (!f) return leaseDue(ctx, rec, nowS) ? 'renew' : undefined;
    if (f.kind === 'held' && f.resultKept) kept = true;
  }
  if (!kept) return 'retire';
  return (rec.leaseExpiresAt ?? 0) <= nowS ? 'give-up-kept' : undefined;
}
