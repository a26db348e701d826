/** Quickly generated input files for the benchmarks (distinct content, no shell). */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

const BLOCK = 1 << 20;
let pattern: Buffer | undefined;

function block(): Buffer {
  pattern ??= crypto.randomBytes(BLOCK);
  return pattern;
}

/**
 * Writes `size` bytes: a random 1 MiB pattern repeated, each MiB stamped with (seed, index)
 * so files and blocks differ. Fast (page-cache bound), and hashing cost is the same as for
 * any data.
 */
export function writeFile(file: string, size: number, seed: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    const buf = Buffer.from(block());
    let off = 0;
    let i = 0;
    while (off < size) {
      buf.writeUInt32LE(seed >>> 0, 0);
      buf.writeUInt32LE(i++, 4);
      const n = Math.min(BLOCK, size - off);
      fs.writeSync(fd, buf, 0, n, off);
      off += n;
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** A sparse file of `size` bytes (reads as zeros; costs no disk and no write time). */
export function writeSparse(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    fs.ftruncateSync(fd, size);
  } finally {
    fs.closeSync(fd);
  }
}

/** `count` files of `size` bytes named f00000.dat ... in dir. */
export function writeMany(dir: string, count: number, size: number, seedBase = 1): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const p = path.join(dir, `f${String(i).padStart(5, '0')}.dat`);
    writeFile(p, size, seedBase + i);
    out.push(p);
  }
  return out;
}

/** Reads files once (to put them in the page cache before timing). */
export async function readThrough(files: readonly string[]): Promise<void> {
  const buf = Buffer.allocUnsafe(4 << 20);
  for (const f of files) {
    const fd = fs.openSync(f, 'r');
    try {
      while (fs.readSync(fd, buf, 0, buf.length, null) > 0) {
        // discard
      }
    } finally {
      fs.closeSync(fd);
    }
  }
}

export const MiB = 1 << 20;
export const GiB = 1 << 30;
