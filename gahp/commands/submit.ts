/**
 * BOINC_SUBMIT <reqid> <batch_name> <app_name> <njobs> (<job_name> <nargs> <arg>...
 *   <ninputs> (<src_path> <dst_name>)...){njobs} [<rsc_fpops_est> <rsc_fpops_bound>
 *   <rsc_memory_bound> <rsc_disk_bound> <delay_bound> <app_version_num>]
 *
 * What happens, in order (each step's failure is reported as `<step>: <reason>`,
 * staging/steps.ts):
 *  1. checks with no I/O: batch, app and job names and every argument can be carried intact
 *     by BOINC's create_work (validate.ts); nothing is sent if not;
 *  2. every unique source path is an existing, readable regular file (nothing is created
 *     or uploaded before this; only the read-only get_templates and query_batch of steps 3
 *     and 4 are already on their way, and are cancelled if a file fails, and the ledger's
 *     'creating' record of a name it does not know is being written);
 *  3. get_templates(app), sent together with step 4's query_batch: each job's input count
 *     must match the input template; when every job's dst_names are the template's
 *     open_names, inputs go in template order. The template last seen for the project and
 *     app is used without waiting (it is cached in this GAHP); the fresh answer must agree
 *     before submit_batch, else the jobs are checked and ordered again by it. With none
 *     seen yet, step 4's batch choice (and create_batch) goes on while it is answered; jobs
 *     that do not fit leave the new batch empty for a corrected repeat to fill;
 *  4. meanwhile, from step 2 on: MD5 of each unique path (persistent cache, worker-thread
 *     pool); and which batch to fill (staging/batch-choice.ts), from what the server
 *     (query_batch, for every name) and the ledger know of a batch of this name:
 *     - none: create it (ledger 'creating' first, then create_batch with expire_time = now +
 *       lease, then ledger 'staging' with its id, written while staging starts). For a
 *       name the ledger does not know, create_batch does not wait for query_batch's answer;
 *       if that shows an older batch of the name, ours is retired and that one is taken;
 *     - one in init state holding none of our jobs or only some of them (an earlier attempt
 *       died): reuse it, submitting only the missing jobs;
 *     - one holding exactly our jobs: success, nothing created;
 *     - anything else (other jobs, another app, not in init state): fail;
 *  5. stage the files under `condorv_<md5>`, linked to the batch, as their hashes arrive
 *     (staging/stage-inputs.ts, upload.ts: batch-linked query_files, upload only what is
 *     absent in bounded concurrent upload_files requests, recovery through query_files
 *     without batch_id). Files this submit hashed itself (not in the hash cache) are asked
 *     about with query_files without batch_id while a new batch is created
 *     (staging/early-probe.ts): those found absent are uploaded as soon as it exists;
 *  6. submit_batch into that batch id (staging/batch-calls.ts): jobs in order, job params,
 *     app_version_num; ledger 'submitted'.
 * So a warm submit (template seen before, hashes cached, files on the server, a new batch
 * name) waits for three calls one after another: create_batch (query_batch and
 * get_templates alongside), query_files, submit_batch; a submit of new files (its first
 * of the app included) for three too: create_batch (the same two and the early
 * query_files alongside), upload_files, submit_batch. Commands for one batch (name,
 * project and account) run one at a time in this GAHP, each against the project selected
 * when its line was read. Hashing and staging report progress to services.progress, if
 * set (at a bounded rate; never on the protocol).
 *
 * Every RPC carries the command's signal: QUIT, EOF or the command timeout cancel calls in
 * flight (uploads included) at once. Retries are bounded in time (README, "Retries and time
 * to error"): create_batch is tried again after a timeout at most once.
 */
