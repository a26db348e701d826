/**
 * BOINC_SUBMIT's calls, one step after the other (gahp/commands/submit.ts): get_templates
 * and query_batch together (whether the name exists: the gridmanager resubmits batches it
 * finds empty, and BOINC accepts duplicate names; test/submit/same-name), then
 * create_batch, the batch-linked query_files, upload_files if files are new, submit_batch.
 * A warm submit (hashes cached, files on the server) waits for four calls one after
 * another, one of new files for five. The template is asked for every time: a change of
 * the app's input template shows at once.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { startEnv, batchName, jobName, type Env } from '../commands/helpers.js';
import { sampleApps } from '../../fixtures/apps.js';
import type { TestApp } from '../../fixtures/test-server/types.js';
import { submitLine, phys, writeInput, rpcNames, expectOneCompleteBatch, cacheHashes } from './support.js';

/** An app whose input template the tests change while the GAHP runs (the server reads it per call). */
const pairApp: TestApp = {
  name: 'pair',
  inputs: [{ openName: 'a' }, { openName: 'b' }],
  outputs: [{ openName: 'out' }],
  run: (ctx) => ({ kind: 'success', outputs: [Buffer.concat(ctx.inputs)] }),
};

/** An app no test submits to before the first-submit test: the GAHP has not seen its template. */
const trioApp: TestApp = {
  name: 'trio',
  inputs: [{ openName: 'x' }, { openName: 'y' }, { openName: 'z' }],
  outputs: [{ openName: 'out' }],
  run: (ctx) => ({ kind: 'success', outputs: [Buffer.concat(ctx.inputs)] }),
};

let env: Env;

beforeAll(async () => {
  env = await startEnv({ apps: [...sampleApps, pairApp, trioApp] });
});

afterAll(async () => {
  await env?.close();
});

async function submit(line: string): Promise<string[]> {
  return env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000);
}

test('a warm submit sends query_batch, create_batch, query_files and submit_batch, and get_templates; no upload', async () => {
  const paths = [0, 1, 2].map((i) => writeInput(env.dir, `warm${i}.txt`, `warm input ${i}\n`));
  await cacheHashes(env.stateDir, paths);
  const first = batchName('uppercase');
  const jobsOf = (b: string) => Array.from({ length: 6 }, (_, i) => ({ name: jobName(b, 1, i), inputs: [[paths[i % 3]!, 'in']] as Array<[string, string]> }));
  expect(await submit(submitLine(first, 'uppercase', jobsOf(first)))).toEqual(['NULL']);

  const second = batchName('uppercase');
  const since = env.server.rpcLog().length;
  expect(await submit(submitLine(second, 'uppercase', jobsOf(second)))).toEqual(['NULL']);
  const names = rpcNames(env.server, since);
  expect([...names].sort()).toEqual(['create_batch', 'get_templates', 'query_batch', 'query_files', 'submit_batch']);
  expect(names.indexOf('create_batch')).toBeLessThan(names.indexOf('query_files'));
  expect(names.indexOf('query_files')).toBeLessThan(names.indexOf('submit_batch'));
  expectOneCompleteBatch(env.server, second, jobsOf(second).map((j) => j.name));

  // A name the ledger knows is looked up first (repeat safety): nothing is created again.
  const again = env.server.rpcLog().length;
  expect(await submit(submitLine(second, 'uppercase', jobsOf(second)))).toEqual(['NULL']);
  expect(rpcNames(env.server, again).sort()).toEqual(['get_templates', 'query_batch']);
});

