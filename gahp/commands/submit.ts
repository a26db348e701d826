/**
 * BOINC_SUBMIT <reqid> <batch_name> <app_name> <njobs> (<job_name> <nargs> <arg>...
 *   <ninputs> (<src_path> <dst_name>)...){njobs} [<rsc_fpops_est> <rsc_fpops_bound>
 *   <rsc_memory_bound> <rsc_disk_bound> <delay_bound> <app_version_num>]
 *
 * What happens, in order (each step's failure is reported as `<step>: <reason>`):
 *  1. checks with no I/O: batch, app and job names and every argument can be carried intact
 *     by BOINC's create_work (validate.ts); nothing is sent if not;
 *  2. every unique source path is an existing, readable regular file (nothing is created
 *     or uploaded before this; only the read-only get_templates and query_batch of steps 3
 *     and 4 are already on their way, and are cancelled if a file fails);
 *  3. get_templates(app), sent together with step 4's query_batch: each job's input count
 *     must match the input template; when every job's dst_names are the template's
 *     open_names, inputs go in template order. The template last seen for the project and
 *     app is used without waiting (it is cached in this GAHP); the fresh answer must agree
 *     before submit_batch, else the jobs are checked and ordered again by it;
 *  4. meanwhile, from step 2 on: MD5 of each unique path (persistent cache, worker-thread
 *     pool); and what the server and the ledger know of a batch of this name (query_batch,
 *     sent only when the ledger knows the name or may miss records of another process):
 *     - none: create it (ledger 'creating' first, then create_batch with expire_time = now +
 *       lease, then ledger 'staging' with its id, written while staging starts);
 *     - one in init state holding none of our jobs or only some of them (an earlier attempt
 *       died): reuse it, submitting only the missing jobs;
 *     - one holding exactly our jobs: success, nothing created;
 *     - anything else (other jobs, another app, not in init state): fail;
 *  5. stage the files under `condorv_<md5>`, linked to the batch, as their hashes arrive
 *     (upload.ts: batch-linked query_files, upload only what is absent in bounded concurrent
 *     upload_files requests, recovery through query_files without batch_id);
 *  6. submit_batch into that batch id: jobs in order, job params, app_version_num; ledger
 *     'submitted'.
 * So a warm submit (template seen before, hashes cached, files on the server, a new batch
 * name) waits for three calls one after another: create_batch, query_files, submit_batch.
 * Commands for one batch (name, project and account) run one at a time in this GAHP, each
 * against the project selected when its line was read. Hashing and staging report progress
 * to services.progress, if set (at a bounded rate; never on the protocol).
 *
 * Every RPC carries the command's signal: QUIT, EOF or the command timeout cancel calls in
 * flight (uploads included) at once. Retries are bounded in time (README, "Retries and time
 * to error"): create_batch is tried again after a timeout at most once.
 */
import type { BigIntStats } from 'node:fs';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { Retries, type RetryPolicy } from '../../boinc-rpc/retry.js';
import type { AppTemplates, BoincRpc, QueryBatchReply, SubmitJob } from '../../boinc-rpc/types.js';
import type { AsyncCommand, HandlerContext } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import { parseSubmitArgs, type SubmitJobSpec, type SubmitRequest } from '../staging/parse.js';
import { checkInputFiles, checkNamesAndArguments, commandLine, orderInputs, uniqueSources } from '../staging/validate.js';
import { HashCache } from '../staging/hash-cache.js';
import { HashPool, hashSources, type HashedFile, type HashSourcesResult } from '../staging/hashing.js';
import { physName } from '../staging/plan.js';
import { createStager, type StageFile } from '../staging/upload.js';
import { PHP_DEFAULT_UPLOAD_LIMITS } from '../../boinc-rpc/upload-limits.js';
import { PhaseProgress } from '../staging/progress.js';
import { sleep as pause } from '../util.js';

