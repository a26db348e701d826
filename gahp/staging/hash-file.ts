/**
 * MD5 of one file with blocking reads into a caller's buffer: what the hash pool's worker
 * threads do for a file that fits their buffer, and what hashSources (hashing.ts) does on
 * the main thread when a submit's unhashed inputs are few and small (starting worker
 * threads would cost more than the hashing). The identity is taken before the first read
 * and checked again after the last: a file that changes meanwhile is an error, never a
 * wrong hash.
 */
import * as fs from 'node:fs';
import { createHash, type Hash } from 'node:crypto';
import type { WorkerHashResult } from './hash-types.js';
import { fileKey, sameFileKey } from './hash-key.js';

/** An input file opened for hashing: its identity as of before the first read. */
export interface OpenedForHash {
  fd: number;
  size: number;
  before: ReturnType<typeof fileKey>;
  hashedAtMs: number;
}

/** Opens path and takes its identity, or gives the result to report (not a regular file). */
export function openForHash(path: string): OpenedForHash | WorkerHashResult {
  const fd = fs.openSync(path, 'r');
  let st: fs.BigIntStats;
  try {
    st = fs.fstatSync(fd, { bigint: true });
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  if (!st.isFile()) {
    fs.closeSync(fd);
    return { path, error: 'not a regular file' };
  }
  // Reads stop at the size fstat gave; a file that grows or shrinks meanwhile is caught
  // by the second fstat in finishHash.
  return { fd, size: Number(st.size), before: fileKey(st), hashedAtMs: Date.now() };
}

/** The result once every byte went into hash: an error if the file changed meanwhile. */
export function finishHash(path: string, f: OpenedForHash, hash: Hash): WorkerHashResult {
  const after = fileKey(fs.fstatSync(f.fd, { bigint: true }));
  if (!sameFileKey(f.before, after)) return { path, error: 'the file changed while it was being hashed' };
  return { path, md5: hash.digest('hex'), key: f.before, hashedAtMs: f.hashedAtMs };
}

/** An I/O failure as the result to report. */
export function hashError(path: string, err: unknown): WorkerHashResult {
  const e = err as NodeJS.ErrnoException;
  return { path, error: e.code ? `${e.code}: ${e.message}` : String(e.message ?? e) };
}

export function hashFileSync(path: string, buf: Buffer): WorkerHashResult {
  let f: OpenedForHash | undefined;
  try {
    const opened = openForHash(path);
    if (!('fd' in opened)) return opened;
    f = opened;
    const hash = createHash('md5');
    let total = 0;
    while (total < f.size) {
      const n = fs.readSync(f.fd, buf, 0, Math.min(buf.length, f.size - total), null);
      if (n === 0) break;
      hash.update(n === buf.length ? buf : buf.subarray(0, n));
      total += n;
    }
    return finishHash(path, f, hash);
  } catch (err) {
    return hashError(path, err);
  } finally {
    if (f) fs.closeSync(f.fd);
  }
}
