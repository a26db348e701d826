/**
 * The persistent hash cache: file identity (device, inode, size, mtime and ctime in ns:
 * hash-key.ts) -> MD5, in `hash-cache.v2` in the state directory, so an unchanged file is
 * hashed once, across commands, restarts and GAHPs sharing the state directory. It may never
 * answer differently from hashing the file now: anything that can change the content
 * without changing the identity (see hash-key.ts) must be kept out.
 *
 * Format: one record per line,
 * `v2 <dev> <ino> <size> <mtimeNs> <ctimeNs> <hashedAtMs> <md5> <check>`, where check is the
 * first 8 hex digits of the MD5 of everything before it. Records are appended with
 * O_APPEND, one write() each, so concurrent GAHPs never interleave inside a line; a line
 * torn by a crash (or glued to the next one) fails its check and is skipped. A later record
 * for the same (dev, ino) replaces an earlier one. Each lookup round first reads what other
 * processes appended since. An oversized file is compacted on open (state-files'
 * replaceFile: temp file, fsync, rename, fsync of the directory); other processes notice
 * the new inode and reload.
 *
 * The older `hash-cache.v1` keyed on mtime without ctime, so a file rewritten with its mtime
 * put back matched its old record: its records cannot be judged and are dropped (the file is
 * removed on open; lines of another version in this file are skipped).
 *
 * The GAHP loads and refreshes the cache with openAsync() and refreshAsync(): reads and
 * parsing go in slices with yields to the event loop (a multi-million-record cache must not
 * stall the protocol loop), and a reload builds a new table that replaces the old one only
 * when complete, so lookups meanwhile see the previous state. open() and refresh() do the
 * same synchronously (tools and tests).
 *
 * Racy hashes are never recorded (isRacy(), as git does), neither in memory nor on disk.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import type { FileKey } from './hash-types.js';
import { isRacy } from './hash-key.js';
import { makeDirs } from '../dirs.js';
import { replaceFile, replaceFileSync } from '../state-files.js';
import { yieldNow } from '../util.js';

export const HASH_CACHE_FILE = 'hash-cache.v2';
/** Earlier formats, removed on open (their records cannot be trusted). */
const OLD_CACHE_FILES = ['hash-cache.v1'];

interface Entry {
  size: string;
  mtimeNs: string;
  ctimeNs: string;
  md5: string;
}

/** Records parsed between two yields to the event loop (a few ms of work). */
const LINES_PER_SLICE = 2048;
/** Bytes read per read() call while loading. */
const READ_BYTES = 256 * 1024;

const readAsync = promisify(fs.read);
const openAsync = promisify(fs.open);
const fstatAsync = (fd: number) => new Promise<fs.BigIntStats>((resolve, reject) => fs.fstat(fd, { bigint: true }, (err, st) => (err ? reject(err) : resolve(st))));

/** Where a load has got to: bytes consumed (up to the last complete line) and lines seen. */
interface LoadState {
  offset: number;
  lines: number;
}

const LINE = /^v2 ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+) ([0-9a-f]{32}) ([0-9a-f]{8})$/;

function check(text: string): string {
  return createHash('md5').update(text).digest('hex').slice(0, 8);
}

export class HashCache {
  private entries = new Map<string, Entry>();
  /** The refreshAsync() in progress (one at a time). */
  private refreshing: Promise<void> | undefined;
  private fd: number | undefined;
  private ino: bigint | undefined;
  /** Bytes of the file consumed so far (up to the last complete line). */
  private offset = 0;
  private lines = 0;

  private constructor(readonly file: string) {}

  /** Opens (creating) the cache in stateDir. Never throws: a broken cache only costs rehashing. */
  static open(stateDir: string, log?: (line: string) => void): HashCache {
    const cache = new HashCache(path.join(stateDir, HASH_CACHE_FILE));
    try {
      makeDirs(stateDir, 'the state directory');
      removeOldFormats(stateDir, log);
      cache.reopen();
      if (cache.lines > 100_000 && cache.lines > 3 * cache.entries.size) cache.compact();
    } catch (err) {
      log?.(`hash cache ${cache.file} unusable: ${(err as Error).message}`);
      cache.closeFd();
    }
    return cache;
  }

