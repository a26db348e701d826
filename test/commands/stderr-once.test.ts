/**
 * A repeated BOINC_FETCH_OUTPUT of a job already fetched (the gridmanager repeats a fetch
 * whose result it never got) leaves the job's stderr file as after one fetch; other jobs,
 * and a file changed since, still get their appends (docs/storage.md, "Output files").
 * The real GAHP process, the test server, real files.
 */
import { spawnSync } from 'node:child_process';
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
  expect(fs.readdirSync(path.join(env.stateDir, 'stderr-appends')).length).toBeGreaterThanOrEqual(2);
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
