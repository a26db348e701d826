/**
 * The staging hashes: the worker pool (compiled build: worker threads run dist/ code) gives
 * the same MD5 as node:crypto on whole files, at chunk boundaries too; the persistent cache
 * survives torn lines and is shared by concurrent processes; the BOINC_SUBMIT parser is linear.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HashCache, HASH_CACHE_FILE } from '../../gahp/staging/hash-cache.js';
import { fileKey, isRacy } from '../../gahp/staging/hash-key.js';
import { parseSubmitArgs } from '../../gahp/staging/parse.js';
import { ArgumentError } from '../../gahp/protocol/commands.js';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';

type HashingModule = typeof import('../../gahp/staging/hashing.js');
const loadHashing = async (): Promise<HashingModule> => {
  const distPath = path.join(REPO_ROOT, 'dist', 'gahp', 'staging', 'hashing.js');
  return (await import(distPath)) as HashingModule;
};

let dir: string;
beforeAll(() => {
  dir = makeTempDir('boinc-gahp-hash-');
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const md5 = (b: Buffer) => crypto.createHash('md5').update(b).digest('hex');
const fileKeyOf = (p: string) => fileKey(fs.statSync(p, { bigint: true }));

test('the worker pool hashes like node:crypto, at 4 MiB chunk boundaries and for many files at once', async () => {
  const { hashFiles } = await loadHashing();
  const MiB = 1024 * 1024;
  const sizes = [0, 1, 4 * MiB - 1, 4 * MiB, 4 * MiB + 1, 9 * MiB + 3];
  const files: string[] = [];
  const want: string[] = [];
  sizes.forEach((n, i) => {
    const b = crypto.randomBytes(n);
    const p = path.join(dir, `big${i}`);
    fs.writeFileSync(p, b);
    files.push(p);
    want.push(md5(b));
  });
  for (let i = 0; i < 300; i++) {
    const b = crypto.randomBytes(1 + (i * 7919) % 20000);
    const p = path.join(dir, `small${i}`);
    fs.writeFileSync(p, b);
    files.push(p);
    want.push(md5(b));
  }
  expect(await hashFiles(files, 2)).toEqual(want);
  expect(await hashFiles(files.slice(0, 1), 3)).toEqual(want.slice(0, 1));
  await expect(hashFiles([path.join(dir, 'nope')], 1)).rejects.toThrow(/nope.*ENOENT/);
});

test('one pool, overlapping calls (submits hashing together): each finishes, whichever ends first, and the pool serves again after', async () => {
  const { HashPool } = await loadHashing();
  const files: string[] = [];
  const want: string[] = [];
  for (let i = 0; i < 40; i++) {
    const b = crypto.randomBytes(256 * 1024 + i);
    const p = path.join(dir, `overlap${i}`);
    fs.writeFileSync(p, b);
    files.push(p);
    want.push(md5(b));
  }
  const digests = (rs: Array<{ md5?: string; error?: string }>) => rs.map((r) => r.md5 ?? r.error);
  const pool = new HashPool(2);
  try {
    // The long call needs two threads, the short ones one: whichever ends first, the threads
    // must stay for the calls still under way (they exit when the last one ends).
    const long = pool.hash(files);
    const short1 = pool.hash(files.slice(0, 1));
    expect(digests(await short1)).toEqual(want.slice(0, 1));
    const short2 = pool.hash(files.slice(1, 2));
    expect(digests(await short2)).toEqual(want.slice(1, 2));
    expect(digests(await long)).toEqual(want);
    expect(digests(await pool.hash(files.slice(2, 6)))).toEqual(want.slice(2, 6));
  } finally {
    pool.close();
  }
});

test('hashSources: a few small files are hashed on the main thread (no worker started), many bytes by the pool; both like node:crypto, both cached', async () => {
  const { hashSources, HashPool, INLINE_HASH_BYTES } = await loadHashing();
  const { HashCache: DistCache } = (await import(path.join(REPO_ROOT, 'dist', 'gahp', 'staging', 'hash-cache.js'))) as typeof import('../../gahp/staging/hash-cache.js');
  /** A real pool that counts the hash() calls it gets. */
  class CountingPool extends HashPool {
    calls = 0;
    override hash(...args: Parameters<InstanceType<typeof HashPool>['hash']>) {
      this.calls++;
      return super.hash(...args);
    }
  }
  const write = (name: string, n: number): [string, string] => {
    const b = crypto.randomBytes(n);
    const p = path.join(dir, name);
    fs.writeFileSync(p, b);
    return [p, md5(b)];
  };
  const statsOf = (ps: string[]) => new Map(ps.map((p) => [p, fs.statSync(p, { bigint: true })] as const));
  const stateDir = makeTempDir('boinc-gahp-hash-state-');
  const pool = new CountingPool(2);
  try {
    const cache = DistCache.open(stateDir);
    const small = [0, 1, 65536, 3 * 1024 * 1024 + 5].map((n, i) => write(`inline${i}`, n));
    const seen: string[] = [];
    const r1 = await hashSources(statsOf(small.map(([p]) => p)), cache, pool, undefined, (p) => seen.push(p));
    expect(pool.calls).toBe(0);
    expect(small.map(([p]) => r1.files.get(p)!.md5)).toEqual(small.map(([, m]) => m));
    expect(seen.sort()).toEqual(small.map(([p]) => p).sort());
    expect(r1.hashed).toBe(4);

    const big = Array.from({ length: 3 }, (_, i) => write(`pooled${i}`, Math.ceil(INLINE_HASH_BYTES / 2)));
    const r2 = await hashSources(statsOf(big.map(([p]) => p)), cache, pool);
    expect(pool.calls).toBe(1);
    expect(big.map(([p]) => r2.files.get(p)!.md5)).toEqual(big.map(([, m]) => m));
    cache.close();

    // Both kinds were recorded; a hash taken within 50 ms of a write is racy and never
    // kept, so what the cache answers is checked, not that it answers.
    const reopened = DistCache.open(stateDir);
    for (const [p, m] of [...small, ...big]) {
      const hit = reopened.lookup(fileKeyOf(p));
      if (hit !== undefined) expect(hit).toBe(m);
    }
    reopened.close();
  } finally {
    pool.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

describe('hash cache', () => {
  const key = (ino: number, mtimeNs = '1700000000123456789', ctimeNs = '1700000000223456789') => ({ dev: '42', ino: String(ino), size: '100', mtimeNs, ctimeNs });
  const hashedAtMs = 1_800_000_000_000;
  const recentNs = String(BigInt(hashedAtMs) * 1_000_000n - 10_000_000n);

  test('records survive reopening; a different size, mtime or ctime misses; racy hashes are not kept', () => {
    const d = makeTempDir('boinc-gahp-hc-');
    try {
      const c = HashCache.open(d);
      c.record([
        { key: key(1), md5: 'a'.repeat(32), hashedAtMs },
        // Modified 10 ms before the hash: by mtime, or (mtime put back) by ctime.
        { key: key(2, recentNs, recentNs), md5: 'b'.repeat(32), hashedAtMs },
        { key: key(3, '1700000000000000000', recentNs), md5: 'c'.repeat(32), hashedAtMs },
      ]);
      expect(c.lookup(key(2, recentNs, recentNs))).toBeUndefined();
      expect(c.lookup(key(3, '1700000000000000000', recentNs))).toBeUndefined();
      c.close();
      const c2 = HashCache.open(d);
      expect(c2.lookup(key(1))).toBe('a'.repeat(32));
      expect(c2.lookup(key(2, recentNs, recentNs))).toBeUndefined();
      expect(c2.lookup(key(3, '1700000000000000000', recentNs))).toBeUndefined();
      expect(c2.lookup({ ...key(1), size: '101' })).toBeUndefined();
      expect(c2.lookup(key(1, '1700000000123456790'))).toBeUndefined();
      // Same size and mtime, content rewritten (only ctime moved): a miss.
      expect(c2.lookup(key(1, '1700000000123456789', '1700000005000000001'))).toBeUndefined();
      c2.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  test('raciness: sub-second times need 50 ms, whole-second ones 2 s; mtime and ctime both; the future is racy', () => {
    const old = '900000000000000000';
    expect(isRacy({ mtimeNs: '1000000000500000000', ctimeNs: old }, 1_000_000_000_540)).toBe(true);
    expect(isRacy({ mtimeNs: '1000000000500000000', ctimeNs: old }, 1_000_000_000_560)).toBe(false);
    expect(isRacy({ mtimeNs: '1000000000000000000', ctimeNs: old }, 1_000_000_001_900)).toBe(true);
    expect(isRacy({ mtimeNs: '1000000000000000000', ctimeNs: old }, 1_000_000_002_100)).toBe(false);
    expect(isRacy({ mtimeNs: old, ctimeNs: '1000000000500000000' }, 1_000_000_000_540)).toBe(true);
    expect(isRacy({ mtimeNs: old, ctimeNs: '1000000000500000000' }, 1_000_000_000_560)).toBe(false);
    expect(isRacy({ mtimeNs: old, ctimeNs: '1000000000000000000' }, 1_000_000_001_900)).toBe(true);
    expect(isRacy({ mtimeNs: old, ctimeNs: '1000000000000000000' }, 1_000_000_002_100)).toBe(false);
    // Exactly the granularity older is not enough.
    expect(isRacy({ mtimeNs: old, ctimeNs: '1000000000500000000' }, 1_000_000_000_550)).toBe(true);
    expect(isRacy({ mtimeNs: '1000000100000000000', ctimeNs: old }, 1_000_000_002_100)).toBe(true);
  });

  test('a cache of the old format (keyed without ctime) is dropped on open, never read', () => {
    const d = makeTempDir('boinc-gahp-hc-');
    try {
      const body = `v1 42 1 100 1700000000123456789 1800000000000 ${'f'.repeat(32)}`;
      const old = path.join(d, 'hash-cache.v1');
      fs.writeFileSync(old, `${body} ${md5(Buffer.from(body)).slice(0, 8)}\n`);
      // A v1 line inside the current file is skipped too.
      fs.writeFileSync(path.join(d, HASH_CACHE_FILE), `${body} ${md5(Buffer.from(body)).slice(0, 8)}\n`);
      const warnings: string[] = [];
      const c = HashCache.open(d, (l) => warnings.push(l));
      expect(c.size).toBe(0);
      expect(fs.existsSync(old)).toBe(false);
      expect(warnings.join('\n')).toMatch(/hash-cache\.v1/);
      c.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  test('torn and glued lines are skipped; records of another process are seen on refresh', () => {
    const d = makeTempDir('boinc-gahp-hc-');
    try {
      const a = HashCache.open(d);
      const b = HashCache.open(d);
      a.record([{ key: key(1), md5: '1'.repeat(32), hashedAtMs }]);
      // A record torn by a crash, then glued to the next one appended.
      const file = path.join(d, HASH_CACHE_FILE);
      const full = fs.readFileSync(file, 'utf8');
      fs.appendFileSync(file, full.slice(0, 30).replace(/ 1 /, ' 3 '));
      b.record([{ key: key(2), md5: '2'.repeat(32), hashedAtMs }]);
      fs.appendFileSync(file, 'garbage line\nv2 42 9 100 1 1 1 ' + '9'.repeat(32) + ' deadbeef\n');
      a.refresh();
      expect(a.lookup(key(1))).toBe('1'.repeat(32));
      // The record glued to the torn one is lost (only costs a rehash), never misread.
      expect(a.lookup(key(3))).toBeUndefined();
      expect(a.lookup({ ...key(9), mtimeNs: '1', ctimeNs: '1' })).toBeUndefined();
      // A later, intact record is read.
      b.record([{ key: key(4), md5: '4'.repeat(32), hashedAtMs }]);
      a.refresh();
      expect(a.lookup(key(4))).toBe('4'.repeat(32));
      const c = HashCache.open(d);
      expect(c.lookup(key(1))).toBe('1'.repeat(32));
      expect(c.lookup(key(4))).toBe('4'.repeat(32));
      a.close();
      b.close();
      c.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});

describe('hash cache, loaded in slices (openAsync, refreshAsync)', () => {
  const md5hex = (t: string) => crypto.createHash('md5').update(t).digest('hex');
  /** n records for inodes 1..keys (repeating), as the GAHP writes them. */
  function cacheText(n: number, keys = n): string {
    const parts: string[] = [];
    for (let i = 0; i < n; i++) {
      const ino = (i % keys) + 1;
      const body = `v2 42 ${ino} 100 1700000000123456789 1700000000223456789 1800000000000 ${md5hex(String(ino))}`;
      parts.push(`${body} ${md5hex(body).slice(0, 8)}\n`);
    }
    return parts.join('');
  }
  const key = (ino: number) => ({ dev: '42', ino: String(ino), size: '100', mtimeNs: '1700000000123456789', ctimeNs: '1700000000223456789' });

  /** Runs fn while measuring the longest gap between event-loop turns. */
  async function longestStall<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; stallMs: number }> {
    let last = performance.now();
    let stall = 0;
    let running = true;
    const tick = () => {
      const now = performance.now();
      stall = Math.max(stall, now - last);
      last = now;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    const t0 = performance.now();
    const value = await fn();
    const ms = performance.now() - t0;
    running = false;
    return { value, ms, stallMs: stall };
  }

  test('a 300,000-record cache: the same table as open(), without stalling the event loop', async () => {
    const d = makeTempDir('boinc-gahp-hc-');
    try {
      fs.writeFileSync(path.join(d, HASH_CACHE_FILE), cacheText(300_000));
      let t0 = performance.now();
      const sync = HashCache.open(d);
      const syncMs = performance.now() - t0;
      sync.close();
      const { value: c, ms, stallMs } = await longestStall(() => HashCache.openAsync(d));
      process.stdout.write(`[hash cache] 300,000 records: open() blocks ${syncMs.toFixed(0)} ms; openAsync() takes ${ms.toFixed(0)} ms, longest stall ${stallMs.toFixed(1)} ms\n`);
      try {
        expect(c.size).toBe(300_000);
        for (const ino of [1, 150_000, 300_000]) expect(c.lookup(key(ino))).toBe(md5hex(String(ino)));
        // Slices of a few thousand records: far below the whole load (timing noise allowed).
        expect(stallMs).toBeLessThan(Math.max(100, syncMs / 3));
        // And it still records and refreshes.
        t0 = performance.now();
        c.record([{ key: key(300_001), md5: 'c'.repeat(32), hashedAtMs: 1_800_000_000_000 }]);
        await Promise.all([c.refreshAsync(), c.refreshAsync()]);
        expect(c.lookup(key(300_001))).toBe('c'.repeat(32));
      } finally {
        c.close();
      }
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  }, 60_000);

  test('an oversized cache is compacted by openAsync; refreshAsync reads appends and follows a compaction', async () => {
    const d = makeTempDir('boinc-gahp-hc-');
    try {
      const file = path.join(d, HASH_CACHE_FILE);
      fs.writeFileSync(file, cacheText(120_000, 30_000));
      const a = await HashCache.openAsync(d);
      expect(fs.readFileSync(file, 'latin1').split('\n').length - 1).toBe(30_000);
      expect(a.size).toBe(30_000);
      expect(a.lookup(key(29_999))).toBe(md5hex('29999'));
      expect(fs.readdirSync(d)).toEqual([HASH_CACHE_FILE]);
      // Another process appends, then another compacts (new inode): a follows both.
      const b = HashCache.open(d);
      b.record([{ key: key(40_000), md5: 'd'.repeat(32), hashedAtMs: 1_800_000_000_000 }]);
      await a.refreshAsync();
      expect(a.lookup(key(40_000))).toBe('d'.repeat(32));
      b.close();
      fs.writeFileSync(`${file}.new`, cacheText(10));
      fs.renameSync(`${file}.new`, file);
      await a.refreshAsync();
      expect(a.size).toBe(10);
      expect(a.lookup(key(40_000))).toBeUndefined();
      a.close();
      // A state directory that cannot hold a cache: openAsync still gives a (memory-only) cache.
      const notDir = path.join(d, 'file');
      fs.writeFileSync(notDir, 'x');
      const warnings: string[] = [];
      const c = await HashCache.openAsync(notDir, (l) => warnings.push(l));
      expect(c.lookup(key(1))).toBeUndefined();
      c.record([{ key: key(1), md5: 'e'.repeat(32), hashedAtMs: 1_800_000_000_000 }]);
      expect(c.lookup(key(1))).toBe('e'.repeat(32));
      await c.refreshAsync();
      c.close();
      expect(warnings).toHaveLength(1);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('BOINC_SUBMIT parsing', () => {
  test('a 20,000-job line parses in linear time', () => {
    const args = ['b', 'app', '20000'];
    for (let i = 0; i < 20000; i++) args.push(`b#1.${i}`, '2', '-n', String(i), '1', `/data/f${i % 50}`, 'in');
    args.push('NULL', '1e9', 'NULL', 'NULL', '3600', 'NULL');
    const t0 = Date.now();
    const req = parseSubmitArgs(args);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(req.jobs).toHaveLength(20000);
    expect(req.jobs[19999]).toEqual({ name: 'b#1.19999', args: ['-n', '19999'], inputs: [{ src: '/data/f49', dst: 'in' }] });
    expect(req.jobParams).toEqual({ rscFpopsBound: 1e9, delayBound: 3600 });
    expect(req.appVersionNum).toBeUndefined();
  });

  test.each([
    [['b', 'app']],
    [['b', 'app', '1', 'j', '0', '1', '/f']],
    [['b', 'app', '1', 'j', '0', '1', '/f', 'in', 'NULL']],
    [['b', 'app', '1', 'j', '-1', '1', '/f', 'in']],
    [['b', 'app', '2', 'j', '0', '1', '/f', 'in']],
  ])('%j is an ArgumentError', (args) => {
    expect(() => parseSubmitArgs(args)).toThrow(ArgumentError);
  });

  // Job parameters are string attributes of the job ad, sent as they are: a bad one fails
  // the submit as its result (validate.ts), never as an E, which aborts the gridmanager.
  test.each([
    [['1', '2', '3', '4', '5', '1.5'], 'job parameter app_version_num must be a non-negative integer, got 1.5'],
    [['1', '2', '3', '4', '5e', '1'], 'job parameter delay_bound must be a number, got "5e"'],
    [['1', '-2', '3', '4', '5', '1'], 'job parameter rsc_fpops_bound must not be negative, got -2'],
  ])('job parameters %j: the submit fails with %s', (params, problem) => {
    const req = parseSubmitArgs(['b', 'app', '1', 'j', '0', '1', '/f', 'in', ...params]);
    expect(req.paramProblem).toBe(problem);
  });
});
