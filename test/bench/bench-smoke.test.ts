/**
 * Smoke test of the benchmark harness (not of the figures): the lean driver speaks to the
 * real GAHP, RESULTS drains a burst of error results, md5sum's output is read correctly,
 * and temporary data is removed. Small sizes: the real figures come from `npm run bench`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { resultsDrainOnce } from './figures/drain.js';
import { md5sum } from './figures/md5.js';
import { streamMd5 } from './lib/hasher.js';
import { writeFile } from './lib/files.js';
import { benchTempDir, removeTempDir } from './lib/tmp.js';
import { median, percentile } from './lib/stats.js';

test('statistics helpers', () => {
  expect(median([3, 1, 2])).toBe(2);
  expect(median([4, 1, 2, 3])).toBe(2.5);
  expect(percentile([...Array(100).keys()].map((i) => i + 1), 99)).toBe(99);
});

test('md5sum side of the md5 figures agrees with node:crypto', async () => {
  const dir = benchTempDir('smoke');
  try {
    const a = path.join(dir, 'a.dat');
    const b = path.join(dir, 'b with space.dat');
    writeFile(a, 3 * 1024 * 1024 + 17, 1);
    writeFile(b, 1000, 2);
    expect(await md5sum([a, b])).toEqual([await streamMd5(a), await streamMd5(b)]);
  } finally {
    removeTempDir(dir);
  }
  expect(fs.existsSync(dir)).toBe(false);
});

test('one RESULTS drains a burst of 2,000 immediate error results', async () => {
  const seconds = await resultsDrainOnce(2000);
  expect(seconds).toBeGreaterThan(0);
  expect(seconds).toBeLessThan(5);
}, 60_000);
