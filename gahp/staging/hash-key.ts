/**
 * A file's identity for the hash cache: everything that changes when its content can
 * change without reading it. Shared by the hash pool, its worker threads, the cache and the
 * upload's last check.
 *
 * ctime is part of it because mtime alone can be put back: `cp -p` onto an existing file,
 * `rsync -t --inplace` or `tar x` over an old tree rewrite the content in place (same
 * device, inode and size) and then restore the old mtime. Only the kernel sets ctime, on
 * every write and every utimes() call, so a rewrite always moves it, except within one tick
 * of the filesystem's clock: see isRacy().
 */
import type * as fs from 'node:fs';
import type { FileKey } from './hash-types.js';

export function fileKey(st: fs.BigIntStats): FileKey {
  return {
    dev: st.dev.toString(),
    ino: st.ino.toString(),
    size: st.size.toString(),
    mtimeNs: st.mtimeNs.toString(),
    ctimeNs: st.ctimeNs.toString(),
  };
}

export function sameFileKey(a: FileKey, b: FileKey): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

const SECOND_NS = 1_000_000_000n;

/**
 * How long after a timestamp a later write may still get the same timestamp. A sub-second
 * timestamp means a fine-grained filesystem, whose clock advances at least every kernel
 * tick (at most 10 ms; Linux stamps files with a clock that can lag real time by a tick):
 * 50 ms is a safe margin. A whole-second one may come from a 1 s (or 2 s, FAT) filesystem.
 */
function granularityNs(timeNs: bigint): bigint {
  return timeNs % SECOND_NS === 0n ? 2n * SECOND_NS : 50_000_000n;
}

/**
 * Whether a hash taken at hashedAtMs (read before the first byte) cannot be trusted for a
 * file with this identity, as git judges "racily clean" entries: if the file's mtime or
 * ctime is not older than the hash by more than the timestamp granularity, a write in the
 * same tick after the hash could leave the whole identity unchanged. Such hashes are used
 * for the submit that took them, never cached. A timestamp in the future is racy too.
 */
export function isRacy(key: Pick<FileKey, 'mtimeNs' | 'ctimeNs'>, hashedAtMs: number): boolean {
  const hashedAtNs = BigInt(hashedAtMs) * 1_000_000n;
  for (const t of [BigInt(key.mtimeNs), BigInt(key.ctimeNs)]) {
    if (hashedAtNs - t <= granularityNs(t)) return true;
  }
  return false;
}
