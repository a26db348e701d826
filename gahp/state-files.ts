/**
 * The crash-safe file primitives the on-disk stores share (docs/storage.md, "Building
 * blocks"):
 * - replaceFile: atomic replace. The new content goes to a temp file beside the target
 *   (same directory, so same filesystem), is fsync'd, renamed over the target, and the
 *   directory is fsync'd so the rename itself survives a power loss. A reader sees the old
 *   file or the new one, never a mix; a crash leaves at most a `*.tmp` file beside it.
 *   replaceFileSync does the same with synchronous calls, for short-lived processes (the
 *   BLAHP scripts) and tools that have no event loop to keep free.
 * - writeAll: one buffer written completely (short writes continued).
 * - withLockFile: a lock file naming its holder's pid, created whole (linked into place
 *   from a complete temp file, so nobody ever reads an empty lock), broken when its holder
 *   is dead, waited for without blocking the event loop.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { pidAlive, sleep } from './util.js';

/** A temp name beside `file`, unique to this process and call. */
export function tempPathBeside(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
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

/**
 * Replaces `file` atomically with the given content: a string or buffer, or chunks produced
 * one at a time (a large snapshot is written without building it whole in memory; the
 * producer may yield to the event loop between chunks).
 */
export async function replaceFile(
  file: string,
  content: string | Uint8Array | AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>,
  mode = 0o600,
): Promise<number> {
  const tmp = tempPathBeside(file);
  const fh = await fsp.open(tmp, 'wx', mode);
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
  const tmp = tempPathBeside(file);
  let fd: number | undefined = fs.openSync(tmp, 'wx', mode);
  let bytes = 0;
  try {
    const chunks = typeof content === 'string' || content instanceof Uint8Array ? [content] : content;
    for (const chunk of chunks) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      for (let off = 0; off < buf.length; ) off += fs.writeSync(fd, buf, off, buf.length - off);
      bytes += buf.length;
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
export function syncDirSync(dir: string): void {
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
 * Runs fn holding `lockFile`. A lock whose pid is dead (its holder was killed) is removed and
 * taken; a live holder is waited for (asynchronously) up to timeoutMs. The lock is removed
 * when fn settles.
 */
export async function withLockFile<T>(lockFile: string, fn: () => Promise<T> | T, opts: LockOptions = {}): Promise<T> {
  await acquire(lockFile, opts);
  try {
    return await fn();
  } finally {
    await fsp.rm(lockFile, { force: true });
  }
}

async function acquire(lockFile: string, opts: LockOptions): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  await fsp.mkdir(path.dirname(lockFile), { recursive: true, mode: 0o700 });
  // The pid goes in first, then the complete file is linked into place: link() fails with
  // EEXIST when the lock exists, and a reader never sees an empty lock.
  const tmp = tempPathBeside(lockFile);
  await fsp.writeFile(tmp, String(process.pid), { mode: 0o600 });
  try {
    for (;;) {
      opts.signal?.throwIfAborted();
      try {
        await fsp.link(tmp, lockFile);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = await lockHolder(lockFile);
      if (holder === 'gone') continue;
      if (holder === 'unreadable' || !pidAlive(holder)) {
        // A dead holder's lock. (Two processes breaking it at the same moment could remove
        // each other's fresh lock; the holder must have died first, and the window is the
        // time between this read and this rm.)
        await fsp.rm(lockFile, { force: true });
        continue;
      }
      if (Date.now() >= deadline) throw new LockHeldError(lockFile, holder);
      await sleep(opts.pollMs ?? 50, opts.signal);
    }
  } finally {
    await fsp.rm(tmp, { force: true });
  }
}

/**
 * The pid in a lock file: 'gone' when it was just released, 'unreadable' when it holds no
 * pid (left half-written by an older version that created the file before writing it).
 */
async function lockHolder(lockFile: string): Promise<number | 'gone' | 'unreadable'> {
  let text: string;
  try {
    text = await fsp.readFile(lockFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : 'unreadable';
}
