/**
 * BOINC_SUBMIT <reqid> <batch_name> <app_name> <njobs> (<job_name> <nargs> <arg>...
 *   <ninputs> (<src_path> <dst_name>)...){njobs} [<rsc_fpops_est> ... <app_version_num>]
 * In order (a failure is reported as `<step>: <reason>`, staging/steps.ts):
 *  1. names and arguments checked to survive BOINC's create_work (no I/O, validate.ts);
 *  2. every input stat'ed: an existing, readable regular file, within the upload limits;
 *  3. get_templates and query_batch together, hashing meanwhile; inputs ordered by template;
 *  4. no batch of the name: create_batch (ledger 'creating' first); one there: done if it
 *     holds these jobs, reused if in init state with some of them, else an error
 *     (staging/batch-choice.ts);
 *  5. staging (stage-inputs.ts): each `condorv_<md5>` linked once, uploaded only if absent;
 *  6. submit_batch (batch-calls.ts), the ledger's record of the linked files written meanwhile;
 *     ledger 'submitted', with the refused jobs. A failure from 5 on withdraws the batch
 *     (withdrawAfterFailure).
 * A job failing a check of 1-3 that is its own is left out with its reason and the others
 * go on (JobRefusals); nothing is created when none is left. The batch's own checks (its
 * name, app, job parameters) fail the batch.
 * A warm submit waits for four calls: the lookups, create_batch, query_files, submit_batch.
 */
import type { BigIntStats } from 'node:fs';
import type { AppTemplates, SubmitJob } from '../../boinc-rpc/types.js';
import { PHP_DEFAULT_UPLOAD_LIMITS } from '../../boinc-rpc/upload-limits.js';
import type { LedgerBatchPatch } from '../ledger/types.js';
import type { AsyncCommand, HandlerContext } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import { createBatch, findBatch, submitBatch, withdrawBatch } from '../staging/batch-calls.js';
import { useExisting } from '../staging/batch-choice.js';
import { HashCache } from '../staging/hash-cache.js';
import { HashPool, hashSources, type HashedFile, type HashSourcesResult } from '../staging/hashing.js';
import { parseSubmitArgs, type SubmitJobSpec, type SubmitRequest } from '../staging/parse.js';
import { physName } from '../staging/plan.js';
import { PhaseProgress } from '../staging/progress.js';
import { HashFeed, stageInputs, type UploadSettings } from '../staging/stage-inputs.js';
import { withTemplateMemoryFloor } from '../staging/memory-bound.js';
import { SubmitError, step } from '../staging/steps.js';
import { checkBatchNames, inputCountProblem, jobProblem, nameTwiceProblem, orderInputs, statInputFiles, uniqueSources } from '../staging/validate.js';
import { uploadLimitProblem } from '../staging/upload.js';
import { keepingTemplates, withKeepingTemplates, type KeptJobs } from '../staging/keep-files.js';
import { KeyedLock, errorMessage } from '../util.js';

/**
 * What the ledger records of a submitted batch: its physical files, its jobs, and the jobs
 * left out with why (replacing any an earlier submit of the batch recorded): status
 * queries report those DONE and their fetch fails with the reason (docs/gahp-protocol.md,
 * "A job refused alone").
 */
function submittedPatch(jobs: readonly SubmitJobSpec[], h: HashSourcesResult, refused: JobRefusals): LedgerBatchPatch {
  const physFiles = new Set<string>();
  for (const job of jobs) for (const i of job.inputs) physFiles.add(physName(h.files.get(i.src)!.md5));
  // Null prototype: a job named `__proto__` is just a key.
  const jobsRec = Object.create(null) as Record<string, string>;
  for (const job of jobs) jobsRec[job.name] = 'SUBMITTED';
  const refusedRec = Object.create(null) as Record<string, string>;
  for (const [name, reason] of refused.reasons) refusedRec[name] = reason;
  return { state: 'submitted', physFiles: [...physFiles], jobs: jobsRec, refused: refusedRec };
}

/** What every BOINC_SUBMIT of this GAHP shares. */
interface SubmitShared {
  services: GahpServices;
  /** The hash cache is loaded on the first submit, in slices (a big one must not stall the protocol loop). */
  hashing(): Promise<{ cache: HashCache; pool: HashPool }>;
  upload: UploadSettings;
}

