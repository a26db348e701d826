/**
 * The ledger as an append-only journal of JSON lines (`ledger.jsonl` in the state
 * directory; docs/storage.md, "The ledger journal"). The state and the meaning of each line
 * are journal-state.ts's; compaction and the registry of writers journal-compaction.ts's.
 *
 * Crash safety: every change is one line; lines queued together are written with one
 * write and one fdatasync (group commit) before their promises resolve. The file is opened,
 * checked and (for a group of up to APPEND_SYNC_BYTES) written with synchronous calls,
 * microseconds each; only the fdatasync, which waits for the disk, goes to the thread pool:
 * one thread-pool round trip per group, where each costs milliseconds on a busy machine
 * and every BOINC_SUBMIT waits for a few appends. A kill -9 can at
 * worst leave a torn last line, which replay skips (and the next writer starts a fresh
 * line after it). Another process can read the ledger at any time by replaying the file
 * (JournalLedger.readOnly).
 *
 * Several writers: every GAHP (the gridmanager's, and the CLI's in-process one) opens the
 * ledger for appending. Each registers in `ledger.writers/` under `ledger.lock`
 * before it opens the file for its first append; compaction (which replaces the file)
 * checks for other writers and renames under the same lock. A writer also checks before
 * each write that the path still names the file it opened (reopening it otherwise).
 * Appends are whole lines in one O_APPEND write, so lines of two writers do not interleave.
 *
 * Compaction runs, asynchronously and between two group writes (no append in progress),
 * when the journal replayed at open has many more lines than batches, and when the journal
 * has grown past compactMinBytes and compactRatio times its size after the last compaction.
 *
 * When the state directory fails (disk full, read-only remount, removed: an error with an
 * errno), the entries of that write are refused with a StateDirError naming the directory
 * and the errno (the commands waiting for them fail with it), and from then on the ledger
 * is kept in memory only, said once through onUnwritable: the GAHP keeps serving
 * (docs/storage.md, "When the state directory cannot be used"). inMemory() is such a
 * ledger from the start, for a GAHP that found no directory at all.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { makeDirs } from '../dirs.js';
import { writeAllSync } from '../state-files.js';
import { StateDirError } from '../state-dir.js';
import { compactJournal, JournalWriters } from './journal-compaction.js';
import { JournalState, type JournalEntry } from './journal-state.js';
import type { JobBatch, Ledger, LedgerBatch, LedgerBatchPatch, LedgerQueryBatch } from './types.js';

export interface JournalLedgerOptions {
  /** Compact while running once the journal is larger than this (default 64 MiB)... */
  compactMinBytes?: number;
  /** ...and larger than this many times the last snapshot (default 4). */
  compactRatio?: number;
  /**
   * For tests: runs when a compaction's snapshot is complete, right before the rename (the
   * window in which a writer registering must not lose its lines).
   */
  beforeCompactionRename?: () => Promise<void>;
  /** Called once when a write fails for the directory's sake and the ledger goes to memory. */
  onUnwritable?: (err: StateDirError) => void;
}

interface PendingAppend {
  line: string | Promise<string>;
  resolve: () => void;
  reject: (err: Error) => void;
}

const LEDGER_FILE = 'ledger.jsonl';
/**
 * A group up to this size is written synchronously; a bigger one (a status query's record
 * of many jobs) goes out on the thread pool, so as not to hold the event loop.
 */
const APPEND_SYNC_BYTES = 64 * 1024;
const fdatasync = promisify(fs.fdatasync);
const writeAsync = promisify(fs.write);

export class JournalLedger implements Ledger {
  private state = new JournalState();
  /**
   * The journal open for appending. A plain descriptor (so it can be opened synchronously):
   * only drain() uses it, one call at a time, and close() waits for drain(), so no call is
   * in flight on it when it is closed.
   */
  private fd: number | undefined;
  private closed = false;
  private queue: PendingAppend[] = [];
  private writing: Promise<void> | undefined;
  /** The file does not end in a newline (a torn line, a failed write): start on a fresh line. */
  private needNewline = false;
  /** Bytes in the journal file as this process last knew it. */
  private journalBytes = 0;
  /** Size of the journal right after the last compaction (or open). */
  private baseBytes = 0;
  private readonly compactMinBytes: number;
  private readonly compactRatio: number;
  private readonly beforeCompactionRename: (() => Promise<void>) | undefined;
  /** undefined when read-only. */
  private readonly writers: JournalWriters | undefined;
  /** This process's registration as a writer: settled before the file is opened for appending. */
  private registration: Promise<void> | undefined;
  /** Compact at the next chance (the journal read at open was much longer than its content). */
  private compactSoon = false;
  /** Entries are applied in memory and written nowhere (no usable directory, or it failed). */
  private memoryOnly = false;
  private readonly onUnwritable: ((err: StateDirError) => void) | undefined;

