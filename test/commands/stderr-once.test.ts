/**
 * A repeated BOINC_FETCH_OUTPUT of a job already fetched (the gridmanager repeats a fetch
 * whose result it never got) leaves the job's stderr file as after one fetch; other jobs,
 * and a file changed since, still get their appends (docs/storage.md, "Output files").
 * The real GAHP process, the test server, real files.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sampleApps } from '../../fixtures/test-server/index.js';
import { batchName, echoErrApp, esc, jobName, listTree, startEnv, submitBatch, type Env } from './helpers.js';

let env: Env;
let n = 0;

beforeAll(async () => {
  env = await startEnv({ apps: [...sampleApps, echoErrApp] });
});

afterAll(async () => {
  await env?.close();
});

/** Completed jobs whose stderr is the given texts. */
async function completedJobs(texts: string[]): Promise<string[]> {
  const batch = batchName('echoerr');
  const jobs = texts.map((text, k) => ({ name: jobName(batch, 100 + k), inputs: [Buffer.from(text)] }));
  await submitBatch(env, batch, 'echoerr', jobs);
  env.server.advanceAll(batch);
  await env.server.settled();
  return jobs.map((j) => j.name);
}

function newIwd(): string {
  const d = path.join(env.dir, `iwd${n++}`);
  fs.mkdirSync(d);
  return d;
}

