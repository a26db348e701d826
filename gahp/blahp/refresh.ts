/**
 * Refreshing the shared status snapshot (status.ts): one BOINC_QUERY_BATCHES over every
 * live batch, the quick status lines boinc_status.sh answers from by itself (quick.ts),
 * then the background worker started when it has work. Loaded only by the status call that holds `status.lock` (the others never load
 * the RPC stack).
 */
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { queryBatchesCommand } from '../commands/query-batches.js';
import type { BlahpContext } from './context.js';
import type { ParsedJobName } from '../batch-boinc/names.js';
import { writeJsonAtomic } from './state.js';
import { batchChore, batchFile, ensureFetcher, finalRecord, forgetKeptResults, liveBatches, type BatchRecord, type StatusSnapshot } from './records.js';
import { dropStamp, snapshotState, writeSnapshotLines, writeStamp, type SnapshotLines } from './quick.js';

/** One BOINC_QUERY_BATCHES over every live batch (and `also`); writes and returns the snapshot. */
export async function refresh(ctx: BlahpContext, old: StatusSnapshot | undefined, also: string, budgetMs: number): Promise<StatusSnapshot | undefined> {
  const live = liveBatches(ctx);
  const names = [...new Set([...live.map((b) => b.batch), also])];
  const gone: string[] = [];
  const handler = ctx.handler('status refresh', budgetMs);
  let tokens: string[] | undefined;
  try {
    const query = queryBatchesCommand(await ctx.services(), { logFailedJobs: false });
    // A batch the server no longer has fails the whole query: leave it out and ask again.
    for (let attempt = 0; attempt < 5 && names.length > 0; attempt++) {
      try {
        tokens = await query.run(await ctx.bound({ minModTime: '0', batchNames: names }), handler);
        break;
      } catch (err) {
        const missing = err instanceof BoincRpcError && err.code === 'no-such-batch' ? err.batchName : undefined;
        if (!missing || !names.includes(missing)) throw err;
        gone.push(missing);
        names.splice(names.indexOf(missing), 1);
      }
    }
  } catch (err) {
    const msg = (err as Error).message;
    ctx.log.warn(`blahp status: refresh failed: ${msg}`);
    const failed: StatusSnapshot = old
      ? { ...old, failedAt: Date.now(), error: msg }
      : { v: 1, projectUrl: ctx.cfg.projectUrl, fetchedAt: 0, serverTime: '0', batches: {}, gone: [], failedAt: Date.now(), error: msg };
    // With an old snapshot kept, its stamp stays right (same fetchedAt, same jobs); without one, a stamp left would name what is no longer there.
    if (!old) dropStamp(ctx);
    writeJsonAtomic(ctx.cfg.paths.statusSnapshot, failed);
    return old;
  }
  const snap: StatusSnapshot = { v: 1, projectUrl: ctx.cfg.projectUrl, fetchedAt: Date.now(), serverTime: '0', batches: {}, gone };
  if (tokens) {
    snap.serverTime = tokens[1] ?? '0';
    let t = 2;
    for (const name of names) {
      const n = Number(tokens[t++]);
      const jobs: Record<string, string> = {};
      for (let k = 0; k < n; k++) {
        const job = tokens[t++]!;
        jobs[job] = tokens[t++]!;
      }
      snap.batches[name] = jobs;
    }
  }
  const ran = endedAfterRunning(old, snap);
  if (ran.length > 0) snap.ran = ran;
  // The quick lines (quick.ts): the stamp goes down first, so no script trusts a line while
  // they change, and comes back only once status.json says the same.
  let quick: SnapshotLines | undefined;
  try {
    quick = writeSnapshotLines(ctx, old, snap);
  } catch (err) {
    ctx.log.warn(`blahp status: quick status lines not written (status calls start node until a refresh writes them): ${(err as Error).message}`);
  }
  writeJsonAtomic(ctx.cfg.paths.statusSnapshot, snap);
  if (quick) {
    try {
      writeStamp(ctx, snap, quick.epoch);
    } catch (err) {
      ctx.log.warn(`blahp status: ${ctx.cfg.paths.statusStamp} not written: ${(err as Error).message}`);
    }
  }
  const lines = quick ? `${quick.full ? 'all ' : ''}${quick.written} quick status lines written, ${quick.removed} removed` : 'no quick status lines';
  ctx.log.debug(`blahp status: snapshot of ${names.length} batches (${gone.length} gone), ${lines}`);
  await chores(ctx, snap, live).catch((err) => ctx.log.warn(`blahp status: chores failed: ${(err as Error).message}`));
  return snap;
}

/**
 * After a refresh, the local part of the chores: record the batches BOINC no longer has;
 * start the background worker (fetch.ts) when jobs finished (outputs to fetch, or a failed
 * job's details), leases are due or batches can be retired.
 */
/**
 * The jobs DONE or ERROR in `snap` that were running in `old`, or already listed there: what
 * a status call answers for them until their final record is the state last answered
 * (status.ts). The `.snap` lines (quick.ts) answered only what status.json said, so the
 * last answer was the last snapshot's idle or running.
 */
function endedAfterRunning(old: StatusSnapshot | undefined, snap: StatusSnapshot): string[] {
  const before = new Set(old?.ran ?? []);
  const ran: string[] = [];
  for (const [batch, jobs] of Object.entries(snap.batches)) {
    for (const [name, word] of Object.entries(jobs)) {
      if (word !== 'DONE' && word !== 'ERROR') continue;
      const was = old && Object.hasOwn(old.batches, batch) ? old.batches[batch]![name] : undefined;
      if (before.has(name) || (was !== undefined && snapshotState(was) === 2)) ran.push(name);
    }
  }
  return ran;
}

async function chores(ctx: BlahpContext, snap: StatusSnapshot, live: BatchRecord[]): Promise<void> {
  let needFetch = false;
  for (const [batch, jobs] of Object.entries(snap.batches)) {
    for (const [name, status] of Object.entries(jobs)) {
      if (status !== 'DONE' && status !== 'ERROR') continue;
      const m = /_(\d+)$/.exec(name);
      if (!m) continue;
      const job: ParsedJobName = { jobName: name, batch, n: Number(m[1]) };
      if (!finalRecord(ctx, job)) needFetch = true;
    }
  }
  if (needFetch) ensureFetcher(ctx);

  // Leases and retirements are RPCs: the background worker does them, never a status call.
  const nowS = Math.floor(Date.now() / 1000);
  let housekeeping = false;
  for (const rec of live) {
    if (snap.gone.includes(rec.batch)) {
      writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, state: 'retired' } satisfies BatchRecord);
      forgetKeptResults(ctx, rec);
      continue;
    }
    if (batchChore(ctx, rec, nowS) !== undefined) housekeeping = true;
  }
  if (needFetch || housekeeping) ensureFetcher(ctx);
}
