/**
 * HTCondor's crash recovery (issue 22): a batch created, its files uploaded and linked, the
 * GAHP killed (SIGKILL) before submit_batch answered, then the same BOINC_SUBMIT to a new
 * GAHP on the same state directory. Through bin/boinc-gahp and the test server, which
 * answers a second link of a file to a batch with the real server's PHP fatal (`Duplicate
 * entry ... for key 'job_file_id'`; a real project logs each one). submit_batch hangs
 * (never processed) and the kill comes once the server has its request: nothing depends on
 * the machine's timing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEnv, batchName, jobName, sleep, type Env } from '../commands/helpers.js';
import { submitLine, phys, writeInput, rpcNames, uploadedNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

let seq = 0;
/** 8 jobs over 6 files, 2 of them already on the server (not linked to any batch). */
async function makeBatch(): Promise<{ batch: string; jobs: LineJob[]; line: string }> {
  const tag = seq++;
  const batch = batchName('uppercase');
  const paths = Array.from({ length: 6 }, (_, i) => writeInput(env.dir, `crash${tag}/f${i}.txt`, `crash recovery ${tag} file ${i}\n`));
  await env.rpc.uploadFiles({ files: paths.slice(0, 2).map((p) => ({ physName: phys(fs.readFileSync(p)), path: p })) });
  const jobs = Array.from({ length: 8 }, (_, j) => ({ name: jobName(batch, 60 + tag, j), inputs: [[paths[j % 6]!, 'in']] as Array<[string, string]> }));
  return { batch, jobs, line: submitLine(batch, 'uppercase', jobs) };
}

/** The PHP fatal errors the server's calls since `since` provoked. */
const fatals = (since: number) => env.server.rpcLog().slice(since).flatMap((e) => (e.fatal ? [e.fatal] : []));

/** Submits, waits until submit_batch has reached the server (which never answers it), kills the GAHP. */
async function submitAndKillAtSubmitBatch(line: string): Promise<number> {
  env.server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'hang' });
  const since = env.server.rpcLog().length;
  expect(await env.gahp.request(`BOINC_SUBMIT ${env.gahp.reqId()} ${line}`)).toBe('S');
  for (let i = 0; i < 3000 && !rpcNames(env.server, since).includes('submit_batch'); i++) await sleep(10);
  expect(rpcNames(env.server, since)).toContain('submit_batch');
  await env.gahp.kill('SIGKILL');
  env.server.clearFaults();
  return since;
}

test('the repeat fills the batch the killed GAHP left, links nothing twice and provokes no fatal error', async () => {
  const { batch, jobs, line } = await makeBatch();
  const since = await submitAndKillAtSubmitBatch(line);
  // Left behind: one empty batch, every file linked to it.
  const [left] = env.server.batches().filter((b) => b.name === batch);
  expect(left!.jobNames).toEqual([]);
  const inputs = new Set(jobs.flatMap((j) => j.inputs.map(([p]) => phys(fs.readFileSync(p)))));
  for (const f of env.server.files().filter((f) => inputs.has(f.name))) expect(f.batches).toContain(left!.id);

  await env.restart();
  const again = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(env.server.batches().filter((b) => b.name === batch).map((b) => b.id)).toEqual([left!.id]);
  // The ledger knew what the killed GAHP linked: no file call at all, nothing created.
  expect(rpcNames(env.server, again).sort()).toEqual(['get_templates', 'query_batch', 'set_expire_time', 'submit_batch']);
  expect(fatals(since)).toEqual([]);
});

test('with the ledger lost, the repeat links each present file by itself: one fatal per file that was linked (docs/boinc-server.md)', async () => {
  const { batch, jobs, line } = await makeBatch();
  const since = await submitAndKillAtSubmitBatch(line);
  await env.restart(() => fs.rmSync(path.join(env.stateDir, 'ledger.jsonl'), { force: true }));
  const again = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(env.server.batches().filter((b) => b.name === batch)).toHaveLength(1);
  expect(uploadedNames(env.server, again)).toEqual([]);
  // No RPC tells which files are linked to a batch: each of the 6 is linked once more, and
  // each such call dies on the duplicate.
  const found = fatals(since);
  expect(found).toHaveLength(6);
  for (const f of found) expect(f).toMatch(/Duplicate entry '\d+-\d+' for key 'job_file_id'/);
});
