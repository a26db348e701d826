/**
 * `boinc_status.sh [-w] [-n] boinc/<job>...`: one line per job (docs/blahp.md, "Status").
 *
 * blahpd asks per job, so the answer comes from a snapshot shared by every status call:
 * `status.json` holds what ONE BOINC_QUERY_BATCHES (query_batch2 over every live batch)
 * said. A call uses it while it is younger than the configured age; otherwise the first
 * call to take `status.lock` refreshes it (refresh.ts; it starts the background worker
 * when outputs, leases or retirements are due) while the others wait for the new snapshot. Nothing here takes long: RPCs get a short timeout, waiting
 * for another process's refresh is bounded, and an unreachable server means an answer from
 * the last snapshot. Final states are kept per job (`jobs/<batch>/<n>.done.json` and
 * friends) and answer without any snapshot.
 *
 * Most calls never reach this code: boinc_status.sh prints the answer itself when it is
 * already known (quick.ts: an idle or running job of a fresh snapshot, a final state). Node
 * is started for the rest: no fresh snapshot, a DONE or ERROR job still to fetch, an id that
 * is not one of ours.
 *
 * States: UNSENT 1; IN_PROGRESS 2; DONE the state last answered (2 when a snapshot had it
 * running, else 1) until the outputs are in place, then 4 with the exit code and times;
 * cancelled through boinc_cancel.sh 3; ERROR (BOINC gave up: all instances failed, or the
 * job was aborted on the server) the state last answered until the background worker has
 * asked for its details, then 5 with the reason.
 */
import type { BlahpContext } from './context.js';
import { errorLine, statusLine } from './classad.js';
import { jobNameFromId } from '../batch-boinc/names.js';
import { readJson } from './state.js';
import { tryLockFile, unlockFile } from '../state-files.js';
import { sleep } from '../util.js';
import { ensureFetcher, finalRecord, type FinalRecord, type StatusSnapshot } from './records.js';
import { ensureFinalLine, finalLine, snapshotState, writeFinalRecord } from './quick.js';

/** After a failed refresh, calls answer from the old snapshot this long before trying again. */
const RETRY_AFTER_FAILURE_MS = 5000;
/** Longest wait for another process's refresh. */
const WAIT_FOR_REFRESH_MS = 15_000;
/** Budget for finding a snapshot, waiting and refreshing together (blahpd kills at 30 s). */
const SNAPSHOT_BUDGET_MS = 20_000;
/** A refresh is given at least this long, and at most REFRESH_MAX_MS. */
const REFRESH_MIN_MS = 3000;
const REFRESH_MAX_MS = 15_000;
/** How long a status call waits for a DONE job's outputs before answering its last state. */
const WAIT_FOR_FETCH_MS = 2000;

/** The status lines for the given ids, in order (each without its newline). */
export async function statusLines(ctx: BlahpContext, ids: readonly string[]): Promise<string[]> {
  const lines: string[] = [];
  for (const id of ids) {
    try {
      lines.push(await statusOf(ctx, id));
    } catch (err) {
      lines.push(errorLine(`status of ${id} failed: ${(err as Error).message}`));
    }
  }
  return lines;
}

async function statusOf(ctx: BlahpContext, id: string): Promise<string> {
  const job = jobNameFromId(id);
  if (!job) return errorLine(`malformed BOINC job id ${id}`);
  const fin = finalRecord(ctx, job);
  if (fin) {
    // The script answers the next call itself (a record from before quick lines existed, or a crash before its line).
    ensureFinalLine(ctx, job, fin);
    return finalLine(job, fin);
  }

  const snap = await snapshotFor(ctx, job.batch);
  if (!snap) return errorLine(`no status of ${job.jobName} yet: the BOINC server could not be asked`);
  if (snap.gone.includes(job.batch)) {
    const rec: FinalRecord = { kind: 'held', at: Date.now(), reason: `the BOINC server no longer has batch ${job.batch} (its lease ran out, or it was retired or deleted)`, code: 0 };
    writeFinalRecord(ctx, job, rec);
    return finalLine(job, finalRecord(ctx, job) ?? rec);
  }
  const jobs = snap.batches[job.batch];
  const status = jobs?.[job.jobName];
  // Not covered: the server could not be asked (the snapshot says why) in time.
  if (jobs === undefined) return errorLine(`no status of ${job.jobName} now: ${snap.error ?? 'the BOINC server was not asked in time'}`);
  if (status === undefined) return errorLine(`job ${job.jobName} is not in BOINC batch ${job.batch}`);
  // Idle and running: the same line the refresh wrote for the script (quick.ts).
  const state = snapshotState(status);
  if (state !== undefined) return statusLine(job.jobName, state);
  switch (status) {
    case 'DONE':
    case 'ERROR': {
      // Outputs (or what the server reports of a failed job) first: the final state only once they are in place.
      ensureFetcher(ctx);
      const deadline = Date.now() + WAIT_FOR_FETCH_MS;
      for (;;) {
        const f = finalRecord(ctx, job);
        if (f) return finalLine(job, f);
        // Until then the state last answered (the last snapshot's; quick.ts writes the same
        // line): a job never seen running is not made to start only to fetch its outputs.
        if (Date.now() >= deadline) return statusLine(job.jobName, snap.ran?.includes(job.jobName) ? 2 : 1);
        await sleep(100);
      }
    }
    default:
      return errorLine(`job ${job.jobName} has BOINC status ${status}, unknown here`);
  }
}

function readSnapshot(ctx: BlahpContext): StatusSnapshot | undefined {
  const s = readJson<StatusSnapshot>(ctx.cfg.paths.statusSnapshot);
  return s && s.v === 1 && s.projectUrl === ctx.cfg.projectUrl ? s : undefined;
}

function usable(ctx: BlahpContext, s: StatusSnapshot | undefined, batch: string): boolean {
  if (!s) return false;
  const covers = s.batches[batch] !== undefined || s.gone.includes(batch);
  if (s.failedAt !== undefined && Date.now() - s.failedAt < RETRY_AFTER_FAILURE_MS) return true;
  return covers && Date.now() - s.fetchedAt < ctx.cfg.statusMaxAgeMs;
}

/** A snapshot that covers the batch: the shared one if fresh, else refreshed (by us or another call). */
async function snapshotFor(ctx: BlahpContext, batch: string): Promise<StatusSnapshot | undefined> {
  const start = Date.now();
  const deadline = start + WAIT_FOR_REFRESH_MS;
  for (;;) {
    const snap = readSnapshot(ctx);
    if (usable(ctx, snap, batch)) return snap;
    if (tryLockFile(ctx.cfg.paths.statusLock)) {
      try {
        // Someone may have refreshed between our read and our lock.
        const again = readSnapshot(ctx);
        if (usable(ctx, again, batch)) return again;
        const { refresh } = await import('./refresh.js');
        const budget = Math.min(REFRESH_MAX_MS, Math.max(REFRESH_MIN_MS, start + SNAPSHOT_BUDGET_MS - Date.now()));
        return await refresh(ctx, again, batch, budget);
      } finally {
        unlockFile(ctx.cfg.paths.statusLock);
      }
    }
    if (Date.now() >= deadline) return snap;
    await sleep(100);
  }
}

