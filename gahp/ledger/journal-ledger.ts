/**
 * The ledger as an append-only journal of JSON lines (`ledger.jsonl` in the state
 * directory). Each change is one line written with a single append and fdatasync'd before
 * the promise resolves, so a kill -9 can at worst leave a torn last line, which replay
 * skips. Another process can read it at any time by replaying the file. On open, a journal
 * much longer than its live content is compacted (snapshot to a temp file, fsync, rename).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Ledger, LedgerBatch, LedgerBatchPatch } from './types.js';

type JournalEntry =
  | { op: 'upsert'; p: string; n: string; t: number; patch: LedgerBatchPatch }
  | { op: 'status'; p: string; n: string; t: number; jobs: Record<string, string>; st?: string }
  | { op: 'snapshot'; batch: LedgerBatch };

const key = (projectUrl: string, name: string) => `${projectUrl}\n${name}`;

export class JournalLedger implements Ledger {
  private readonly batches = new Map<string, LedgerBatch>();
  private fd: number | undefined;
  /** Appends are chained so lines never interleave and resolve in order. */
  private tail: Promise<void> = Promise.resolve();

  private constructor(readonly file: string) {}

  /** Opens (creating if needed) the ledger in stateDir, for reading and appending. */
  static open(stateDir: string): JournalLedger {
    fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const ledger = new JournalLedger(path.join(stateDir, 'ledger.jsonl'));
    const lines = ledger.replay();
    if (lines > 1000 && lines > 4 * ledger.batches.size) ledger.compact();
    ledger.fd = fs.openSync(ledger.file, 'a', 0o600);
    // After a torn last line, start the next entry on a line of its own.
    const size = fs.fstatSync(ledger.fd).size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      const rfd = fs.openSync(ledger.file, 'r');
      fs.readSync(rfd, last, 0, 1, size - 1);
      fs.closeSync(rfd);
      if (last[0] !== 10) fs.writeSync(ledger.fd, '\n');
    }
    return ledger;
  }

  /** Reads a ledger without opening it for writing (for `status` while a GAHP runs). */
  static readOnly(stateDir: string): JournalLedger {
    const ledger = new JournalLedger(path.join(stateDir, 'ledger.jsonl'));
    ledger.replay();
    return ledger;
  }

  get(projectUrl: string, batchName: string): LedgerBatch | undefined {
    const b = this.batches.get(key(projectUrl, batchName));
    return b && structuredClone(b);
  }

  list(projectUrl?: string): LedgerBatch[] {
    return [...this.batches.values()]
      .filter((b) => projectUrl === undefined || b.projectUrl === projectUrl)
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .map((b) => structuredClone(b));
  }

  async upsert(projectUrl: string, batchName: string, patch: LedgerBatchPatch): Promise<LedgerBatch> {
    const entry: JournalEntry = { op: 'upsert', p: projectUrl, n: batchName, t: Date.now(), patch };
    this.apply(entry);
    await this.append(entry);
    return this.get(projectUrl, batchName)!;
  }

  async recordStatuses(projectUrl: string, batchName: string, statuses: Record<string, string>, serverTime?: string): Promise<void> {
    const entry: JournalEntry = { op: 'status', p: projectUrl, n: batchName, t: Date.now(), jobs: statuses };
    if (serverTime !== undefined) entry.st = serverTime;
    this.apply(entry);
    await this.append(entry);
  }

  async close(): Promise<void> {
    await this.tail;
    if (this.fd !== undefined) {
      fs.closeSync(this.fd);
      this.fd = undefined;
    }
  }

  private append(entry: JournalEntry): Promise<void> {
    const line = JSON.stringify(entry) + '\n';
    const run = this.tail.then(
      () =>
        new Promise<void>((resolve, reject) => {
          if (this.fd === undefined) return reject(new Error('ledger is closed or read-only'));
          const fd = this.fd;
          fs.write(fd, line, (err) => {
            if (err) return reject(err);
            fs.fdatasync(fd, (err2) => (err2 ? reject(err2) : resolve()));
          });
        }),
    );
    // A failed append must not wedge later ones.
    this.tail = run.catch(() => undefined);
    return run;
  }

  private apply(entry: JournalEntry): void {
    if (entry.op === 'snapshot') {
      this.batches.set(key(entry.batch.projectUrl, entry.batch.name), entry.batch);
      return;
    }
    const k = key(entry.p, entry.n);
    let batch = this.batches.get(k);
    if (!batch) {
      batch = { projectUrl: entry.p, name: entry.n, app: '', state: 'creating', physFiles: [], jobs: {}, createdAt: entry.t, updatedAt: entry.t };
      this.batches.set(k, batch);
    }
    if (entry.op === 'upsert') {
      const { jobs, ...rest } = entry.patch;
      Object.assign(batch, rest);
      if (jobs) batch.jobs = { ...batch.jobs, ...jobs };
    } else {
      Object.assign(batch.jobs, entry.jobs);
      if (entry.st !== undefined) batch.lastServerTime = entry.st;
    }
    batch.updatedAt = entry.t;
  }

  /** Replays the journal; returns the number of lines read. A torn line is skipped. */
  private replay(): number {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    let count = 0;
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      count++;
      try {
        this.apply(JSON.parse(line) as JournalEntry);
      } catch {
        // A line cut by a crash mid-append: everything before it is intact.
      }
    }
    return count;
  }

  private compact(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      for (const batch of this.batches.values()) fs.writeSync(fd, JSON.stringify({ op: 'snapshot', batch }) + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
  }
}
