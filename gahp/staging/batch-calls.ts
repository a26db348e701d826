/**
 * BOINC_SUBMIT's calls on the batch itself, each safe to use after a crash or a lost
 * reply: looking a batch up by name, creating it (never two of one name from one
 * attempt), waiting for an interrupted submit_batch to settle, and submit_batch (an
 * uncertain failure is checked on the server before it counts as one). The retry limits
 * are those of README, "Retries and time to error".
 */
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { MAX_TIMED_OUT_ATTEMPTS, Retries, type RetryPolicy } from '../../boinc-rpc/retry.js';
import type { BoincRpc, QueryBatchReply, SubmitJob } from '../../boinc-rpc/types.js';
import { sleep } from '../util.js';
import type { SubmitRequest } from './parse.js';

const noSuchBatch = (err: unknown) => err instanceof BoincRpcError && err.kind === 'server' && err.code === 'no-such-batch';

/**
 * Repeats of create_batch and of a submit_batch that cannot have reached the server: at
 * most four attempts, 300, 600, 1200 ms apart, none after a second one that timed out.
 */
const SUBMIT_RETRY: RetryPolicy = { baseMs: 300, capMs: 30_000, jitter: false, maxAttempts: 4, maxTimeouts: MAX_TIMED_OUT_ATTEMPTS };

/** Waits ms (less when the signal fires), then throws if the signal fired. */
async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, signal);
  signal.throwIfAborted();
}

/**
 * query_batch by name: undefined when the server has no such batch. Today's BOINC answers
 * an empty batch like any other; servers from before 2017 read the output template of the
 * batch's first job, which a batch without jobs lacks, and die (fatal reply,
 * docs/boinc-server.md). Then query_batch2 tells whether the batch exists and which jobs it
 * holds, and the id comes from the ledger (knownId).
 */
export async function findBatch(rpc: BoincRpc, batchName: string, knownId: number | undefined, signal: AbortSignal): Promise<QueryBatchReply | undefined> {
  try {
    return await rpc.queryBatch({ batchName, signal });
  } catch (err) {
    if (noSuchBatch(err)) return undefined;
    if (!(err instanceof BoincRpcError) || err.kind !== 'fatal') throw err;
    let reply;
    try {
      reply = await rpc.queryBatch2('0', [batchName], { signal });
    } catch (err2) {
      if (noSuchBatch(err2)) return undefined;
      throw err2;
    }
    const jobs = (reply.batches[0]?.jobs ?? []).map((j, i) => ({ id: -1 - i, name: j.name, status: j.status }));
    if (knownId === undefined && jobs.length === 0) {
      throw new Error(`batch ${batchName} exists on the server without jobs, but query_batch cannot give its id (${err.message})`, { cause: err });
    }
    return { id: knownId ?? -1, name: batchName, state: jobs.length > 0 ? 1 : 0, njobs: jobs.length, jobs };
  }
}

/**
 * create_batch. A failure that may have taken effect is checked with query_batch before
 * anything is repeated: never two batches of one name (an empty batch of the name found
 * then is the one the failed call made: the submit found none before it). At most four attempts, and none
 * after a second one that timed out.
 */
export async function createBatch(rpc: BoincRpc, req: SubmitRequest, expireTime: number, signal: AbortSignal): Promise<number> {
  const retries = new Retries(SUBMIT_RETRY);
  for (;;) {
    try {
      return await rpc.createBatch({ batchName: req.batchName, appName: req.appName, expireTime, signal });
    } catch (err) {
      if (!(err instanceof BoincRpcError)) throw err;
      const delay = retries.next(err);
      if (delay === undefined || err.kind === 'server' || err.kind === 'local') throw err;
      await pause(delay, signal);
      if (err.uncertain || err.kind === 'fatal') {
        // It may have been created: look before creating again (twice, in case it is
        // still being processed).
        for (let look = 0; look < 2; look++) {
          const found = await findBatch(rpc, req.batchName, undefined, signal);
          if (found) {
            if (found.jobs.length > 0 || found.state !== 0) throw new Error(`batch ${req.batchName} appeared on the server with ${found.jobs.length} jobs in state ${found.state}`, { cause: err });
            return found.id;
          }
          if (look === 0) await pause(1000, signal);
        }
      }
    }
  }
}

