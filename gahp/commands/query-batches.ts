/**
 * BOINC_QUERY_BATCHES <reqid> <min_mod_time> <nbatches> <batch_name>...
 *
 * One query_batch2 for all the named batches. Success: `NULL <server_time>` then, per
 * batch in the order asked, `<n>` and n `<job_name> <status>` pairs. UNSENT becomes
 * NOT_STARTED (the gridmanager's word); the other statuses pass through. min_mod_time and
 * server_time are passed through as strings. Errors keep the server's text at the end
 * (`query_batch2 failed: no batch named <name>`, which the gridmanager parses).
 *
 * BOINC keeps a job's mod_time in whole seconds while server_time has a fraction, so a job
 * that changes later in the same second as a poll has mod_time <= that poll's server_time
 * and a query from it would never report the change: HTCondor would wait forever for a job
 * that is DONE. So an incremental query asks the server from one whole second earlier, and
 * the jobs whose status is the one this GAHP last reported for them are left out of the
 * answer again. The gridmanager sees its min_mod_time and the server's server_time as they
 * were, and every change exactly once or more, never less.
 *
 * Big replies (100 batches of 1,000 jobs) are built with yields to the event loop, and
 * recorded in the ledger as one journal entry holding only the statuses that changed.
 * Each query also checks the ledger's leases: a live batch whose lease ends within the
 * hour without renewal is warned about in the log (once per lease value).
 */
import { ArgumentError, expectArgCount, parseCount, parseNumber, type AsyncCommand, type HandlerContext } from '../protocol/commands.js';
import type { QueryBatch2Reply } from '../../boinc-rpc/types.js';
import type { LedgerQueryBatch } from '../ledger/types.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';

export interface QueryBatchesRequest {
  minModTime: string;
  batchNames: string[];
}

/** Job status words as the gridmanager knows them. */
export function gridStatus(boincStatus: string): string {
  return boincStatus === 'UNSENT' ? 'NOT_STARTED' : boincStatus;
}

const FINISHED = new Set(['DONE', 'ERROR']);
const LEASE_WARNING_SECONDS = 3600;
/** Yield to the event loop after this many jobs while building a reply. */
const YIELD_EVERY = 10_000;

export function parseQueryBatches(args: string[]): QueryBatchesRequest {
  expectArgCount(args, 2, Infinity);
  const [minModTime, countText] = args as [string, string];
  parseNumber(minModTime, 'min_mod_time');
  const n = parseCount(countText, 'number of batches', 1_000_000);
  if (args.length !== 2 + n) throw new ArgumentError(`${n} batch names announced, ${args.length - 2} given`);
  const batchNames = args.slice(2);
  if (batchNames.some((b) => b.length === 0)) throw new ArgumentError('empty batch name');
  return { minModTime, batchNames };
}

const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The result tokens, built with yields so a huge reply does not stall the protocol loop. */
/**
 * The status each job was last reported with, per batch, so that jobs re-read through the
 * one-second overlap (see above) are not reported again unchanged. In memory only: after a
 * restart the first answers may repeat a status, which the gridmanager takes in its stride.
 */
export class ReportedStatuses {
  private readonly batches = new Map<string, { jobs: Map<string, string>; usedAt: number }>();

  constructor(private readonly forgetAfterMs = 24 * 3600 * 1000) {}

  batch(accountKey: string, batchName: string): Map<string, string> {
    const key = `${accountKey}\n${batchName}`;
    const now = Date.now();
    let entry = this.batches.get(key);
    if (!entry) {
      entry = { jobs: new Map(), usedAt: now };
      this.batches.set(key, entry);
      // Batches not queried for a day are done with; keep memory bounded.
      for (const [k, e] of this.batches) if (now - e.usedAt > this.forgetAfterMs) this.batches.delete(k);
    }
    entry.usedAt = now;
    return entry.jobs;
  }
}

/**
 * The min_mod_time sent to the server for the one the gridmanager gave: `0` stays `0`
 * (a full query), any other time goes back to one second before its whole second.
 */
export function serverMinModTime(minModTime: string): string {
  const t = Number(minModTime);
  if (!(t > 0)) return minModTime;
  return String(Math.max(0, Math.floor(t) - 1));
}

/**
 * The result tokens, built with yields so a huge reply does not stall the protocol loop.
 * With `reported` (incremental queries), jobs whose status equals the one last reported are
 * left out; every job reported is recorded there.
 */
