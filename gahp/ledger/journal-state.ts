/**
 * The ledger's state in memory and how journal lines change it (docs/storage.md, "The
 * ledger journal"): a map of batches, each with a map of job statuses. Replaying the lines
 * of `ledger.jsonl` in order gives the state; a line that does not parse (torn by a crash)
 * is skipped. The journal file and its writers are journal-ledger.ts's; compaction is
 * journal-compaction.ts's.
 *
 * Cost: job statuses live in a Map per batch. A status query is recorded as one entry that
 * holds only the statuses that changed; view() is O(1) in the number of jobs (copy-on-write:
 * the job map handed out is copied only if the batch changes afterwards, and the `jobs`
 * object is built on first access).
 *
 * Resubmitted jobs: HTCondor's gridmanager matches status answers to its jobs by the
 * `cluster.proc` after the last `#` of a job name alone, so after a hold and release has
 * submitted `<batch2>#16.0`, an answer still carrying the aborted `<batch1>#16.0` would
 * land on the new job. Every job whose name has the gridmanager's shape is indexed by its
 * submitter (the batch name without its app and time) and `cluster.proc`; a job of a batch
 * created earlier than another batch holding the same key is superseded
 * (docs/storage.md, "Superseded jobs"). Derived from the batches' job maps and refused
 * jobs, so it survives restarts and compaction like them.
 */
import { ownCopy } from '../../boinc-rpc/xml.js';
import { yieldNow } from '../util.js';
import type { JobBatch, LedgerBatch, LedgerBatchPatch, LedgerQueryBatch } from './types.js';

export type JournalEntry =
  | { op: 'upsert'; p: string; n: string; t: number; patch: LedgerBatchPatch }
  | { op: 'status'; p: string; n: string; t: number; jobs: Record<string, string>; st?: string }
  /** One status query over several batches: batch name -> changed job statuses. */
  | { op: 'query'; p: string; t: number; st: string; b: Record<string, Record<string, string>> }
  | { op: 'snapshot'; batch: LedgerBatch };

/** The in-memory record of a batch: its job statuses, and its refused jobs' reasons, in Maps. */
type BatchRecord = Omit<LedgerBatch, 'jobs' | 'refused'> & {
  jobs: Map<string, string>;
  refused?: Map<string, string>;
  /** The job map was handed out by view(): copy it before changing it. */
  jobsShared: boolean;
  /** Jobs of this batch submitted again in a batch created later (not journalled: derived). */
  superseded?: Set<string>;
};

/** Status-query work, and replayed lines, between two yields to the event loop. */
const YIELD_EVERY = 5000;
/** Compaction forgets batches retired longer ago than this. */
const RETIRED_KEEP_MS = 30 * 24 * 3600 * 1000;
const key = (projectUrl: string, name: string) => `${projectUrl}\n${name}`;

export class JournalState {
  private readonly batches = new Map<string, BatchRecord>();
  /**
   * submitter -> `<cluster>.<proc>` -> the newest batch holding that job (one map per
   * submitter: the keys are short strings, not the submitter repeated in each).
   */
  private readonly newestByJob = new Map<string, Map<string, BatchRecord>>();

  get size(): number {
    return this.batches.size;
  }

  get(projectUrl: string, batchName: string): LedgerBatch | undefined {
    const rec = this.batches.get(key(projectUrl, batchName));
    return rec && view(rec);
  }

  /** The jobs of a batch that were submitted again in a batch created later (undefined: none). */
  superseded(projectUrl: string, batchName: string): ReadonlySet<string> | undefined {
    const rec = this.batches.get(key(projectUrl, batchName));
    return rec?.superseded;
  }

  batchOfJob(projectUrl: string, jobName: string): JobBatch | undefined {
    const rec = this.recordOfJob(projectUrl, jobName, (r) => r.jobs.has(jobName));
    return rec && { name: rec.name, app: rec.app, createdAt: rec.createdAt };
  }

  refused(projectUrl: string, batchName: string): ReadonlyMap<string, string> | undefined {
    return this.batches.get(key(projectUrl, batchName))?.refused;
  }