/**
 * query_batch until the batch's job count has not changed for settleMs (a submit_batch
 * whose client went away may still be creating jobs on the server), at most `rounds` looks.
 */
export async function settledBatch(rpc: BoincRpc, batchName: string, signal: AbortSignal, first?: QueryBatchReply, settleMs = 2000, rounds = 6): Promise<QueryBatchReply | undefined> {
  let cur = first ?? (await findBatch(rpc, batchName, undefined, signal));
  for (let i = 0; cur && i < rounds; i++) {
    await pause(settleMs, signal);
    const next = await findBatch(rpc, batchName, undefined, signal);
    if (!next || next.jobs.length === cur.jobs.length) return next;
    cur = next;
  }
  return cur;
}

/**
 * submit_batch. Only a failure that certainly did not reach the server is repeated; after
 * an uncertain one the batch is looked at: holding all the jobs means success.
 */
export async function submitBatch(rpc: BoincRpc, req: SubmitRequest, batchId: number, jobs: SubmitJob[], signal: AbortSignal): Promise<void> {
  const retries = new Retries(SUBMIT_RETRY);
  for (;;) {
    try {
      const req2 = { batchId, batchName: req.batchName, appName: req.appName, jobParams: req.jobParams, jobs, signal };
      await rpc.submitBatch(req.appVersionNum !== undefined ? { ...req2, appVersionNum: req.appVersionNum } : req2);
      return;
    } catch (err) {
      if (!(err instanceof BoincRpcError)) throw err;
      // Timed-out attempts are not counted here: these never reached the server.
      const delay = err.kind === 'transport' && !err.uncertain ? retries.next() : undefined;
      if (delay !== undefined) {
        await pause(delay, signal);
        continue;
      }
      if (err.aborted) throw err;
      if (err.uncertain || err.kind === 'fatal' || err.kind === 'transport') {
        // The server may still be creating the jobs (BOINC's create_work is slow): look
        // until their number stops growing.
        const found = await settledBatch(rpc, req.batchName, signal).catch(() => undefined);
        if (found) {
          const have = new Set(found.jobs.map((j) => j.name));
          const missing = jobs.filter((j) => !have.has(j.name)).length;
          if (missing === 0) return;
          throw new Error(`${err.message} (the batch now holds ${jobs.length - missing} of the ${jobs.length} jobs; a repeated BOINC_SUBMIT completes it)`, { cause: err });
        }
      }
      throw err;
    }
  }
}

/** How long withdrawing a cut submit may take (it runs after the command's own signal has fired). */
const WITHDRAW_MS = 15_000;

/**
 * What a BOINC_SUBMIT cut by its command deadline after submit_batch went out may have left:
 * jobs the gridmanager will never fetch. It takes the error result as the end of the batch
 * (the jobs are held; released, they go into a new batch of a new name:
 * docs/gahp-protocol.md), so the jobs the server holds are aborted and the batch retired.
 * Runs on its own bounded signal (the command's has fired). Returns how many jobs it aborted.
 */
export async function withdrawBatch(rpc: BoincRpc, batchName: string, batchId: number): Promise<number> {
  const signal = AbortSignal.timeout(WITHDRAW_MS);
  const found = await findBatch(rpc, batchName, batchId, signal);
  if (!found) return 0;
  const names = found.jobs.map((j) => j.name);
  if (names.length > 0) await rpc.abortJobs(names, { signal });
  await rpc.retireBatch({ batchName, signal });
  return names.length;
}