import type { BigIntStats } from 'node:fs';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import type { AppTemplates } from '../../boinc-rpc/types.js';
import { PHP_DEFAULT_UPLOAD_LIMITS } from '../../boinc-rpc/upload-limits.js';
import type { LedgerBatchPatch } from '../ledger/types.js';
import type { AsyncCommand, HandlerContext } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import { submitBatch } from '../staging/batch-calls.js';
import { BatchLookup, chooseBatch, type BatchChoice } from '../staging/batch-choice.js';
import { HashCache } from '../staging/hash-cache.js';
import { EarlyProbe } from '../staging/early-probe.js';
import { HashPool, hashSources, type HashedFile, type HashSourcesResult } from '../staging/hashing.js';
import { parseSubmitArgs, type SubmitJobSpec, type SubmitRequest } from '../staging/parse.js';
import { physName } from '../staging/plan.js';
import { PhaseProgress } from '../staging/progress.js';
import { HashFeed, stageInputs, type UploadSettings } from '../staging/stage-inputs.js';
import { SubmitError, step } from '../staging/steps.js';
import { checkInputFiles, checkNamesAndArguments, orderInputs, uniqueSources } from '../staging/validate.js';
import { KeyedLock, errorMessage, yieldNow } from '../util.js';

const sameNames = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((n, i) => n === b[i]);

/** What the ledger records of a submitted batch: its physical files and its jobs. */
function submittedPatch(jobs: readonly SubmitJobSpec[], h: HashSourcesResult): LedgerBatchPatch {
  const physFiles = new Set<string>();
  for (const job of jobs) for (const i of job.inputs) physFiles.add(physName(h.files.get(i.src)!.md5));
  // Null prototype: a job named `__proto__` is just a key.
  const jobsRec = Object.create(null) as Record<string, string>;
  for (const job of jobs) jobsRec[job.name] = 'SUBMITTED';
  return { state: 'submitted', physFiles: [...physFiles], jobs: jobsRec };
}

/** What every BOINC_SUBMIT of this GAHP shares. */
interface SubmitShared {
  services: GahpServices;
  /**
   * The input template last seen per project and app. Apps rarely change, so a submit
   * orders and checks its inputs with this one and does not wait for get_templates before
   * creating the batch; the fresh answer (asked for every time, alongside) is compared
   * before submit_batch, and a changed template is used instead (or fails the batch).
   */
  templateCache: Map<string, AppTemplates>;
  /** The hash cache is loaded on the first submit, in slices (a big one must not stall the protocol loop). */
  hashing(): Promise<{ cache: HashCache; pool: HashPool }>;
  upload: UploadSettings;
}

