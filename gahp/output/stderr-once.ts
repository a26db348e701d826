/**
 * A job's stderr is appended once, even when its fetch is repeated (docs/storage.md,
 * "Output files"): the gridmanager sends BOINC_FETCH_OUTPUT again when the first one's
 * result never reached it, and the BLAHP fetches again when it was killed before writing
 * the job's done record. Nothing goes into the user's directory: after an append, a record
 * in the state directory keeps the file's device, inode and size right after it. A later
 * append of the same job to the same destination is skipped when the file still has that
 * inode and that size: nothing touched it since, so the text is there. Any other case (the
 * file grew, was cut, replaced or removed) appends as before.
 *
 * The records are lines appended to 256 files, `stderr-appends/<xx>.log`, `xx` the first
 * two hex digits of the sha256 of job name and destination: a fetch adds one line to a file
 * that is there already. (A file per record made each fetch create a third new file beside
 * its output and stderr; on a busy ext4 a creation costs ~250 us of kernel time, more than
 * anything else a fetch does with files.) A record is one O_APPEND write of one line,
 * before the fetch's result is printed, not synced: a line torn or lost by a kill or a
 * power failure reads as none, so a crash between the append and its record costs at most
 * one repeated append. Only an append to a file that exists reads records (its shard file,
 * from the end, by the line's beginning). A shard grown past SHARD_COMPACT_BYTES is rewritten with the lines of the
 * last 30 days; a record another process adds meanwhile may be lost (one repeated append).
 * Records of earlier versions, a file `stderr-appends/<sha256>` each, are still read.
 *
 * Without a state directory (gahp/state-dir.ts, state in memory) the records are kept in
 * memory until the GAHP exits. A record that cannot be written is logged, never an error:
 * the append has happened, and failing the fetch would make the gridmanager repeat it.
 * The calls on the shard files are synchronous, like the lock files' in the same state
 * directory: an append to a file that exists takes microseconds, where a thread-pool round
 * trip each for open, write and close cost a fetch more than the write.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { isStaleTemp, replaceFileSync, writeAllSync } from '../state-files.js';

/** Records older than this are dropped: no fetch is repeated that late. */
const KEEP_MS = 30 * 24 * 3600_000;
/** A shard file past this size is rewritten without its records older than KEEP_MS. */
const SHARD_COMPACT_BYTES = 1024 * 1024;

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

/** The record directories made (or found) by this process: looked at once each. */
const madeDirs = new Set<string>();

/** Records kept in memory when the GAHP has no state directory. */
const inMemory = new Map<string, AppendRecord>();
let pruned = false;

/** The stderr appends of one job to one destination path. */
export class StderrAppendOnce {
  private readonly key: string;
  private readonly dir: string | undefined;

  constructor(stateDir: string | undefined, private readonly job: string, private readonly dest: string, private readonly warn: (msg: string) => void) {
    this.key = createHash('sha256').update(`${job}\0${dest}`).digest('hex');
    this.dir = stateDir === undefined ? undefined : path.join(stateDir, 'stderr-appends');
  }

  private get shard(): string {
    return path.join(this.dir!, `${this.key.slice(0, 2)}.log`);
  }

  /** True when this job's text was appended and the file is as that append left it. */
  async alreadyAppended(now: FileMark): Promise<boolean> {
    const rec = await this.read();
    return rec !== undefined && rec.dev === String(now.dev) && rec.ino === String(now.ino) && rec.size === String(now.size);
  }

  /** Keeps the file's state right after the append of `length` bytes. Never throws. */
  async appended(after: FileMark, length: number): Promise<void> {
    const rec: AppendRecord = { job: this.job, dest: this.dest, dev: String(after.dev), ino: String(after.ino), size: String(after.size), length, at: Date.now() };
    if (this.dir === undefined) {
      inMemory.set(this.key, rec);
      return;
    }
    let size = 0;
    try {
      if (!madeDirs.has(this.dir)) {
        makeDirs(this.dir, 'the directory of stderr append records');
        madeDirs.add(this.dir);
      }
      size = appendLine(this.shard, JSON.stringify(rec) + '\n');
    } catch (err) {
      this.warn(`stderr of ${this.job} appended to ${this.dest}, but its record in ${this.dir} could not be written ` +
        `(${(err as Error).message}): a repeated fetch would append it again`);
    }
    try {
      if (size > SHARD_COMPACT_BYTES) compactShard(this.shard);
      if (!pruned) {
        pruned = true;
        await pruneOld(this.dir);
      }
    } catch (err) {
      this.warn(`the stderr append records in ${this.dir} could not be tidied: ${(err as Error).message}`);
    }
  }

  /** This job's last record for this destination: its shard's last line for them, else an earlier version's file. */
  private async read(): Promise<AppendRecord | undefined> {
    if (this.dir === undefined) return inMemory.get(this.key);
    const text = await fsp.readFile(this.shard, 'utf8').catch(() => '');
    // Every record line begins with its job and destination as JSON.stringify writes them:
    // found from the end by that prefix, only those lines are parsed.
    const head = `{"job":${JSON.stringify(this.job)},"dest":${JSON.stringify(this.dest)},`;
    for (let at = text.lastIndexOf(head); at >= 0; at = at === 0 ? -1 : text.lastIndexOf(head, at - 1)) {
      if (at > 0 && text[at - 1] !== '\n') continue;
      const end = text.indexOf('\n', at);
      const rec = parseRecord(text.slice(at, end < 0 ? text.length : end));
      if (rec) return rec;
    }
    const legacy = parseRecord(await fsp.readFile(path.join(this.dir, this.key), 'utf8').catch(() => ''));
    return legacy?.job === this.job && legacy.dest === this.dest ? legacy : undefined;
  }
}

/** A record line, or undefined when it is torn or not one. */
function parseRecord(line: string): AppendRecord | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const rec = JSON.parse(line) as Partial<AppendRecord>;
    return typeof rec.job === 'string' && typeof rec.dest === 'string' && typeof rec.size === 'string' ? (rec as AppendRecord) : undefined;
  } catch {
    return undefined;
  }
}

/** Appends one line (one O_APPEND write); returns the file's size after it. */
function appendLine(file: string, line: string): number {
  const fd = fs.openSync(file, 'a', 0o600);
  try {
    writeAllSync(fd, Buffer.from(line, 'utf8'));
    return fs.fstatSync(fd).size;
  } finally {
    fs.closeSync(fd);
  }
}

/** Rewrites a shard with its records of the last KEEP_MS (its last one for each job and destination). */
function compactShard(file: string): void {
  const cutoff = Date.now() - KEEP_MS;
  const last = new Map<string, string>();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const rec = parseRecord(line);
    if (rec && rec.at >= cutoff) last.set(`${rec.job}\0${rec.dest}`, line);
  }
  replaceFileSync(file, [...last.values()].map((l) => l + '\n'));
}

/**
 * Removes files of records older than KEEP_MS (shards not appended to since, an earlier
 * version's record files) and the temp file of a replace whose writer was killed.
 */
async function pruneOld(dir: string): Promise<void> {
  const cutoff = Date.now() - KEEP_MS;
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const p = path.join(dir, name);
    const gone = isStaleTemp(name) || ((await fsp.stat(p).catch(() => undefined))?.mtimeMs ?? Infinity) < cutoff;
    if (gone) await fsp.rm(p, { force: true }).catch(() => undefined);
  }
}
