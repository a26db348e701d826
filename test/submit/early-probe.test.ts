/**
 * The early probe (gahp/staging/early-probe.ts): while a new batch is created, the files
 * BOINC_SUBMIT hashed itself (not found in its hash cache) are asked about with query_files
 * WITHOUT batch_id, so those the server lacks go straight to upload_files once the batch
 * exists. Its answers are hints: present files are still linked by the batch-linked
 * query_files, a failed probe changes nothing, and a file someone else uploads after the
 * probe is linked by the upload's recovery.
 */
import { startEnv, batchName, jobName, sleep, type Env } from '../commands/helpers.js';
import { submitLine, phys, writeInput, rpcNames, uploadedNames, expectOneCompleteBatch, probeCalls, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  // Every call takes 100 ms, as on a real server: hashing a few small files is done well
  // before create_batch is answered, so the files are asked about meanwhile.
  env = await startEnv({ latencyMs: 100 });
});

afterAll(async () => {
  await env?.close();
});

beforeEach(() => {
  env.server.clearFaults();
});

let seq = 0;
function makeBatch(nfiles: number): { batch: string; jobs: LineJob[]; line: string; contents: string[]; paths: string[] } {
  const batch = batchName('uppercase');
  const tag = seq++;
  const contents = Array.from({ length: nfiles }, (_, i) => `early probe ${tag}/${i} ${Date.now()}\n`);
  const paths = contents.map((c, i) => writeInput(env.dir, `early${tag}/f${i}.txt`, c));
  const jobs: LineJob[] = paths.map((p, i) => ({ name: jobName(batch, 300 + tag, i), inputs: [[p, 'in']] }));
  return { batch, jobs, line: submitLine(batch, 'uppercase', jobs), contents, paths };
}

const linkedQueries = (since: number) => env.server.rpcLog().slice(since).filter((e) => e.rpc === 'query_files' && /<batch_id>/.test(e.raw)).length;

function expectLinked(contents: string[], batch: string): void {
  const id = env.server.batches().find((b) => b.name === batch && b.state !== 4)!.id;
  for (const c of contents) {
    const stored = env.server.files().filter((f) => f.name === phys(c));
    expect(stored).toHaveLength(1);
    expect(stored[0]!.batches).toContain(id);
  }
}

test('files new to the server: asked about once without batch_id, uploaded with it, never queried with it', async () => {
  const { batch, jobs, line, contents } = makeBatch(3);
  const since = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(probeCalls(env.server, since)).toBe(1);
  expect(linkedQueries(since)).toBe(0);
  expect(rpcNames(env.server, since).filter((n) => n === 'upload_files')).toHaveLength(1);
  expect(uploadedNames(env.server, since).sort()).toEqual(contents.map(phys).sort());
  expectLinked(contents, batch);
});

test('freshly hashed files another client uploaded already: found present, linked by the batch-linked query_files, not uploaded', async () => {
  const { batch, jobs, line, contents, paths } = makeBatch(2);
  const other = await env.rpc.createBatch({ batchName: batchName('uppercase'), appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 3600 });
  await env.rpc.uploadFiles({ batchId: other, files: contents.map((c, i) => ({ physName: phys(c), path: paths[i]! })) });
  const since = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(probeCalls(env.server, since)).toBe(1);
  expect(linkedQueries(since)).toBe(1);
  expect(uploadedNames(env.server, since)).toEqual([]);
  expectLinked(contents, batch);
});

test('the probe fails (a garbage reply): the files are queried with the batch id as usual', async () => {
  const { batch, jobs, line, contents } = makeBatch(3);
  env.server.injectFault({ script: 'job_file.php', rpc: 'query_files', kind: 'garbage' });
  const since = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(probeCalls(env.server, since)).toBe(1);
  expect(linkedQueries(since)).toBe(1);
  expect(uploadedNames(env.server, since).sort()).toEqual(contents.map(phys).sort());
  expectLinked(contents, batch);
});

test('a file found absent, then uploaded by another client before ours: upload_files meets Duplicate entry and the recovery links it', async () => {
  const { batch, jobs, line, contents, paths: files } = makeBatch(2);
  // create_batch answers slowly: time for another client between the probe and our upload.
  env.server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'slow', delayMs: 1500 });
  const since = env.server.rpcLog().length;
  const id = env.gahp.reqId();
  expect(await env.gahp.request(`BOINC_SUBMIT ${id} ${line}`)).toBe('S');
  for (let i = 0; i < 500 && probeCalls(env.server, since) === 0; i++) await sleep(10);
  expect(probeCalls(env.server, since)).toBe(1);
  await sleep(200);
  const other = await env.rpc.createBatch({ batchName: batchName('uppercase'), appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 3600 });
  await env.rpc.uploadFiles({ batchId: other, files: [{ physName: phys(contents[0]!), path: files[0]! }] });
  expect(await env.gahp.waitResult(id, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  // Our first upload_files carried the file the probe had found absent (and met the other
  // client's row); it is stored once and linked to our batch all the same.
  const uploads = env.server.rpcLog().slice(since).filter((e) => e.rpc === 'upload_files');
  expect(uploads[0]!.raw).toContain(phys(contents[0]!));
  expect(uploads.length).toBeGreaterThan(1);
  expectLinked(contents, batch);
});

test('the probe hangs: once the batch exists its answer is waited for briefly, then the files are queried with the batch id', async () => {
  const { batch, jobs, line, contents } = makeBatch(2);
  env.server.injectFault({ script: 'job_file.php', rpc: 'query_files', kind: 'hang' });
  const since = env.server.rpcLog().length;
  const started = Date.now();
  // The RPC timeout is 60 s: an answer waited for in full would take that long.
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  expect(Date.now() - started).toBeLessThan(10_000);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(probeCalls(env.server, since)).toBe(1);
  expect(linkedQueries(since)).toBe(1);
  expectLinked(contents, batch);
});