export function submitCommand(services: GahpServices): AsyncCommand<BoundRequest<SubmitRequest>> {
  const { config, log } = services;
  /** One command per batch of one account at a time. */
  const batchLock = new KeyedLock();
  let cache: Promise<HashCache> | undefined;
  let pool: HashPool | undefined;
  const shared: SubmitShared = {
    services,
    templateCache: new Map(),
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

  return {
    kind: 'async',
    name: 'BOINC_SUBMIT',
    usage: '<reqid> <batch_name> <app_name> <njobs> (<job_name> <nargs> <arg>... <ninputs> (<src_path> <dst_name>)...)... [<rsc_fpops_est> <rsc_fpops_bound> <rsc_memory_bound> <rsc_disk_bound> <delay_bound> <app_version_num>]',
    summary: 'Stage input files and submit a batch of jobs.',
    parse: parseBound(services, parseSubmitArgs),
    async run(bound, ctx) {
      const req = bound.request;
      try {
        const binding = projectOf(bound);
        // 1. Nothing is sent for a batch BOINC cannot carry.
        await step('checking names and arguments', () => checkNamesAndArguments(req));
        // One command per batch of one account at a time (the same batch name in another
        // project or account is another batch).
        return await batchLock.run(`${binding.accountKey}\n${req.batchName}`, () => submit(shared, req, binding, ctx));
      } catch (err) {
        if (err instanceof SubmitError) throw err;
        throw new SubmitError(errorMessage(err));
      }
    },
  };
}

/** get_templates, sent at once; the answer replaces the cached template (a server error drops it). */
function askTemplates(shared: SubmitShared, projectUrl: string, req: SubmitRequest, binding: ProjectBinding, signal: AbortSignal) {
  const key = `${projectUrl}\n${req.appName}`;
  const cached = shared.templateCache.get(key);
  const fresh = binding.rpc.getTemplates({ appName: req.appName, signal });
  fresh.then(
    (t) => shared.templateCache.set(key, t),
    (err: unknown) => {
      if (err instanceof BoincRpcError && err.kind === 'server') shared.templateCache.delete(key);
    },
  );
  fresh.catch(() => undefined);
  return { cached, fresh };
}

/** Step 4's hashing, started as soon as the files are checked; each hash goes to `onHashed` as it is known. */
function startHashing(shared: SubmitShared, stats: Map<string, BigIntStats>, onHashed: (path: string, file: HashedFile) => void, ctx: HandlerContext, tag: string, t0: number, jobCount: number) {
  const { services } = shared;
  let hashBytes = 0;
  if (services.progress) for (const st of stats.values()) hashBytes += Number(st.size);
  const progress = new PhaseProgress(services.progress, ctx.reqId, 'hash', stats.size, hashBytes);
  const hashed = step('hashing input files', async () => {
    const { cache, pool } = await shared.hashing();
    return hashSources(stats, cache, pool, ctx.signal, onHashed, (n, b) => progress.add(n, b));
  });
  hashed.catch(() => undefined);
  const done = { at: 0 };
  hashed.then((h) => {
    done.at = Date.now();
    progress.finish();
    services.log.info(`${tag}: ${jobCount} jobs, ${stats.size} input paths (${h.fromCache} hashes cached, ${h.hashed} hashed, ${h.hashedBytes} bytes) in ${done.at - t0} ms`);
  }, () => progress.stop());
  return { hashed, done };
}

type FittedJobs = { jobs: SubmitJobSpec[]; reordered: boolean };

/** Steps 3 and 4 as begun by fitAndChoose. */
type Begun =
  | { fitted: FittedJobs; usedTemplates: AppTemplates; choosing: Promise<BatchChoice> }
  | { fresh: Promise<{ t: AppTemplates; fit: FittedJobs }>; choosing: Promise<BatchChoice> | undefined };

/** A check that failed after the batch was created: the batch stays empty for a corrected repeat. */
function emptyBatchError(err: unknown, batchName: string): SubmitError {
  return new SubmitError(`${errorMessage(err)} (batch ${batchName} was created with no jobs; a corrected BOINC_SUBMIT of the same batch name fills it)`);
}

/**
 * Steps 3 and 4 begun. The jobs fitted to the cached template (when there is one and they
 * fit) and the batch choice started with them; else the fresh template asked for, and with
 * no template seen yet for the app the choice started too: the batch is looked up and
 * created while get_templates is answered, one call fewer one after another
 * (docs/architecture.md, "Round trips"). Only an existing batch needs the checked jobs to
 * decide; if they do not fit, the new batch stays empty, as after a template change. When
 * jobs that do not fit the cached template wait for the fresh one, nothing is started.
 */
async function fitAndChoose(
  templates: { cached: AppTemplates | undefined; fresh: Promise<AppTemplates> },
  fitTemplate: (t: AppTemplates) => Promise<FittedJobs>,
  choose: (jobs: Promise<readonly SubmitJobSpec[]>) => Promise<BatchChoice>,
): Promise<Begun> {
  if (templates.cached) {
    try {
      const fitted = await fitTemplate(templates.cached);
      const choosing = choose(Promise.resolve(fitted.jobs));
      choosing.catch(() => undefined);
      return { fitted, usedTemplates: templates.cached, choosing };
    } catch {
      // The app may have changed: decide on the fresh template.
    }
  }
  const fresh = step('get_templates', () => templates.fresh).then(async (t) => ({ t, fit: await fitTemplate(t) }));
  fresh.catch(() => undefined);
  if (templates.cached) return { fresh, choosing: undefined };
  const jobs = fresh.then((f) => f.fit.jobs);
  jobs.catch(() => undefined); // awaited only for an existing batch
  const choosing = choose(jobs);
  choosing.catch(() => undefined);
  return { fresh, choosing };
}

/**
 * The jobs again when the app's input template changed since the cached one they were
 * checked and ordered with (undefined: unchanged, or they were checked with the fresh one).
 */
async function recheckTemplate(
  templates: { cached: AppTemplates | undefined; fresh: Promise<AppTemplates> },
  usedTemplates: AppTemplates | undefined,
  fitTemplate: (t: AppTemplates) => Promise<FittedJobs>,
  log: (line: string) => void,
  batchName: string,
): Promise<readonly SubmitJobSpec[] | undefined> {
  const cached = templates.cached;
  if (usedTemplates !== cached || cached === undefined) return undefined;
  const fresh = await step('get_templates', () => templates.fresh);
  if (sameNames(fresh.inputOpenNames, cached.inputOpenNames)) return undefined;
  log(`the app's input template changed since the last submit (${cached.inputOpenNames.join(', ')} -> ${fresh.inputOpenNames.join(', ')}): inputs checked and ordered again`);
  try {
    return (await fitTemplate(fresh)).jobs;
  } catch (err) {
    throw emptyBatchError(err, batchName);
  }
}

async function submit(shared: SubmitShared, req: SubmitRequest, binding: ProjectBinding, ctx: HandlerContext): Promise<string[]> {
  const tag = `BOINC_SUBMIT ${ctx.reqId} ${req.batchName}`;
  // Asks which freshly hashed files the server lacks while the batch is created; no call
  // starts once the command is over.
  const early = new EarlyProbe(binding.rpc, ctx.signal, (l) => shared.services.log.info(`${tag}: ${l}`));
  try {
    return await submitWith(shared, req, binding, ctx, tag, early);
  } finally {
    early.close();
  }
}

async function submitWith(shared: SubmitShared, req: SubmitRequest, binding: ProjectBinding, ctx: HandlerContext, tag: string, early: EarlyProbe): Promise<string[]> {
  const { services } = shared;
  const { config, ledger, log } = services;
  const { project, rpc } = binding;
  const { signal } = ctx;
  const t0 = Date.now();
  const recordBatch = (patch: LedgerBatchPatch) => ledger.upsert(project.url, req.batchName, { app: req.appName, ...patch });

  // 3 and 4 start first, read-only: the template and what the server knows of a batch of
  // this name, asked at once and while the input files are checked. If the files fail
  // the check both are cancelled.
  const record = ledger.get(project.url, req.batchName);
  // A name the ledger does not know is created next (unless a check fails): its
  // 'creating' record is written first and made durable while the lookups go out and the
  // files are checked, not between the checks and create_batch. A check that fails leaves
  // the record without a batch id, which a repeat handles like any name (it looks it up
  // first).
  const creatingRecorded = record !== undefined ? undefined : recordBatch({ state: 'creating', physFiles: [], jobs: {} });
  creatingRecorded?.catch(() => undefined);
  const lookups = new AbortController();
  const lookupSignal = AbortSignal.any([signal, lookups.signal]);
  const templates = askTemplates(shared, project.url, req, binding, lookupSignal);
  const lookup = new BatchLookup(rpc, req.batchName, record?.batchId, lookupSignal);
  // Two turns of the event loop (a poll phase between them) before the files are checked:
  // node opens a connection in a later tick and writes the request once it is connected,
  // so without them both calls would wait for the checks instead of the server working on
  // them meanwhile.
  await yieldNow();
  await yieldNow();

  // 2. Input files (synchronous stats, in slices), before anything is created or uploaded.
  let stats: Map<string, BigIntStats>;
  try {
    stats = await step('checking input files', () => checkInputFiles(uniqueSources(req.jobs)));
  } catch (err) {
    lookups.abort();
    throw err;
  }

  // 3 and 4: the template fit, and which batch (new, reused or complete already:
  // batch-choice.ts), started before the hashing so that a create_batch is on its way first.
  const fitTemplate = (t: AppTemplates): Promise<FittedJobs> => step('checking input files against the app template', () => orderInputs(req.jobs, t.inputOpenNames));
  const choose = (jobs: Promise<readonly SubmitJobSpec[]>) =>
    chooseBatch({ rpc, req, jobs, lookup, record, creatingRecorded, recordBatch, leaseSeconds: config.defaultLeaseSeconds, log, tag, signal });
  const begun = await fitAndChoose(templates, fitTemplate, choose);

  // 4 (hashing). Results arrive while the template is checked and the batch looked for or
  // created; once the batch exists they feed the stager at once. While the batch is being
  // made, the server is asked which of the files not in the hash cache it lacks
  // (early-probe.ts); not while a template that no longer fits is asked for again.
  const feed = new HashFeed();
  const probing = begun.choosing !== undefined;
  const onHashed = (path: string, h: HashedFile) => {
    feed.push(path, h);
    if (h.fresh && probing) early.add(physName(h.md5));
  };
  const hashes = startHashing(shared, stats, onHashed, ctx, tag, t0, req.jobs.length);

  let fitted: FittedJobs;
  let usedTemplates: AppTemplates;
  let choosing: Promise<BatchChoice>;
  if ('fitted' in begun) {
    ({ fitted, usedTemplates, choosing } = begun);
  } else {
    try {
      ({ t: usedTemplates, fit: fitted } = await begun.fresh);
    } catch (err) {
      const made = await begun.choosing?.catch(() => undefined);
      if (made?.kind !== 'new') throw err;
      await made.staging.catch(() => undefined);
      throw emptyBatchError(err, req.batchName);
    }
    choosing = begun.choosing ?? choose(Promise.resolve(fitted.jobs));
  }
  if (fitted.reordered) log.debug(`${tag}: inputs put in template order (${usedTemplates.inputOpenNames.join(', ')})`);

  const choice = await choosing;
  if (choice.kind === 'complete') {
    // Hashes only serve the ledger, which may know the batch already.
    if (choice.recordNeeded) await recordBatch({ ...(choice.batchId > 0 ? { batchId: choice.batchId } : {}), ...submittedPatch(fitted.jobs, await hashes.hashed) });
    return ['NULL'];
  }

  // 5. Stage the files of the jobs still to submit, as their hashes arrive. Checked and
  // ordered with the cached template, the jobs are checked again by the fresh one (answered
  // long ago, during create_batch) once hashing is done.
  const tStage = Date.now();
  const staged = await stageInputs({
    rpc,
    batchId: choice.batchId,
    reused: choice.kind === 'reuse',
    jobs: fitted.jobs,
    toSubmit: choice.kind === 'reuse' ? choice.toSubmit : fitted.jobs,
    stats,
    feed,
    early,
    hashing: hashes.hashed,
    recheck: () => recheckTemplate(templates, usedTemplates, fitTemplate, (l) => log.info(`${tag}: ${l}`), req.batchName),
    upload: shared.upload,
    leaseSeconds: config.defaultLeaseSeconds,
    progress: services.progress,
    reqId: ctx.reqId,
    log: (l) => log.info(`${tag}: ${l}`),
    signal,
  });
  const { report } = staged;
  const tStaged = Date.now();
  log.info(`${tag}: ${staged.distinctFiles} distinct files: ${report.present} already on the server, ${report.uploaded} uploaded (${report.uploadedBytes} bytes, ${report.uploadRequests} upload_files requests, ${report.recoveries} recoveries), staged ${tStaged - Math.max(tStage, hashes.done.at)} ms after the last hash`);

  if (choice.kind === 'new') await step('recording the batch in the ledger', () => choice.staging);

  // 6. Submit the jobs; the ledger's record is built while the server creates them.
  const submitted = step('submit_batch', () => submitBatch(rpc, req, choice.batchId, staged.boincJobs, signal));
  submitted.catch(() => undefined);
  const patch = submittedPatch(staged.jobs, staged.hashed);
  await submitted;
  await recordBatch({ batchId: choice.batchId, ...patch });
  log.info(`${tag}: submitted ${staged.boincJobs.length} jobs into batch ${choice.batchId} in ${Date.now() - tStaged} ms (total ${Date.now() - t0} ms)`);
  return ['NULL'];
}
