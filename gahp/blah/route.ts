/**
 * `batch boinc` served by the GAHP itself (docs/blah-route.md): the gridmanager's BLAH
 * commands turned into BOINC work inside this one long-lived process, with no blahpd and
 * no process per request.
 *
 * - Submit: each job is checked alone (gahp/batch-boinc/job-check.ts; a bad job is refused with
 *   its own reason), then joins its app's open batch and is answered at once: the batch is
 *   on disk with the job in it, so its id is good (joinArrivals). One batch per app goes
 *   to BOINC at a time, through the GAHP's BOINC_SUBMIT (content-addressed staging,
 *   repeat-safe); the next one fills meanwhile and goes when that one has settled and no
 *   job joined for GATHER_QUIET_MS, or it has been open GATHER_MAX_MS: a large cluster
 *   becomes a few large batches, and the gridmanager (50 requests in flight at most) is
 *   never paced by BOINC's round trips.
 * - Exactly once: the batch and its jobs' submission keys (the gridmanager's JobDirectory,
 *   saved in the job queue before it sends the submit) are on disk before BOINC_SUBMIT
 *   goes out (store.ts). A submit repeated after a crash of either side gets the job it
 *   already has; a batch the crash left half made is completed by the same BOINC_SUBMIT.
 * - Status: answered from memory. One BOINC_QUERY_BATCHES over every unfinished batch
 *   refreshes what BOINC says at most every STATUS_MAX_AGE_MS, whichever status asks
 *   first; never an RPC per status. A job just submitted is idle until the next refresh.
 * - Outputs: every DONE job a refresh finds is fetched at once (FETCH_CONCURRENCY at a
 *   time) through the GAHP's BOINC_FETCH_OUTPUT; its status says completed (4) only once
 *   its outputs are in place and Out exists. A fetch that fails is tried again; after
 *   MAX_FETCH_ATTEMPTS the job is held, and its BOINC job is kept (not aborted) so that
 *   the result can still be fetched.
 * - Cancel: aborts on BOINC, gathered into one abort_jobs per GATHER_QUIET_MS; a batch
 *   whose jobs are all finished is retired at once; leases are renewed while a batch has
 *   unfinished jobs (housekeeping, every HOUSEKEEPING_MS).
 */
