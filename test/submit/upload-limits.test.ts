/**
 * Issue 11 §1b: every upload_files request fits PHP's default limits (max_file_uploads 20,
 * post_max_size 8M with the multipart framing, upload_max_filesize 2M), which the test
 * server enforces by default as PHP does (docs/boinc-server.md, "PHP's limits on uploads").
 * Through the real GAHP process.
 */
import * as crypto from 'node:crypto';
import { startEnv, batchName, esc, jobName, type Env } from '../commands/helpers.js';
import { submitLine, phys, writeInput, rpcNames, uploadedNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

const MiB = 1024 * 1024;
let seq = 0;

function bigInputs(e: Env, n: number, size: number): { paths: string[]; contents: Buffer[] } {
  const tag = seq++;
  const contents = Array.from({ length: n }, () => crypto.randomBytes(size));
  return { contents, paths: contents.map((c, i) => writeInput(e.dir, `limits${tag}/f${i}.bin`, c)) };
}

function jobsOver(batch: string, cluster: number, paths: string[]): LineJob[] {
  return paths.map((p, i) => ({ name: jobName(batch, cluster, i), inputs: [[p, 'in']] }));
}

test('ten new 1 MiB files go up in requests that each fit post_max_size 8M', async () => {
  const { paths, contents } = bigInputs(env, 10, MiB);
  const batch = batchName('uppercase');
  const jobs = jobsOver(batch, 400, paths);
  const since = env.server.rpcLog().length;
  expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000)).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(uploadedNames(env.server, since).sort()).toEqual(contents.map(phys).sort());
  const uploads = env.server.rpcLog().slice(since).filter((e) => e.script === 'job_file.php');
  // Every request reached the handler whole (one PHP dropped would have no root element).
  for (const e of uploads) expect(e.rpc).not.toBe('');
  const sizes = uploads.filter((e) => e.rpc === 'upload_files').map((e) => e.bodyBytes!);
  expect(sizes.length).toBeGreaterThanOrEqual(2);
  for (const n of sizes) expect(n).toBeLessThanOrEqual(8 * MiB);
}, 60_000);

test('a file over upload_max_filesize fails the submit at once, naming the php.ini settings', async () => {
  const { paths } = bigInputs(env, 1, 2 * MiB + 1);
  const batch = batchName('uppercase');
  const since = env.server.rpcLog().length;
  const t0 = Date.now();
  const [msg] = await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobsOver(batch, 401, paths))}`, 60_000);
  expect(msg).toContain(paths[0]!);
  expect(msg).toContain('upload_max_filesize');
  expect(msg).toContain('post_max_size');
  expect(msg).toContain('php.ini');
  // Nothing was tried that could not succeed.
  expect(rpcNames(env.server, since)).not.toContain('upload_files');
  expect(rpcNames(env.server, since)).not.toContain('submit_batch');
  expect(Date.now() - t0).toBeLessThan(4000);
}, 60_000);

test('raised limits, told to the GAHP by options and environment, let bigger files through', async () => {
  const raised = await startEnv(
    { php: { uploadMaxFilesize: 4 * MiB, postMaxSize: 16 * MiB, maxFileUploads: 20 } },
    { args: ['--upload-max-filesize', '4M'], env: { BOINC_GAHP_POST_MAX_SIZE: '16M' } },
  );
  try {
    const { paths, contents } = bigInputs(raised, 6, 3 * MiB);
    const batch = batchName('uppercase');
    const jobs = jobsOver(batch, 402, paths);
    const since = raised.server.rpcLog().length;
    expect(await raised.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000)).toEqual(['NULL']);
    expectOneCompleteBatch(raised.server, batch, jobs.map((j) => j.name));
    expect(uploadedNames(raised.server, since).sort()).toEqual(contents.map(phys).sort());
    const sizes = raised.server.rpcLog().slice(since).filter((e) => e.rpc === 'upload_files').map((e) => e.bodyBytes!);
    // 18 MiB in requests of at most 16M: more than one, none over.
    expect(sizes.length).toBeGreaterThanOrEqual(2);
    for (const n of sizes) expect(n).toBeLessThanOrEqual(16 * MiB);
    expect(Math.max(...sizes)).toBeGreaterThan(8 * MiB);
  } finally {
    await raised.close();
  }
}, 60_000);

test('a file whose request alone would exceed post_max_size refuses its job at once, naming it; the other job goes', async () => {
  const tight = await startEnv(
    { php: { uploadMaxFilesize: 4 * MiB, postMaxSize: MiB, maxFileUploads: 20 } },
    { args: ['--upload-max-filesize', '4M', '--post-max-size', '1M'] },
  );
  try {
    // The first fits the limits with room to spare; the second is exactly 1 MiB, which the
    // request's framing and XML take over post_max_size.
    const small = bigInputs(tight, 1, 1000);
    const big = bigInputs(tight, 1, MiB);
    const paths = [small.paths[0]!, big.paths[0]!];
    const batch = batchName('uppercase');
    const jobs = jobsOver(batch, 403, paths);
    const since = tight.server.rpcLog().length;
    // This used to fail the whole batch, and the gridmanager held the small file's job with
    // the big file's reason (issue 38): now the big file's job alone is left out.
    expect(await tight.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000)).toEqual(['NULL']);
    expectOneCompleteBatch(tight.server, batch, [jobs[0]!.name]);
    expect(uploadedNames(tight.server, since)).toEqual([phys(small.contents[0]!)]);
    // Its fetch fails with the reason (the gridmanager's hold reason for that job).
    const [msg] = await tight.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobs[1]!.name)} ${esc(tight.dir)} /dev/null ALL 0`);
    expect(msg).toContain(`job ${jobs[1]!.name}: input file ${big.paths[0]!}`);
    expect(msg).not.toContain(small.paths[0]!);
    expect(msg).toContain('needs an upload request of');
    expect(msg).toContain('post_max_size (1M)');
  } finally {
    await tight.close();
  }
}, 60_000);