export function submitCommand(services: GahpServices): SubmitCommand {
  const { config, log } = services;
  /** One command per batch of one account at a time. */
  const batchLock = new KeyedLock();
  let cache: Promise<HashCache> | undefined;
  let pool: HashPool | undefined;
  const shared: SubmitShared = {
    services,
    async hashing() {
      cache ??= HashCache.openAsync(config.stateDir, (l) => log.warn(l));
      pool ??= new HashPool(Math.max(1, config.hashWorkers));
      return { cache: await cache, pool };
    },
    upload: {
      uploadConcurrency: config.uploadConcurrency,
      uploadBatchBytes: config.uploadBatchBytes,
      uploadBatchFiles: config.uploadBatchFiles ?? PHP_DEFAULT_UPLOAD_LIMITS.maxFileUploads,
      postMaxSize: config.postMaxSize ?? PHP_DEFAULT_UPLOAD_LIMITS.postMaxSize,
      uploadMaxFilesize: config.uploadMaxFilesize ?? PHP_DEFAULT_UPLOAD_LIMITS.uploadMaxFilesize,
    },
  };

  /** One batch: the checks that need nothing but the request, then the rest under the batch's lock. */
  async function submitJobs(bound: BoundRequest<SubmitRequest>, ctx: HandlerContext): Promise<SubmitOutcome> {
    const req = bound.request;
    try {
      const binding = projectOf(bound);
      // 1. Nothing is sent for a batch BOINC cannot carry, nor for a job it cannot.
      await step('checking names and arguments', () => checkBatchNames(req));
      const refused = new JobRefusals();
      const seen = new Set<string>();
      refused.add('checking names and arguments', req.jobs, (job) => jobProblem(job, seen));
      // One command per batch of one account at a time (the same batch name in another
      // project or account is another batch).
      const outcome = await batchLock.run(`${binding.accountKey}\n${req.batchName}`, () => submit(shared, req, binding, ctx, refused));
      for (const r of outcome.refused) log.warn(`BOINC_SUBMIT ${ctx.reqId} ${req.batchName}: job ${r.name} refused alone: ${r.reason}`);
      return outcome;
    } catch (err) {
      if (err instanceof SubmitError) throw err;
      throw new SubmitError(errorMessage(err));
    }
  }

  return {
    kind: 'async',
    name: 'BOINC_SUBMIT',
    usage: '<reqid> <batch_name> <app_name> <njobs> (<job_name> <nargs> <arg>... <ninputs> (<src_path> <dst_name>)...)... [<rsc_fpops_est> <rsc_fpops_bound> <rsc_memory_bound> <rsc_disk_bound> <delay_bound> <app_version_num>]',
    summary: 'Stage input files and submit a batch of jobs.',
    parse: parseBound(services, parseSubmitArgs),
    async run(bound, ctx) {
      // A job's own problem leaves that job out and the others go (docs/gahp-protocol.md,
      // "A job refused alone"): the ledger records it, a status query reports it DONE and
      // its fetch fails with the reason, which the gridmanager makes that job's hold reason.
      // An error reply would hold every job of the batch with one job's reason.
      // Reasons are kept per job name, so a name given twice fails the batch (the
      // gridmanager never sends one: its names hold cluster.proc).
      const twice = nameTwiceProblem(bound.request.jobs);
      if (twice) throw new SubmitError(`checking names and arguments: ${twice}`);
      const { refused } = await submitJobs(bound, ctx);
      // The reply is one line for the batch: with no job left, it is every job's reason.
      if (refused.length === bound.request.jobs.length) throw everyJobRefused(refused);
      return ['NULL'];
    },
    submitJobs,
  };
}

/** A job left out of its batch, and why: its own problem (the others were submitted). */
export interface RefusedJob {
  name: string;
  reason: string;
}

/** What a submit did beyond its batch: the jobs it refused alone. */
export interface SubmitOutcome {
  refused: RefusedJob[];
}

export interface SubmitCommand extends AsyncCommand<BoundRequest<SubmitRequest>> {
  /**
   * The submit for callers that answer for each job (the BLAH routes): a job with a problem
   * of its own (a name, an argument, an input missing, unreadable, over the project's upload
   * limits or not fitting the app's template) is left out with its reason, naming the job,
   * and the others are submitted; when every job is refused nothing is created. The ledger
   * records the refused jobs of a batch once it is submitted. BOINC_SUBMIT (run) does the
   * same and fails when every job is refused.
   */
  submitJobs(bound: BoundRequest<SubmitRequest>, ctx: HandlerContext): Promise<SubmitOutcome>;
}