import * as crypto from 'node:crypto';
import * as path from 'node:path';
import PQueue from 'p-queue';
import type { AppTemplates } from '../../boinc-rpc/types.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { ownCopy } from '../../boinc-rpc/xml.js';
import type { GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import type { HandlerContext } from '../protocol/commands.js';
import type { SubmitRequest } from '../staging/parse.js';
import { submitCommand, type SubmitCommand } from '../commands/submit.js';
import { queryBatchesCommand } from '../commands/query-batches.js';
import { abortJobsCommand } from '../commands/abort-jobs.js';
import { retireBatchCommand } from '../commands/retire-batch.js';
import { setLeaseCommand } from '../commands/set-lease.js';
import { pingCommand } from '../commands/ping.js';
import type { FetchOutputRequest } from '../commands/fetch-output-args.js';
import { errorMessage } from '../util.js';
import { condorJobLabel, identityOf, jobName as boincJobName, newBatchName, newSubmitKey, notSentReason, parseJobName, type ParsedJobName } from '../batch-boinc/names.js';
import { describeFailedJobs, type FailedJobReport } from '../failed-job.js';
import { checkJob, type JobRequest } from '../batch-boinc/job-check.js';
import { ensureStdout, startErrorFile } from '../batch-boinc/standard-files.js';
import { SubmitCheckError } from '../staging/validate.js';
import { ARCHIVE_AFTER_MS, BlahStore, type FinalState, type StoredBatch, type StoredJob } from './store.js';

/** How long arriving jobs are gathered before they are recorded together and answered. */
const JOIN_MS = 20;
const GATHER_QUIET_MS = 250;
const GATHER_MAX_MS = 2000;
const MAX_BATCH_JOBS = 1000;
const STATUS_MAX_AGE_MS = 5000;
/** Archived batches whose final states are kept in memory once asked (route.archived). */
const ARCHIVE_CACHE_BATCHES = 4;
/** After a failed refresh, statuses answer from what is known this long before asking again. */
const RETRY_AFTER_FAILURE_MS = 5000;
/** How long a status of a DONE job waits for its outputs before answering "running". */
const WAIT_FOR_FETCH_MS = 2000;
/** Fetches at once; each is two RPCs, which the project's RPC client bounds again (--concurrency). */
const FETCH_CONCURRENCY = 16;
const MAX_FETCH_ATTEMPTS = 3;
const TEMPLATE_MAX_AGE_MS = 5 * 60_000;
const HOUSEKEEPING_MS = 60_000;

/** The configured project is missing or unusable: every BLAH command says so. */
export const NOT_CONFIGURED =
  'no BOINC project is configured for batch boinc: set BOINC_GAHP_PROJECT_URL and BOINC_GAHP_AUTHENTICATOR_FILE in HTCondor\'s configuration (or the GAHP\'s environment); boinc-gahp doctor checks them';

/** A status answer: HTCondor's JobStatus and the rest of the ad. */
export interface JobStatusAnswer {
  jobStatus: number;
  extra: Array<[string, string | number | boolean]>;
}

export interface SubmitTicket {
  job: JobRequest;
  submissionKey?: string;
}

interface Waiting {
  key: string;
  identity?: string;
  job: JobRequest;
  checked: Promise<Array<{ src: string; dst: string }>>;
  resolve(jobName: string): void;
  reject(err: unknown): void;
}

/**
 * The submits of one app (and memory bound): the batch being filled (`open`, its jobs
 * answered as they join it) and the one batch of the group going to BOINC (`inflight`).
 */
interface Group {
  app: string;
  /** Jobs whose checks are under way. */
  arriving: Waiting[];
  open?: StoredBatch;
  openedAt: number;
  lastArrival: number;
  inflight?: Promise<void>;
  tick?: Promise<void>;
  timer?: NodeJS.Timeout;
}

export class BlahRoute {
  private store: BlahStore | undefined;
  private loaded = false;
  private readonly batches = new Map<string, StoredBatch>();
  private readonly finals = new Map<string, FinalState>();
  /** Final states of archived batches lately asked about, by batch (oldest first). */
  private readonly archiveCache = new Map<string, Map<string, FinalState>>();
  /** Submission key -> BOINC job name. */
  private readonly byKey = new Map<string, string>();
  /**
   * What BOINC said of each job at the last refresh, per batch: job n's status word's code
   * (statusCode) at [n], 0 when not listed. A byte a job: a map by job name cost a string
   * and an entry a job, and the names, slices of the server's reply, kept it whole.
   */
  private readonly boincStatus = new Map<string, Uint8Array>();
  /** Batches the server said it does not have. */
  private readonly gone = new Set<string>();
  private refreshedAt = 0;
  private refreshFailedAt = 0;
  private refreshError: string | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly groups = new Map<string, Group>();
  /** Per claimed batch: resolves once its BOINC_SUBMIT settled (submitted or failed). */
  private readonly settled = new Map<string, { promise: Promise<void>; resolve(): void }>();
  private readonly settling = new Map<string, Promise<void>>();
  /**
   * Fetches run FETCH_CONCURRENCY at a time; the queue is given a job only when it has a free
   * place (its 'next' event), from `fetchWanted`. Queuing every DONE job at once kept a task,
   * its promises and its job for each of a 20,000-job cluster (docs/blah-route.md "Memory").
   */
  private readonly fetchQueue = new PQueue({ concurrency: FETCH_CONCURRENCY });
  /** BOINC job names found DONE whose fetch has not started, oldest first. */
  private readonly fetchWanted = new Set<string>();
  /** Fetches given to the queue, until they end. */
  private readonly fetching = new Map<string, Promise<void>>();
  /** For a job still in `fetchWanted` whose status waits for its fetch: resolved when it ends. */
  private readonly fetchWaiters = new Map<string, { promise: Promise<void>; resolve(): void }>();
  private readonly fetchFailures = new Map<string, number>();
  /**
   * Per batch: its jobs before this index have final states that are not kept results (such
   * a state is never taken back or changed into a kept one), for batchFinished.
   */
  private readonly finishedUpTo = new WeakMap<StoredBatch, number>();
  /** BOINC_SUBMIT's work, one for the GAHP's life (its hash cache is loaded once). */
  private submitter?: SubmitCommand;
  private readonly describing = new Map<string, Promise<void>>();
  /** Jobs last reported running (2), for the answer while a DONE job's outputs are fetched. */
  private readonly reported = new Map<string, number>();
  private readonly templates = new Map<string, { at: number; t: Promise<AppTemplates> }>();
  private pendingAborts: Array<{ job: ParsedJobName; resolve(): void; reject(err: unknown): void }> = [];
  private abortTimer: NodeJS.Timeout | undefined;
  private housekeepingTimer: NodeJS.Timeout | undefined;
  private readonly shutdown = new AbortController();

  constructor(private readonly services: GahpServices) {
    this.fetchQueue.on('next', () => this.takeFetches());
  }

  // ---- project, state -----------------------------------------------------------------

  private binding(): ProjectBinding {
    // The site's project (its authenticator file read again while it cannot be used), else
    // the one an in-process GAHP was started with.
    if (this.services.site) return this.services.site.bind();
    const b = this.services.session.bind();
    if (!b) throw new Error(NOT_CONFIGURED);
    if ('unusable' in b) throw new Error(`${b.unusable} (batch boinc's project, from BOINC_GAHP_PROJECT_URL)`);
    return b;
  }

  /** Loads the kept state once (state directory chosen at start-up). */
  private ensureLoaded(): BlahStore {
    if (this.store && this.loaded) return this.store;
    const stateDir = this.services.config.stateDir;
    if (!stateDir) throw new Error('batch boinc needs a state directory to keep its jobs across restarts, and none could be used (see the GAHP\'s start-up warning)');
    this.store = new BlahStore(stateDir);
    const { batches, finals, archived } = this.store.load();
    for (const b of batches) {
      this.batches.set(b.batch, b);
      if (b.state === 'failed') continue;
      b.jobs.forEach((j, n) => this.byKey.set(j.key, boincJobName(b.batch, n)));
    }
    for (const [job, state] of finals) {
      // Kept by an older version (no end recorded): kept until the batch's lease as it is now.
      if (isKept(state) && state.keptUntil === undefined) {
        const lease = this.batches.get(parseOurJobName(job)?.batch ?? '')?.leaseExpiresAt;
        if (lease !== undefined) state.keptUntil = lease;
      }
      this.finals.set(job, state);
    }
    this.loaded = true;
    // Batches a killed GAHP recorded but may not have sent: completed now (repeat-safe).
    const usable = (() => {
      try {
        return this.binding().project.url;
      } catch {
        return undefined;
      }
    })();
    for (const b of batches) {
      if (b.state === 'claimed' && b.projectUrl === usable) void this.settle(b).catch(() => undefined);
    }
    if (batches.length > 0) this.services.log.info(`batch boinc: ${batches.length} batches and ${finals.size} finished jobs read from ${this.store.dir}`);
    if (archived > 0) this.services.log.info(`batch boinc: ${archived} batches retired more than a day ago moved to ${path.join(this.store.dir, 'archive')} (not read at start-up)`);
    // Often enough that a lease is renewed before it runs out, however short it was set.
    const every = Math.min(HOUSEKEEPING_MS, (this.services.config.defaultLeaseSeconds * 1000) / 4);
    this.housekeepingTimer = setInterval(() => void this.housekeeping(), every);
    this.housekeepingTimer.unref();
    return this.store;
  }

  /**
   * The context of work the route starts itself: cut at shutdown, by `signal`, or when
   * timeoutMs has passed. dispose() when the work has ended: its timeout is a timer of its
   * own that dispose() clears, not AbortSignal.timeout(), whose timer Node keeps (with the
   * signal) until the timeout passes: a fetch's, five minutes after it ended, a few hundred
   * bytes a job while a cluster drains (docs/blah-route.md, "Memory"). Undisposed, it is
   * let go when the timeout passes.
   */
  private handler(what: string, timeoutMs: number, signal?: AbortSignal): HandlerContext & { dispose(): void } {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), timeoutMs);
    timer.unref();
    const signals = [this.shutdown.signal, timeout.signal];
    if (signal) signals.push(signal);
    return { signal: AbortSignal.any(signals), reqId: what, log: this.services.log, dispose: () => clearTimeout(timer) };
  }

  private get rpcTimeoutMs(): number {
    return 30_000;
  }

  close(): void {
    this.shutdown.abort();
    if (this.housekeepingTimer) clearInterval(this.housekeepingTimer);
    if (this.abortTimer) clearTimeout(this.abortTimer);
    for (const g of this.groups.values()) if (g.timer) clearTimeout(g.timer);
    this.fetchWanted.clear();
    this.fetchQueue.clear();
  }

  // ---- ping ---------------------------------------------------------------------------

  async ping(signal: AbortSignal): Promise<void> {
    const binding = this.binding();
    await pingCommand(this.services).run({ request: {}, binding }, this.handler('ping', this.rpcTimeoutMs, signal));
  }

  // ---- submit -------------------------------------------------------------------------

  /** Submits one job (or finds the one this submission already has); resolves to its BOINC job name. */
  async submit(ticket: SubmitTicket, signal: AbortSignal): Promise<string> {
    const binding = this.binding();
    this.ensureLoaded();
    const key = ticket.submissionKey
      ? 'gm-' + crypto.createHash('sha256').update(`${binding.project.url}\0${ticket.submissionKey}`).digest('hex').slice(0, 32)
      : newSubmitKey();
    const known = await this.knownSubmission(key);
    if (known) return known;
    const job = ticket.job;
    const identity = ticket.submissionKey ? identityOf(ticket.submissionKey) : undefined;
    const kept = identity ? await this.keptResult(identity, key, job) : undefined;
    if (kept) return kept;
    const checked = checkJob(job, (app) => this.appTemplates(app, binding, signal)).then((r) => r.inputs);
    checked.catch(() => undefined); // reported through the ticket
    // One group per app: a memory request does not split a cluster into batches. BOINC's
    // create_work applies the input template's rsc_memory_bound after the job's (verified
    // on its real server: 4 GiB asked, the template's 1e8 kept), so a request matters only
    // for an app whose template sets none; the batch asks the largest of its jobs'.
    const group = job.app;
    return new Promise<string>((resolve, reject) => {
      let g = this.groups.get(group);
      if (!g) {
        g = { app: job.app, arriving: [], openedAt: 0, lastArrival: 0 };
        this.groups.set(group, g);
      }
      g.arriving.push({ key, job, checked, resolve, reject, ...(identity ? { identity } : {}) });
      g.lastArrival = Date.now();
      this.scheduleTick(g);
    });
  }

  /** The job a repeated submission already has, once its batch is settled; undefined for a new one. */
  private async knownSubmission(key: string): Promise<string | undefined> {
    const name = this.byKey.get(key);
    if (!name) return undefined;
    const job = parseOurJobName(name);
    const rec = job && this.batches.get(job.batch);
    if (!job || !rec) return undefined;
    // A claimed batch is recorded and will reach BOINC (this GAHP's pipeline, or the
    // settling at start-up): its ids are good.
    if (rec.state === 'failed') return undefined;
    const fin = this.finals.get(name);
    if (fin?.kind === 'cancelled') return undefined;
    this.services.log.info(`batch boinc: submission ${key} repeated: it already is BOINC job ${name}`);
    return name;
  }

  /**
   * A job that comes back (released after a hold, so with a new sandbox id) whose BOINC job
   * finished but whose outputs could not be put in place: that result is fetched again, into
   * the places the new submission names, instead of running the job again on BOINC.
   */
  private async keptResult(identity: string, key: string, job: JobRequest): Promise<string | undefined> {
    for (const rec of this.batches.values()) {
      if (rec.state !== 'submitted' || rec.projectUrl !== this.binding().project.url) continue;
      // A batch whose lease ran out may be gone from the server with its results.
      if (rec.leaseExpiresAt !== undefined && rec.leaseExpiresAt <= Date.now() / 1000) continue;
      const n = rec.jobs.findIndex((j) => j.identity === identity);
      if (n < 0) continue;
      const name = boincJobName(rec.batch, n);
      const fin = this.finals.get(name);
      // A result past its end is being given up (housekeeping): the job runs again.
      if (!fin || !isKept(fin) || (fin.keptUntil !== undefined && fin.keptUntil <= Date.now() / 1000)) continue;
      const stored = rec.jobs[n]!;
      Object.assign(stored, { key, iwd: job.iwd, outputs: job.outputs });
      if (job.stdout) stored.stdout = job.stdout;
      if (job.stderr) stored.stderr = job.stderr;
      this.store!.saveBatch(rec);
      this.byKey.set(key, name);
      this.finals.delete(name);
      this.store!.appendFinal(rec.batch, name, null);
      this.setStatus(rec, n, 'DONE');
      this.services.log.info(`batch boinc: ${name} is back (released): its kept result is fetched again, no new BOINC job`);
      this.wantFetch(name);
      return name;
    }
    return undefined;
  }

  private appTemplates(app: string, binding: ProjectBinding, signal: AbortSignal): Promise<AppTemplates> {
    const k = `${binding.accountKey}\0${app}`;
    const kept = this.templates.get(k);
    if (kept && Date.now() - kept.at < TEMPLATE_MAX_AGE_MS) return kept.t;
    const t = binding.rpc.getTemplates({ appName: app, signal: AbortSignal.any([signal, this.shutdown.signal, AbortSignal.timeout(this.rpcTimeoutMs)]) })
      .catch((err: unknown) => {
        this.templates.delete(k);
        throw new Error(`BOINC app ${app}: get_templates failed: ${errorMessage(err)}`);
      });
    this.templates.set(k, { at: Date.now(), t });
    return t;
  }

  /**
   * Jobs join their group's open batch as soon as their checks are done, and are answered
   * then: the batch, with each job's submission key, is on disk (store.ts), so the id is
   * good from that moment (a crash before the batch reaches BOINC is settled by the next
   * GAHP). Answering at once matters: the gridmanager keeps at most 50 requests in flight
   * and sends more only as results come, so waiting for BOINC would pace the whole
   * cluster by BOINC's round trips. The jobs arriving within JOIN_MS join together, in
   * one synced write (group commit): the gridmanager sends each request only after the
   * `S` of the one before, so without the wait every job would cost a write and an fsync
   * of its own (about 100 jobs a second on a busy disk, measured). The tick then runs
   * after the event loop has read what input waits (setImmediate follows the I/O phase).
   */
  private scheduleTick(g: Group): void {
    if (g.tick) return;
    g.tick = new Promise<void>((r) => setTimeout(r, JOIN_MS)).then(() => new Promise<void>((r) => setImmediate(r))).then(() => this.joinArrivals(g)).finally(() => {
      g.tick = undefined;
      if (g.arriving.length > 0) this.scheduleTick(g);
      this.maybeClose(g);
    });
  }

  private async joinArrivals(g: Group): Promise<void> {
    const arriving = g.arriving;
    g.arriving = [];
    const t0 = Date.now();
    const outcomes = await Promise.allSettled(arriving.map((w) => w.checked));
    const tChecked = Date.now();
    const ready: Array<{ w: Waiting; inputs: Array<{ src: string; dst: string }> }> = [];
    outcomes.forEach((o, i) => {
      const w = arriving[i]!;
      if (o.status !== 'fulfilled') return w.reject(o.reason);
      const problem = startErrorFile(w.job);
      if (problem) return w.reject(new SubmitCheckError(problem));
      ready.push({ w, inputs: o.value });
    });
    if (ready.length === 0) return;
    let binding: ProjectBinding;
    let store: BlahStore;
    try {
      binding = this.binding();
      store = this.ensureLoaded();
    } catch (err) {
      for (const { w } of ready) w.reject(err);
      return;
    }
    while (ready.length > 0) {
      if (!g.open || g.open.jobs.length >= MAX_BATCH_JOBS) {
        if (g.open) this.sendOpenBatch(g);
        g.open = { v: 1, batch: newBatchName(g.app), app: g.app, projectUrl: binding.project.url, state: 'claimed', jobs: [], createdAt: Date.now() };
        g.openedAt = Date.now();
        let resolve!: () => void;
        const promise = new Promise<void>((r) => { resolve = r; });
        this.settled.set(g.open.batch, { promise, resolve });
        this.batches.set(g.open.batch, g.open);
      }
      const rec = g.open;
      const joining = ready.splice(0, MAX_BATCH_JOBS - rec.jobs.length);
      const first = rec.jobs.length;
      for (const { w, inputs } of joining) {
        // A cluster's jobs mostly share their initialdir and inputs: the previous job's copies
        // are kept once, not one each (a 20,000-job cluster's records are most of what the
        // route holds: docs/blah-route.md, "Memory").
        const prev = rec.jobs[rec.jobs.length - 1];
        const j: StoredJob = { key: w.key, iwd: prev?.iwd === w.job.iwd ? prev.iwd : w.job.iwd, args: w.job.args, inputs: prev && sameInputs(prev.inputs, inputs) ? prev.inputs : inputs, outputs: w.job.outputs };
        if (w.identity) j.identity = w.identity;
        if (w.job.stdout) j.stdout = w.job.stdout;
        if (w.job.stderr) j.stderr = w.job.stderr;
        rec.jobs.push(j);
        if (w.job.memoryMb && w.job.memoryMb > (rec.memoryMb ?? 0)) rec.memoryMb = w.job.memoryMb;
      }
      try {
        store.saveBatch(rec);
      } catch (err) {
        rec.jobs.splice(first);
        for (const { w } of joining) w.reject(new Error(`cannot record the batch in ${store.dir}: ${errorMessage(err)}`));
        continue;
      }
      joining.forEach(({ w }, k) => {
        const name = boincJobName(rec.batch, first + k);
        this.byKey.set(w.key, name);
        w.resolve(name);
      });
      this.services.log.debug(`batch boinc: ${joining.length} jobs joined ${rec.batch} (now ${rec.jobs.length}): checks ${tChecked - t0} ms, recorded ${Date.now() - tChecked} ms`);
    }
  }

  /**
   * The open batch goes to BOINC when the group's previous batch has settled and either no
   * job joined for GATHER_QUIET_MS or it has been open GATHER_MAX_MS: while a batch is on
   * its way, the next one fills, so a large cluster becomes few large batches.
   */
  private maybeClose(g: Group): void {
    if (!g.open || g.inflight || g.tick || g.arriving.length > 0) return;
    const now = Date.now();
    const due = Math.min(g.lastArrival + GATHER_QUIET_MS, g.openedAt + GATHER_MAX_MS);
    if (g.open.jobs.length < MAX_BATCH_JOBS && now < due) {
      if (g.timer) clearTimeout(g.timer);
      g.timer = setTimeout(() => { g.timer = undefined; this.maybeClose(g); }, due - now);
      return;
    }
    this.sendOpenBatch(g);
  }

  /** Sends the open batch to BOINC (one BOINC_SUBMIT in flight per group); the next opens on the next arrival. */
  private sendOpenBatch(g: Group): void {
    const rec = g.open;
    if (!rec) return;
    g.open = undefined;
    if (g.timer) clearTimeout(g.timer);
    g.timer = undefined;
    const previous = g.inflight ?? Promise.resolve();
    g.inflight = previous.then(() => this.settle(rec)).finally(() => {
      if (g.inflight === current) g.inflight = undefined;
      this.maybeClose(g);
    });
    const current = g.inflight;
  }

  /** Runs (or repeats) BOINC_SUBMIT for a claimed batch; one at a time per batch. */
  private settle(rec: StoredBatch): Promise<void> {
    const running = this.settling.get(rec.batch);
    if (running) return running;
    const work = this.runSubmit(rec).finally(() => {
      this.settling.delete(rec.batch);
      if (rec.state !== 'claimed') {
        this.settled.get(rec.batch)?.resolve();
        this.settled.delete(rec.batch);
      }
    });
    this.settling.set(rec.batch, work);
    return work;
  }

  private async runSubmit(rec: StoredBatch): Promise<void> {
    if (rec.state !== 'claimed') return;
    const store = this.ensureLoaded();
    const req: SubmitRequest = {
      batchName: rec.batch,
      appName: rec.app,
      jobs: rec.jobs.map((j, n) => ({ name: boincJobName(rec.batch, n), args: j.args, inputs: j.inputs })),
      jobParams: rec.memoryMb ? { rscMemoryBound: rec.memoryMb * 1024 * 1024 } : {},
    };
    const t0 = Date.now();
    try {
      const binding = this.binding();
      const timeout = AbortSignal.timeout(this.services.config.commandTimeoutMs ?? 290_000);
      const ctx: HandlerContext = {
        signal: AbortSignal.any([this.shutdown.signal, timeout]),
        reqId: `submit ${rec.batch}`,
        log: this.services.log,
        // Cut by its deadline, the batch is withdrawn; at shutdown it is left for the next GAHP.
        deadlinePassed: () => timeout.aborted && !this.shutdown.signal.aborted,
      };
      this.submitter ??= submitCommand(this.services);
      const { refused } = await this.submitter.submitJobs({ request: req, binding }, ctx);
      // A job with a problem of its own that the checks at submit could not see (an input
      // over the project's upload limits, one deleted since): held alone, with its reason.
      for (const r of refused) {
        const job = parseJobName(r.name);
        if (!job) continue;
        const reason = notSentReason(r.reason, r.name);
        this.setFinal(job, { kind: 'held', reason, code: 0 });
        const spec = rec.jobs[job.n];
        if (spec) this.services.log.info(`batch boinc: ${condorJobLabel(spec.identity, spec.iwd)}: ${reason}`);
      }
      const now = Date.now();
      if (refused.length === rec.jobs.length) {
        // Nothing was created: each job is held with its own reason.
        rec.state = 'failed';
        rec.error = `every job of batch ${rec.batch} was refused`;
      } else {
        rec.state = 'submitted';
        rec.submittedAt = now;
        rec.leaseExpiresAt = Math.floor(now / 1000) + this.services.config.defaultLeaseSeconds;
        this.services.log.info(`batch boinc: batch ${rec.batch}: ${rec.jobs.length - refused.length} jobs of ${rec.app} submitted in ${now - t0} ms`);
      }
    } catch (err) {
      if (this.shutdown.signal.aborted) return; // left claimed: the next GAHP completes it
      rec.state = 'failed';
      rec.error = `BOINC_SUBMIT of batch ${rec.batch} (${rec.jobs.length} jobs) failed: ${errorMessage(err)}`;
      this.services.log.error(`batch boinc: ${rec.error}`);
    }
    try {
      store.saveBatch(rec);
    } catch (err) {
      this.services.log.error(`batch boinc: cannot record the state of batch ${rec.batch}: ${errorMessage(err)}`);
    }
  }

  // ---- status -------------------------------------------------------------------------

  async status(job: ParsedJobName, signal: AbortSignal): Promise<JobStatusAnswer> {
    this.ensureLoaded();
    const archived = this.archived(job);
    if (archived) return finalAnswer(job, archived);
    const rec = this.batches.get(job.batch);
    const stored = rec?.jobs[job.n];
    if (!rec || !stored) throw new Error(`BOINC job ${job.jobName} is not one this GAHP submitted (no record of it in ${this.store!.dir})`);
    const fin = this.finals.get(job.jobName);
    if (fin) return finalAnswer(job, fin);
    // On its way to BOINC (recorded, not submitted yet): idle.
    if (rec.state === 'claimed') return { jobStatus: 1, extra: [] };
    if (rec.state === 'failed') return held(notSentReason(rec.error ?? 'the BOINC submission failed'), 0);
    // Submitted since the last refresh, moments ago: nothing worth a query can have happened yet.
    const sinceSubmit = Date.now() - (rec.submittedAt ?? 0);
    if ((rec.submittedAt ?? 0) > this.refreshedAt && sinceSubmit < STATUS_MAX_AGE_MS && this.statusOf(job) === undefined) return { jobStatus: 1, extra: [] };
    await this.fresh(signal);
    if (this.gone.has(job.batch)) {
      const state: FinalState = { kind: 'held', reason: `the BOINC server no longer has batch ${job.batch} (its lease ran out, or it was retired or deleted)`, code: 0 };
      this.setFinal(job, state);
      return finalAnswer(job, state);
    }
    const st = this.statusOf(job);
    switch (st) {
      case undefined:
        if (this.refreshError) throw new Error(`no status of ${job.jobName} yet: ${this.refreshError}`);
        throw new Error(`BOINC does not list job ${job.jobName} in batch ${job.batch}`);
      case 'NOT_STARTED':
      case 'UNSENT':
        return { jobStatus: 1, extra: [] };
      case 'IN_PROGRESS':
        this.reported.set(this.nameOf(job), 2);
        return { jobStatus: 2, extra: [] };
      case 'DONE':
      case 'ERROR': {
        const fetch = st === 'DONE' ? this.startFetch(job) : this.describeFailures(job.batch, this.failedOf(job.batch));
        await Promise.race([fetch, new Promise((r) => setTimeout(r, WAIT_FOR_FETCH_MS).unref())]);
        const f = this.finals.get(job.jobName);
        // Until its outputs are in place the job keeps the state last reported: a job
        // never seen running is not made to "start" only to fetch its outputs.
        return f ? finalAnswer(job, f) : { jobStatus: this.reported.get(job.jobName) ?? 1, extra: [] };
      }
      default:
        throw new Error(`BOINC job ${job.jobName} has status ${st}, unknown here`);
    }
  }

  /** What BOINC says, no older than STATUS_MAX_AGE_MS (one refresh at a time). */
  private async fresh(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    if (now - this.refreshedAt < STATUS_MAX_AGE_MS) return;
    if (now - this.refreshFailedAt < RETRY_AFTER_FAILURE_MS) return;
    this.refreshing ??= this.refresh().finally(() => { this.refreshing = undefined; });
    await Promise.race([this.refreshing, new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }))]);
  }

  /** One BOINC_QUERY_BATCHES over every batch with an unfinished job; then the fetches it calls for. */
  private async refresh(): Promise<void> {
    let binding: ProjectBinding;
    try {
      binding = this.binding();
    } catch (err) {
      this.refreshError = errorMessage(err);
      this.refreshFailedAt = Date.now();
      return;
    }
    const names = [...this.batches.values()]
      .filter((b) => b.state === 'submitted' && b.projectUrl === binding.project.url && !this.gone.has(b.batch) && b.jobs.some((_, n) => !this.finals.has(boincJobName(b.batch, n))))
      .map((b) => b.batch);
    const started = Date.now();
    const query = queryBatchesCommand(this.services, { logFailedJobs: false });
    try {
      let tokens: string[] | undefined;
      for (let attempt = 0; attempt < 20 && names.length > 0; attempt++) {
        try {
          tokens = await query.run({ request: { minModTime: '0', batchNames: names }, binding }, this.handler('status refresh', this.rpcTimeoutMs));
          break;
        } catch (err) {
          // A batch the server no longer has fails the whole query: leave it out and ask again.
          const missing = err instanceof BoincRpcError && err.code === 'no-such-batch' ? err.batchName : undefined;
          if (!missing || !names.includes(missing)) throw err;
          this.gone.add(missing);
          names.splice(names.indexOf(missing), 1);
        }
      }
      if (tokens) {
        let t = 2;
        for (let b = 0; b < names.length; b++) {
          const n = Number(tokens[t++]);
          const rec = this.batches.get(names[b]!);
          for (let k = 0; k < n; k++, t += 2) {
            const job = parseOurJobName(tokens[t]!);
            if (rec && job?.batch === rec.batch) this.setStatus(rec, job.n, tokens[t + 1]!);
          }
        }
      }
      this.refreshedAt = started;
      this.refreshError = undefined;
      this.services.log.debug(`batch boinc: statuses of ${names.length} batches in ${Date.now() - started} ms`);
    } catch (err) {
      this.refreshFailedAt = Date.now();
      this.refreshError = `the BOINC server could not be asked: ${errorMessage(err)}`;
      this.services.log.warn(`batch boinc: status refresh failed: ${errorMessage(err)}`);
      return;
    }
    // Outputs are fetched as soon as BOINC has them, not when each job's status is asked;
    // failed jobs are described batch by batch.
    const failedBatches = new Set<string>();
    for (const [batch, codes] of this.boincStatus) {
      codes.forEach((code, n) => {
        if (code !== DONE_CODE && code !== ERROR_CODE) return;
        const name = boincJobName(batch, n);
        if (this.finals.has(name)) return;
        if (code === DONE_CODE) this.wantFetch(name);
        else failedBatches.add(batch);
      });
    }
    for (const batch of failedBatches) void this.describeFailures(batch, this.failedOf(batch));
  }

  /** The jobs of a batch BOINC reports ERROR that have no final state yet. */
  private failedOf(batch: string): string[] {
    const codes = this.boincStatus.get(batch);
    if (!codes) return [];
    const failed: string[] = [];
    codes.forEach((code, n) => {
      if (code !== ERROR_CODE) return;
      const name = boincJobName(batch, n);
      if (!this.finals.has(name)) failed.push(name);
    });
    return failed;
  }

  /** What BOINC said of a job at the last refresh (undefined: not listed). */
  private statusOf(job: ParsedJobName): string | undefined {
    const code = this.boincStatus.get(job.batch)?.[job.n];
    return code ? STATUS_WORDS[code] : undefined;
  }

  private setStatus(rec: StoredBatch, n: number, word: string): void {
    if (n >= rec.jobs.length) return;
    let codes = this.boincStatus.get(rec.batch);
    if (!codes) this.boincStatus.set(rec.batch, (codes = new Uint8Array(rec.jobs.length)));
    codes[n] = statusCode(word);
  }

  /**
   * The job's name as the route keeps it (a key of its maps): made from its batch's record,
   * not the name it came with, which may be a slice of a longer string (a request line, a
   * server reply) that it would keep whole.
   */
  private nameOf(job: ParsedJobName): string {
    const rec = this.batches.get(job.batch);
    return rec ? boincJobName(rec.batch, job.n) : job.jobName;
  }

  // ---- outputs ------------------------------------------------------------------------

  /** A promise of the job's fetch (started now if the queue has a place), for a status to wait on. */
  private startFetch(job: ParsedJobName): Promise<void> {
    this.wantFetch(this.nameOf(job));
    const running = this.fetching.get(job.jobName);
    if (running) return running;
    let waiter = this.fetchWaiters.get(job.jobName);
    if (!waiter) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => { resolve = r; });
      waiter = { promise, resolve };
      this.fetchWaiters.set(job.jobName, waiter);
    }
    return waiter.promise;
  }

  /** Marks a DONE job's outputs to be fetched (once: a job fetching or waiting already is left). */
  private wantFetch(jobName: string): void {
    if (this.fetching.has(jobName) || this.shutdown.signal.aborted) return;
    this.fetchWanted.add(jobName);
    this.takeFetches();
  }

  /** Gives the queue the oldest wanted jobs while it has a free place. */
  private takeFetches(): void {
    for (const name of this.fetchWanted) {
      if (this.fetchQueue.size + this.fetchQueue.pending >= FETCH_CONCURRENCY) return;
      this.fetchWanted.delete(name);
      const job = parseOurJobName(name);
      if (!job) continue;
      const work = this.fetchQueue.add(() => this.fetchOutputs(job))
        .catch((err) => this.services.log.error(`batch boinc: fetch of ${name}: ${errorMessage(err)}`))
        .finally(() => {
          this.fetching.delete(name);
          const waiter = this.fetchWaiters.get(name);
          this.fetchWaiters.delete(name);
          waiter?.resolve();
        });
      this.fetching.set(name, work);
    }
  }

  private async fetchOutputs(job: ParsedJobName): Promise<void> {
    if (this.finals.has(job.jobName) || this.shutdown.signal.aborted) return;
    const spec = this.batches.get(job.batch)?.jobs[job.n];
    if (!spec) return;
    const binding = this.binding();
    const req: FetchOutputRequest = {
      jobName: job.jobName,
      iwd: spec.iwd,
      stderrPath: spec.stderr ?? '/dev/null',
      mode: spec.outputs ? 'SOME' : 'ALL',
      specs: spec.outputs ?? [],
    };
    const t0 = Date.now();
    try {
      const { fetchOutputCommand } = await import('../commands/fetch-output.js');
      const ctx = this.handler(`fetch ${job.jobName}`, this.rpcTimeoutMs * 10);
      const tokens = await fetchOutputCommand(this.services).run({ request: req, binding }, ctx).finally(() => ctx.dispose());
      ensureStdout(spec);
      this.setFinal(job, { kind: 'done', exitCode: Number(tokens[1] ?? 0), wallClock: Number(tokens[2] ?? 0), cpu: Number(tokens[3] ?? 0) });
      this.fetchFailures.delete(job.jobName);
      this.services.log.info(`batch boinc: ${job.jobName}: outputs in ${spec.iwd} (${Date.now() - t0} ms)`);
      this.afterFinal(job.batch);
    } catch (err) {
      if (this.shutdown.signal.aborted) return;
      const msg = errorMessage(err);
      this.services.log.warn(`batch boinc: fetch of ${job.jobName} failed: ${msg}`);
      if (err instanceof BoincRpcError && err.kind === 'transport') return; // the next refresh tries again
      // Loaded here, as fetch-output above: the GAHP as HTCondor starts it loads no fetch module until a fetch comes.
      const { isOutputGone } = await import('../output/gone.js');
      if (isOutputGone(err)) {
        // Deleted or moved by the project: no attempt can bring it back, nothing is kept.
        this.fetchFailures.delete(job.jobName);
        this.setFinal(job, { kind: 'held', reason: `BOINC finished job ${job.jobName} but ${msg}`, code: 0 });
        this.afterFinal(job.batch);
        return;
      }
      const attempts = (this.fetchFailures.get(job.jobName) ?? 0) + 1;
      this.fetchFailures.set(job.jobName, attempts);
      if (attempts >= MAX_FETCH_ATTEMPTS) {
        this.fetchFailures.delete(job.jobName);
        const lease = this.batches.get(job.batch)?.leaseExpiresAt;
        this.setFinal(job, {
          kind: 'held',
          reason: `BOINC finished job ${job.jobName} but its outputs could not be put in place (${attempts} attempts): ${msg}. The result is kept on BOINC${lease !== undefined ? ` until ${new Date(lease * 1000).toISOString()}` : ''}: fix the cause and release the job${lease !== undefined ? ' before then' : ''} to fetch it`,
          code: 0,
          resultKept: true,
          // Kept no longer than the batch's lease as it is now, renewed or not for other jobs.
          ...(lease !== undefined ? { keptUntil: lease } : {}),
        });
      }
    }
  }

  /**
   * The jobs of a batch BOINC gave up on: held, with what the server reports of them (exit
   * status, aborted, the instances' states: gahp/failed-job.ts), one query for the batch.
   */
  private describeFailures(batch: string, names: string[]): Promise<void> {
    const running = this.describing.get(batch);
    if (running) return running;
    const work = (async () => {
      const todo = names.filter((n) => !this.finals.has(n));
      if (todo.length === 0) return;
      let reports: Map<string, FailedJobReport>;
      try {
        reports = await describeFailedJobs(this.binding().rpc, batch, todo, { signal: this.handler('failed jobs', this.rpcTimeoutMs * 2).signal });
      } catch (err) {
        if (err instanceof BoincRpcError && err.kind === 'transport') return; // asked again at the next refresh
        reports = new Map();
        this.services.log.warn(`batch boinc: no details of the failed jobs of ${batch}: ${errorMessage(err)}`);
      }
      for (const name of todo) {
        const job = parseOurJobName(name);
        if (!job || this.finals.has(name)) continue;
        const r = reports.get(name);
        this.setFinal(job, {
          kind: 'held',
          reason: `BOINC gave up on job ${name}: ${r ? r.text : 'its instances failed (the server reports nothing more)'}`,
          code: 0,
        });
        this.services.log.info(`batch boinc: ${name}: held: ${r?.text ?? 'failed'}`);
      }
      this.afterFinal(batch);
    })().finally(() => this.describing.delete(batch));
    this.describing.set(batch, work);
    return work;
  }

  private setFinal(job: ParsedJobName, state: FinalState): void {
    this.finals.set(this.nameOf(job), state);
    this.reported.delete(job.jobName);
    try {
      this.store?.appendFinal(job.batch, job.jobName, state);
    } catch (err) {
      this.services.log.error(`batch boinc: cannot record the final state of ${job.jobName}: ${errorMessage(err)}`);
    }
  }

  // ---- cancel -------------------------------------------------------------------------

  async cancel(job: ParsedJobName): Promise<void> {
    this.ensureLoaded();
    // A job of an archived batch has its final state: nothing to abort.
    if (this.archived(job)) return;
    const rec = this.batches.get(job.batch);
    if (!rec?.jobs[job.n]) throw new Error(`BOINC job ${job.jobName} is not one this GAHP submitted`);
    const fin = this.finals.get(job.jobName);
    if (fin?.kind === 'cancelled' || fin?.kind === 'done') return;
    if (fin?.kind === 'held' && fin.resultKept) {
      // Its result is on BOINC: kept for the job's return (nothing to abort now), until its end.
      this.setFinal(job, { kind: 'cancelled', kept: true, ...(fin.keptUntil !== undefined ? { keptUntil: fin.keptUntil } : {}) });
      return;
    }
    if (rec.state === 'claimed') await (this.settled.get(rec.batch)?.promise ?? this.settle(rec));
    if (rec.state !== 'submitted') {
      this.setFinal(job, { kind: 'cancelled' });
      return;
    }
    await new Promise<void>((resolve, reject) => {
      this.pendingAborts.push({ job, resolve, reject });
      this.abortTimer ??= setTimeout(() => void this.abortPending(), GATHER_QUIET_MS);
    });
    this.services.log.info(`batch boinc: ${job.jobName}: aborted on BOINC`);
    this.afterFinal(job.batch);
  }

  /** One abort_jobs for every cancel gathered. */
  private async abortPending(): Promise<void> {
    this.abortTimer = undefined;
    const todo = this.pendingAborts;
    this.pendingAborts = [];
    try {
      const binding = this.binding();
      await abortJobsCommand(this.services).run({ request: { jobNames: todo.map((t) => t.job.jobName) }, binding }, this.handler('abort', this.rpcTimeoutMs * 2));
      for (const t of todo) {
        this.setFinal(t.job, { kind: 'cancelled' });
        t.resolve();
      }
    } catch (err) {
      for (const t of todo) t.reject(err);
    }
  }

  // ---- batches: retire, leases ----------------------------------------------------------

  private batchFinished(rec: StoredBatch): boolean {
    // Looked at after every job's final state: from where the last look stopped, not from
    // job 0 (a batch of 1,000 jobs cost 1,000 names and lookups a job).
    let n = this.finishedUpTo.get(rec) ?? 0;
    while (n < rec.jobs.length) {
      const f = this.finals.get(boincJobName(rec.batch, n));
      // A held job whose result is kept keeps its batch open (retiring lets BOINC delete it).
      if (f === undefined || isKept(f)) break;
      n++;
    }
    this.finishedUpTo.set(rec, n);
    return n === rec.jobs.length;
  }

  /** Whether every job of the batch is final or held with its result kept (nothing left to run). */
  private onlyKeptLeft(rec: StoredBatch): boolean {
    return rec.jobs.every((_, n) => this.finals.has(boincJobName(rec.batch, n)));
  }

  /** After a job's final state: its batch is retired at once when it was the last one. */
  private afterFinal(batch: string): void {
    const rec = this.batches.get(batch);
    if (rec && rec.state === 'submitted' && this.batchFinished(rec)) void this.retire(rec);
  }

  private async retire(rec: StoredBatch): Promise<void> {
    try {
      await retireBatchCommand(this.services).run({ request: { batchName: rec.batch }, binding: this.binding() }, this.handler('retire', this.rpcTimeoutMs * 2));
      rec.state = 'retired';
      rec.retiredAt = Date.now();
      this.store?.saveBatch(rec);
      // What BOINC said of its jobs is not needed any more (their final states answer).
      this.boincStatus.delete(rec.batch);
      this.services.log.info(`batch boinc: retired batch ${rec.batch}: every job finished`);
    } catch (err) {
      this.services.log.warn(`batch boinc: retiring ${rec.batch} failed (tried again later): ${errorMessage(err)}`);
    }
  }

  /**
   * Kept results past their end (the batch's lease when they were kept): no job came back
   * for them. A job held, then removed, sends nothing (the gridmanager cancels no held
   * job), so this is the only way such a result ends. Each is aborted on BOINC, which
   * lets it delete the files even while other jobs keep the batch open, and the job's
   * final state says the result is gone (a release now runs the job again); the batch is
   * retired when nothing else is left.
   */
  private async giveUpKept(rec: StoredBatch, nowS: number, binding: ProjectBinding): Promise<void> {
    const expired: ParsedJobName[] = [];
    rec.jobs.forEach((_, n) => {
      const name = boincJobName(rec.batch, n);
      const f = this.finals.get(name);
      if (f && isKept(f) && f.keptUntil !== undefined && f.keptUntil <= nowS) {
        expired.push({ jobName: name, batch: rec.batch, n });
      }
    });
    if (expired.length === 0) return;
    try {
      await abortJobsCommand(this.services).run({ request: { jobNames: expired.map((j) => j.jobName) }, binding }, this.handler('abort', this.rpcTimeoutMs * 2));
    } catch (err) {
      if (err instanceof BoincRpcError && err.kind === 'transport') {
        this.services.log.warn(`batch boinc: giving up the kept results of ${rec.batch}: abort failed (tried again later): ${errorMessage(err)}`);
        return;
      }
      // The server refuses (the batch or job is gone): nothing is left to keep either.
      this.services.log.warn(`batch boinc: giving up the kept results of ${rec.batch}: abort refused: ${errorMessage(err)}`);
    }
    for (const job of expired) {
      const f = this.finals.get(job.jobName) as Extract<FinalState, { kind: 'held' | 'cancelled' }>;
      const until = new Date((f.keptUntil ?? nowS) * 1000).toISOString();
      this.setFinal(job, f.kind === 'held'
        ? { kind: 'held', code: f.code, reason: `${f.reason.replace(/\. The result is kept on BOINC.*$/, '')}. Its result was kept on BOINC until ${until} (its batch's lease then) and is given up: a release runs the job again` }
        : { kind: 'cancelled' });
      this.services.log.info(`batch boinc: ${job.jobName}: its kept result was given up (kept until ${until}, no job came back for it): aborted on BOINC`);
    }
  }

  /**
   * The final state of a job whose batch is archived (store.ts: retired over a day ago, not
   * read at start-up), read from the archive when asked; undefined for any other job. The
   * last few archived batches asked are kept: the gridmanager asks for a cluster's jobs
   * one after another.
   */
  private archived(job: ParsedJobName): FinalState | undefined {
    if (this.batches.has(job.batch)) return undefined;
    let a = this.archiveCache.get(job.batch);
    if (!a) {
      const read = this.store!.readArchived(job.batch);
      if (!read) return undefined;
      a = read.finals;
      this.archiveCache.set(job.batch, a);
      if (this.archiveCache.size > ARCHIVE_CACHE_BATCHES) this.archiveCache.delete(this.archiveCache.keys().next().value!);
    }
    return a.get(job.jobName);
  }

  /** Retired batches past ARCHIVE_AFTER_MS leave memory and the start-up path (store.ts). */
  private archiveOld(now: number): void {
    for (const rec of [...this.batches.values()]) {
      if (rec.state !== 'retired' || (rec.retiredAt ?? now) >= now - ARCHIVE_AFTER_MS) continue;
      if (!this.store?.archive(rec.batch)) continue;
      this.batches.delete(rec.batch);
      rec.jobs.forEach((j, n) => {
        const name = boincJobName(rec.batch, n);
        if (this.byKey.get(j.key) === name) this.byKey.delete(j.key);
        this.finals.delete(name);
      });
    }
  }

  private async housekeeping(): Promise<void> {
    if (this.shutdown.signal.aborted) return;
    this.archiveOld(Date.now());
    let binding: ProjectBinding;
    try {
      binding = this.binding();
    } catch {
      return;
    }
    const nowS = Math.floor(Date.now() / 1000);
    const lease = this.services.config.defaultLeaseSeconds;
    for (const rec of this.batches.values()) {
      if (rec.state !== 'submitted' || rec.projectUrl !== binding.project.url || this.gone.has(rec.batch)) continue;
      await this.giveUpKept(rec, nowS, binding);
      if (this.batchFinished(rec)) {
        await this.retire(rec);
      } else if (this.onlyKeptLeft(rec)) {
        // Results kept for jobs that may come back (released): the lease is not renewed for
        // them, and once it has run out nobody is coming: the batch is retired.
        if (rec.leaseExpiresAt !== undefined && rec.leaseExpiresAt <= nowS) {
          this.services.log.info(`batch boinc: batch ${rec.batch}: its lease ran out with results kept that no job came back for; retiring it`);
          await this.retire(rec);
        }
      } else if (rec.leaseExpiresAt === undefined || rec.leaseExpiresAt - nowS < lease / 2) {
        try {
          await setLeaseCommand(this.services).run({ request: { batchName: rec.batch, expireTime: nowS + lease }, binding }, this.handler('lease', this.rpcTimeoutMs * 2));
          rec.leaseExpiresAt = nowS + lease;
          this.store?.saveBatch(rec);
        } catch (err) {
          this.services.log.warn(`batch boinc: renewing the lease of ${rec.batch} failed: ${errorMessage(err)}`);
        }
      }
    }
  }
}

