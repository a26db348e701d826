/**
 * The ledger as an append-only journal of JSON lines (`ledger.jsonl` in the state
 * directory).
 *
 * Crash safety: every change is one line; lines queued together are written with one
 * write and one fdatasync (group commit) before their promises resolve. A kill -9 can at
 * worst leave a torn last line, which replay skips (and the next writer starts a fresh
 * line after it). Another process can read the ledger at any time by replaying the file
 * (JournalLedger.readOnly). The journal is compacted (snapshot to a temp file beside it,
 * fsync, rename, fsync of the directory) on open when it is much longer than its live
 * content, and while running when it has grown past a threshold; a reader sees either the
 * old or the new file, both complete. Compaction forgets batches retired over 30 days ago.
 *
 * Several writers: every GAHP (the gridmanager's, and the CLI's in-process one) opens the
 * ledger for appending. Each registers itself in `ledger.writers/<pid>`; a compaction (which
 * replaces the file) runs only when no other live process is registered, and a writer checks
 * before each write that the file is still the one it opened (reopening it otherwise).
 * Appends are whole lines in one O_APPEND write, so lines of two writers do not interleave.
 *
 * Cost: job statuses live in a Map per batch. A status query is recorded as one entry that
 * holds only the statuses that changed; get() is O(1) in the number of jobs (copy-on-write:
 * the job map handed out is copied only if the batch changes afterwards, and the `jobs`
 * object is built on first access).
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { replaceFile } from '../state-files.js';
import { pidAlive, yieldNow } from '../util.js';
import type { Ledger, LedgerBatch, LedgerBatchPatch, LedgerBatchState, LedgerQueryBatch } from './types.js';

type JournalEntry =
  | { op: 'upsert'; p: string; n: string; t: number; patch: LedgerBatchPatch }
  | { op: 'status'; p: string; n: string; t: number; jobs: Record<string, string>; st?: string }
  /** One status query over several batches: batch name -> changed job statuses. */
  | { op: 'query'; p: string; t: number; st: string; b: Record<string, Record<string, string>> }
  | { op: 'snapshot'; batch: LedgerBatch };

/** The in-memory record of a batch. */
interface BatchRecord {
  projectUrl: string;
  name: string;
  app: string;
  state: LedgerBatchState;
  batchId?: number;
  leaseExpiresAt?: number;
  physFiles: string[];
  jobs: Map<string, string>;
  /** The job map was handed out by get()/list(): copy it before changing it. */
  jobsShared: boolean;
  lastServerTime?: string;
  createdAt: number;
  updatedAt: number;
}

export interface JournalLedgerOptions {
  /** Compact while running once the journal is larger than this (default 64 MiB)... */
  compactMinBytes?: number;
  /** ...and larger than this many times the last snapshot (default 4). */
  compactRatio?: number;
}

interface PendingAppend {
  line: string | Promise<string>;
  resolve: () => void;
  reject: (err: Error) => void;
}

const LEDGER_FILE = 'ledger.jsonl';
/** Status-query work between two yields to the event loop, in jobs. */
const YIELD_EVERY = 5000;
/** Compaction forgets batches retired longer ago than this. */
const RETIRED_KEEP_MS = 30 * 24 * 3600 * 1000;
const key = (projectUrl: string, name: string) => `${projectUrl}\n${name}`;

export class JournalLedger implements Ledger {
  private readonly batches = new Map<string, BatchRecord>();
  private fh: fsp.FileHandle | undefined;
  private readonly readonly: boolean;
  private closed = false;
  private queue: PendingAppend[] = [];
  private writing: Promise<void> | undefined;
  /** The last write failed part-way: start the next one on a fresh line. */
  private needNewline = false;
  /** Bytes in the journal file as this process wrote it. */
  private journalBytes = 0;
  /** Size of the journal right after the last compaction (or open). */
  private baseBytes = 0;
  private readonly compactMinBytes: number;
  private readonly compactRatio: number;
  /** This process's registration as a writer (removed by close()). */
  private writerFile: string | undefined;

  private constructor(readonly file: string, readonly_: boolean, opts: JournalLedgerOptions = {}) {
    this.readonly = readonly_;
    this.compactMinBytes = opts.compactMinBytes ?? 64 * 1024 * 1024;
    this.compactRatio = opts.compactRatio ?? 4;
  }

