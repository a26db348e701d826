/**
 * An input file rewritten in place with its old size and modification time put back (`cp -p`
 * onto it, `rsync -t --inplace`, `tar x` over an old tree) keeps its inode, size and mtime;
 * only its ctime moves. Its jobs must get the new content, never the hash the cache holds
 * for the old one: in the same GAHP and after a restart (the cache on disk).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEnv, batchName, jobName, sleep, type Env } from '../commands/helpers.js';
import { submitLine, phys } from './support.js';

let env: Env;
let logFile: string;

beforeAll(async () => {
  env = await startEnv();
  logFile = path.join(env.dir, 'gahp.log');
  await env.restart(undefined, { logFile });
});

afterAll(async () => {
  await env?.close();
});

/** An mtime in whole seconds, as `tar x` and many copies restore it. */
const OLD_MTIME = Math.floor(Date.now() / 1000) - 3600;

/** Rewrites the file in place (same inode), then puts its old mtime back. */
function rewriteInPlace(p: string, content: string): void {
  const before = fs.statSync(p, { bigint: true });
  const fd = fs.openSync(p, 'r+');
  try {
    fs.writeSync(fd, content, 0);
  } finally {
    fs.closeSync(fd);
  }
  fs.utimesSync(p, OLD_MTIME, OLD_MTIME);
  const after = fs.statSync(p, { bigint: true });
  // What makes the case: everything but ctime (and the content) is as before.
  expect([after.dev, after.ino, after.size, after.mtimeNs]).toEqual([before.dev, before.ino, before.size, before.mtimeNs]);
  expect(after.ctimeNs).not.toBe(before.ctimeNs);
}

let seq = 0;
async function submitWith(p: string): Promise<string[]> {
  const b = batchName('uppercase');
  const job = jobName(b, 300, seq++);
  expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(b, 'uppercase', [{ name: job, inputs: [[p, 'in']] }])}`, 60_000)).toEqual(['NULL']);
  return env.server.jobs(b).find((j) => j.name === job)!.inputFiles;
}

/** How the GAHP's log says the batch's hashes were found (cached vs hashed). */
function hashCounts(): { cached: number; hashed: number } {
  const all = [...fs.readFileSync(logFile, 'utf8').matchAll(/input paths \((\d+) hashes cached, (\d+) hashed/g)];
  const m = all[all.length - 1]!;
  return { cached: Number(m[1]), hashed: Number(m[2]) };
}

const v = (n: number) => `version ${n} of the input, same length\n`;

/** A new input file whose hash is in the cache (checked through the GAHP's log). */
async function cachedInput(name: string): Promise<string> {
  const p = path.join(env.dir, name);
  fs.writeFileSync(p, v(1));
  fs.utimesSync(p, OLD_MTIME, OLD_MTIME);
  // Past the timestamp granularity, so the cache may keep the hash.
  await sleep(150);
  expect(await submitWith(p)).toEqual([phys(v(1))]);
  // An unchanged file does come from the cache (else the tests below would prove nothing).
  await sleep(50);
  expect(await submitWith(p)).toEqual([phys(v(1))]);
  expect(hashCounts()).toEqual({ cached: 1, hashed: 0 });
  return p;
}

test('a file rewritten with the same size and its old mtime restored is submitted with its new content (same GAHP)', async () => {
  const p = await cachedInput('same-gahp.txt');
  rewriteInPlace(p, v(2));
  await sleep(150);
  expect(await submitWith(p)).toEqual([phys(v(2))]);
  expect(hashCounts()).toEqual({ cached: 0, hashed: 1 });
  // The new hash is cached in turn.
  await sleep(50);
  expect(await submitWith(p)).toEqual([phys(v(2))]);
  expect(hashCounts()).toEqual({ cached: 1, hashed: 0 });
});

test('a file rewritten the same way while no GAHP runs is submitted with its new content after the restart', async () => {
  const p = await cachedInput('restart.txt');
  await env.restart(async () => {
    rewriteInPlace(p, v(3));
    await sleep(150);
  }, { logFile });
  expect(await submitWith(p)).toEqual([phys(v(3))]);
  expect(hashCounts()).toEqual({ cached: 0, hashed: 1 });
});
