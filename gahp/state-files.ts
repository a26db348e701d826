/**
 * The crash-safe file primitives the on-disk stores share (docs/storage.md, "Building
 * blocks"):
 * - replaceFile: atomic replace. The new content goes to a temp file beside the target
 *   (same directory, so same filesystem), is fsync'd, renamed over the target, and the
 *   directory is fsync'd so the rename itself survives a power loss. A reader sees the old
 *   file or the new one, never a mix; a crash leaves at most a `*.tmp` file beside it.
 *   replaceFileSync does the same with synchronous calls, for short-lived processes (the
 *   BLAHP scripts) and tools that have no event loop to keep free.
 * - writeAll / writeAllSync: one buffer written completely (short writes continued).
 * - tryLockFile / unlockFile / lockFileHeld: a lock file naming its holder's pid, created
 *   whole (linked into place from a complete temp file, so nobody ever reads an empty
 *   lock), broken when its holder is dead; withLockFile runs a function holding one,
 *   waiting for a live holder without blocking the event loop.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { makeDirs } from './dirs.js';
import { pidAlive, sleep } from './util.js';

/**
 * A temp name beside `file`, unique to this process and call, for content put in place whole
 * (a replace, a lock file linked into place). Output files use output/staging.ts's hidden
 * `.part` names instead, which its clean-up recognises.
 */
function tempBeside(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
}

/** Whether `name` is such a temp name of a process that is gone: what a crash mid-replace left. */
export function isStaleTemp(name: string): boolean {
  const m = /\.(\d+)\.[0-9a-f]{8}\.tmp$/.exec(name);
  return m !== null && !pidAlive(Number(m[1]));
}

/** fsync of a directory (after a rename in it). Not every filesystem allows it; the rename is atomic anyway. */
export async function syncDir(dir: string): Promise<void> {
  try {
    const dh = await fsp.open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  } catch {
    // e.g. EISDIR/EINVAL on some filesystems: nothing more can be done.
  }
}

/** Writes all of buf at the file's current position (O_APPEND: at its end). Returns the bytes written. */
export async function writeAll(fh: fsp.FileHandle, buf: Uint8Array): Promise<number> {
  let off = 0;
  while (off < buf.length) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
  return off;
}

/** writeAll with synchronous writes (a small buffer: microseconds, where a thread-pool round trip costs milliseconds). */
export function writeAllSync(fd: number, buf: Uint8Array): number {
  let off = 0;
  while (off < buf.length) off += fs.writeSync(fd, buf, off, buf.length - off);
  return off;
}

export interface ReplaceOptions {
  /** The new file's mode (default 0600). */
  mode?: number;
  /**
   * Runs when the new content is complete and durable, right before the rename; if it
   * throws, the old file stays and the temp file is removed (a last look at the target).
   */
  beforeRename?: () => Promise<void>;
}

/**
 * Replaces `file` atomically with the given content: a string or buffer, or chunks produced
 * one at a time (a large snapshot is written without building it whole in memory; the
 * producer may yield to the event loop between chunks).
 */
export async function replaceFile(
  file: string,
  content: string | Uint8Array | AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>,
  opts: ReplaceOptions = {},
): Promise<number> {
  const tmp = tempBeside(file);
  const fh = await fsp.open(tmp, 'wx', opts.mode ?? 0o600);
  let bytes = 0;
  try {
    const chunks = typeof content === 'string' || content instanceof Uint8Array ? [content] : content;
    for await (const chunk of chunks) bytes += await writeAll(fh, typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
    await fh.sync();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await fsp.rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await opts.beforeRename?.();
    await fsp.rename(tmp, file);
  } catch (err) {
    await fsp.rm(tmp, { force: true });
    throw err;
  }
  await syncDir(path.dirname(file));
  return bytes;
}

/** replaceFile with synchronous calls (no event loop to keep free: scripts, tools, tests). */
export function replaceFileSync(file: string, content: string | Uint8Array | Iterable<string | Uint8Array>, mode = 0o600): number {
  const tmp = tempBeside(file);
  let fd: number | undefined = fs.openSync(tmp, 'wx', mode);
  let bytes = 0;
  try {
    const chunks = typeof content === 'string' || content instanceof Uint8Array ? [content] : content;
    for (const chunk of chunks) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      bytes += writeAllSync(fd, buf);
    }
    fs.fsyncSync(fd);
    const done = fd;
    fd = undefined;
    fs.closeSync(done);
    fs.renameSync(tmp, file);
  } catch (err) {
    // (Never a second close: the number may belong to another file by now.)
    if (fd !== undefined) fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  syncDirSync(path.dirname(file));
  return bytes;
}

/** syncDir with a synchronous call. */
function syncDirSync(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // As in syncDir: not every filesystem allows it.
  }
}