  /** Opens (creating if needed) the ledger in stateDir, for reading and appending. */
  static open(stateDir: string, opts: JournalLedgerOptions = {}): JournalLedger {
    fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const ledger = new JournalLedger(path.join(stateDir, LEDGER_FILE), false, opts);
    ledger.register();
    const { lines, bytes } = ledger.replay();
    if (lines > 1000 && lines > 4 * ledger.batches.size && !ledger.otherWriters()) ledger.compactSync();
    const fd = fs.openSync(ledger.file, 'a', 0o600);
    let size = fs.fstatSync(fd).size;
    if (size > 0) {
      // After a torn last line, start the next entry on a line of its own.
      const last = Buffer.alloc(1);
      const rfd = fs.openSync(ledger.file, 'r');
      try {
        fs.readSync(rfd, last, 0, 1, size - 1);
      } finally {
        fs.closeSync(rfd);
      }
      if (last[0] !== 10) {
        fs.writeSync(fd, '\n');
        size++;
      }
    }
    fs.closeSync(fd);
    ledger.journalBytes = size;
    ledger.baseBytes = Math.min(size, bytes);
    return ledger;
  }

  /** Reads a ledger without opening it for writing (for `status` while a GAHP runs). */
  static readOnly(stateDir: string): JournalLedger {
    const ledger = new JournalLedger(path.join(stateDir, LEDGER_FILE), true);
    ledger.replay();
    return ledger;
  }

  get(projectUrl: string, batchName: string): LedgerBatch | undefined {
    const rec = this.batches.get(key(projectUrl, batchName));
    return rec && this.view(rec);
  }

  list(projectUrl?: string): LedgerBatch[] {
    return [...this.batches.values()]
      .filter((b) => projectUrl === undefined || b.projectUrl === projectUrl)
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .map((b) => this.view(b));
  }

  async upsert(projectUrl: string, batchName: string, patch: LedgerBatchPatch): Promise<LedgerBatch> {
    const entry: JournalEntry = { op: 'upsert', p: projectUrl, n: batchName, t: Date.now(), patch };
    const line = JSON.stringify(entry);
    this.apply(entry);
    const view = this.get(projectUrl, batchName)!;
    await this.append(line);
    return view;
  }

  async recordStatuses(projectUrl: string, batchName: string, statuses: Record<string, string>, serverTime?: string): Promise<void> {
    const entry: JournalEntry = { op: 'status', p: projectUrl, n: batchName, t: Date.now(), jobs: statuses };
    if (serverTime !== undefined) entry.st = serverTime;
    const line = JSON.stringify(entry);
    this.apply(entry);
    await this.append(line);
  }

  async recordQuery(projectUrl: string, serverTime: string, batches: ReadonlyArray<LedgerQueryBatch>): Promise<void> {
    // The journal slot is taken now, so entries stay in the order of the calls; the
    // changes are worked out, applied and encoded a slice at a time with yields between.
    await this.append(this.applyQuery(projectUrl, Date.now(), serverTime, batches));
  }

  /** Applies a status query to the records; resolves to its journal line ('' = nothing to write). */
  private async applyQuery(projectUrl: string, t: number, serverTime: string, batches: ReadonlyArray<LedgerQueryBatch>): Promise<string> {
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
          const [job, status] = jobs[i]!;
          if (rec.jobs.get(job) === status) continue;
          map ??= this.writableJobs(rec);
          map.set(job, status);
          changed[job] = status;
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

  async close(): Promise<void> {
    this.closed = true;
    while (this.writing) await this.writing;
    if (this.fh) {
      const fh = this.fh;
      this.fh = undefined;
      await fh.close();
    }
    if (this.writerFile) {
      fs.rmSync(this.writerFile, { force: true });
      this.writerFile = undefined;
    }
  }

  // ---------------------------------------------------------------- writers

  private get writersDir(): string {
    return path.join(path.dirname(this.file), 'ledger.writers');
  }

  private register(): void {
    fs.mkdirSync(this.writersDir, { recursive: true, mode: 0o700 });
    this.writerFile = path.join(this.writersDir, String(process.pid));
    fs.writeFileSync(this.writerFile, `${Date.now()}\n`, { mode: 0o600 });
    // Entries of writers killed (kill -9) before they could unregister: removed here, or
    // they pile up, one per crash, until a compaction looks.
    this.otherWriters();
  }

  /** Whether another live process has the ledger open for writing (stale entries are removed). */
  private otherWriters(): boolean {
    let names: string[];
    try {
      names = fs.readdirSync(this.writersDir);
    } catch {
      return false;
    }
    let others = false;
    for (const name of names) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
      if (pidAlive(pid)) others = true;
      else fs.rmSync(path.join(this.writersDir, name), { force: true });
    }
    return others;
  }