export async function buildQueryResult(
  reply: QueryBatch2Reply,
  batchNames: readonly string[],
  reported?: { for(batchName: string): Map<string, string>; skipUnchanged: boolean },
): Promise<{ tokens: string[]; ledger: LedgerQueryBatch[] }> {
  const batchCount = batchNames.length;
  if (reply.batches.length !== batchCount) {
    throw new Error(`query_batch2 failed: the server reported ${reply.batches.length} batches for ${batchCount} asked`);
  }
  let total = 2 + batchCount;
  for (const b of reply.batches) total += 2 * b.jobs.length;
  const tokens = new Array<string>(total);
  let t = 0;
  tokens[t++] = 'NULL';
  tokens[t++] = reply.serverTime;
  const ledger: LedgerQueryBatch[] = [];
  let sinceYield = 0;
  for (let k = 0; k < batchCount; k++) {
    const b = reply.batches[k]!;
    const countAt = t++;
    const last = reported?.for(batchNames[k]!);
    const skip = reported?.skipUnchanged === true;
    const pairs: Array<readonly [string, string]> = [];
    for (let i = 0; i < b.jobs.length; i++) {
      const job = b.jobs[i]!;
      const status = gridStatus(job.status);
      if (last) {
        if (skip && last.get(job.name) === status) continue;
        last.set(job.name, status);
      }
      tokens[t++] = job.name;
      tokens[t++] = status;
      pairs.push([job.name, status]);
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldNow();
      }
    }
    tokens[countAt] = String(pairs.length);
    ledger.push({ name: batchNames[k]!, jobs: pairs });
  }
  tokens.length = t;
  return { tokens, ledger };
}

export function queryBatchesCommand(services: GahpServices): AsyncCommand<BoundRequest<QueryBatchesRequest>> {
  /** `<project>\n<batch>\n<lease>` already warned about. */
  const warned = new Set<string>();
  const reported = new ReportedStatuses();

  function checkLeases(projectUrl: string, names: string[], ctx: HandlerContext): void {
    const now = Date.now() / 1000;
    for (const name of names) {
      const rec = services.ledger.get(projectUrl, name);
      if (!rec || rec.state === 'retired' || rec.leaseExpiresAt === undefined) continue;
      const left = rec.leaseExpiresAt - now;
      if (left > LEASE_WARNING_SECONDS) continue;
      const k = `${projectUrl}\n${name}\n${rec.leaseExpiresAt}`;
      if (warned.has(k)) continue;
      // Only batches with unfinished jobs need their lease (built lazily: only now).
      const unfinished = Object.values(rec.jobs).filter((s) => !FINISHED.has(s)).length;
      if (unfinished === 0) continue;
      warned.add(k);
      const when = new Date(rec.leaseExpiresAt * 1000).toISOString();
      ctx.log.warn(
        left > 0
          ? `lease of batch ${name} ends in ${Math.round(left / 60)} min (${when}) and has not been renewed; ${unfinished} jobs unfinished`
          : `lease of batch ${name} ended at ${when} without renewal; ${unfinished} jobs unfinished: the server may delete them`,
      );
    }
  }

  return {
    kind: 'async',
    name: 'BOINC_QUERY_BATCHES',
    usage: '<reqid> <min_mod_time> <nbatches> <batch_name>...',
    summary: 'Report the status of the jobs of some batches (those changed since min_mod_time).',
    parse: parseBound(services, parseQueryBatches),
    async run(bound, ctx) {
      const req = bound.request;
      const { project, rpc, accountKey } = projectOf(bound);
      const t0 = performance.now();
      const askFrom = serverMinModTime(req.minModTime);
      const reply = await rpc.queryBatch2(askFrom, req.batchNames, { signal: ctx.signal });
      const t1 = performance.now();
      const { tokens, ledger } = await buildQueryResult(reply, req.batchNames, {
        for: (batchName) => reported.batch(accountKey, batchName),
        skipUnchanged: askFrom !== req.minModTime,
      });
      const t2 = performance.now();
      // Recorded in the background: the gridmanager need not wait for the ledger (its
      // update runs in slices with yields, then one journal line and its fdatasync; close()
      // at shutdown waits for it). The lease check reads the updated records after.
      services.ledger
        .recordQuery(project.url, reply.serverTime, ledger)
        .then(
          () => ctx.log.debug(`query ${ctx.reqId}: statuses journalled ${(performance.now() - t2).toFixed(0)} ms after the reply was built`),
          (err) => ctx.log.error(`ledger: could not record the statuses of query ${ctx.reqId}: ${(err as Error).message}`),
        )
        .then(() => checkLeases(project.url, req.batchNames, ctx))
        .catch((err) => ctx.log.error(`lease check failed: ${(err as Error).message}`));
      ctx.log.debug(
        `query ${ctx.reqId}: ${req.batchNames.length} batches, ${(tokens.length - 2 - req.batchNames.length) / 2} jobs; ` +
          `query_batch2 ${(t1 - t0).toFixed(0)} ms, result ${(t2 - t1).toFixed(0)} ms`,
      );
      return tokens;
    },
  };
}
