/**
 * Which batch a BOINC_SUBMIT fills (step 4 of gahp/commands/submit.ts): a new one, one an
 * earlier attempt left (reused: only its missing jobs are submitted), or none when the
 * server already holds exactly these jobs. Anything else fails before a job is sent.
 *
 * The server is asked (query_batch) even for a name the ledger does not know: a batch made
 * behind this ledger's back (another state directory, a lost one, an earlier GAHP) and
 * left empty is resubmitted by the gridmanager, and BOINC accepts a second batch of the
 * same name while every lookup by name picks the lowest id (docs/boinc-server.md): jobs in
 * a batch created next to it would never be seen. For a name the ledger knows, the answer
 * is awaited before anything is created. For one it does not know, create_batch does not
 * wait for it (three sequential calls for a warm submit instead of four: "Round trips" in
 * docs/architecture.md); the answer still decides before any file is linked to our batch
 * or any job submitted. The cases, by when the server processed the lookup (all rest on
 * lookups by name picking the lowest id, as measured on the real server):
 *
 * - answered before create_batch is sent: as for a known name (nothing is created when a
 *   batch exists);
 * - shows no batch: processed before our create_batch committed, when no batch of the name
 *   existed, so ours is the first of its name: go on with ours;
 * - shows our id: ours is the lowest id of the name, the one every lookup finds: go on;
 * - shows another id: processed before our batch existed (then the other is older), or
 *   after (then lookups pick the other, so it is older). Either way that batch is where the
 *   jobs must go. Ours, still empty, is retired by its id (never by name: that would hit
 *   the other one) and the other is taken as if found first: reused, complete, or an error
 *   (other jobs, another app). If retiring fails, ours stays empty until its lease ends;
 *   lookups never find it;
 * - create_batch failed but the lookup shows a batch: that one is taken as if found first.
 *   An id create_batch's own recovery found (after an uncertain failure) is not counted as
 *   ours: it may be the older batch, whose lease must be renewed and files linked one by one;
 * - create_batch failed and the lookup shows none: the submit fails, as before;
 * - the lookup failed: the submit fails. A batch we created is recorded ('staging' with its
 *   id) for the repeat, which asks the server first (the ledger knows the name then) and
 *   gets the lowest id of the name, ours or an older one. Except when the lookup failed
 *   because the batch it found has no jobs and query_batch died on it (BatchIdUnknownError,
 *   only on BOINC servers from before 2017: docs/boinc-server.md; no id, it may be ours or
 *   an older one): then our id is not recorded, so no repeat takes that batch for ours; the
 *   name fails until the batch gets jobs or is removed, as it did before for an empty batch
 *   behind the ledger on such a server.
 *
 * A crash after create_batch and before retiring ours leaves the ledger at 'creating': the
 * repeat asks first and takes the batch lookups find; ours stays empty until its lease ends.
 */
import type { BoincRpc, QueryBatchReply } from '../../boinc-rpc/types.js';
import type { Logger } from '../log.js';
import type { LedgerBatch, LedgerBatchPatch } from '../ledger/types.js';
import type { SubmitJobSpec, SubmitRequest } from './parse.js';
import { BatchIdUnknownError, createBatch, findBatch, settledBatch } from './batch-calls.js';
import { SubmitError, step, stepError } from './steps.js';
import { errorMessage } from '../util.js';

/** query_batch for the batch name, sent when the command starts. */
export class BatchLookup {
  readonly answer: Promise<QueryBatchReply | undefined>;
  /** Whether the answer (or failure) has come. */
  answered = false;

  constructor(rpc: BoincRpc, batchName: string, knownId: number | undefined, signal: AbortSignal) {
    this.answer = findBatch(rpc, batchName, knownId, signal);
    this.answer.then(
      () => (this.answered = true),
      () => (this.answered = true),
    );
  }
}

export interface BatchChoiceContext {
  rpc: BoincRpc;
  req: SubmitRequest;
  /**
   * The jobs, checked against the template and in its order. A promise: with no template
   * seen yet for the app, the batch is looked up and created while get_templates is
   * answered (gahp/commands/submit.ts); only an existing batch needs the jobs to decide.
   * A rejection (the jobs do not fit) fails the choice when it needs them.
   */
  jobs: Promise<readonly SubmitJobSpec[]>;
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
  if (c.record === undefined && !c.lookup.answered) {
    await recordCreating(c);
    if (!c.lookup.answered) return createAlongsideLookup(c);
  }
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

/** create_batch sent without waiting for the lookup; the lookup's answer decides (see the header). */
async function createAlongsideLookup(c: BatchChoiceContext): Promise<BatchChoice> {
  const expireTime = leaseEnd(c);
  const [made, found] = await Promise.allSettled([createBatch(c.rpc, c.req, expireTime, c.signal), c.lookup.answer]);
  if (found.status === 'rejected') {
    if (made.status === 'rejected') throw stepError('create_batch', made.reason);
    if (!(found.reason instanceof BatchIdUnknownError)) await recordStaging(c, made.value.batchId, expireTime).catch(() => undefined);
    throw stepError(LOOKUP_STEP, found.reason);
  }
  const ours = made.status === 'fulfilled' && !made.value.recovered ? made.value.batchId : undefined;
  const existing = found.value;
  if (existing && existing.id !== ours) {
    if (ours !== undefined) await retireOurs(c, ours, existing);
    return takeExisting(c, existing);
  }
  if (made.status === 'rejected') throw stepError('create_batch', made.reason);
  return { kind: 'new', batchId: made.value.batchId, staging: recordStaging(c, made.value.batchId, expireTime) };
}

/**
 * Retires the batch this command just made, by its id: another batch of the name is the
 * one lookups find. Ours holds no job and no file is linked to it yet; if retiring fails
 * it stays empty until its lease ends (lookups still find the other).
 */
async function retireOurs(c: BatchChoiceContext, ours: number, other: QueryBatchReply): Promise<void> {
  c.log.info(`${c.tag}: batch ${other.id} of this name already exists on the server (made before ours, ${ours}): ${ours} is retired, the jobs go into ${other.id}`);
  try {
    await c.rpc.retireBatch({ batchId: ours, signal: c.signal });
  } catch (err) {
    c.signal.throwIfAborted();
    c.log.warn(`${c.tag}: retiring the batch ${ours} made by this submit failed (${errorMessage(err)}); it stays empty until its lease ends`);
  }
}

/** A batch of this name exists: it is complete, reusable (init state, only our jobs), or an error. */
async function takeExisting(c: BatchChoiceContext, existing: QueryBatchReply): Promise<BatchChoice> {
  const { req, record } = c;
  const jobs = await c.jobs;
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