/**
 * The most an error refusing a whole batch says: the gridmanager holds each of its jobs
 * with that error, and a hold reason keeps at most 1023 characters (docs/gahp-protocol.md,
 * "A job refused alone").
 */
const HOLD_REASON_MAX = 1023;

/**
 * The error for a batch none of whose jobs could be sent: each job's reason (each names
 * its job), as many as fit a hold reason with the count of the others (the first always).
 */
function everyJobRefused(refused: readonly RefusedJob[]): SubmitError {
  const others = (more: number) => (more > 0 ? `; and ${more} more job${more === 1 ? '' : 's'} refused (the GAHP's log has each reason)` : '');
  let text = `no job was sent to BOINC: ${refused[0]!.reason}`;
  let shown = 1;
  for (; shown < refused.length; shown++) {
    const longer = `${text}; ${refused[shown]!.reason}`;
    if (longer.length + others(refused.length - shown - 1).length > HOLD_REASON_MAX) break;
    text = longer;
  }
  return new SubmitError(text + others(refused.length - shown));
}

/** The jobs a submit refused: each with the step and problem that refused it. */
class JobRefusals {
  readonly reasons = new Map<string, string>();

  /** Checks each job not yet refused with `problemOf`; returns the jobs left. */
  add<J extends { name: string }>(stepName: string, jobs: readonly J[], problemOf: (job: J) => string | undefined): J[] {
    const left: J[] = [];
    for (const job of jobs) {
      if (this.reasons.has(job.name)) continue;
      const problem = problemOf(job);
      if (problem === undefined) {
        left.push(job);
        continue;
      }
      this.reasons.set(job.name, `${stepName}: ${problem}`);
    }
    return left;
  }

  outcome(): SubmitOutcome {
    return { refused: [...this.reasons].map(([name, reason]) => ({ name, reason })) };
  }
}

/** Step 3's hashing; each hash goes to `onHashed` as it is known. */
function startHashing(shared: SubmitShared, stats: Map<string, BigIntStats>, onHashed: (path: string, file: HashedFile) => void, ctx: HandlerContext, tag: string, t0: number, jobCount: number) {
  const { services } = shared;
  let hashBytes = 0;
  if (services.progress) for (const st of stats.values()) hashBytes += Number(st.size);
  const progress = new PhaseProgress(services.progress, ctx.reqId, 'hash', stats.size, hashBytes);
  const hashed = step('hashing input files', async () => {
    const { cache, pool } = await shared.hashing();
    return hashSources(stats, cache, pool, ctx.signal, onHashed, (n, b) => progress.add(n, b));
  });
  hashed.catch(() => undefined); // awaited by staging, or left when an earlier step fails
  hashed.then((h) => {
    progress.finish();
    services.log.info(`${tag}: ${jobCount} jobs, ${stats.size} input paths (${h.fromCache} hashes cached, ${h.hashed} hashed, ${h.hashedBytes} bytes) in ${Date.now() - t0} ms`);
  }, () => progress.stop());
  return hashed;
}