  private constructor(readonly file: string, writers: JournalWriters | undefined, opts: JournalLedgerOptions = {}) {
    this.writers = writers;
    this.compactMinBytes = opts.compactMinBytes ?? 64 * 1024 * 1024;
    this.compactRatio = opts.compactRatio ?? 4;
    this.beforeCompactionRename = opts.beforeCompactionRename;
    this.onUnwritable = opts.onUnwritable;
  }

  /**
   * Opens (creating if needed) the ledger in stateDir, for reading and appending. The
   * journal is read synchronously (this runs at start-up, before any request is served);
   * registering as a writer and compacting go on asynchronously, and the first append
   * waits for them.
   */
  static open(stateDir: string, opts: JournalLedgerOptions = {}): JournalLedger {
    makeDirs(stateDir, 'the state directory');
    const ledger = new JournalLedger(path.join(stateDir, LEDGER_FILE), new JournalWriters(stateDir), opts);
    const { lines, bytes } = ledger.replayFile();
    ledger.journalBytes = ledger.baseBytes = bytes;
    ledger.startRegistration();
    if (lines > 1000 && lines > 4 * ledger.state.size) {
      ledger.compactSoon = true;
      ledger.kick();
    }
    return ledger;
  }

  /** A ledger in memory only, written nowhere: it lasts until the process exits. */
  static inMemory(): JournalLedger {
    const ledger = new JournalLedger('', undefined);
    ledger.memoryOnly = true;
    return ledger;
  }

  /** Reads a ledger without opening it for writing (for `status` while a GAHP runs). */
  static readOnly(stateDir: string): JournalLedger {
    const ledger = new JournalLedger(path.join(stateDir, LEDGER_FILE), undefined);
    ledger.replayFile();
    return ledger;
  }

  get(projectUrl: string, batchName: string): LedgerBatch | undefined {
    return this.state.get(projectUrl, batchName);
  }

  superseded(projectUrl: string, batchName: string): ReadonlySet<string> | undefined {
    return this.state.superseded(projectUrl, batchName);
  }

  batchOfJob(projectUrl: string, jobName: string): JobBatch | undefined {
    return this.state.batchOfJob(projectUrl, jobName);
  }

  refused(projectUrl: string, batchName: string): ReadonlyMap<string, string> | undefined {
    return this.state.refused(projectUrl, batchName);
  }

  refusal(projectUrl: string, jobName: string): string | undefined {
    return this.state.refusal(projectUrl, jobName);
  }

  list(projectUrl?: string): LedgerBatch[] {
    return this.state.list(projectUrl);
  }

  async upsert(projectUrl: string, batchName: string, patch: LedgerBatchPatch): Promise<LedgerBatch> {
    const entry: JournalEntry = { op: 'upsert', p: projectUrl, n: batchName, t: Date.now(), patch };
    const line = JSON.stringify(entry);
    this.state.apply(entry);
    const view = this.get(projectUrl, batchName)!;
    await this.append(line);
    return view;
  }

  async recordStatuses(projectUrl: string, batchName: string, statuses: Record<string, string>, serverTime?: string): Promise<void> {
    const entry: JournalEntry = { op: 'status', p: projectUrl, n: batchName, t: Date.now(), jobs: statuses };
    if (serverTime !== undefined) entry.st = serverTime;
    const line = JSON.stringify(entry);
    this.state.apply(entry);
    await this.append(line);
  }