async function fetch(job: string, iwd: string, stderr = 'job.err'): Promise<void> {
  expect(await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} ${esc(stderr)} ALL 0`)).toEqual(['NULL', '0', '1.000000', '1.000000']);
}

test('fetching a completed job twice leaves the stderr file as after one fetch, new or existing file', async () => {
  const [job] = await completedJobs(['only once\n']);
  // The file did not exist: created by the first fetch.
  const iwd = newIwd();
  await fetch(job!, iwd);
  const once = fs.readFileSync(path.join(iwd, 'job.err'), 'utf8');
  expect(once).toContain('only once\n');
  await fetch(job!, iwd);
  expect(fs.readFileSync(path.join(iwd, 'job.err'), 'utf8')).toBe(once);
  await fetch(job!, iwd);
  expect(fs.readFileSync(path.join(iwd, 'job.err'), 'utf8')).toBe(once);

  // The file existed: appended in place by the first fetch only.
  const iwd2 = newIwd();
  fs.writeFileSync(path.join(iwd2, 'job.err'), 'before\n');
  await fetch(job!, iwd2);
  const appended = fs.readFileSync(path.join(iwd2, 'job.err'), 'utf8');
  expect(appended).toBe(`before\n${once}`);
  await fetch(job!, iwd2);
  expect(fs.readFileSync(path.join(iwd2, 'job.err'), 'utf8')).toBe(appended);

  // Nothing of ours in the users' directories; the records are in the state directory.
  expect(listTree(iwd)).toEqual(['job.err', 'out']);
  expect(listTree(iwd2)).toEqual(['job.err', 'out']);
  expect(recordLines().filter((r) => r.job === job).map((r) => r.dest).sort()).toEqual([path.join(iwd, 'job.err'), path.join(iwd2, 'job.err')].sort());
});

/** Every record line in the state directory's shard files. */
function recordLines(): Array<{ job: string; dest: string }> {
  const dir = path.join(env.stateDir, 'stderr-appends');
  return fs.readdirSync(dir).filter((f) => f.endsWith('.log'))
    .flatMap((f) => fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as { job: string; dest: string }));
}

test('records are lines in at most 256 shard files: a fetch creates no file for its record', async () => {
  const jobs = await completedJobs(Array.from({ length: 15 }, (_, k) => `job ${k}\n`));
  const dir = path.join(env.stateDir, 'stderr-appends');
  const iwd = newIwd();
  for (const [k, job] of jobs.entries()) await fetch(job, iwd, `e${k}.err`);
  // The files are the shards the records' keys name, no more: none made per record.
  const shardOf = (r: { job: string; dest: string }) => `${createHash('sha256').update(`${r.job}\0${r.dest}`).digest('hex').slice(0, 2)}.log`;
  expect(fs.readdirSync(dir).filter((f) => !f.startsWith('.')).sort()).toEqual([...new Set(recordLines().map(shardOf))].sort());
  expect(fs.readdirSync(dir).length).toBeLessThanOrEqual(256);
  expect(fs.readdirSync(dir).filter((f) => /^[0-9a-f]{64}$/.test(f))).toEqual([]);
  expect(recordLines().filter((r) => jobs.includes(r.job))).toHaveLength(15);
  // Each is honoured: repeats change nothing.
  const first = jobs.map((_, k) => fs.readFileSync(path.join(iwd, `e${k}.err`), 'utf8'));
  first.forEach((text, k) => expect(text).toContain(`job ${k}\n`));
  for (const [k, job] of jobs.entries()) await fetch(job, iwd, `e${k}.err`);
  expect(jobs.map((_, k) => fs.readFileSync(path.join(iwd, `e${k}.err`), 'utf8'))).toEqual(first);
});

test("a torn record line is skipped; an earlier version's record file is still honoured", async () => {
  const [torn, legacy] = await completedJobs(['torn record\n', 'legacy record\n']);
  const dir = path.join(env.stateDir, 'stderr-appends');
  const iwd = newIwd();
  const err = path.join(iwd, 'job.err');
  await fetch(torn!, iwd);
  const one = fs.readFileSync(err, 'utf8');
  // Cut the job's record line in half, as a kill mid-write would: it reads as none.
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.log'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    const at = text.indexOf(`{"job":${JSON.stringify(torn)},`);
    if (at >= 0) fs.writeFileSync(path.join(dir, f), text.slice(0, at + 40) + '\n' + text.slice(text.indexOf('\n', at) + 1));
  }
  await fetch(torn!, iwd);
  expect(fs.readFileSync(err, 'utf8')).toBe(one + one);

  // A record written by an earlier version: a file named by the key, the same JSON.
  const iwd2 = newIwd();
  const err2 = path.join(iwd2, 'job.err');
  await fetch(legacy!, iwd2);
  const text = fs.readFileSync(err2, 'utf8');
  const st = fs.statSync(err2, { bigint: true });
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.log'))) {
    const lines = fs.readFileSync(path.join(dir, f), 'utf8').split('\n');
    fs.writeFileSync(path.join(dir, f), lines.filter((l) => !l.startsWith(`{"job":${JSON.stringify(legacy)},`)).join('\n'));
  }
  const key = createHash('sha256').update(`${legacy}\0${err2}`).digest('hex');
  fs.writeFileSync(path.join(dir, key), JSON.stringify({ job: legacy, dest: err2, dev: String(st.dev), ino: String(st.ino), size: String(st.size), length: text.length, at: Date.now() }));
  await fetch(legacy!, iwd2);
  expect(fs.readFileSync(err2, 'utf8')).toBe(text);
});

test('two jobs with the same stderr text sharing one stderr file: two appends', async () => {
  const [a, b] = await completedJobs(['same text\n', 'same text\n']);
  const iwd = newIwd();
  await fetch(a!, iwd, 'shared.err');
  const one = fs.readFileSync(path.join(iwd, 'shared.err'), 'utf8');
  await fetch(b!, iwd, 'shared.err');
  expect(fs.readFileSync(path.join(iwd, 'shared.err'), 'utf8')).toBe(one + one);
  // Repeats of either change nothing while the file is as the last append left it.
  await fetch(b!, iwd, 'shared.err');
  expect(fs.readFileSync(path.join(iwd, 'shared.err'), 'utf8')).toBe(one + one);
});

test('a stderr file changed between the fetches gets the text again (documented)', async () => {
  const [job] = await completedJobs(['changed since\n']);
  const iwd = newIwd();
  const err = path.join(iwd, 'job.err');
  await fetch(job!, iwd);
  const one = fs.readFileSync(err, 'utf8');
  fs.appendFileSync(err, 'a line the user added\n');
  await fetch(job!, iwd);
  expect(fs.readFileSync(err, 'utf8')).toBe(`${one}a line the user added\n${one}`);
  // Truncated: the text goes in again.
  fs.truncateSync(err, 0);
  await fetch(job!, iwd);
  expect(fs.readFileSync(err, 'utf8')).toBe(one);
});

test("a record's temp file left by a killed GAHP is removed by the next GAHP's first record; a live writer's is kept", async () => {
  const records = path.join(env.stateDir, 'stderr-appends');
  fs.mkdirSync(records, { recursive: true });
  const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
  const stale = `${'a'.repeat(64)}.${deadPid}.0badf00d.tmp`;
  const live = `${'b'.repeat(64)}.${process.pid}.0badf00d.tmp`;
  fs.writeFileSync(path.join(records, stale), '{"job":');
  fs.writeFileSync(path.join(records, live), '{"job":');
  // A new process: the clean-up runs with its first record.
  await env.restart();
  const [job] = await completedJobs(['after a crash\n']);
  await fetch(job!, newIwd());
  const left = fs.readdirSync(records);
  expect(left).not.toContain(stale);
  expect(left).toContain(live);
});
