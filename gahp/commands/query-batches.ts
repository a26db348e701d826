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
 * of the jobs re-read through that overlap only those are left out again that the answer
 * carrying this very min_mod_time (its server_time) reported with the status they have now
 * (AnswerMemory): the gridmanager asks again from an old min_mod_time after a failed or
 * timed-out query, and must then hear of every change since, reported or not. It sees its
 * min_mod_time and the server's server_time as they were, and every change at least once.
 *
 * A job submitted again in a later batch (HTCondor's hold and release: the gridmanager
 * aborts `<old batch>#16.0` and submits `<new batch>#16.0`) is no longer reported in its
 * old batch: the gridmanager matches answers to its jobs by `cluster.proc` alone, so the
 * aborted job's ERROR would put the new one on hold. The ledger knows which jobs are
 * superseded, durably (docs/gahp-protocol.md, "Resubmitted jobs").
 *
 * A job BOINC_SUBMIT left out of its batch for a problem of its own is reported DONE with
 * the batch's jobs (the ledger keeps it), so the gridmanager fetches it, and the fetch's
 * error, naming the problem, becomes that job's hold reason (docs/gahp-protocol.md, "A job
 * refused alone").
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
import { yieldNow } from '../util.js';
import { describeFailedJobs } from '../failed-job.js';
import type { ProjectBinding } from '../session.js';

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


/** Per batch name, the status of each job an answer reported. */
export type ReportedJobs = ReadonlyMap<string, ReadonlyMap<string, string>>;

/**
 * What each answer reported, by the server_time token it carried, per account. A client
 * that sends a token back as min_mod_time has provably received the answer that carried it
 * (the token came only in that answer), and nothing more: the gridmanager keeps its old
 * min_mod_time when a query fails or times out and asks again from it, so a later answer
 * may never have reached it. So a job re-read through the one-second overlap is left out
 * only when the answer that carried exactly this token reported it with the same status;
 * everything else is reported, again if need be.
 *
 * In memory only and bounded: the newest tokens of each account (a token looked up counts
 * as new again: the gridmanager repeats its last good one), and at most maxJobs statuses in
 * all, the oldest answers forgotten first. A forgotten or unknown token (a restart, another
 * client) suppresses nothing. A token carried by two answers (two queries of one account in
 * the same instant) cannot say which of them was received: it suppresses nothing either.
 */
export class AnswerMemory {
  /** `<accountKey>\n<token>` -> the answer's statuses; Map order is age, oldest first. */
  private readonly answers = new Map<string, { account: string; jobs: ReportedJobs | 'ambiguous'; size: number }>();
  private total = 0;

  constructor(
    private readonly tokensPerAccount = 8,
    private readonly maxJobs = 2_000_000,
  ) {}

  /** The statuses reported in the answer that carried `token` to this account (undefined: none known). */
  reportedIn(accountKey: string, token: string): ReportedJobs | undefined {
    const key = `${accountKey}\n${token}`;
    const entry = this.answers.get(key);
    if (!entry) return undefined;
    this.answers.delete(key);
    this.answers.set(key, entry);
    return entry.jobs === 'ambiguous' ? undefined : entry.jobs;
  }

  /** Records an answer: `size` is the number of statuses in `jobs`. */
  remember(accountKey: string, token: string, jobs: ReportedJobs, size: number): void {
    const key = `${accountKey}\n${token}`;
    const earlier = this.answers.get(key);
    if (earlier) {
      this.total -= earlier.size;
      this.answers.delete(key);
      this.answers.set(key, { account: accountKey, jobs: 'ambiguous', size: 0 });
      return;
    }
    if (size > this.maxJobs) return;
    this.answers.set(key, { account: accountKey, jobs, size });
    this.total += size;
    let ofAccount = 0;
    for (const e of this.answers.values()) if (e.account === accountKey) ofAccount++;
    for (const [k, e] of this.answers) {
      if (this.total <= this.maxJobs && ofAccount <= this.tokensPerAccount) break;
      if (k === key) continue;
      if (this.total > this.maxJobs || e.account === accountKey) {
        this.answers.delete(k);
        this.total -= e.size;
        if (e.account === accountKey) ofAccount--;
      }
    }
  }