  async recordQuery(projectUrl: string, serverTime: string, batches: ReadonlyArray<LedgerQueryBatch>): Promise<void> {
    // The journal slot is taken now, so entries stay in the order of the calls; the
    // changes are worked out, applied and encoded a slice at a time with yields between.
    await this.append(this.state.applyQuery(projectUrl, Date.now(), serverTime, batches));
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.writing) await this.writing;
    this.closeFile();
    if (this.registration) {
      await this.registration.catch(() => undefined);
      // A directory gone read-only keeps our entry: an entry too many only skips a compaction.
      await this.writers!.unregister().catch(() => undefined);
    }
  }

  // ---------------------------------------------------------------- writing

  private startRegistration(): void {
    const registration = this.writers!.register();
    // Awaited by the first append; a failure is reported there (and registering is retried).
    registration.catch(() => undefined);
    this.registration = registration;
  }

  private append(line: string | Promise<string>): Promise<void> {
    // (A query's line is computed, and its changes applied, even when it is written nowhere.)
    if (this.memoryOnly) return Promise.resolve(line).then(() => undefined);
    if (!this.writers) return Promise.reject(new Error('the ledger is open read-only'));
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
    while (this.queue.length > 0 || this.compactSoon) {
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
      try {
        if (texts.length > 0 && !this.memoryOnly) await this.write(texts.join('\n') + '\n');
        for (const p of ok) p.resolve();
      } catch (err) {
        const failure = this.failure(err);
        for (const p of ok) p.reject(failure);
      }
      if (!this.memoryOnly && (this.compactSoon || this.shouldCompact())) await this.compact();
    }
  }

  private async write(text: string): Promise<void> {
    const fd = await this.handle();
    const buf = Buffer.from((this.needNewline ? '\n' : '') + text, 'utf8');
    let written = 0;
    try {
      if (buf.length <= APPEND_SYNC_BYTES) written = writeAllSync(fd, buf);
      else while (written < buf.length) written += (await writeAsync(fd, buf, written, buf.length - written, null)).bytesWritten;
      this.needNewline = false;
      await fdatasync(fd);
    } catch (err) {
      // Part of it may be in the file: the next entry starts on a line of its own.
      this.needNewline = true;
      throw err;
    } finally {
      this.journalBytes += written;
    }
  }

  /**
   * The error a failed write is reported with. A failure of the directory (an errno: ENOSPC,
   * EROFS, EDQUOT, EIO, ENOENT...) becomes a StateDirError, and the ledger goes to memory
   * for the rest of the process (said once); anything else (a lock held too long) stays as
   * it is and the next write tries the file again.
   */
  private failure(err: unknown): Error {
    if (typeof (err as NodeJS.ErrnoException)?.code !== 'string') return err as Error;
    const failure = new StateDirError(path.dirname(this.file), err);
    this.memoryOnly = true;
    this.compactSoon = false;
    this.closeFile();
    this.onUnwritable?.(failure);
    return failure;
  }

  /** The file to append to: registered first; reopened when another process replaced the file. */
  private async handle(): Promise<number> {
    if (!this.registration) this.startRegistration();
    try {
      await this.registration;
    } catch (err) {
      this.registration = undefined; // tried again by the next write
      throw err;
    }
    if (this.fd !== undefined) {
      let replaced: boolean;
      try {
        const mine = fs.fstatSync(this.fd);
        const current = fs.statSync(this.file);
        replaced = current.ino !== mine.ino || current.dev !== mine.dev;
      } catch {
        replaced = true;
      }
      if (replaced) this.closeFile();
    }
    if (this.fd === undefined) {
      const fd = fs.openSync(this.file, 'a+', 0o600);
      try {
        const size = fs.fstatSync(fd).size;
        let last = 10;
        if (size > 0) {
          const one = Buffer.alloc(1);
          fs.readSync(fd, one, 0, 1, size - 1);
          last = one[0]!;
        }
        // After a torn last line, start the next entry on a line of its own.
        this.needNewline = last !== 10;
        this.journalBytes = size;
      } catch (err) {
        fs.closeSync(fd);
        throw err;
      }
      this.fd = fd;
    }
    return this.fd;
  }

  private closeFile(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try {
      fs.closeSync(fd);
    } catch {
      // Nothing was written since the last fdatasync; the descriptor is gone either way.
    }
  }

  private shouldCompact(): boolean {
    return this.journalBytes > this.compactMinBytes && this.journalBytes > this.compactRatio * Math.max(this.baseBytes, 1);
  }

  /**
   * Replaces the journal by a snapshot (journal-compaction.ts). Runs inside drain(), so no
   * append is in progress. The snapshot is made of the file, which holds what other
   * processes wrote too; memory takes that state when nothing was applied meanwhile
   * (else it stays as it is, and the entries queued meanwhile go to the new file).
   */
  private async compact(): Promise<void> {
    this.compactSoon = false;
    try {
      await this.registration;
      const done = await compactJournal(this.file, this.writers!, this.beforeCompactionRename);
      if (done === 'others') {
        this.baseBytes = this.journalBytes;
        return;
      }
      if (this.queue.length === 0) this.state = done.state;
      this.closeFile();
      this.journalBytes = this.baseBytes = done.bytes;
    } catch {
      // The journal is still valid; compaction is retried after it has grown again.
      this.baseBytes = this.journalBytes;
    }
  }

  /** Replays the journal file (synchronously); returns its number of lines and bytes. */
  private replayFile(): { lines: number; bytes: number } {
    let buf: Buffer;
    try {
      buf = fs.readFileSync(this.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { lines: 0, bytes: 0 };
      throw err;
    }
    return { lines: this.state.replay(buf), bytes: buf.length };
  }
}