  refusal(projectUrl: string, jobName: string): string | undefined {
    return this.recordOfJob(projectUrl, jobName, (r) => r.refused?.has(jobName) === true)?.refused!.get(jobName);
  }

  /**
   * The record of the batch named by the job's name up to its last `#` (the gridmanager's
   * and the CLI's job names) or its last `_` (the BLAHP's), when `holds` says it has the job.
   */
  private recordOfJob(projectUrl: string, jobName: string, holds: (rec: BatchRecord) => boolean): BatchRecord | undefined {
    for (const sep of ['#', '_']) {
      const at = jobName.lastIndexOf(sep);
      const rec = at > 0 ? this.batches.get(key(projectUrl, jobName.slice(0, at))) : undefined;
      if (rec && holds(rec)) return rec;
    }
    return undefined;
  }

  list(projectUrl?: string): LedgerBatch[] {
    return [...this.batches.values()]
      .filter((b) => projectUrl === undefined || b.projectUrl === projectUrl)
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .map(view);
  }

  /** Replays journal text; returns the number of lines. Torn lines are skipped. */
  replay(buf: Buffer): number {
    let lines = 0;
    for (let start = 0; start < buf.length; ) start = this.replayLine(buf, start, () => lines++);
    return lines;
  }

  /** replay() with a yield to the event loop every few thousand lines. */
  async replayAsync(buf: Buffer): Promise<number> {
    let lines = 0;
    for (let start = 0, slice = 0; start < buf.length; slice++) {
      start = this.replayLine(buf, start, () => lines++);
      if (slice % YIELD_EVERY === YIELD_EVERY - 1) await yieldNow();
    }
    return lines;
  }

  /** Applies the line that starts at `start`; returns where the next one starts. */
  private replayLine(buf: Buffer, start: number, counted: () => void): number {
    let end = buf.indexOf(10, start);
    if (end < 0) end = buf.length;
    if (end > start) {
      counted();
      try {
        this.apply(JSON.parse(buf.toString('utf8', start, end)) as JournalEntry);
      } catch {
        // A line cut by a crash mid-append: everything before it is intact.
      }
    }
    return end + 1;
  }

  /**
   * Applies a status query to the records, a slice of jobs at a time with yields between;
   * resolves to its journal line ('' = nothing to write).
   */
  async applyQuery(projectUrl: string, t: number, serverTime: string, batches: ReadonlyArray<LedgerQueryBatch>): Promise<string> {
    const parts: string[] = [];
    let since = 0;
    for (const qb of batches) {
      const rec = this.batches.get(key(projectUrl, qb.name));
      if (!rec) continue;
      // Null prototype: a job named `__proto__` is just a key.
      const changed = Object.create(null) as Record<string, string>;
      const jobs = qb.jobs;
      for (let i = 0; i < jobs.length; ) {
        const begin = i;
        const end = Math.min(jobs.length, i + YIELD_EVERY - since);
        let map: Map<string, string> | undefined;
        for (; i < end; i++) {
          const { name, status } = jobs[i]!;
          const before = rec.jobs.get(name);
          if (before === status) continue;
          // A job new to the record is keyed by its own copy of the name, a slice of the reply.
          const job = before === undefined ? ownCopy(name) : name;
          map ??= writableJobs(rec);
          map.set(job, status);
          changed[job] = status;
          if (before === undefined) this.indexJobs(rec, [job]);
        }
        since += end - begin;
        if (since >= YIELD_EVERY) {
          since = 0;
          await yieldNow();
        }
      }
      rec.lastServerTime = serverTime;
      rec.updatedAt = t;
      parts.push(JSON.stringify(qb.name) + ':' + JSON.stringify(changed));
    }
    if (parts.length === 0) return '';
    return `{"op":"query","p":${JSON.stringify(projectUrl)},"t":${t},"st":${JSON.stringify(serverTime)},"b":{${parts.join(',')}}}`;
  }