  /** How many statuses are kept (for tests of the bound). */
  get size(): number {
    return this.total;
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

/** Per batch name, its jobs submitted again in a later batch (not to be reported). */
export type SupersededJobs = (batchName: string) => ReadonlySet<string> | undefined;

/** Per batch name, the jobs its submit left out (job name -> why), reported DONE. */
export type RefusedJobs = (batchName: string) => ReadonlyMap<string, string> | undefined;

/**
 * The result tokens, built with yields so a huge reply does not stall the protocol loop.
 * Jobs whose status is the one `known` (the answer whose token the client sent) reported for
 * them are left out, and so are superseded jobs. A batch's refused jobs follow its server
 * jobs as DONE (the server has never heard of them; docs/gahp-protocol.md, "A job refused
 * alone"), left out like the others when `known` has them; they are not for the ledger's
 * statuses, which are the server's. `reported` is what this answer reports, for the next
 * query's `known`.
 */
export async function buildQueryResult(
  reply: QueryBatch2Reply,
  batchNames: readonly string[],
  known?: ReportedJobs,
  superseded?: SupersededJobs,
  refused?: RefusedJobs,
): Promise<{ tokens: string[]; ledger: LedgerQueryBatch[]; reported: Map<string, Map<string, string>>; reportedCount: number; failed: Map<string, string[]> }> {
  const batchCount = batchNames.length;
  if (reply.batches.length !== batchCount) {
    throw new Error(`query_batch2 failed: the server reported ${reply.batches.length} batches for ${batchCount} asked`);
  }
  let total = 2 + batchCount;
  for (const b of reply.batches) total += 2 * b.jobs.length;
  for (const name of batchNames) total += 2 * (refused?.(name)?.size ?? 0);
  const tokens = new Array<string>(total);
  let t = 0;
  tokens[t++] = 'NULL';
  tokens[t++] = reply.serverTime;
  const ledger: LedgerQueryBatch[] = [];
  const reported = new Map<string, Map<string, string>>();
  /** Per batch, its jobs this answer reports ERROR (for logFailures, without a second pass over all). */
  const failed = new Map<string, string[]>();
  let reportedCount = 0;
  let sinceYield = 0;
  for (let k = 0; k < batchCount; k++) {
    const b = reply.batches[k]!;
    const name = batchNames[k]!;
    const countAt = t++;
    const before = known?.get(name);
    const gone = superseded?.(name);
    // A batch named twice in one query gets one map: both lists report the same jobs.
    let now = reported.get(name);
    if (!now) reported.set(name, (now = new Map<string, string>()));
    // The ledger's part: the reply's job objects themselves where the status word is the
    // server's (a new pair per job was a fifth of the time a 100,000-job answer took to build).
    const ledgerJobs: Array<{ readonly name: string; readonly status: string }> = [];
    for (let i = 0; i < b.jobs.length; i++) {
      const job = b.jobs[i]!;
      if (gone !== undefined && gone.has(job.name)) continue;
      const status = gridStatus(job.status);
      if (before !== undefined && before.get(job.name) === status) continue;
      now.set(job.name, status);
      tokens[t++] = job.name;
      tokens[t++] = status;
      ledgerJobs.push(status === job.status ? job : { name: job.name, status });
      if (status === 'ERROR') {
        const jobs = failed.get(name);
        if (jobs) jobs.push(job.name);
        else failed.set(name, [job.name]);
      }
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldNow();
      }
    }
    ledger.push({ name, jobs: ledgerJobs });
    let count = ledgerJobs.length;
    for (const job of refused?.(name)?.keys() ?? []) {
      if (gone !== undefined && gone.has(job)) continue;
      if (before !== undefined && before.get(job) === 'DONE') continue;
      now.set(job, 'DONE');
      tokens[t++] = job;
      tokens[t++] = 'DONE';
      count++;
    }
    tokens[countAt] = String(count);
  }
  tokens.length = t;
  for (const jobs of reported.values()) reportedCount += jobs.size;
  return { tokens, ledger, reported, reportedCount, failed };
}

/** Failed jobs whose failure was logged, remembered at most (then forgotten all at once). */
const MAX_LOGGED_FAILURES = 100_000;

/**
 * `logFailedJobs`: whether the first answer reporting a job ERROR has the reason asked for and
 * logged (below). The protocol's command does (HTCondor 10.0 asks nothing more); the `batch
 * boinc` front ends, which call this handler in-process, do not: each asks the server why
 * itself, for the hold reason, and a second query_batch per failed batch would be waste.
 */
export function queryBatchesCommand(services: GahpServices, { logFailedJobs = true }: { logFailedJobs?: boolean } = {}): AsyncCommand<BoundRequest<QueryBatchesRequest>> {
  /** `<project>\n<batch>\n<lease>` already warned about. */
  const warned = new Set<string>();
  const answers = new AnswerMemory();
  /** `<account key>\n<job>` whose failure was logged. */
  const failuresLogged = new Set<string>();

  /**
   * HTCondor 10.0 holds a job BOINC reports ERROR with its own words, "Reason unknown,
   * check the server", and asks nothing more: so the first answer that reports a job ERROR
   * has the GAHP ask the server why (gahp/failed-job.ts: one query_batch with job details
   * per batch) and log it at info, where the user is told to look (README, "HTCondor
   * set-up"). In the background: the answer does not wait for it.
   */
  function logFailures(bound: ProjectBinding, reportedFailed: ReadonlyMap<string, readonly string[]>, ctx: HandlerContext): void {
    const failed = new Map<string, string[]>();
    for (const [batch, reportedJobs] of reportedFailed) {
      for (const job of reportedJobs) {
        const key = `${bound.accountKey}\n${job}`;
        if (failuresLogged.has(key)) continue;
        if (failuresLogged.size >= MAX_LOGGED_FAILURES) failuresLogged.clear();
        failuresLogged.add(key);
        let jobs = failed.get(batch);
        if (!jobs) failed.set(batch, (jobs = []));
        jobs.push(job);
      }
    }
    for (const [batch, jobs] of failed) {
      describeFailedJobs(bound.rpc, batch, jobs, { signal: ctx.signal }).then(
        (reports) => {
          for (const [job, r] of reports) ctx.log.info(`job ${job} of batch ${batch} failed on BOINC: ${r.text}`);
        },
        (err) => {
          if (ctx.signal.aborted) return;
          ctx.log.info(`${jobs.length} jobs of batch ${batch} failed on BOINC (${jobs.slice(0, 5).join(', ')}${jobs.length > 5 ? ', ...' : ''}); asking the server why failed: ${(err as Error).message}`);
        },
      );
    }
  }

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
      const known = askFrom !== req.minModTime ? answers.reportedIn(accountKey, req.minModTime) : undefined;
      const superseded: SupersededJobs = (name) => services.ledger.superseded(project.url, name);
      const refused: RefusedJobs = (name) => services.ledger.refused(project.url, name);
      const { tokens, ledger, reported, reportedCount, failed } = await buildQueryResult(reply, req.batchNames, known, superseded, refused);
      answers.remember(accountKey, reply.serverTime, reported, reportedCount);
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
        .then(() => {
          if (logFailedJobs && failed.size > 0) logFailures(projectOf(bound), failed, ctx);
        })
        .catch((err) => ctx.log.error(`lease check failed: ${(err as Error).message}`));
      ctx.log.debug(
        `query ${ctx.reqId}: ${req.batchNames.length} batches, ${(tokens.length - 2 - req.batchNames.length) / 2} jobs; ` +
          `query_batch2 ${(t1 - t0).toFixed(0)} ms, result ${(t2 - t1).toFixed(0)} ms`,
      );
      return tokens;
    },
  };
}