async function submit(shared: SubmitShared, request: SubmitRequest, binding: ProjectBinding, ctx: HandlerContext, refused: JobRefusals): Promise<SubmitOutcome> {
  const { services } = shared;
  const { config, ledger, log } = services;
  const { project, rpc } = binding;
  const { signal } = ctx;
  const tag = `BOINC_SUBMIT ${ctx.reqId} ${request.batchName}`;
  const t0 = Date.now();
  const recordBatch = (patch: LedgerBatchPatch) => ledger.upsert(project.url, request.batchName, { app: request.appName, ...patch });

  // 2. Nothing is asked or created before every input is there and can be uploaded.
  let req: SubmitRequest = { ...request, jobs: request.jobs.filter((j) => !refused.reasons.has(j.name)) };
  const checked = await step('checking input files', () => statInputFiles(uniqueSources(req.jobs)));
  const alone = rpc.uploadBodySize({ batchId: 2 ** 31 - 1, deleteTime: 2 ** 32 - 1 });
  for (const [src, st] of checked.stats) {
    const problem = uploadLimitProblem({ path: src, size: Number(st.size), physName: physName('0'.repeat(32)) }, shared.upload, alone);
    if (problem) checked.problems.set(src, problem);
  }
  // A file's problem is said per job: the gridmanager shows each job's reason on that job
  // alone, and the reason must say which job it is.
  const inputProblem = (job: SubmitJobSpec) => {
    for (const i of job.inputs) {
      const problem = checked.problems.get(i.src);
      if (problem) return `job ${job.name}: ${problem}`;
    }
    return undefined;
  };
  req = { ...req, jobs: refused.add('checking input files', req.jobs, inputProblem) };
  if (req.jobs.length === 0) return refused.outcome();
  const stats = checked.stats;
  // A file with a problem is only in refused jobs.
  for (const src of checked.problems.keys()) stats.delete(src);

  // 3. The template and what the server has of this name, hashing meanwhile (the hashes
  // are held until staging starts).
  const record = ledger.get(project.url, req.batchName);
  const lookups = Promise.all([
    step('get_templates', () => rpc.getTemplates({ appName: req.appName, signal })),
    step('looking for an existing batch (query_batch)', () => findBatch(rpc, req.batchName, record?.batchId, signal)),
  ]);
  // Once the lookups are on their way (they lead the critical path): a name the ledger does
  // not know is most likely created next, so its 'creating' record is made durable while
  // they are out; and the hashing, needed only once the batch exists.
  const creating = record === undefined ? recordBatch({ state: 'creating', physFiles: [], jobs: {} }) : undefined;
  creating?.catch(() => undefined);
  const feed = new HashFeed();
  const hashing = startHashing(shared, stats, feed.push, ctx, tag, t0, req.jobs.length);
  const [templates, existing] = await lookups;
  const fitting = refused.add('checking input files against the app template', req.jobs, (job) => inputCountProblem(job, templates.inputOpenNames));
  if (fitting.length === 0) return refused.outcome();
  const { jobs, reordered } = orderInputs(fitting, templates.inputOpenNames);
  req = { ...req, jobs };
  if (reordered) log.debug(`${tag}: inputs put in template order (${templates.inputOpenNames.join(', ')})`);

  // 4. The batch: a new one, or the one an earlier attempt left.
  let batch: { batchId: number; toSubmit: readonly SubmitJobSpec[]; reused: boolean; linked: ReadonlySet<string> };
  if (existing) {
    const found = await useExisting({ rpc, req, jobs, record, recordBatch, leaseSeconds: config.defaultLeaseSeconds, log, tag, signal }, existing);
    if (found.kind === 'complete') {
      if (found.recordNeeded || !sameRefusals(record?.refused, refused.reasons)) {
        await recordBatch({ ...(found.batchId > 0 ? { batchId: found.batchId } : {}), ...submittedPatch(jobs, await hashing, refused) });
      }
      return refused.outcome();
    }
    batch = { ...found, reused: true };
  } else {
    if (record?.batchId !== undefined) log.info(`${tag}: the ledger's batch ${record.batchId} is gone from the server`);
    await step('recording the batch in the ledger', () => creating ?? recordBatch({ state: 'creating', physFiles: [], jobs: {} }));
    const expireTime = Math.floor(Date.now() / 1000) + config.defaultLeaseSeconds;
    const batchId = await step('create_batch', () => createBatch(rpc, req, expireTime, signal));
    // Not waited for: the record written before submit_batch is (the journal keeps order).
    recordBatch({ state: 'staging', batchId, leaseExpiresAt: expireTime }).catch(() => undefined);
    batch = { batchId, toSubmit: jobs, reused: false, linked: new Set() };
  }

  // 5.-6. A failure from here on is the batch's end for the gridmanager (it holds the jobs
  // and puts them in a new batch when released), so the batch is withdrawn; a shutdown
  // (QUIT, EOF) is left alone: the next gridmanager repeats this submit.
  let staged: Awaited<ReturnType<typeof stageInputs>>;
  let linkedRecorded: Promise<unknown>;
  let tSubmit: number;
  try {
    // 5. Stage the files of the jobs still to submit, as their hashes arrive.
    const tStage = Date.now();
    staged = await stageInputs({
      rpc,
      ...batch,
      stats,
      feed,
      hashing,
      upload: shared.upload,
      leaseSeconds: config.defaultLeaseSeconds,
      progress: services.progress,
      reqId: ctx.reqId,
      log: (l) => log.info(`${tag}: ${l}`),
      signal,
    });
    const { report } = staged;
    log.info(`${tag}: ${staged.distinctFiles} distinct files: ${report.present} already on the server, ${report.uploaded} uploaded (${report.uploadedBytes} bytes, ${report.uploadRequests} upload_files requests, ${report.recoveries} recoveries) in ${Date.now() - tStage} ms`);

    // 6. Submit the jobs. A repeat after a crash links only what the ledger shows linked: that
    // record is written as submit_batch goes out, its fdatasync overlapping the call (should a
    // crash lose it, the repeat's links meet Duplicate entry, which staging recovers from).
    linkedRecorded = recordBatch({ state: 'staging', batchId: batch.batchId, physFiles: staged.linked });
    linkedRecorded.catch(() => undefined); // awaited below, or moot when submit_batch fails
    tSubmit = Date.now();
    const memory = withTemplateMemoryFloor(req.jobParams, templates.rscMemoryBound);
    if (memory.note) log.info(`${tag}: ${memory.note}`);
    const toSend = keptJobs(config.keepFiles, staged.boincJobs, templates, shared.upload.postMaxSize ?? PHP_DEFAULT_UPLOAD_LIMITS.postMaxSize, (jobs) =>
      rpc.submitBatchBodyBytes({ batchId: batch.batchId, batchName: req.batchName, appName: req.appName, appVersionNum: req.appVersionNum, jobParams: memory.params, jobs }),
    );
    if (toSend.note) log.warn(`${tag}: ${toSend.note}`);
    await step('submit_batch', () => submitBatch(rpc, { ...req, jobParams: memory.params }, batch.batchId, toSend.jobs, signal));
  } catch (err) {
    if (signal.aborted && !ctx.deadlinePassed?.()) throw err;
    throw await withdrawAfterFailure(err, { rpc, batchName: req.batchName, batchId: batch.batchId, recordBatch, log: (l) => log.info(`${tag}: ${l}`) });
  }
  await step('recording the batch in the ledger', () => linkedRecorded);
  await recordBatch({ batchId: batch.batchId, ...submittedPatch(jobs, staged.hashed, refused) });
  log.info(`${tag}: submitted ${staged.boincJobs.length} jobs into batch ${batch.batchId} in ${Date.now() - tSubmit} ms (total ${Date.now() - t0} ms)`);
  return refused.outcome();
}