  apply(entry: JournalEntry): void {
    switch (entry.op) {
      case 'snapshot': {
        const b = entry.batch;
        const rec = this.record(b.projectUrl, b.name, b.createdAt);
        copyFields(rec, b);
        rec.physFiles = Array.isArray(b.physFiles) ? [...b.physFiles] : [];
        rec.jobs = new Map(Object.entries(b.jobs ?? {}));
        rec.jobsShared = false;
        rec.createdAt = b.createdAt;
        rec.updatedAt = b.updatedAt;
        this.indexJobs(rec, rec.jobs.keys());
        this.setRefused(rec, b.refused ?? {});
        return;
      }
      case 'upsert': {
        const rec = this.record(entry.p, entry.n, entry.t);
        const patch = entry.patch;
        copyFields(rec, patch);
        if (patch.physFiles) rec.physFiles = [...patch.physFiles];
        if (patch.jobs) this.setJobs(rec, Object.entries(patch.jobs));
        if (patch.refused) this.setRefused(rec, patch.refused);
        rec.updatedAt = entry.t;
        return;
      }
      case 'status': {
        const rec = this.record(entry.p, entry.n, entry.t);
        this.setJobs(rec, Object.entries(entry.jobs));
        if (entry.st !== undefined) rec.lastServerTime = entry.st;
        rec.updatedAt = entry.t;
        return;
      }
      case 'query': {
        for (const [name, changed] of Object.entries(entry.b)) {
          const rec = this.batches.get(key(entry.p, name));
          if (!rec) continue;
          const entries = Object.entries(changed);
          if (entries.length > 0) this.setJobs(rec, entries);
          rec.lastServerTime = entry.st;
          rec.updatedAt = entry.t;
        }
        return;
      }
    }
  }

  /**
   * The snapshot lines of compaction, one batch per line, dropping (here too) batches
   * retired over RETIRED_KEEP_MS ago. Each line is encoded when asked for, from the record
   * as it is then.
   */
  *snapshotLines(now = Date.now()): Generator<string> {
    for (const [k, rec] of [...this.batches]) {
      if (rec.state === 'retired' && now - rec.updatedAt > RETIRED_KEEP_MS) {
        this.batches.delete(k);
        continue;
      }
      yield JSON.stringify({ op: 'snapshot', batch: plain(rec) }) + '\n';
    }
  }

  private setJobs(rec: BatchRecord, entries: Array<[string, string]>): void {
    const jobs = writableJobs(rec);
    let added: string[] | undefined;
    for (const [job, status] of entries) {
      if (!jobs.has(job)) (added ??= []).push(job);
      jobs.set(job, status);
    }
    if (added) this.indexJobs(rec, added);
  }

  /**
   * Replaces the batch's refused jobs. They are indexed like its jobs: the gridmanager
   * matches a refused job's reported DONE by cluster.proc as it does any other status, so a
   * job submitted again in a later batch supersedes it (and it supersedes an earlier one).
   */
  private setRefused(rec: BatchRecord, refused: Record<string, string>): void {
    const entries = Object.entries(refused);
    rec.refused = entries.length > 0 ? new Map(entries) : undefined;
    if (rec.refused) this.indexJobs(rec, rec.refused.keys());
  }

  /**
   * Indexes jobs new to a batch by submitter and cluster.proc; where another batch holds
   * the same job, the one of the batch created earlier is marked superseded (on a tie, the
   * batch indexed first: journal order).
   */
  private indexJobs(rec: BatchRecord, jobNames: Iterable<string>): void {
    const submitter = submitterOf(rec.name);
    if (submitter === undefined) return;
    const prefix = rec.name + '#';
    let byProcId = this.newestByJob.get(submitter);
    if (!byProcId) this.newestByJob.set(submitter, (byProcId = new Map<string, BatchRecord>()));
    for (const job of jobNames) {
      if (!job.startsWith(prefix)) continue;
      const procId = job.slice(prefix.length);
      if (!PROC_ID.test(procId)) continue;
      const newest = byProcId.get(procId);
      if (newest === rec) continue;
      if (newest === undefined || newest.createdAt <= rec.createdAt) {
        if (newest) (newest.superseded ??= new Set()).add(`${newest.name}#${procId}`);
        byProcId.set(procId, rec);
      } else {
        (rec.superseded ??= new Set()).add(job);
      }
    }
  }

