/**
 * Compaction of the ledger journal, and the registry of the processes writing it
 * (docs/storage.md, "The ledger journal").
 *
 * Compaction replaces `ledger.jsonl` by one snapshot line per batch (state-files'
 * replaceFile). A process that appends to the old file after the rename writes to an inode
 * nobody reads again: its lines would be lost. So compaction runs only while no other live
 * process is registered in `ledger.writers/<pid>.<random>`, and the check, the snapshot and the
 * rename happen under the lock file `ledger.lock`, under which a writer also registers
 * (before it opens the file for its first append). A writer arriving during a compaction
 * waits for the lock (with timers, never blocking the thread) and then opens the new file;
 * a compaction that starts after it registered sees it and does nothing.
 *
 * Two more guards, for writers that do not take the lock (an older boinc-gahp during an
 * upgrade, or one in another pid namespace whose registration looks dead from here): the
 * snapshot is made from the file as it is read under the lock, so lines other processes
 * wrote while they had it open are kept; and right before the rename the file must still
 * be the inode and the size that were read, else the compaction is dropped.
 *
 * Everything is asynchronous I/O, and the snapshot is encoded with a yield every few
 * hundred batches: a large ledger is compacted without stalling the GAHP's event loop.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { replaceFile, withLockFile } from '../state-files.js';
import { pidAlive, yieldNow } from '../util.js';
import { JournalState } from './journal-state.js';

/** How long a writer waits for a compaction (or another registration) to end. */
const LOCK_WAIT_MS = 60_000;
/** Snapshot lines encoded between two yields to the event loop. */
const LINES_PER_YIELD = 200;

/** The names in `ledger.writers/` of the ledgers open in this process. */
const registeredHere = new Set<string>();

/** The processes that have the journal open for appending, and the lock over them and compaction. */
export class JournalWriters {
  readonly dir: string;
  readonly lockFile: string;
  private registered: string | undefined;

  constructor(stateDir: string) {
    this.dir = path.join(stateDir, 'ledger.writers');
    this.lockFile = path.join(stateDir, 'ledger.lock');
  }

  /** Registers this process (removing entries of dead ones), under the lock. */
  async register(): Promise<void> {
    await this.withLock(async () => {
      makeDirs(this.dir, "the ledger's writers directory");
      // <pid>.<random>: two ledgers open in one process (tests, tools) are two writers.
      const file = path.join(this.dir, `${process.pid}.${randomBytes(4).toString('hex')}`);
      await fsp.writeFile(file, `${Date.now()}\n`, { mode: 0o600 });
      this.registered = file;
      registeredHere.add(path.basename(file));
      // Entries of writers killed (kill -9) before they could unregister: removed here, or
      // they pile up, one per crash, until a compaction looks.
      await this.othersAlive();
    });
  }

  /** Removes this process's entry (no lock needed: an entry too many only skips a compaction). */
  async unregister(): Promise<void> {
    if (this.registered === undefined) return;
    await fsp.rm(this.registered, { force: true });
    registeredHere.delete(path.basename(this.registered));
    this.registered = undefined;
  }

  withLock<T>(fn: () => Promise<T>): Promise<T> {
    return withLockFile(this.lockFile, fn, { timeoutMs: LOCK_WAIT_MS });
  }

  /** Whether another live process is registered (entries of dead ones are removed). */
  async othersAlive(): Promise<boolean> {
    let names: string[];
    try {
      names = await fsp.readdir(this.dir);
    } catch {
      return false;
    }
    let others = false;
    for (const name of names) {
      if (this.registered !== undefined && name === path.basename(this.registered)) continue;
      // `<pid>`, as older versions named it, or `<pid>.<random>`.
      const pid = Number(name.split('.')[0]);
      if (!Number.isInteger(pid) || pid <= 0) continue;
      // An entry with our pid that no ledger here made is an earlier process's (pids repeat).
      if (pid === process.pid ? registeredHere.has(name) : pidAlive(pid)) others = true;
      else await fsp.rm(path.join(this.dir, name), { force: true });
    }
    return others;
  }
}

/** The file changed between the read and the rename: the compaction is dropped. */
class JournalChangedError extends Error {
  override name = 'JournalChangedError';
}

export interface Compacted {
  /** The state the snapshot was made of (the whole file, as read under the lock). */
  state: JournalState;
  /** The size of the new journal. */
  bytes: number;
}

/**
 * Compacts the journal unless another live writer is registered ('others'). Rejects when
 * the file changed under it (JournalChangedError) or on I/O errors: the journal is then as
 * it was. `beforeRename` is for tests: it runs inside the window a writer must not enter.
 */
export async function compactJournal(file: string, writers: JournalWriters, beforeRename?: () => Promise<void>): Promise<Compacted | 'others'> {
  return writers.withLock(async () => {
    if (await writers.othersAlive()) return 'others';
    const { buf, ino } = await readJournal(file);
    const state = new JournalState();
    await state.replayAsync(buf);
    const bytes = await replaceFile(file, snapshot(state), {
      beforeRename: async () => {
        await beforeRename?.();
        const now = await fsp.stat(file).catch(() => undefined);
        if (!now || now.ino !== ino || now.size !== buf.length) throw new JournalChangedError(`${file} changed while it was compacted`);
      },
    });
    return { state, bytes };
  });
}

async function readJournal(file: string): Promise<{ buf: Buffer; ino: number | undefined }> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { buf: Buffer.alloc(0), ino: undefined };
    throw err;
  }
  try {
    const ino = (await fh.stat()).ino;
    return { buf: await fh.readFile(), ino };
  } finally {
    await fh.close();
  }
}

/** The snapshot in chunks of about 64 KiB (fewer writes), with yields while it is encoded. */
async function* snapshot(state: JournalState): AsyncGenerator<string> {
  let chunk = '';
  let n = 0;
  for (const line of state.snapshotLines()) {
    chunk += line;
    if (chunk.length >= 64 * 1024) {
      yield chunk;
      chunk = '';
    }
    if (++n % LINES_PER_YIELD === 0) await yieldNow();
  }
  if (chunk) yield chunk;
}
