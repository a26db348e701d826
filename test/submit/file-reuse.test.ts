/**
 * Issue 11 §1: input files already on the server, against the test server's default (real)
 * quirks: query_files answers `job_file->update() failed: ` when a request's delete_time is
 * later than a file's stored one, and dies on a file already linked to the batch
 * (docs/boinc-server.md, "Input files in practice"). Through the real GAHP process.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEnv, batchName, jobName, sleep, type Env } from '../commands/helpers.js';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { submitLine, phys, writeInput, uploadedNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

async function submit(line: string): Promise<string[]> {
  return env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000);
}

let seq = 0;
function inputs(n: number): { paths: string[]; contents: string[] } {
  const tag = seq++;
  const contents = Array.from({ length: n }, (_, i) => `reuse ${tag}/${i}\n`.repeat(1 + i));
  return { contents, paths: contents.map((c, i) => writeInput(env.dir, `reuse${tag}/f${i}.txt`, c)) };
}

function jobsOver(batch: string, cluster: number, paths: string[]): LineJob[] {
  return paths.map((p, i) => ({ name: jobName(batch, cluster, i), inputs: [[p, 'in']] }));
}

/** No query_files was answered with the update quirk or a duplicate-link fatal. */
function expectNoFileRpcErrors(since: number): void {
  for (const e of env.server.rpcLog().slice(since)) {
    if (e.script === 'job_file.php') expect(e.rpc).not.toBe('');
  }
}

test('a second batch reuses files an earlier batch uploaded seconds before: no upload again, each linked to both batches', async () => {
  const { paths, contents } = inputs(5);
  const first = batchName('uppercase');
  expect(await submit(submitLine(first, 'uppercase', jobsOver(first, 300, paths)))).toEqual(['NULL']);
  const stored = new Map(env.server.files().map((f) => [f.name, f.deleteTime]));
  // The clock moves on: a delete_time computed now is later than the stored ones.
  await sleep(2100);
  const extra = writeInput(env.dir, `reuse-extra-${seq}.txt`, 'a file only the second batch has\n');
  const second = batchName('uppercase');
  const jobs2 = jobsOver(second, 301, [...paths, extra]);
  const since = env.server.rpcLog().length;
  expect(await submit(submitLine(second, 'uppercase', jobs2))).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, second, jobs2.map((j) => j.name));
  expect(uploadedNames(env.server, since)).toEqual([phys('a file only the second batch has\n')]);
  const ids = new Map(env.server.batches().map((b) => [b.name, b.id]));
  for (const c of contents) {
    const f = env.server.files().find((x) => x.name === phys(c))!;
    expect(f.batches.sort()).toEqual([ids.get(first)!, ids.get(second)!].sort());
    // Protected: never lowered.
    expect(f.deleteTime).toBeGreaterThanOrEqual(stored.get(phys(c))!);
  }
  expectNoFileRpcErrors(since);
  // A third batch later still, the same way.
  await sleep(1100);
  const third = batchName('uppercase');
  const jobs3 = jobsOver(third, 302, paths);
  const since3 = env.server.rpcLog().length;
  expect(await submit(submitLine(third, 'uppercase', jobs3))).toEqual(['NULL']);
  expectOneCompleteBatch(env.server, third, jobs3.map((j) => j.name));
  expect(uploadedNames(env.server, since3)).toEqual([]);
}, 90_000);

test('crash recovery re-stages an existing batch whose files were put there earlier: no upload again, nothing linked twice', async () => {
  const { paths, contents } = inputs(6);
  const batch = batchName('uppercase');
  const jobs = jobsOver(batch, 303, paths);
  // An earlier attempt (a GAHP that was then killed) created the batch and staged some files
  // with the delete_time of its time: two linked to the batch, one only registered. Its
  // ledger says 'creating' (written before create_batch went out).
  await env.restart(async () => {
    const ledger = JournalLedger.open(env.stateDir);
    await ledger.upsert(env.server.url, batch, { app: 'uppercase', state: 'creating', physFiles: [], jobs: {} });
    await ledger.close();
  });
  const then = Math.floor(Date.now() / 1000);
  const batchId = await env.rpc.createBatch({ batchName: batch, appName: 'uppercase', expireTime: then + 3600 });
  const tmp = path.join(env.dir, `pre-${seq}.txt`);
  for (const [i, linked] of [[0, true], [1, true], [2, false]] as const) {
    fs.writeFileSync(tmp, contents[i]!);
    await env.rpc.uploadFiles({ ...(linked ? { batchId } : {}), deleteTime: then + 3600, files: [{ physName: phys(contents[i]!), path: tmp }] });
  }
  await sleep(1100);
  const since = env.server.rpcLog().length;
  expect(await submit(submitLine(batch, 'uppercase', jobs))).toEqual(['NULL']);
  expect(env.server.batches().filter((b) => b.name === batch).map((b) => b.id)).toEqual([batchId]);
  expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  expect(uploadedNames(env.server, since).sort()).toEqual(contents.slice(3).map(phys).sort());
  expectNoFileRpcErrors(since);
}, 60_000);