/** A lock file another live process holds. */
export class LockHeldError extends Error {
  override name = 'LockHeldError';
  constructor(readonly lockFile: string, readonly holder: number) {
    super(`${lockFile} is held by process ${holder}`);
  }
}

export interface LockOptions {
  /** How long to wait for a live holder before failing with LockHeldError (default 10 s). */
  timeoutMs?: number;
  /** Time between two looks at a held lock (default 50 ms). */
  pollMs?: number;
  signal?: AbortSignal;
}

/**
 * Runs fn holding `lockFile`. A lock whose holder is dead (killed) is broken and taken; a
 * live holder (this process included: callers in one process take turns) is waited for by
 * polling with timers, never by blocking the thread, up to timeoutMs. The lock is removed
 * when fn settles.
 */
export async function withLockFile<T>(lockFile: string, fn: () => Promise<T> | T, opts: LockOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  for (;;) {
    opts.signal?.throwIfAborted();
    if (tryLockFile(lockFile)) break;
    if (Date.now() >= deadline) {
      const holder = readHolder(lockFile);
      throw new LockHeldError(lockFile, typeof holder === 'number' ? holder : 0);
    }
    await sleep(opts.pollMs ?? 50, opts.signal);
  }
  try {
    return await fn();
  } finally {
    unlockFile(lockFile);
  }
}

/**
 * One attempt to take `lockFile`, without waiting: true when taken (release it with
 * unlockFile). The file holds the holder's pid; it is written to a temp file first and
 * hard-linked to the lock's name, which fails if the lock exists, so a lock never appears
 * empty. A lock whose holder is dead is broken: under `<lock>.break`, taken the same way,
 * so two processes that both see the dead holder cannot both break it (the second would
 * remove the first one's fresh lock). The calls are single quick syscalls, made
 * synchronously; only waiting must never block, and that is the caller's (withLockFile
 * polls with timers).
 */
export function tryLockFile(lockFile: string): boolean {
  makeDirs(path.dirname(lockFile), `the directory of the lock file ${path.basename(lockFile)}`);
  if (linkLock(lockFile)) return true;
  const holder = readHolder(lockFile);
  if (holder === 'gone') return linkLock(lockFile);
  if (!abandoned(lockFile, holder)) return false;
  const breaker = `${lockFile}.break`;
  if (!linkLock(breaker)) {
    // A breaker killed in its few microseconds of work leaves this behind.
    if (ageMs(breaker) > UNWRITTEN_GRACE_MS) fs.rmSync(breaker, { force: true });
    return false;
  }
  try {
    if (readHolder(lockFile) === holder) fs.rmSync(lockFile, { force: true });
  } finally {
    fs.rmSync(breaker, { force: true });
  }
  return linkLock(lockFile);
}

/** Releases a lock this process holds (never another's). */
export function unlockFile(lockFile: string): void {
  if (readHolder(lockFile) === process.pid) fs.rmSync(lockFile, { force: true });
}

/** Whether a live process (this one included) holds the lock. */
export function lockFileHeld(lockFile: string): boolean {
  const holder = readHolder(lockFile);
  return holder !== 'gone' && !abandoned(lockFile, holder);
}

/**
 * An empty or unreadable lock (written by an older version, which created the file before
 * writing its pid) is given this long before it counts as abandoned; so is a `.break` file.
 */
const UNWRITTEN_GRACE_MS = 5000;

function abandoned(lockFile: string, holder: number | 'unreadable'): boolean {
  return holder === 'unreadable' ? ageMs(lockFile) > UNWRITTEN_GRACE_MS : !pidAlive(holder);
}

function ageMs(file: string): number {
  try {
    return Date.now() - fs.statSync(file).mtimeMs;
  } catch {
    return Infinity;
  }
}

/** Links a complete file naming this process to `lockFile`: false when the lock exists. */
function linkLock(lockFile: string): boolean {
  const tmp = tempBeside(lockFile);
  fs.writeFileSync(tmp, String(process.pid), { mode: 0o600 });
  try {
    fs.linkSync(tmp, lockFile);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** The pid in a lock file: 'gone' when there is none, 'unreadable' when it holds no pid. */
function readHolder(lockFile: string): number | 'gone' | 'unreadable' {
  let text: string;
  try {
    text = fs.readFileSync(lockFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : 'unreadable';
}
