/**
 * BOINC_SUBMIT's sequential calls (issue 12). A real server charges 5-25 ms per call, so a
 * warm submit (template known, hashes cached, files on the server) needs only query_batch
 * (whether the name exists: the gridmanager resubmits batches it finds empty, and BOINC
 * accepts duplicate names), create_batch, query_files and submit_batch one after another
 * (get_templates goes alongside); and the cached template must not hide a change of the
 * app's input template.
 */
import { startEnv, batchName, jobName, type Env } from '../commands/helpers.js';
import { sampleApps } from '../../fixtures/apps.js';
import type { TestApp } from '../../fixtures/test-server/types.js';
import { submitLine, phys, writeInput, rpcNames, expectOneCompleteBatch } from './support.js';

/** An app whose input template the tests change while the GAHP runs (the server reads it per call). */
const pairApp: TestApp = {
  name: 'pair',
  inputs: [{ openName: 'a' }, { openName: 'b' }],
  outputs: [{ openName: 'out' }],
  run: (ctx) => ({ kind: 'success', outputs: [Buffer.concat(ctx.inputs)] }),
};

let env: Env;

beforeAll(async () => {
  env = await startEnv({ apps: [...sampleApps, pairApp] });
});

afterAll(async () => {
  await env?.close();
});

async function submit(line: string): Promise<string[]> {
  return env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000);
}

test('a warm submit sends query_batch, create_batch, query_files and submit_batch, with get_templates alongside; no upload', async () => {
  const paths = [0, 1, 2].map((i) => writeInput(env.dir, `warm${i}.txt`, `warm input ${i}\n`));
  const first = batchName('uppercase');
  const jobsOf = (b: string) => Array.from({ length: 6 }, (_, i) => ({ name: jobName(b, 1, i), inputs: [[paths[i % 3]!, 'in']] as Array<[string, string]> }));
  expect(await submit(submitLine(first, 'uppercase', jobsOf(first)))).toEqual(['NULL']);

  const second = batchName('uppercase');
  const since = env.server.rpcLog().length;
  expect(await submit(submitLine(second, 'uppercase', jobsOf(second)))).toEqual(['NULL']);
  const names = rpcNames(env.server, since);
  expect([...names].sort()).toEqual(['create_batch', 'get_templates', 'query_batch', 'query_files', 'submit_batch']);
  expect(names.indexOf('query_batch')).toBeLessThan(names.indexOf('create_batch'));
  expect(names.indexOf('create_batch')).toBeLessThan(names.indexOf('query_files'));
  expect(names.indexOf('query_files')).toBeLessThan(names.indexOf('submit_batch'));
  expectOneCompleteBatch(env.server, second, jobsOf(second).map((j) => j.name));

  // A name the ledger knows is looked up first (repeat safety): nothing is created again.
  const again = env.server.rpcLog().length;
  expect(await submit(submitLine(second, 'uppercase', jobsOf(second)))).toEqual(['NULL']);
  expect(rpcNames(env.server, again).sort()).toEqual(['get_templates', 'query_batch']);
});

test('a template whose input order changed since it was cached: the jobs go in the new order', async () => {
  const pa = writeInput(env.dir, 'pair-a.txt', 'content for a\n');
  const pb = writeInput(env.dir, 'pair-b.txt', 'content for b\n');
  const jobsOf = (b: string) => [{ name: jobName(b, 2, 0), inputs: [[pa, 'a'], [pb, 'b']] as Array<[string, string]> }];
  const first = batchName('pair');
  expect(await submit(submitLine(first, 'pair', jobsOf(first)))).toEqual(['NULL']);
  expect(env.server.jobs(first)[0]!.inputFiles).toEqual([phys('content for a\n'), phys('content for b\n')]);

  pairApp.inputs = [{ openName: 'b' }, { openName: 'a' }];
  try {
    const second = batchName('pair');
    expect(await submit(submitLine(second, 'pair', jobsOf(second)))).toEqual(['NULL']);
    expect(env.server.jobs(second)[0]!.inputFiles).toEqual([phys('content for b\n'), phys('content for a\n')]);
  } finally {
    pairApp.inputs = [{ openName: 'a' }, { openName: 'b' }];
  }
});

test('a template that needs another input count since it was cached: the batch fails before submit_batch, naming the job; a corrected submit fills the same batch', async () => {
  const pa = writeInput(env.dir, 'count-a.txt', 'count a\n');
  const pb = writeInput(env.dir, 'count-b.txt', 'count b\n');
  const pc = writeInput(env.dir, 'count-c.txt', 'count c\n');
  const warmUp = batchName('pair');
  expect(await submit(submitLine(warmUp, 'pair', [{ name: jobName(warmUp, 3, 0), inputs: [[pa, 'a'], [pb, 'b']] }]))).toEqual(['NULL']);

  pairApp.inputs = [{ openName: 'a' }, { openName: 'b' }, { openName: 'c' }];
  try {
    const batch = batchName('pair');
    const job = jobName(batch, 3, 1);
    const since = env.server.rpcLog().length;
    const [msg] = await submit(submitLine(batch, 'pair', [{ name: job, inputs: [[pa, 'a'], [pb, 'b']] }]));
    expect(msg).toContain(job);
    expect(msg).toContain('input template has 3');
    expect(rpcNames(env.server, since)).not.toContain('submit_batch');
    expect(env.server.jobs(batch)).toEqual([]);

    const again = env.server.rpcLog().length;
    expect(await submit(submitLine(batch, 'pair', [{ name: job, inputs: [[pa, 'a'], [pb, 'b'], [pc, 'c']] }]))).toEqual(['NULL']);
    expect(rpcNames(env.server, again)).not.toContain('create_batch');
    expectOneCompleteBatch(env.server, batch, [job]);
  } finally {
    pairApp.inputs = [{ openName: 'a' }, { openName: 'b' }];
  }
});
