/**
 * The hash function under test for the md5 figures: the staging module's hashFiles (the
 * worker-thread pool BOINC_SUBMIT uses, sized like the GAHP's default hashWorkers), or with
 * BENCH_HASHER=reference a plain node:crypto stream on the main thread, one file at a time.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { hashFiles } from '../../../gahp/staging/hashing.js';

export interface Hasher {
  name: string;
  /** md5 hex digests of the files, in order. */
  hash(files: readonly string[]): Promise<string[]>;
}

export function streamMd5(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = crypto.createHash('md5');
    fs.createReadStream(file, { highWaterMark: 1 << 20 })
      .on('data', (c) => h.update(c))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}

export const referenceHasher: Hasher = {
  name: 'reference node:crypto stream (bench-local, sequential)',
  async hash(files) {
    const out: string[] = [];
    for (const f of files) out.push(await streamMd5(f));
    return out;
  },
};

/** Same default as gahp/cli/run-gahp.ts's defaultConfig().hashWorkers. */
export const HASH_WORKERS = Math.max(1, Math.min(os.availableParallelism(), 8));

export const poolHasher: Hasher = {
  name: `gahp/staging hashFiles (worker pool, ${HASH_WORKERS} threads)`,
  hash: (files) => hashFiles(files, HASH_WORKERS),
};

export async function stagingHasher(): Promise<Hasher> {
  return process.env.BENCH_HASHER === 'reference' ? referenceHasher : poolHasher;
}
