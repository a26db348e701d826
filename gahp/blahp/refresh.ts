/**
 * Refreshing the shared status snapshot (status.ts) and the chores that go with it: one
 * BOINC_QUERY_BATCHES over every live batch, then BOINC's failures recorded, the output
 * fetcher started, leases renewed and finished batches retired. Loaded only by the status
 * call that holds `status.lock` (the others never load the RPC stack).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { queryBatchesCommand } from '../commands/query-batches.js';
import { retireBatchCommand } from '../commands/retire-batch.js';
import { setLeaseCommand } from '../commands/set-lease.js';
import type { BlahpContext } from './context.js';
import { jobName as nameOf, type ParsedJobName } from './names.js';
import { lockHeld, readJson, writeJsonAtomic } from './state.js';
import { batchFile, ensureFetcher, erroredRecord, finalRecord, heldFile, type BatchRecord, type StatusSnapshot } from './records.js';

/** The whole refresh's deadline (the query, and the chores after it). */
const REFRESH_DEADLINE_MS = 15_000;
/** Lease renewals and retirements done by one refresh (the rest wait for the next). */
const MAX_CHORES = 10;

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

/** One BOINC_QUERY_BATCHES over every live batch (and `also`); writes and returns the snapshot. */
export async function refresh(ctx: BlahpContext, old: StatusSnapshot | undefined, also: string): Promise<StatusSnapshot | undefined> {
  const live = liveBatches(ctx);
  const names = [...new Set([...live.map((b) => b.batch), also])];
  const gone: string[] = [];
  const handler = ctx.handler('status refresh', REFRESH_DEADLINE_MS);
  let tokens: string[] | undefined;
  try {
    const query = queryBatchesCommand(await ctx.services());
    // A batch the server no longer has fails the whole query: leave it out and ask again.
    for (let attempt = 0; attempt < 5 && names.length > 0; attempt++) {
      try {
        tokens = await query.run({ minModTime: '0', batchNames: names }, handler);
        break;
      } catch (err) {
        const m = /no batch named (\S+)/.exec(err instanceof Error ? err.message : '');
        const missing = m?.[1];
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
  writeJsonAtomic(ctx.cfg.paths.statusSnapshot, snap);
  ctx.log.debug(`blahp status: snapshot of ${names.length} batches (${gone.length} gone)`);
  await chores(ctx, snap, live).catch((err) => ctx.log.warn(`blahp status: chores failed: ${(err as Error).message}`));
  return snap;
}

/** After a refresh: record BOINC's failures, start the fetcher, renew leases, retire finished batches. */
async function chores(ctx: BlahpContext, snap: StatusSnapshot, live: BatchRecord[]): Promise<void> {
  let needFetch = false;
  for (const [batch, jobs] of Object.entries(snap.batches)) {
    for (const [name, status] of Object.entries(jobs)) {
      if (status !== 'DONE' && status !== 'ERROR') continue;
      const m = /_(\d+)$/.exec(name);
      if (!m) continue;
      const job: ParsedJobName = { jobName: name, batch, n: Number(m[1]) };
      if (finalRecord(ctx, job)) continue;
      if (status === 'DONE') needFetch = true;
      else writeJsonAtomic(heldFile(ctx, job), erroredRecord(job));
    }
  }
  if (needFetch) ensureFetcher(ctx);

  const services = await ctx.services();
  let budget = MAX_CHORES;
  const nowS = Math.floor(Date.now() / 1000);
  for (const rec of live) {
    if (budget <= 0) break;
    if (snap.gone.includes(rec.batch)) {
      writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, state: 'retired' } satisfies BatchRecord);
      continue;
    }
    const finished = rec.keys.every((_, n) => finalRecord(ctx, { jobName: nameOf(rec.batch, n), batch: rec.batch, n }) !== undefined);
    if (finished && !lockHeld(ctx.cfg.paths.fetchLock)) {
      budget--;
      try {
        await retireBatchCommand(services).run({ batchName: rec.batch }, ctx.handler('retire', ctx.cfg.rpcTimeoutMs));
        writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, state: 'retired' } satisfies BatchRecord);
        ctx.log.info(`blahp status: retired batch ${rec.batch}: every job finished`);
      } catch (err) {
        ctx.log.warn(`blahp status: retiring ${rec.batch} failed: ${(err as Error).message}`);
      }
      continue;
    }
    if (rec.leaseExpiresAt === undefined || rec.leaseExpiresAt - nowS < ctx.cfg.leaseSeconds / 2) {
      budget--;
      const until = nowS + ctx.cfg.leaseSeconds;
      try {
        await setLeaseCommand(services).run({ batchName: rec.batch, expireTime: until }, ctx.handler('lease', ctx.cfg.rpcTimeoutMs));
        writeJsonAtomic(batchFile(ctx, rec.batch), { ...rec, leaseExpiresAt: until } satisfies BatchRecord);
      } catch (err) {
        ctx.log.warn(`blahp status: renewing the lease of ${rec.batch} failed: ${(err as Error).message}`);
      }
    }
  }
}