  // ---------------------------------------------------------------- writing

  private append(line: string | Promise<string>): Promise<void> {
    if (this.readonly) return Promise.reject(new Error('the ledger is open read-only'));
    if (this.closed) return Promise.reject(new Error('the ledger is closed'));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ line, resolve, reject });
      this.kick();
    });
  }

  /** Starts the writer unless it runs; it restarts itself for entries queued as it ended. */
  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  /** Writes queued entries: everything queued at once goes out in one write + fdatasync. */
  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const group = this.queue;
      this.queue = [];
      const texts: string[] = [];
      const ok: PendingAppend[] = [];
      for (const p of group) {
        try {
          const text = await p.line;
          if (text.length > 0) texts.push(text);
          ok.push(p);
        } catch (err) {
          p.reject(err as Error);
        }
      }
      if (texts.length === 0) {
        for (const p of ok) p.resolve();
        continue;
      }
      let text = (this.needNewline ? '\n' : '') + texts.join('\n') + '\n';
      try {
        const fh = await this.handle();
        const buf = Buffer.from(text, 'utf8');
        text = '';
        let off = 0;
        try {
          while (off < buf.length) {
            const { bytesWritten } = await fh.write(buf, off, buf.length - off);
            off += bytesWritten;
          }
        } finally {
          this.journalBytes += off;
        }
        this.needNewline = false;
        await fh.datasync();
        for (const p of ok) p.resolve();
      } catch (err) {
        this.needNewline = true;
        for (const p of ok) p.reject(err as Error);
      }
      if (this.shouldCompact()) {
        try {
          await this.compactOnline();
        } catch {
          // The journal is still valid; compaction is retried after later writes.
          this.baseBytes = this.journalBytes;
        }
      }
    }
  }

  private async handle(): Promise<fsp.FileHandle> {
    if (this.fh) {
      // Another process may have compacted (replaced) the journal: write to the new file.
      // Synchronous stats: microseconds, where two thread-pool round trips cost
      // milliseconds on a busy machine (and every BOINC_SUBMIT waits for a few appends).
      let replaced: boolean;
      try {
        const mine = fs.fstatSync(this.fh.fd);
        const current = fs.statSync(this.file);
        replaced = current.ino !== mine.ino || current.dev !== mine.dev;
      } catch {
        replaced = true;
      }
      if (replaced) {
        const old = this.fh;
        this.fh = undefined;
        await old.close().catch(() => undefined);
        this.needNewline = false;
      }
    }
    if (!this.fh) {
      this.fh = await fsp.open(this.file, 'a', 0o600);
      this.journalBytes = fs.fstatSync(this.fh.fd).size;
    }
    return this.fh;
  }

  private shouldCompact(): boolean {
    return this.journalBytes > this.compactMinBytes && this.journalBytes > this.compactRatio * Math.max(this.baseBytes, 1);
  }

  /**
   * Replaces the journal by a snapshot of the live state. Runs inside drain(), so no
   * append is in progress. Skipped if the file is not the size we wrote (another process
   * appended to it: renaming over its lines would lose them).
   */
  private async compactOnline(): Promise<void> {
    if (this.otherWriters()) {
      this.baseBytes = this.journalBytes;
      return;
    }
    // Everything applied in memory must be in the file first (nothing queued); then the
    // snapshot is made from the file itself, which also holds what other processes wrote
    // while they had the ledger open, and memory is brought up to date from it.
    if (this.queue.length > 0) return;
    const fh = await this.handle();
    const fresh = new JournalLedger(this.file, true);
    fresh.replay();
    this.batches.clear();
    for (const [k, rec] of fresh.batches) this.batches.set(k, rec);
    const records = this.pruneRetired();
    const bytes = await replaceFile(this.file, (async function* snapshot() {
      for (const rec of records) {
        yield JSON.stringify({ op: 'snapshot', batch: plain(rec) }) + '\n';
        await yieldNow(); // a big ledger is written without holding the event loop
      }
    })());
    this.fh = undefined;
    await fh.close().catch(() => undefined);
    this.journalBytes = this.baseBytes = bytes;
  }

  private compactSync(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      for (const rec of this.pruneRetired()) fs.writeSync(fd, JSON.stringify({ op: 'snapshot', batch: plain(rec) }) + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
    try {
      const dfd = fs.openSync(path.dirname(this.file), 'r');
      try { fs.fsyncSync(dfd); } finally { fs.closeSync(dfd); }
    } catch {
      // Not every filesystem lets a directory be fsync'd; the rename is still atomic.
    }
  }

  // ---------------------------------------------------------------- state

  /** Drops batches retired long ago (from memory too); returns the records to keep. */
  private pruneRetired(now = Date.now()): BatchRecord[] {
    const keep: BatchRecord[] = [];
    for (const [k, rec] of this.batches) {
      if (rec.state === 'retired' && now - rec.updatedAt > RETIRED_KEEP_MS) this.batches.delete(k);
      else keep.push(rec);
    }
    return keep;
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

  private writableJobs(rec: BatchRecord): Map<string, string> {
    if (rec.jobsShared) {
      rec.jobs = new Map(rec.jobs);
      rec.jobsShared = false;
    }
    return rec.jobs;
  }

  private apply(entry: JournalEntry): void {
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
        return;
      }
      case 'upsert': {
        const rec = this.record(entry.p, entry.n, entry.t);
        const patch = entry.patch;
        copyFields(rec, patch);
        if (patch.physFiles) rec.physFiles = [...patch.physFiles];
        if (patch.jobs) {
          const jobs = this.writableJobs(rec);
          for (const [job, status] of Object.entries(patch.jobs)) jobs.set(job, status);
        }
        rec.updatedAt = entry.t;
        return;
      }
      case 'status': {
        const rec = this.record(entry.p, entry.n, entry.t);
        const jobs = this.writableJobs(rec);
        for (const [job, status] of Object.entries(entry.jobs)) jobs.set(job, status);
        if (entry.st !== undefined) rec.lastServerTime = entry.st;
        rec.updatedAt = entry.t;
        return;
      }
      case 'query': {
        for (const [name, changed] of Object.entries(entry.b)) {
          const rec = this.batches.get(key(entry.p, name));
          if (!rec) continue;
          const entries = Object.entries(changed);
          if (entries.length > 0) {
            const jobs = this.writableJobs(rec);
            for (const [job, status] of entries) jobs.set(job, status);
          }
          rec.lastServerTime = entry.st;
          rec.updatedAt = entry.t;
        }
        return;
      }
    }
  }

  /** A snapshot of a record: metadata copied now, `jobs` built from the job map on first access. */
  private view(rec: BatchRecord): LedgerBatch {
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
    if (rec.lastServerTime !== undefined) out.lastServerTime = rec.lastServerTime;
    out.createdAt = rec.createdAt;
    out.updatedAt = rec.updatedAt;
    return out as LedgerBatch;
  }

  /** Replays the journal; returns the number of lines and bytes read. Torn lines are skipped. */
  private replay(): { lines: number; bytes: number } {
    let buf: Buffer;
    try {
      buf = fs.readFileSync(this.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { lines: 0, bytes: 0 };
      throw err;
    }
    let count = 0;
    let start = 0;
    while (start < buf.length) {
      let end = buf.indexOf(10, start);
      if (end < 0) end = buf.length;
      if (end > start) {
        count++;
        try {
          this.apply(JSON.parse(buf.toString('utf8', start, end)) as JournalEntry);
        } catch {
          // A line cut by a crash mid-append: everything before it is intact.
        }
      }
      start = end + 1;
    }
    return { lines: count, bytes: buf.length };
  }
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
  return b;
}