/** A failed step: the message says which step and why. */
class SubmitError extends Error {
  override name = 'SubmitError';
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs fn; a failure becomes `<step>: <reason>`. */
async function step<T>(what: string, fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof SubmitError) throw err;
    throw new SubmitError(`${what}: ${reason(err)}`);
  }
}

/** Waits ms, or less when the signal fires; then throws if it fired. */
async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await pause(ms, signal);
  signal?.throwIfAborted();
}

/**
 * Repeats of create_batch and of a submit_batch that cannot have reached the server: at
 * most four attempts, 300, 600, 1200 ms apart, none after a second one that timed out.
 */
const SUBMIT_RETRY: RetryPolicy = { baseMs: 300, capMs: 30_000, jitter: false, maxAttempts: 4, maxTimeouts: 2 };

const sameNames = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((n, i) => n === b[i]);

const noSuchBatch = (err: unknown) => err instanceof BoincRpcError && err.kind === 'server' && err.code === 'no-such-batch';

/**
 * query_batch by name: undefined when the server has no such batch. BOINC's query_batch
 * reads the output template of the batch's first job, which a batch without jobs lacks; if
 * that kills the PHP (fatal reply), query_batch2 tells whether the batch exists and which
 * jobs it holds, and the id comes from the ledger (knownId).
 */