/**
 * The jobs as submit_batch sends them: with `keepFiles`, each carries the app's templates
 * marked no_delete (gahp/staging/keep-files.ts), as far as the request stays within the
 * project's post_max_size.
 */
function keptJobs(keepFiles: boolean, jobs: SubmitJob[], templates: AppTemplates, postMaxSize: number, bodyBytes: (jobs: SubmitJob[]) => number): KeptJobs {
  if (!keepFiles) return { jobs };
  return withKeepingTemplates(jobs, keepingTemplates(templates), bodyBytes, postMaxSize);
}

/** Whether the ledger's refused jobs of a batch are exactly these. */
function sameRefusals(recorded: Record<string, string> | undefined, reasons: ReadonlyMap<string, string>): boolean {
  const entries = Object.entries(recorded ?? {});
  return entries.length === reasons.size && entries.every(([name, reason]) => reasons.get(name) === reason);
}

/**
 * Staging or submit_batch failed after the batch was made (or reused), or was cut by the
 * command deadline: the gridmanager takes the error as the batch's end and will fetch none
 * of its jobs, so the batch is withdrawn (any jobs it got aborted, the batch retired)
 * rather than left empty or running on the server. Returns the error to report, saying
 * what was done.
 */
async function withdrawAfterFailure(
  err: unknown,
  o: { rpc: ProjectBinding['rpc']; batchName: string; batchId: number; recordBatch: (patch: LedgerBatchPatch) => Promise<unknown>; log: (line: string) => void },
): Promise<Error> {
  let withdrawn: string;
  try {
    const n = await withdrawBatch(o.rpc, o.batchName, o.batchId);
    await o.recordBatch({ state: 'retired' }).catch(() => undefined);
    withdrawn = `; the batch was withdrawn (${n} job${n === 1 ? '' : 's'} aborted, batch retired): a released job goes into a new batch`;
  } catch (e) {
    withdrawn = `; withdrawing the batch failed too (${errorMessage(e)}): its jobs may run unfetched until its lease ends`;
  }
  o.log(`failed (${errorMessage(err)})${withdrawn}`);
  return new Error(`${errorMessage(err)}${withdrawn}`, { cause: err });
}
