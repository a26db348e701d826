/**
 * MD5 of one file with blocking reads into a caller's buffer: what the hash pool's worker
 * threads do for a file that fits their buffer, and what hashSources (hashing.ts) does on
 * the main thread when a submit's unhashed inputs are few and small (starting worker
 * threads would cost more than the hashing). The identity is taken before the first read
 * and checked again after the last: a file that changes meanwhile is an error, never a
 * wrong hash.
 */
import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { WorkerHashResult } from './hash-types.js';
import { fileKey, sameFileKey } from './hash-key.js';

export function hashFileSync(path: string, buf: Buffer): WorkerHashResult {
  let fd: number | undefined;
  try {
    fd = fs.openSync(path, 'r');
    const st = fs.fstatSync(fd, { bigint: true });
    if (!st.isFile()) return { path, error: 'not a regular file' };
    const before = fileKey(st);
    const hashedAtMs = Date.now();
    const hash = createHash('md5');
    // Reads stop at the size fstat gave; a file that grows or shrinks meanwhile is caught
    // by the second fstat.
    const size = Number(st.size);
    let total = 0;
    while (total < size) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, size - total), null);
      if (n === 0) break;
      hash.update(n === buf.length ? buf : buf.subarray(0, n));
      total += n;
    }
    const after = fileKey(fs.fstatSync(fd, { bigint: true }));
    if (!sameFileKey(before, after)) return { path, error: 'the file changed while it was being hashed' };
    return { path, md5: hash.digest('hex'), key: before, hashedAtMs };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { path, error: e.code ? `${e.code}: ${e.message}` : String(e.message ?? e) };
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