async function findBatch(rpc: BoincRpc, batchName: string, knownId: number | undefined, signal: AbortSignal | undefined): Promise<QueryBatchReply | undefined> {
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

export function submitCommand(services: GahpServices): AsyncCommand<BoundRequest<SubmitRequest>> {
  const locks = new Map<string, Promise<unknown>>();
  /**
   * The input template last seen per project and app. Apps rarely change, so a submit
   * orders and checks its inputs with this one and does not wait for get_templates before
   * creating the batch; the fresh answer (asked for every time, alongside) is compared
   * before submit_batch, and a changed template is used instead (or fails the batch).
   */
  const templateCache = new Map<string, AppTemplates>();
  let cache: Promise<HashCache> | undefined;
  let pool: HashPool | undefined;
  /** The hash cache is loaded on the first submit, in slices (a big one must not stall the protocol loop). */
  const hashing = async () => {
    cache ??= HashCache.openAsync(services.config.stateDir, (l) => services.log.warn(l));
    pool ??= new HashPool(Math.max(1, services.config.hashWorkers));
    return { cache: await cache, pool };
  };

  /** Runs fn after any earlier command for the same batch has finished. */
  async function exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = locks.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (locks.get(key) === tail) locks.delete(key);
    }
  }

  async function submit(req: SubmitRequest, binding: ProjectBinding, ctx: HandlerContext): Promise<string[]> {
    const { config, ledger, log } = services;
    const { project, rpc } = binding;
    const t0 = Date.now();
    const tag = `BOINC_SUBMIT ${ctx.reqId} ${req.batchName}`;

    // 3 and 4 start first, read-only: the template and what the server knows of the batch,
    // asked at once and while the input files are checked (both answers are needed before
    // anything is created). If the files fail the check these two are cancelled.
    const { signal } = ctx;
    const lookups = new AbortController();
    const lookupSignal = AbortSignal.any([signal, lookups.signal]);
    const record = ledger.get(project.url, req.batchName);
    const templateKey = `${project.url}\n${req.appName}`;
    const cachedTemplates = templateCache.get(templateKey);
    const templatesP = rpc.getTemplates({ appName: req.appName, signal: lookupSignal });
    templatesP.then(
      (t) => templateCache.set(templateKey, t),
      (err: unknown) => {
        if (err instanceof BoincRpcError && err.kind === 'server') templateCache.delete(templateKey);
      },
    );
    // The server is asked even for a name the ledger does not know: the batch may have been
    // made behind this ledger's back (another state directory, an earlier GAHP, a lost state
    // directory), and the gridmanager resubmits a batch it finds empty. BOINC accepts a second
    // batch of the same name, and every later lookup by name picks the lower id, so creating
    // one here would leave the jobs where the gridmanager never looks: stuck forever. This
    // costs the warm submit a fourth sequential call (docs/architecture.md, "Round trips").
    const existingP = findBatch(rpc, req.batchName, record?.batchId, lookupSignal);
    templatesP.catch(() => undefined);
    existingP.catch(() => undefined);

    // 2. Input files (synchronous stats, in slices), before anything is created or uploaded.
    let stats: Map<string, BigIntStats>;
    try {
      stats = await step('checking input files', () => checkInputFiles(uniqueSources(req.jobs)));
    } catch (err) {
      lookups.abort();
      throw err;
    }
    // A name the ledger does not know is created next (unless the template check fails):
    // its 'creating' record is made durable now, while the template and the hashes are
    // worked on, not between them and create_batch. A check that fails later leaves the
    // record without a batch id, which a repeat handles like any name (it looks it up first).
    const creatingRecorded = record !== undefined ? undefined : ledger.upsert(project.url, req.batchName, { app: req.appName, state: 'creating', physFiles: [], jobs: {} });
    creatingRecorded?.catch(() => undefined);

    // Hashing starts now (after the cache is loaded, on the first submit). Its results
    // arrive while the template is checked and the batch looked for or created; once the
    // batch exists they feed the stager at once, so uploads overlap the hashing of the
    // remaining files.
    let feed: ((path: string, h: HashedFile) => void) | undefined;
    const early: Array<[string, HashedFile]> = [];
    let hashBytes = 0;
    if (services.progress) for (const st of stats.values()) hashBytes += Number(st.size);
    const hashProgress = new PhaseProgress(services.progress, ctx.reqId, 'hash', stats.size, hashBytes);
    const hashP = step('hashing input files', async () => {
      const { cache: hc, pool: hp } = await hashing();
      return hashSources(stats, hc, hp, ctx.signal, (p, h) => (feed ? feed(p, h) : early.push([p, h])), (n, b) => hashProgress.add(n, b));
    });
    hashP.catch(() => undefined);
    let tHashed = 0;
    hashP.then((h) => {
      tHashed = Date.now();
      hashProgress.finish();
      log.info(`${tag}: ${req.jobs.length} jobs, ${stats.size} input paths (${h.fromCache} hashes cached, ${h.hashed} hashed, ${h.hashedBytes} bytes) in ${tHashed - t0} ms`);
    }, () => hashProgress.stop());

    // 3. Template: counts and order, from the cached template when there is one (checked
    // against the fresh answer before submit_batch); a job that does not fit the cached one
    // waits for the fresh one before failing.
    const fitTemplate = (t: AppTemplates) => step('checking input files against the app template', () => orderInputs(req.jobs, t.inputOpenNames));
    let usedTemplates: AppTemplates | undefined;
    let fitted: { jobs: SubmitJobSpec[]; reordered: boolean } | undefined;
    if (cachedTemplates) {
      try {
        fitted = await fitTemplate(cachedTemplates);
        usedTemplates = cachedTemplates;
      } catch {
        // The app may have changed: decide on the fresh template below.
      }
    }
    if (!fitted) {
      usedTemplates = await step('get_templates', () => templatesP);
      fitted = await fitTemplate(usedTemplates);
    }
    let { jobs } = fitted;
    if (fitted.reordered) log.debug(`${tag}: inputs put in template order (${usedTemplates!.inputOpenNames.join(', ')})`);

    // 4. What exists already.
    const existing = await step('looking for an existing batch (query_batch)', () => existingP);

    // 4a. A batch of this name with exactly these jobs: done already (hashes only serve
    // the ledger, which may know the batch already).
    const ours = new Set(jobs.map((j) => j.name));
    const theirs = existing?.jobs.map((j) => j.name) ?? [];
    const foreign = theirs.filter((n) => !ours.has(n));
    if (existing && existing.appName !== undefined && existing.appName !== '' && existing.appName !== req.appName) {
      throw new SubmitError(`batch ${req.batchName} already exists on the server for app ${existing.appName}, not ${req.appName}`);
    }
    if (foreign.length > 0) {
      throw new SubmitError(`batch ${req.batchName} already exists on the server with ${theirs.length} jobs, ${foreign.length} of them not in this submit (e.g. ${foreign[0]})`);
    }
    const present = new Set(theirs);
    if (existing && present.size === ours.size) {
      log.info(`${tag}: the server already holds this batch (id ${existing.id}) with exactly these ${ours.size} jobs: nothing to do`);
      if (record?.state !== 'submitted' || (existing.id > 0 && record.batchId !== existing.id)) await recordSubmitted(existing.id, submittedPatch(jobs, await hashP));
      return ['NULL'];
    }

    let batchId: number;
    let toSubmit: SubmitJobSpec[] = jobs;
    let stagingRecorded: Promise<unknown> = Promise.resolve();
    if (existing) {
      if (existing.state !== 0) {
        throw new SubmitError(`batch ${req.batchName} already exists on the server in state ${existing.state} with ${present.size} of the ${ours.size} jobs: it cannot take more`);
      }
      if (existing.id <= 0) throw new SubmitError(`batch ${req.batchName} exists on the server with ${present.size} of the ${ours.size} jobs, but its id is unknown`);
      if (present.size > 0) {
        // An earlier submit_batch may still be creating jobs: wait until it is done, then
        // look again (it may have completed the batch).
        const settled = await step('waiting for an interrupted submit_batch to settle (query_batch)', () => settledBatch(rpc, req.batchName, signal, existing));
        const now = new Set(settled?.jobs.map((j) => j.name) ?? []);
        if (!settled || [...now].some((n) => !ours.has(n)) || settled.state !== 0 || now.size !== present.size) {
          if (settled && now.size === ours.size && [...now].every((n) => ours.has(n))) {
            await recordSubmitted(settled.id, submittedPatch(jobs, await hashP));
            return ['NULL'];
          }
          throw new SubmitError(`batch ${req.batchName} changed on the server while it was being checked (${now.size} jobs, state ${settled?.state ?? 'gone'}): repeat the submit`);
        }
      }
      batchId = existing.id;
      toSubmit = jobs.filter((j) => !present.has(j.name));
      log.info(`${tag}: reusing batch ${batchId} left by an earlier attempt (${present.size} of ${ours.size} jobs present)`);
      // Its lease may be short or past (the server may then collect it): give it a full one.
      const expireTime = Math.floor(Date.now() / 1000) + config.defaultLeaseSeconds;
      await step('renewing the lease of the existing batch (set_expire_time)', () => rpc.setExpireTime(req.batchName, expireTime, { signal }));
      await ledger.upsert(project.url, req.batchName, { app: req.appName, state: 'staging', batchId, leaseExpiresAt: expireTime });
    } else {
      // 4b. Create the batch. The ledger first knows we may be creating it.
      await (creatingRecorded ?? ledger.upsert(project.url, req.batchName, { app: req.appName, state: 'creating', physFiles: [], jobs: {} }));
      const expireTime = Math.floor(Date.now() / 1000) + config.defaultLeaseSeconds;
      batchId = await step('create_batch', () => createBatch(rpc, req, expireTime, signal));
      // Not waited for here: staging starts at once. Until this is durable a crash leaves
      // 'creating', whose repeat finds the batch by name (query_batch).
      stagingRecorded = ledger.upsert(project.url, req.batchName, { state: 'staging', batchId, leaseExpiresAt: expireTime });
      stagingRecorded.catch(() => undefined);
      if (record?.batchId !== undefined && record.batchId !== batchId) log.info(`${tag}: the ledger's batch ${record.batchId} is gone from the server`);
    }

    // 5. Stage the files of the jobs still to submit, as their hashes arrive.
    const tStage = Date.now();
    const needed = new Set<string>();
    for (const job of toSubmit) for (const input of job.inputs) needed.add(input.src);
    let neededBytes = 0;
    if (services.progress) for (const p of needed) neededBytes += Number(stats.get(p)!.size);
    // Upload progress counts paths: one whose content another path already brings is done at once.
    const uploadProgress = new PhaseProgress(services.progress, ctx.reqId, 'upload', needed.size, neededBytes);
    const stager = createStager({
      rpc,
      batchId,
      deleteTime: Math.floor(Date.now() / 1000) + config.defaultLeaseSeconds,
      reused: existing !== undefined,
      uploadConcurrency: config.uploadConcurrency,
      uploadBatchBytes: config.uploadBatchBytes,
      uploadBatchFiles: config.uploadBatchFiles ?? PHP_DEFAULT_UPLOAD_LIMITS.maxFileUploads,
      postMaxSize: config.postMaxSize ?? PHP_DEFAULT_UPLOAD_LIMITS.postMaxSize,
      uploadMaxFilesize: config.uploadMaxFilesize ?? PHP_DEFAULT_UPLOAD_LIMITS.uploadMaxFilesize,
      log: (l) => log.info(`${tag}: ${l}`),
      signal: ctx.signal,
      ...(services.progress ? { onSettled: (n: number, b: number) => uploadProgress.add(n, b) } : {}),
    });
    const distinct = new Set<string>();
    const toStage = (list: ReadonlyArray<readonly [string, HashedFile]>): StageFile[] => {
      const out: StageFile[] = [];
      for (const [p, h] of list) {
        if (!needed.has(p)) continue;
        const name = physName(h.md5);
        if (distinct.has(name)) {
          uploadProgress.add(1, Number(h.key.size));
          continue;
        }
        distinct.add(name);
        out.push({ physName: name, path: p, size: Number(h.key.size), key: h.key });
      }
      return out;
    };
    // What was hashed so far goes in one piece (one query); the rest as it comes.
    stager.add(toStage(early));
    early.length = 0;
    feed = (p, h) => stager.add(toStage([[p, h]]));
    let hashed: HashSourcesResult;
    try {
      hashed = await hashP;
    } catch (err) {
      uploadProgress.stop();
      stager.abort(err);
      await stager.finish().catch(() => undefined);
      throw err;
    }
    // Checked and ordered with the cached template: the fresh one (answered long ago,
    // during create_batch) must agree, else the jobs are checked and ordered again by it.
    if (usedTemplates === cachedTemplates && cachedTemplates !== undefined) {
      const fresh = await step('get_templates', () => templatesP).catch(async (err: unknown) => {
        uploadProgress.stop();
        stager.abort(err);
        await stager.finish().catch(() => undefined);
        throw err;
      });
      if (!sameNames(fresh.inputOpenNames, cachedTemplates.inputOpenNames)) {
        log.info(`${tag}: the app's input template changed since the last submit (${cachedTemplates.inputOpenNames.join(', ')} -> ${fresh.inputOpenNames.join(', ')}): inputs checked and ordered again`);
        try {
          jobs = (await fitTemplate(fresh)).jobs;
        } catch (err) {
          uploadProgress.stop();
          stager.abort(err);
          await stager.finish().catch(() => undefined);
          throw new SubmitError(`${reason(err)} (batch ${req.batchName} was created with no jobs; a corrected BOINC_SUBMIT of the same batch name fills it)`);
        }
        const still = new Set(toSubmit.map((j) => j.name));
        toSubmit = jobs.filter((j) => still.has(j.name));
      }
    }
    // The jobs as BOINC gets them, built while the last files are staged.
    const boincJobs: SubmitJob[] = toSubmit.map((job) => ({
      name: job.name,
      commandLine: commandLine(job),
      inputFiles: job.inputs.map((i) => physName(hashed.files.get(i.src)!.md5)),
    }));
    const report = await step('staging input files', () => stager.finish()).catch((err: unknown) => {
      uploadProgress.stop();
      throw err;
    });
    uploadProgress.finish();
    const tStaged = Date.now();
    log.info(`${tag}: ${distinct.size} distinct files: ${report.present} already on the server, ${report.uploaded} uploaded (${report.uploadedBytes} bytes, ${report.uploadRequests} upload_files requests, ${report.recoveries} recoveries), staged ${tStaged - Math.max(tStage, tHashed)} ms after the last hash`);

    await step('recording the batch in the ledger', () => stagingRecorded);

    // 6. Submit the jobs.
    const submitted = step('submit_batch', () => submitBatch(rpc, req, batchId, boincJobs, signal));
    submitted.catch(() => undefined);
    // The ledger's record is built while the server creates the jobs.
    const patch = submittedPatch(jobs, hashed);
    await submitted;
    await recordSubmitted(batchId, patch);
    log.info(`${tag}: submitted ${boincJobs.length} jobs into batch ${batchId} in ${Date.now() - tStaged} ms (total ${Date.now() - t0} ms)`);
    return ['NULL'];

    function submittedPatch(all: readonly SubmitJobSpec[], h: HashSourcesResult): { physFiles: string[]; jobs: Record<string, string> } {
      const physFiles = new Set<string>();
      for (const job of all) for (const i of job.inputs) physFiles.add(physName(h.files.get(i.src)!.md5));
      // Null prototype: a job named `__proto__` is just a key.
      const jobsRec = Object.create(null) as Record<string, string>;
      for (const job of all) jobsRec[job.name] = 'SUBMITTED';
      return { physFiles: [...physFiles], jobs: jobsRec };
    }

    async function recordSubmitted(id: number, patch: { physFiles: string[]; jobs: Record<string, string> }): Promise<void> {
      await ledger.upsert(project.url, req.batchName, { app: req.appName, state: 'submitted', ...(id > 0 ? { batchId: id } : {}), ...patch });
    }
  }

  /**
   * create_batch. A failure that may have taken effect is checked with query_batch before
   * anything is repeated: never two batches of one name. At most four attempts, and none
   * after a second one that timed out.
   */
  async function createBatch(rpc: BoincRpc, req: SubmitRequest, expireTime: number, signal: AbortSignal): Promise<number> {
    const retries = new Retries(SUBMIT_RETRY);
    for (;;) {
      try {
        return await rpc.createBatch({ batchName: req.batchName, appName: req.appName, expireTime, signal });
      } catch (err) {
        if (!(err instanceof BoincRpcError)) throw err;
        const delay = retries.next(err);
        if (delay === undefined || err.kind === 'server' || err.kind === 'local') throw err;
        await sleep(delay, signal);
        if (err.uncertain || err.kind === 'fatal') {
          // It may have been created: look before creating again (twice, in case it is
          // still being processed).
          for (let look = 0; look < 2; look++) {
            const found = await findBatch(rpc, req.batchName, undefined, signal);
            if (found) {
              if (found.jobs.length > 0 || found.state !== 0) throw new Error(`batch ${req.batchName} appeared on the server with ${found.jobs.length} jobs in state ${found.state}`, { cause: err });
              return found.id;
            }
            if (look === 0) await sleep(1000, signal);
          }
        }
      }
    }
  }

  /**
   * query_batch until the batch's job count has not changed for settleMs (a submit_batch
   * whose client went away may still be creating jobs on the server), at most `rounds` looks.
   */
  async function settledBatch(rpc: BoincRpc, batchName: string, signal: AbortSignal, first?: QueryBatchReply, settleMs = 2000, rounds = 6): Promise<QueryBatchReply | undefined> {
    let cur = first ?? (await findBatch(rpc, batchName, undefined, signal));
    for (let i = 0; cur && i < rounds; i++) {
      await sleep(settleMs, signal);
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
  async function submitBatch(rpc: BoincRpc, req: SubmitRequest, batchId: number, jobs: SubmitJob[], signal: AbortSignal): Promise<void> {
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
          await sleep(delay, signal);
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
        return await exclusive(`${binding.accountKey}\n${req.batchName}`, () => submit(req, binding, ctx));
      } catch (err) {
        if (err instanceof SubmitError) throw err;
        throw new SubmitError(reason(err));
      }
    },
  };
}