  private record(projectUrl: string, name: string, t: number): BatchRecord {
    const k = key(projectUrl, name);
    let rec = this.batches.get(k);
    if (!rec) {
      rec = { projectUrl, name, app: '', state: 'creating', physFiles: [], jobs: new Map(), jobsShared: false, createdAt: t, updatedAt: t };
      this.batches.set(k, rec);
    }
    return rec;
  }
}

function writableJobs(rec: BatchRecord): Map<string, string> {
  if (rec.jobsShared) {
    rec.jobs = new Map(rec.jobs);
    rec.jobsShared = false;
  }
  return rec.jobs;
}

/** A gridmanager job id after a batch name's `#`: `<cluster>.<proc>`. */
const PROC_ID = /^\d+\.\d+$/;

/**
 * The submitter part of a gridmanager batch name `condor#<schedd>#<app>#<unix time>`:
 * everything before `#<app>#<time>`; undefined for names of another shape (the CLI's,
 * the BLAHP's), whose jobs are never superseded.
 */
export function submitterOf(batchName: string): string | undefined {
  const t = batchName.lastIndexOf('#');
  if (t < 0 || !/^\d+$/.test(batchName.slice(t + 1))) return undefined;
  const a = batchName.lastIndexOf('#', t - 1);
  return a > 0 ? batchName.slice(0, a) : undefined;
}

/** A snapshot of a record: metadata copied now, `jobs` built from the job map on first access. */
function view(rec: BatchRecord): LedgerBatch {
  const out: Partial<LedgerBatch> = { projectUrl: rec.projectUrl, name: rec.name, app: rec.app, state: rec.state };
  if (rec.batchId !== undefined) out.batchId = rec.batchId;
  if (rec.leaseExpiresAt !== undefined) out.leaseExpiresAt = rec.leaseExpiresAt;
  out.physFiles = [...rec.physFiles];
  const map = rec.jobs;
  rec.jobsShared = true;
  let jobs: Record<string, string> | undefined;
  Object.defineProperty(out, 'jobs', {
    enumerable: true,
    configurable: true,
    get: () => (jobs ??= Object.fromEntries(map)),
    set: (v: Record<string, string>) => { jobs = v; },
  });
  if (rec.refused) out.refused = Object.fromEntries(rec.refused);
  if (rec.lastServerTime !== undefined) out.lastServerTime = rec.lastServerTime;
  out.createdAt = rec.createdAt;
  out.updatedAt = rec.updatedAt;
  return out as LedgerBatch;
}

/** The scalar fields of a patch (or snapshot) that are set, onto a record. */
function copyFields(rec: BatchRecord, from: LedgerBatchPatch): void {
  if (from.app !== undefined) rec.app = from.app;
  if (from.state !== undefined) rec.state = from.state;
  if (from.batchId !== undefined) rec.batchId = from.batchId;
  if (from.leaseExpiresAt !== undefined) rec.leaseExpiresAt = from.leaseExpiresAt;
  if (from.lastServerTime !== undefined) rec.lastServerTime = from.lastServerTime;
}

function plain(rec: BatchRecord): LedgerBatch {
  const b: LedgerBatch = {
    projectUrl: rec.projectUrl, name: rec.name, app: rec.app, state: rec.state, physFiles: rec.physFiles,
    jobs: Object.fromEntries(rec.jobs), createdAt: rec.createdAt, updatedAt: rec.updatedAt,
  };
  if (rec.batchId !== undefined) b.batchId = rec.batchId;
  if (rec.leaseExpiresAt !== undefined) b.leaseExpiresAt = rec.leaseExpiresAt;
  if (rec.lastServerTime !== undefined) b.lastServerTime = rec.lastServerTime;
  if (rec.refused) b.refused = Object.fromEntries(rec.refused);
  return b;
}
