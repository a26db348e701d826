/**
 * md5_big_ratio and md5_many_ratio: our staging hash throughput over md5sum's on the same
 * files, measured side by side (alternating ours/md5sum, files read once beforehand so
 * both hash from the page cache). md5sum is spawned without a shell, with a fixed argv of
 * the temp files we created.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { GiB, MiB, readThrough, writeFile, writeMany } from '../lib/files.js';
import { median, secondsSince } from '../lib/stats.js';
import { stagingHasher, type Hasher } from '../lib/hasher.js';

export function md5sum(files: readonly string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn('md5sum', ['--', ...files], { stdio: ['ignore', 'pipe', 'pipe'], shell: false });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`md5sum exited ${code}: ${err.slice(0, 500)}`));
      const lines = Buffer.concat(out).toString('utf8').split('\n').filter((l) => l.length > 0);
      resolve(lines.map((l) => l.slice(0, 32)));
    });
  });
}

export interface Md5Sizes {
  bigBytes: number;
  manyCount: number;
  manyBytes: number;
  runs: number;
}

export interface Md5Figures {
  md5_big_ratio: number;
  md5_many_ratio: number;
  md5_big_ours_mbps: number;
  md5_big_md5sum_mbps: number;
  md5_many_ours_mbps: number;
  md5_many_md5sum_mbps: number;
}

/**
 * Times ours and md5sum alternately, `runs` pairs; returns the median seconds of each and
 * the median of the per-pair ratios (a pair runs back to back, so on a machine whose load
 * changes it is the fairer comparison). Checks the digests agree.
 */
async function sideBySide(hasher: Hasher, files: string[], runs: number): Promise<{ ours: number; theirs: number; ratio: number }> {
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let r = 0; r < runs; r++) {
    // Alternate which goes first so neither always benefits from a warmer CPU/cache.
    const order = r % 2 === 0 ? ['ours', 'theirs'] : ['theirs', 'ours'];
    for (const who of order) {
      const t0 = process.hrtime.bigint();
      const digests = who === 'ours' ? await hasher.hash(files) : await md5sum(files);
      const s = secondsSince(t0);
      (who === 'ours' ? ours : theirs).push(s);
      if (r === 0 && who === 'ours') {
        const ref = await md5sum(files);
        for (let i = 0; i < files.length; i++) {
          if (digests[i] !== ref[i]) throw new Error(`${hasher.name}: wrong md5 for ${files[i]}: ${digests[i]} != ${ref[i]}`);
        }
      }
    }
  }
  return { ours: median(ours), theirs: median(theirs), ratio: median(ours.map((o, i) => theirs[i]! / o)) };
}

export async function md5Figures(sizes: Md5Sizes, note: (s: string) => void): Promise<Md5Figures> {
  const hasher = await stagingHasher();
  note(`md5: our side is ${hasher.name}`);
  const dir = benchTempDir('md5');
  try {
    const big = path.join(dir, 'big.dat');
    writeFile(big, sizes.bigBytes, 7);
    await readThrough([big]);
    const b = await sideBySide(hasher, [big], sizes.runs);

    const manyDir = path.join(dir, 'many');
    (await import('node:fs')).mkdirSync(manyDir);
    const files = writeMany(manyDir, sizes.manyCount, sizes.manyBytes, 1000);
    await readThrough(files);
    const m = await sideBySide(hasher, files, sizes.runs);
    const totalMany = sizes.manyCount * sizes.manyBytes;
    return {
      md5_big_ratio: b.ratio,
      md5_many_ratio: m.ratio,
      md5_big_ours_mbps: sizes.bigBytes / MiB / b.ours,
      md5_big_md5sum_mbps: sizes.bigBytes / MiB / b.theirs,
      md5_many_ours_mbps: totalMany / MiB / m.ours,
      md5_many_md5sum_mbps: totalMany / MiB / m.theirs,
    };
  } finally {
    removeTempDir(dir);
  }
}

export const FULL_MD5: Omit<Md5Sizes, 'runs'> = { bigBytes: GiB, manyCount: 2000, manyBytes: 512 * 1024 };
export const QUICK_MD5: Omit<Md5Sizes, 'runs'> = { bigBytes: 256 * MiB, manyCount: 500, manyBytes: 512 * 1024 };