test('a template whose input order changed since the last submit: the jobs go in the new order', async () => {
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

test('jobs that do not fit the app\'s input template fail after the lookups, naming the job: nothing is created; the corrected submit goes through', async () => {
  const [px, py, pz] = ['x', 'y', 'z'].map((n) => writeInput(env.dir, `trio-${n}.txt`, `trio ${n}\n`));
  const batch = batchName('trio');
  const job = jobName(batch, 5, 0);
  const since = env.server.rpcLog().length;
  const [msg] = await submit(submitLine(batch, 'trio', [{ name: job, inputs: [[px!, 'x'], [py!, 'y']] }]));
  expect(msg).toContain(job);
  expect(msg).toContain('input template has 3');
  expect(rpcNames(env.server, since).sort()).toEqual(['get_templates', 'query_batch']);
  expect(env.server.batches().filter((b) => b.name === batch)).toEqual([]);

  const again = env.server.rpcLog().length;
  expect(await submit(submitLine(batch, 'trio', [{ name: job, inputs: [[px!, 'x'], [py!, 'y'], [pz!, 'z']] }]))).toEqual(['NULL']);
  expect(rpcNames(env.server, again).filter((n) => n === 'create_batch')).toHaveLength(1);
  expectOneCompleteBatch(env.server, batch, [job]);
  expect(env.server.jobs(batch)[0]!.inputFiles).toEqual([phys('trio x\n'), phys('trio y\n'), phys('trio z\n')]);
});

/** HTTP calls the in-process test server handled, timed from the request's headers to the end of its reply. */
interface CallTime {
  start: number;
  end: number;
}

/**
 * The longest chain of calls each starting after the previous one ended (greedy by end
 * time): the calls on the submit's critical path, as test/bench counts them.
 */
function sequentialCalls(calls: readonly CallTime[]): number {
  let n = 0;
  let last = -Infinity;
  for (const c of [...calls].sort((a, b) => a.end - b.end)) {
    if (c.start >= last) {
      n++;
      last = c.end;
    }
  }
  return n;
}

describe('with a server that takes 200 ms per call', () => {
  let slow: Env;
  const calls: CallTime[] = [];
  const started = new WeakMap<IncomingMessage, number>();
  const onStart = (m: unknown) => started.set((m as { request: IncomingMessage }).request, performance.now());
  const onFinish = (m: unknown) => {
    const start = started.get((m as { request: IncomingMessage }).request);
    if (start !== undefined) calls.push({ start, end: performance.now() });
  };

  beforeAll(async () => {
    // Calls that take long: two that overlap in time cannot be counted one after another.
    slow = await startEnv({ latencyMs: 200 });
    diagnosticsChannel.subscribe('http.server.request.start', onStart);
    diagnosticsChannel.subscribe('http.server.response.finish', onFinish);
  });

  afterAll(async () => {
    diagnosticsChannel.unsubscribe('http.server.request.start', onStart);
    diagnosticsChannel.unsubscribe('http.server.response.finish', onFinish);
    await slow?.close();
  });

  test('a submit of new files waits for five calls one after another', async () => {
    const paths = [0, 1].map((i) => writeInput(slow.dir, `cold${i}.txt`, `cold input ${i}\n`));
    const batch = batchName('concat');
    const jobs = [0, 1, 2].map((i) => ({ name: jobName(batch, 7, i), inputs: [[paths[i % 2]!, 'a'], [paths[(i + 1) % 2]!, 'b']] as Array<[string, string]> }));
    calls.length = 0;
    const since = slow.server.rpcLog().length;
    expect(await slow.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'concat', jobs)}`, 60_000)).toEqual(['NULL']);
    expect(rpcNames(slow.server, since).sort()).toEqual(['create_batch', 'get_templates', 'query_batch', 'query_files', 'submit_batch', 'upload_files']);
    // get_templates and query_batch together; then create_batch, query_files, upload_files,
    // submit_batch.
    expect(calls).toHaveLength(6);
    expect(sequentialCalls(calls)).toBe(5);
    expectOneCompleteBatch(slow.server, batch, jobs.map((j) => j.name));
  });

  test('a warm submit of a new batch name waits for four calls one after another', async () => {
    const paths = [0, 1].map((i) => writeInput(slow.dir, `seq${i}.txt`, `sequential input ${i}\n`));
    await cacheHashes(slow.stateDir, paths);
    const jobsOf = (b: string) => Array.from({ length: 4 }, (_, i) => ({ name: jobName(b, 4, i), inputs: [[paths[i % 2]!, 'in']] as Array<[string, string]> }));
    const first = batchName('uppercase');
    expect(await slow.gahp.call(`BOINC_SUBMIT ${submitLine(first, 'uppercase', jobsOf(first))}`, 60_000)).toEqual(['NULL']);

    const second = batchName('uppercase');
    calls.length = 0;
    const since = slow.server.rpcLog().length;
    expect(await slow.gahp.call(`BOINC_SUBMIT ${submitLine(second, 'uppercase', jobsOf(second))}`, 60_000)).toEqual(['NULL']);
    expect(rpcNames(slow.server, since).sort()).toEqual(['create_batch', 'get_templates', 'query_batch', 'query_files', 'submit_batch']);
    expect(calls).toHaveLength(5);
    expect(sequentialCalls(calls)).toBe(4);
    expectOneCompleteBatch(slow.server, second, jobsOf(second).map((j) => j.name));
  });
});
