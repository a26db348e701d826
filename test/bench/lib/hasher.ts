/**
 * The hash function under test for the md5 figures. Until the staging module's hashing
 * function is plugged in, this is a plain node:crypto stream (one file at a time on the
 * main thread): the "before" reference.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';

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

export async function stagingHasher(): Promise<Hasher> {
  return referenceHasher;
}
