/**
 * Which batch a BOINC_SUBMIT fills (step 4 of gahp/commands/submit.ts): a new one, one an
 * earlier attempt left (reused: only its missing jobs are submitted), or none when the
 * server already holds exactly these jobs. Anything else fails before a job is sent.
 *
 * The server is asked (query_batch) even for a name the ledger does not know: a batch made
 * behind this ledger's back (another state directory, a lost one, an earlier GAHP) and
 * left empty is resubmitted by the gridmanager, and BOINC accepts a second batch of the
 * same name while every lookup by name picks the lower id (docs/boinc-server.md): a batch
 * created next to it would hold jobs nobody ever sees. Its answer is awaited before
 * anything is created (docs/architecture.md, "Round trips").
 */
import type { BoincRpc, QueryBatchReply } from '../../boinc-rpc/types.js';
import type { Logger } from '../log.js';
import type { LedgerBatch, LedgerBatchPatch } from '../ledger/types.js';
import type { SubmitJobSpec, SubmitRequest } from './parse.js';
import { createBatch, findBatch, settledBatch } from './batch-calls.js';
import { SubmitError, step } from './steps.js';

/** query_batch for the batch name, sent when the command starts. */
export class BatchLookup {
  readonly answer: Promise<QueryBatchReply | undefined>;

  constructor(rpc: BoincRpc, batchName: string, knownId: number | undefined, signal: AbortSignal) {
    this.answer = findBatch(rpc, batchName, knownId, signal);
    // Awaited later, or never when an earlier step fails.
    this.answer.catch(() => undefined);
  }
}

export interface BatchChoiceContext {
  rpc: BoincRpc;
  req: SubmitRequest;
  /** The jobs, checked against the template and in its order. */
  jobs: readonly SubmitJobSpec[];
  lookup: BatchLookup;
  /** The ledger's record of this name when the command started. */
  record: LedgerBatch | undefined;
  /** The 'creating' record, written early when the ledger did not know the name. */
  creatingRecorded: Promise<unknown> | undefined;
  /** Updates this batch's ledger record. */
  recordBatch(patch: LedgerBatchPatch): Promise<unknown>;
  leaseSeconds: number;
  log: Logger;
  /** `BOINC_SUBMIT <reqid> <batch>`, for the log. */
  tag: string;
  signal: AbortSignal;
}

export type BatchChoice =
  /** The server holds exactly these jobs already: nothing to submit. */
  | { kind: 'complete'; batchId: number; recordNeeded: boolean }
  /** A batch made by this command; `staging` is its ledger record being written. */
  | { kind: 'new'; batchId: number; staging: Promise<unknown> }
  /** A batch left by an earlier attempt, in init state, holding some or none of the jobs. */
  | { kind: 'reuse'; batchId: number; toSubmit: SubmitJobSpec[] };

const LOOKUP_STEP = 'looking for an existing batch (query_batch)';

const leaseEnd = (c: BatchChoiceContext) => Math.floor(Date.now() / 1000) + c.leaseSeconds;

export async function chooseBatch(c: BatchChoiceContext): Promise<BatchChoice> {
  const existing = await step(LOOKUP_STEP, () => c.lookup.answer);
  if (existing) return takeExisting(c, existing);
  await recordCreating(c);
  const expireTime = leaseEnd(c);
  const { batchId } = await step('create_batch', () => createBatch(c.rpc, c.req, expireTime, c.signal));
  if (c.record?.batchId !== undefined && c.record.batchId !== batchId) c.log.info(`${c.tag}: the ledger's batch ${c.record.batchId} is gone from the server`);
  return { kind: 'new', batchId, staging: recordStaging(c, batchId, expireTime) };
}

/** The ledger knows we may be creating the batch before create_batch can go out. */
async function recordCreating(c: BatchChoiceContext): Promise<void> {
  await (c.creatingRecorded ?? c.recordBatch({ app: c.req.appName, state: 'creating', physFiles: [], jobs: {} }));
}

/**
 * Not waited for here: staging starts at once. Until this is durable a crash leaves
 * 'creating', whose repeat finds the batch by name (query_batch).
 */
function recordStaging(c: BatchChoiceContext, batchId: number, expireTime: number): Promise<unknown> {
  const recorded = c.recordBatch({ state: 'staging', batchId, leaseExpiresAt: expireTime });
  recorded.catch(() => undefined);
  return recorded;
}

/** A batch of this name exists: it is complete, reusable (init state, only our jobs), or an error. */
async function takeExisting(c: BatchChoiceContext, existing: QueryBatchReply): Promise<BatchChoice> {
  const { req, jobs, record } = c;
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
  c.log.info(`${c.tag}: reusing batch ${batchId} left by an earlier attempt (${present.size} of ${ours.size} jobs present)`);
  // Its lease may be short or past (the server may then collect it): give it a full one.
  const expireTime = leaseEnd(c);
  await step('renewing the lease of the existing batch (set_expire_time)', () => c.rpc.setExpireTime(req.batchName, expireTime, { signal: c.signal }));
  await c.recordBatch({ app: req.appName, state: 'staging', batchId, leaseExpiresAt: expireTime });
  return { kind: 'reuse', batchId, toSubmit: jobs.filter((j) => !present.has(j.name)) };
}
