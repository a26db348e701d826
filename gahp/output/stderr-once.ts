/**
 * A job's stderr is appended once, even when its fetch is repeated (docs/storage.md,
 * "Output files"): the gridmanager sends BOINC_FETCH_OUTPUT again when the first one's
 * result never reached it, and the BLAHP fetches again when it was killed before writing
 * the job's done record. Nothing goes into the user's directory: after an append, a small
 * record in the state directory (`stderr-appends/<sha256 of job name and destination>`)
 * keeps the file's device, inode and size right after it. A later append of the same job
 * to the same destination is skipped when the file still has that inode and that size:
 * nothing touched it since, so the text is there. Any other case (the file grew, was cut,
 * replaced or removed) appends as before.
 *
 * Without a state directory (gahp/state-dir.ts, state in memory) the records are kept in
 * memory until the GAHP exits. A crash between the append and its record costs at most one
 * repeated append (and the record's temp file, removed by the next process's first record). A record that cannot be written is logged, never an error: the append
 * has happened, and failing the fetch would make the gridmanager repeat it.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { isStaleTemp, replaceFile } from '../state-files.js';

/** Records older than this are removed (once per process): no fetch is repeated that late. */
const KEEP_MS = 30 * 24 * 3600_000;

interface AppendRecord {
  job: string;
  dest: string;
  dev: string;
  ino: string;
  /** The file's size right after the append. */
  size: string;
  /** The appended text's length. */
  length: number;
  at: number;
}

/** The file's identity and size as the records keep them (bigint stat: exact inodes). */
export interface FileMark {
  dev: bigint;
  ino: bigint;
  size: bigint;
}

/** Records kept in memory when the GAHP has no state directory. */
const inMemory = new Map<string, AppendRecord>();
let pruned = false;

/** The stderr appends of one job to one destination path. */
export class StderrAppendOnce {
  private readonly key: string;
  private readonly file: string | undefined;

  constructor(stateDir: string | undefined, private readonly job: string, private readonly dest: string, private readonly warn: (msg: string) => void) {
    this.key = createHash('sha256').update(`${job}\0${dest}`).digest('hex');
    this.file = stateDir === undefined ? undefined : path.join(stateDir, 'stderr-appends', this.key);
  }

  /** True when this job's text was appended and the file is as that append left it. */
  async alreadyAppended(now: FileMark): Promise<boolean> {
    const rec = await this.read();
    return rec !== undefined && rec.job === this.job && rec.dest === this.dest &&
      rec.dev === String(now.dev) && rec.ino === String(now.ino) && rec.size === String(now.size);
  }

  /** Keeps the file's state right after the append of `length` bytes. Never throws. */
  async appended(after: FileMark, length: number): Promise<void> {
    const rec: AppendRecord = { job: this.job, dest: this.dest, dev: String(after.dev), ino: String(after.ino), size: String(after.size), length, at: Date.now() };
    if (this.file === undefined) {
      inMemory.set(this.key, rec);
      return;
    }
    try {
      makeDirs(path.dirname(this.file), 'the directory of stderr append records');
      await replaceFile(this.file, JSON.stringify(rec));
    } catch (err) {
      this.warn(`stderr of ${this.job} appended to ${this.dest}, but its record in ${path.dirname(this.file)} could not be written ` +
        `(${(err as Error).message}): a repeated fetch would append it again`);
    }
    if (!pruned) {
      pruned = true;
      await pruneOld(path.dirname(this.file));
    }
  }

  private async read(): Promise<AppendRecord | undefined> {
    if (this.file === undefined) return inMemory.get(this.key);
    try {
      return JSON.parse(await fsp.readFile(this.file, 'utf8')) as AppendRecord;
    } catch {
      // None, or unreadable: append (as if no record were there).
      return undefined;
    }
  }
}

/** Removes records older than KEEP_MS, and the temp file of a record whose writer was killed. */
async function pruneOld(dir: string): Promise<void> {
  const cutoff = Date.now() - KEEP_MS;
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const p = path.join(dir, name);
    const gone = isStaleTemp(name) || ((await fsp.stat(p).catch(() => undefined))?.mtimeMs ?? Infinity) < cutoff;
    if (gone) await fsp.rm(p, { force: true }).catch(() => undefined);
  }
}
