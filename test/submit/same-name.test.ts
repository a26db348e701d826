/**
 * BOINC_SUBMIT of a name this GAHP's ledger does not know sends create_batch without
 * waiting for query_batch (issue 12). BOINC accepts a second batch of a name and every
 * lookup by name picks the lowest id, so when the lookup shows an older batch of the name
 * (made behind the ledger's back and left empty: the gridmanager resubmits such a batch),
 * the batch just created is retired by its id and the jobs go into the older one; when it
 * shows ours or none, ours is used. Through bin/boinc-gahp and the test server, with the
 * lookup's answer delayed so that create_batch goes out before it comes: its reply sent
 * slowly (processed before create_batch), or the request processed late (after it).
 */
import { startEnv, batchName, jobName, type Env } from '../commands/helpers.js';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import type { FaultSpec } from '../../fixtures/test-server/types.js';
import { submitLine, writeInput, rpcNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

beforeEach(() => {
  env.server.clearFaults();
});

let seq = 0;
function makeBatch(njobs: number): { batch: string; jobs: LineJob[]; line: string } {
  const batch = batchName('uppercase');
  const tag = seq++;
  const jobs: LineJob[] = [];
  for (let j = 0; j < njobs; j++) {
    const path = writeInput(env.dir, `same${tag}/f${j}.txt`, `input ${j} of same-name case ${tag}\n`);
    jobs.push({ name: jobName(batch, 20 + tag, j), inputs: [[path, 'in']] });
  }
  return { batch, jobs, line: submitLine(batch, 'uppercase', jobs) };
}

/** The lookup's answer comes long after create_batch was sent. */
const lookupFaults: Array<[string, FaultSpec]> = [
  ['answered slowly (processed before create_batch)', { script: 'submit_rpc_handler.php', rpc: 'query_batch', kind: 'slow', delayMs: 1500 }],
  ['processed late (after create_batch)', { script: 'submit_rpc_handler.php', rpc: 'query_batch', kind: 'late', delayMs: 1500 }],
];

const batchIdIn = (raw: string) => Number(/<batch_id>(\d+)<\/batch_id>/.exec(raw)?.[1]);

describe('an empty batch of the name made behind the ledger', () => {
  test.each(lookupFaults)('query_batch %s: the batch just created is retired by id and the jobs land in the older one', async (_what, fault) => {
    const { batch, jobs, line } = makeBatch(3);
    const olderId = await env.rpc.createBatch({ batchName: batch, appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 60 });
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);

    const log = env.server.rpcLog().slice(since);
    const names = log.map((e) => e.rpc);
    // create_batch went out before the lookup's answer came, and made a second batch.
    expect(names.filter((n) => n === 'create_batch')).toHaveLength(1);
    const same = env.server.batches().filter((b) => b.name === batch);
    expect(same.map((b) => b.id).sort((a, b) => a - b)).toEqual([olderId, expect.any(Number)]);
    const ours = same.find((b) => b.id !== olderId)!;
    // Ours is retired by its id, never by name (the name is the older batch's), and holds nothing.
    const retires = log.filter((e) => e.rpc === 'retire_batch');
    expect(retires).toHaveLength(1);
    expect(batchIdIn(retires[0]!.raw)).toBe(ours.id);
    expect(retires[0]!.raw).not.toContain('<batch_name>');
    expect(ours.state).toBe(4);
    expect(ours.jobNames).toEqual([]);
    // The jobs are in the older batch, the one every lookup by name finds; its lease renewed.
    const older = same.find((b) => b.id === olderId)!;
    expect(older.jobNames.sort()).toEqual(jobs.map((j) => j.name).sort());
    expect(env.server.jobs(batch).map((j) => j.batchId)).toEqual(jobs.map(() => olderId));
    expect(older.expireTime).toBeGreaterThan(Date.now() / 1000 + 3600);
    // No file was linked to ours: staging waited for the lookup.
    for (const f of env.server.files()) expect(f.batches).not.toContain(ours.id);
    // (A query_files without batch_id links nothing: the freshly hashed files are asked
    // about while the batch is created.)
    const firstLink = log.findIndex((e) => e.rpc === 'upload_files' || (e.rpc === 'query_files' && /<batch_id>/.test(e.raw)));
    expect(firstLink).toBeGreaterThan(-1);
    expect(names.indexOf('retire_batch')).toBeLessThan(firstLink);
    const ledger = JournalLedger.readOnly(env.stateDir);
    const rec = ledger.get(env.server.url, batch)!;
    expect(rec.state).toBe('submitted');
    expect(rec.batchId).toBe(olderId);
  });
});

describe('no other batch of the name', () => {
  test.each(lookupFaults)('query_batch %s: the batch just created is used, nothing retired', async (_what, fault) => {
    const { batch, jobs, line } = makeBatch(3);
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
    const names = rpcNames(env.server, since);
    expect(names).not.toContain('retire_batch');
    expect(names).toContain('query_batch');
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expect(env.server.batches().find((b) => b.name === batch)!.state).toBe(1);
  });
});