  /**
   * Opens (creating) the cache in stateDir without stalling the event loop: the file is read
   * and parsed in slices, and compacted (if oversized) with asynchronous writes. Never
   * rejects: a broken cache only costs rehashing. Without a directory, in memory only.
   */
  static async openAsync(stateDir: string | undefined, log?: (line: string) => void): Promise<HashCache> {
    // No state directory (docs/storage.md, "When the state directory cannot be used"): a
    // cache in memory, which lasts as long as the process.
    if (stateDir === undefined) return new HashCache('');
    const cache = new HashCache(path.join(stateDir, HASH_CACHE_FILE));
    try {
      makeDirs(stateDir, 'the state directory');
      removeOldFormats(stateDir, log);
      await cache.reopenAsync();
      if (cache.lines > 100_000 && cache.lines > 3 * cache.entries.size) await cache.compactAsync();
    } catch (err) {
      log?.(`hash cache ${cache.file} unusable: ${(err as Error).message}`);
      cache.closeFd();
    }
    return cache;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The cached MD5 of a file with this identity, if any. */
  lookup(key: FileKey): string | undefined {
    const e = this.entries.get(`${key.dev}:${key.ino}`);
    if (!e || e.size !== key.size || e.mtimeNs !== key.mtimeNs || e.ctimeNs !== key.ctimeNs) return undefined;
    return e.md5;
  }

  /** Reads records other processes appended since the last call (and follows a compaction). */
  refresh(): void {
    if (this.fd === undefined) return;
    try {
      const onDisk = fs.statSync(this.file, { bigint: true });
      if (onDisk.ino !== this.ino) {
        this.reopen();
        return;
      }
      this.readFrom(this.fd, Number(onDisk.size));
    } catch {
      // Cache trouble never fails a submit.
    }
  }

  /** refresh() in slices with yields; concurrent calls share one refresh. Never rejects. */
  refreshAsync(): Promise<void> {
    if (this.fd === undefined) return Promise.resolve();
    this.refreshing ??= (async () => {
      try {
        const onDisk = await fsp.stat(this.file, { bigint: true });
        if (onDisk.ino !== this.ino) {
          await this.reopenAsync();
        } else if (this.fd !== undefined) {
          const state = { offset: this.offset, lines: this.lines };
          await this.loadAsync(this.fd, Number(onDisk.size), state, this.entries);
          this.offset = state.offset;
          this.lines = state.lines;
        }
      } catch {
        // Cache trouble never fails a submit.
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  /** Records hashes (racy ones are skipped). One write per record. */
  record(items: ReadonlyArray<{ key: FileKey; md5: string; hashedAtMs: number }>): void {
    let text = '';
    for (const { key, md5, hashedAtMs } of items) {
      if (isRacy(key, hashedAtMs)) continue;
      this.entries.set(`${key.dev}:${key.ino}`, { size: key.size, mtimeNs: key.mtimeNs, ctimeNs: key.ctimeNs, md5 });
      const body = `v2 ${key.dev} ${key.ino} ${key.size} ${key.mtimeNs} ${key.ctimeNs} ${hashedAtMs} ${md5}`;
      text += `${body} ${check(body)}\n`;
      // Keep each write small enough to be one atomic append on any local filesystem.
      if (text.length > 3500) {
        this.append(text);
        text = '';
      }
    }
    if (text) this.append(text);
  }

  close(): void {
    this.closeFd();
  }

  private append(text: string): void {
    if (this.fd === undefined) return;
    try {
      // When the file ends where our reading does and grows by exactly our write, nobody
      // else appended meanwhile: our own records need not be read back by the next refresh
      // (they are in memory already). Not while a refresh is reading (it owns the offset).
      const before = this.refreshing ? -1 : fs.fstatSync(this.fd).size;
      // Whole lines only: a short write would tear a record, which readers tolerate.
      const n = fs.writeSync(this.fd, text);
      if (before === this.offset && n === text.length && !this.refreshing && fs.fstatSync(this.fd).size === before + n) {
        this.offset += n;
        for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) this.lines++;
      }
    } catch {
      // Disk full or similar: entries stay in memory for this process.
    }
  }

  private reopen(): void {
    this.closeFd();
    this.entries.clear();
    this.offset = 0;
    this.lines = 0;
    const fd = fs.openSync(this.file, fs.constants.O_RDWR | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
    this.fd = fd;
    const st = fs.fstatSync(fd, { bigint: true });
    this.ino = st.ino;
    this.readFrom(fd, Number(st.size));
  }

  /**
   * Opens the file again and loads it into a new table, in slices; the new table, descriptor
   * and position replace the old ones only once it is complete.
   */
  private async reopenAsync(): Promise<void> {
    const fd = await openAsync(this.file, fs.constants.O_RDWR | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
    const entries = new Map<string, Entry>();
    const state: LoadState = { offset: 0, lines: 0 };
    let ino: bigint;
    try {
      const st = await fstatAsync(fd);
      ino = st.ino;
      await this.loadAsync(fd, Number(st.size), state, entries);
    } catch (err) {
      fs.close(fd, () => undefined);
      throw err;
    }
    this.closeFd();
    this.fd = fd;
    this.ino = ino;
    this.entries = entries;
    this.offset = state.offset;
    this.lines = state.lines;
  }

  /** readFrom() with asynchronous reads and a yield every LINES_PER_SLICE records. */
  private async loadAsync(fd: number, end: number, state: LoadState, into: Map<string, Entry>): Promise<void> {
    if (end <= state.offset) return;
    const buf = Buffer.allocUnsafe(Math.min(end - state.offset, READ_BYTES));
    let carry = '';
    while (state.offset < end) {
      const { bytesRead: n } = await readAsync(fd, buf, 0, Math.min(buf.length, end - state.offset), state.offset);
      if (n <= 0) break;
      const text = carry + buf.toString('latin1', 0, n);
      state.offset += n;
      const lastNl = text.lastIndexOf('\n');
      if (lastNl < 0) {
        carry = text;
        continue;
      }
      carry = text.slice(lastNl + 1);
      const lines = text.slice(0, lastNl).split('\n');
      for (let i = 0; i < lines.length; i += LINES_PER_SLICE) {
        state.lines += parseLines(lines, i, Math.min(lines.length, i + LINES_PER_SLICE), into);
        await yieldNow();
      }
    }
    state.offset -= Buffer.byteLength(carry, 'latin1');
  }

  /** compact() with asynchronous writes and a yield after each slice of records. */
  private async compactAsync(): Promise<void> {
    const entries = this.entries;
    await replaceFile(this.file, (async function* snapshot() {
      for (const text of compactChunks(entries)) {
        yield text;
        await yieldNow();
      }
    })());
    await this.reopenAsync();
  }

  private readFrom(fd: number, end: number): void {
    if (end <= this.offset) return;
    const buf = Buffer.allocUnsafe(Math.min(end - this.offset, 16 * 1024 * 1024));
    let carry = '';
    while (this.offset < end) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, end - this.offset), this.offset);
      if (n <= 0) break;
      const text = carry + buf.toString('latin1', 0, n);
      const lastNl = text.lastIndexOf('\n');
      if (lastNl < 0) {
        carry = text;
        this.offset += n;
        continue;
      }
      this.parse(text.slice(0, lastNl));
      carry = text.slice(lastNl + 1);
      this.offset += n;
    }
    // An unfinished last line stays unread: it may still be being written, or torn.
    this.offset -= Buffer.byteLength(carry, 'latin1');
  }

  private parse(text: string): void {
    const lines = text.split('\n');
    this.lines += parseLines(lines, 0, lines.length, this.entries);
  }

  private compact(): void {
    replaceFileSync(this.file, compactChunks(this.entries));
    this.reopen();
  }

  private closeFd(): void {
    if (this.fd !== undefined) {
      try {
        fs.closeSync(this.fd);
      } catch {
        // ignore
      }
      this.fd = undefined;
    }
  }
}

/** Parses lines[from..to) into `into`; returns how many non-empty lines there were. */
function parseLines(lines: readonly string[], from: number, to: number, into: Map<string, Entry>): number {
  let count = 0;
  for (let i = from; i < to; i++) {
    const line = lines[i]!;
    if (line.length === 0) continue;
    count++;
    const m = LINE.exec(line);
    if (!m) continue;
    const body = line.slice(0, line.length - 9);
    if (check(body) !== m[8]) continue;
    into.set(`${m[1]}:${m[2]}`, { size: m[3]!, mtimeNs: m[4]!, ctimeNs: m[5]!, md5: m[7]! });
  }
  return count;
}

/** The compacted file's text, LINES_PER_SLICE records at a time. */
function* compactChunks(entries: Map<string, Entry>): Generator<string> {
  let text = '';
  let n = 0;
  for (const [k, e] of entries) {
    text += compactLine(k, e);
    if (++n % LINES_PER_SLICE === 0) {
      yield text;
      text = '';
    }
  }
  if (text) yield text;
}

/** A record as compaction writes it. */
function compactLine(k: string, e: Entry): string {
  const [dev, ino] = k.split(':');
  // hashedAtMs is only needed to judge raciness, already judged: keep it non-racy.
  const latestNs = BigInt(e.mtimeNs) > BigInt(e.ctimeNs) ? BigInt(e.mtimeNs) : BigInt(e.ctimeNs);
  const body = `v2 ${dev} ${ino} ${e.size} ${e.mtimeNs} ${e.ctimeNs} ${Number(latestNs / 1_000_000n) + 10_000} ${e.md5}`;
  return `${body} ${check(body)}\n`;
}

/** Removes cache files of earlier formats (best effort: another GAHP may race us to it). */
function removeOldFormats(stateDir: string, log?: (line: string) => void): void {
  for (const name of OLD_CACHE_FILES) {
    try {
      fs.unlinkSync(path.join(stateDir, name));
      log?.(`hash cache: dropped ${name} (keyed without ctime, its hashes cannot be trusted); files are hashed again once`);
    } catch {
      // absent, or removed by another process
    }
  }
}
