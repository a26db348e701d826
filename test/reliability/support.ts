/**
 * Shared pieces of the reliability suite: seeded randomness, the SOAK switch, checks that
 * the ledger and hash cache are sound and agree with the server, temp-file scans.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { HashCache, HASH_CACHE_FILE } from '../../gahp/staging/hash-cache.js';
import { fileKey } from '../../gahp/staging/hash-key.js';
import type { ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';

/** SOAK=1 (npm run soak): more trials, more fault combinations. */
export const SOAK = process.env.SOAK === '1';

/** A small seeded PRNG (mulberry32): the same seed gives the same trial plan. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');

/** Every file under dir (relative paths, sorted), hidden ones included; [] if dir is gone. */
export function walk(dir: string): string[] {
  const out: string[] = [];
  const rec = (d: string, rel: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) rec(path.join(d, e.name), r);
      else out.push(r);
    }
  };
  rec(dir, '');
  return out.sort();
}

/** Temp files the GAHP (or its RPC client) may leave: `.part`, `.tmp`, the staging marker. */
export function tempFiles(dir: string): string[] {
  return walk(dir).filter((f) => /\.part(\.|$)|\.tmp$|\.boinc-gahp-/.test(path.basename(f)));
}

/**
 * The ledger file replays, and its lines are whole JSON (at most `tornAllowed` lines not,
 * each a line cut by a kill -9). Returns the replayed ledger.
 */
export function checkLedgerFile(stateDir: string, tornAllowed = 0): JournalLedger {
  const file = path.join(stateDir, 'ledger.jsonl');
  let bad = 0;
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, 'utf8');
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      try {
        JSON.parse(line);
      } catch {
        bad++;
      }
    }
  }
  expect(bad).toBeLessThanOrEqual(tornAllowed);
  return JournalLedger.readOnly(stateDir);
}

/**
 * The ledger's records agree with the server: one server batch per name; a known batch id
 * is the server's; a submitted batch holds exactly the ledger's jobs; statuses other than
 * SUBMITTED are the server's (when `statuses`). Returns the number of records checked.
 */
export function expectLedgerMatchesServer(stateDir: string, server: ExtendedTestBoincServer, opts: { tornAllowed?: number; statuses?: boolean } = {}): number {
  const ledger = checkLedgerFile(stateDir, opts.tornAllowed ?? 0);
  const records = ledger.list(server.url);
  const byName = new Map<string, number>();
  for (const b of server.batches()) byName.set(b.name, (byName.get(b.name) ?? 0) + 1);
  for (const [name, n] of byName) if (n > 1) throw new Error(`the server holds ${n} batches named ${name}`);
  for (const rec of records) {
    const sb = server.batches().find((b) => b.name === rec.name);
    if (rec.state === 'creating') {
      if (rec.batchId !== undefined && sb) expect(sb.id).toBe(rec.batchId);
      continue;
    }
    if (!sb) throw new Error(`ledger batch ${rec.name} (${rec.state}) is not on the server`);
    if (rec.batchId !== undefined) expect(rec.batchId).toBe(sb.id);
    if (rec.state === 'submitted' || rec.state === 'retired') {
      const jobs = server.jobs(rec.name);
      expect(Object.keys(rec.jobs).sort()).toEqual(jobs.map((j) => j.name).sort());
      if (opts.statuses) {
        for (const j of jobs) {
          const s = rec.jobs[j.name];
          if (s !== 'SUBMITTED') expect(s).toBe(j.state === 'UNSENT' ? 'NOT_STARTED' : j.state);
        }
      }
    }
    if (rec.state === 'retired') expect(sb.state).toBe(4);
  }
  return records.length;
}

/**
 * The hash cache is sound: complete lines carry valid checks (at most `tornAllowed` do
 * not), and whatever it answers for the given files is their true MD5.
 */
export function expectHashCacheSound(stateDir: string, files: readonly string[], tornAllowed = 0): number {
  const file = path.join(stateDir, HASH_CACHE_FILE);
  if (!fs.existsSync(file)) return 0;
  const text = fs.readFileSync(file, 'latin1');
  const lines = text.split('\n');
  lines.pop(); // an unfinished last line is not a record yet
  let bad = 0;
  for (const l of lines) {
    const m = /^(v2 [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9a-f]{32}) ([0-9a-f]{8})$/.exec(l);
    if (!m || md5(m[1]!).slice(0, 8) !== m[2]) bad++;
  }
  expect(bad).toBeLessThanOrEqual(tornAllowed);
  const cache = HashCache.open(stateDir);
  let hits = 0;
  try {
    for (const f of files) {
      const got = cache.lookup(fileKey(fs.statSync(f, { bigint: true })));
      if (got !== undefined) {
        hits++;
        expect(got).toBe(md5(fs.readFileSync(f)));
      }
    }
  } finally {
    cache.close();
  }
  return hits;
}

/** Every file under the dirs, read as Latin-1, must not contain any of the secrets. */
export function expectNoSecretIn(dirs: readonly string[], secrets: readonly string[]): number {
  let scanned = 0;
  for (const d of dirs) {
    for (const rel of walk(d)) {
      const p = path.join(d, rel);
      let data: Buffer;
      try {
        data = fs.readFileSync(p);
      } catch {
        continue;
      }
      scanned++;
      for (const s of secrets) {
        if (data.includes(Buffer.from(s, 'latin1')) || data.includes(Buffer.from(s, 'utf8'))) {
          throw new Error(`the authenticator (as ${JSON.stringify(s.slice(0, 4))}...) appears in ${p}`);
        }
      }
    }
  }
  return scanned;
}

/** Peak resident set (VmHWM) of a process, in MiB, from /proc; undefined elsewhere. */
export function peakRssMiB(pid: number): number | undefined {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Percentile of a list of numbers (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Runs tasks with at most `n` at a time; results in input order. */
export async function pool<T, R>(items: readonly T[], n: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
