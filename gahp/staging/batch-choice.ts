/**
 * What BOINC_SUBMIT does with a batch of its name that the server already has (step 4 of
 * gahp/commands/submit.ts): an earlier attempt left it (a crash, a lost reply, another
 * state directory), and BOINC would accept a second batch of the name while every lookup
 * by name picks the first (docs/boinc-server.md), so the jobs must go into this one:
 * - it holds exactly these jobs: nothing to do;
 * - in init state, holding some or none of them and no other job: reused, its lease
 *   renewed, only the missing jobs submitted;
 * - anything else (other jobs, another app, not in init state): the submit fails.
 */
import type { BoincRpc, QueryBatchReply } from '../../boinc-rpc/types.js';
import type { Logger } from '../log.js';
import type { LedgerBatch, LedgerBatchPatch } from '../ledger/types.js';
import type { SubmitJobSpec, SubmitRequest } from './parse.js';
import { settledBatch } from './batch-calls.js';
import { SubmitError, step } from './steps.js';

export interface ExistingBatchContext {
  rpc: BoincRpc;
  req: SubmitRequest;
  /** The jobs, checked against the template and in its order. */
  jobs: readonly SubmitJobSpec[];
  /** The ledger's record of this name when the command started. */
  record: LedgerBatch | undefined;
  /** Updates this batch's ledger record. */
  recordBatch(patch: LedgerBatchPatch): Promise<unknown>;
  leaseSeconds: number;
  log: Logger;
  /** `BOINC_SUBMIT <reqid> <batch>`, for the log. */
  tag: string;
  signal: AbortSignal;
}

export type ExistingBatch =
  /** The server holds exactly these jobs already. */
  | { kind: 'complete'; batchId: number; recordNeeded: boolean }
  /**
   * Left by an earlier attempt, in init state. `linked`: the files the ledger recorded as
   * linked to it (the rest may be linked or not: upload.ts).
   */
  | { kind: 'reuse'; batchId: number; toSubmit: SubmitJobSpec[]; linked: ReadonlySet<string> };

export async function useExisting(c: ExistingBatchContext, existing: QueryBatchReply): Promise<ExistingBatch> {
  const { req, record, jobs } = c;
  const ours = new Set(jobs.map((j) => j.name));
  const theirs = existing.jobs.map((j) => j.name);
  const foreign = theirs.filter((n) => !ours.has(n));
  if (existing.appName !== undefined && existing.appName !== '' && existing.appName !== req.appName) {
    throw new SubmitError(`batch ${req.batchName} already exists on the server for app ${existing.appName}, not ${req.appName}`);
  }
  if (foreign.length > 0) {
    throw new SubmitError(`batch ${req.batchName} already exists on the server with ${theirs.length} jobs, ${foreign.length} of them not in this submit (e.g. ${foreign[0]})`);
  }
  const present = new Set(theirs);
  if (present.size === ours.size) {
    c.log.info(`${c.tag}: the server already holds this batch (id ${existing.id}) with exactly these ${ours.size} jobs: nothing to do`);
    return { kind: 'complete', batchId: existing.id, recordNeeded: record?.state !== 'submitted' || (existing.id > 0 && record.batchId !== existing.id) };
  }
  if (existing.state !== 0) {
    throw new SubmitError(`batch ${req.batchName} already exists on the server in state ${existing.state} with ${present.size} of the ${ours.size} jobs: it cannot take more`);
  }
  if (existing.id <= 0) throw new SubmitError(`batch ${req.batchName} exists on the server with ${present.size} of the ${ours.size} jobs, but its id is unknown`);
  if (present.size > 0) {
    // An earlier submit_batch may still be creating jobs: wait until it is done, then
    // look again (it may have completed the batch).
    const settled = await step('waiting for an interrupted submit_batch to settle (query_batch)', () => settledBatch(c.rpc, req.batchName, c.signal, existing));
    const now = new Set(settled?.jobs.map((j) => j.name) ?? []);
    if (!settled || [...now].some((n) => !ours.has(n)) || settled.state !== 0 || now.size !== present.size) {
      if (settled && now.size === ours.size && [...now].every((n) => ours.has(n))) return { kind: 'complete', batchId: settled.id, recordNeeded: true };
      throw new SubmitError(`batch ${req.batchName} changed on the server while it was being checked (${now.size} jobs, state ${settled?.state ?? 'gone'}): repeat the submit`);
    }
  }
  const batchId = existing.id;
  // What the ledger recorded as linked holds for this very batch only.
  const linked = record?.batchId === batchId && record.state !== 'creating' ? record.physFiles : [];
  c.log.info(`${c.tag}: reusing batch ${batchId} left by an earlier attempt (${present.size} of ${ours.size} jobs present, ${linked.length} files known linked)`);
  // Its lease may be short or past (the server may then collect it): give it a full one.
  const expireTime = Math.floor(Date.now() / 1000) + c.leaseSeconds;
  await step('renewing the lease of the existing batch (set_expire_time)', () => c.rpc.setExpireTime(req.batchName, expireTime, { signal: c.signal }));
  await c.recordBatch({ state: 'staging', batchId, leaseExpiresAt: expireTime, physFiles: linked });
  return { kind: 'reuse', batchId, toSubmit: jobs.filter((j) => !present.has(j.name)), linked: new Set(linked) };
}