function sameInputs(a: ReadonlyArray<{ src: string; dst: string }>, b: ReadonlyArray<{ src: string; dst: string }>): boolean {
  return a.length === b.length && a.every((x, i) => x.src === b[i]!.src && x.dst === b[i]!.dst);
}

/** A final state whose result is kept on BOINC for the job's return (a release). */
function isKept(f: FinalState): f is Extract<FinalState, { kind: 'held' | 'cancelled' }> {
  return (f.kind === 'held' && f.resultKept === true) || (f.kind === 'cancelled' && f.kept === true);
}

/**
 * BOINC's job status words as the route keeps them (boincStatus): a word's code is its index;
 * a word not known yet is added (at most 255: more would be a server gone wrong, kept as the last).
 */
const STATUS_WORDS = ['', 'NOT_STARTED', 'IN_PROGRESS', 'DONE', 'ERROR', 'UNSENT'];
const DONE_CODE = 3;
const ERROR_CODE = 4;

function statusCode(word: string): number {
  const code = STATUS_WORDS.indexOf(word);
  if (code > 0) return code;
  if (STATUS_WORDS.length < 256) STATUS_WORDS.push(ownCopy(word));
  return STATUS_WORDS.length - 1;
}

function parseOurJobName(name: string): ParsedJobName | undefined {
  const m = /^(.+)_(\d{1,7})$/.exec(name);
  return m ? { jobName: name, batch: m[1]!, n: Number(m[2]) } : undefined;
}

function held(reason: string, code: number): JobStatusAnswer {
  return { jobStatus: 5, extra: [['HoldReason', reason], ['HoldReasonCode', code], ['HoldReasonSubCode', 0]] };
}

function finalAnswer(_job: ParsedJobName, f: FinalState): JobStatusAnswer {
  switch (f.kind) {
    case 'done':
      return { jobStatus: 4, extra: [['ExitCode', f.exitCode], ['RemoteWallClockTime', f.wallClock], ['RemoteUserCpu', f.cpu]] };
    case 'cancelled':
      return { jobStatus: 3, extra: [] };
    case 'held':
      return held(f.reason, f.code);
  }
}
