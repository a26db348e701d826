/**
 * BOINC accepts a second batch of a name and every lookup by name picks the lowest id, so
 * BOINC_SUBMIT asks (query_batch) before it creates anything, even for a name this GAHP's
 * ledger does not know: an empty batch of the name made behind the ledger's back (the
 * gridmanager resubmits such a batch) is filled, and no second batch is made. Through
 * bin/boinc-gahp and the test server, with the lookup's answer delayed: its reply sent
 * slowly, or the request processed late.
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

/** The lookup's answer comes late. */
const lookupFaults: Array<[string, FaultSpec]> = [
  ['answered slowly', { script: 'submit_rpc_handler.php', rpc: 'query_batch', kind: 'slow', delayMs: 1500 }],
  ['processed late', { script: 'submit_rpc_handler.php', rpc: 'query_batch', kind: 'late', delayMs: 1500 }],
];

describe('an empty batch of the name made behind the ledger', () => {
  test.each(lookupFaults)('query_batch %s: the jobs land in that batch; nothing is created or retired', async (_what, fault) => {
    const { batch, jobs, line } = makeBatch(3);
    const olderId = await env.rpc.createBatch({ batchName: batch, appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 60 });
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);

    const names = rpcNames(env.server, since);
    expect(names).not.toContain('create_batch');
    expect(names).not.toContain('retire_batch');
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    const older = env.server.batches().find((b) => b.name === batch)!;
    expect(older.id).toBe(olderId);
    // Its short lease renewed to a full one.
    expect(older.expireTime).toBeGreaterThan(Date.now() / 1000 + 3600);
    const rec = JournalLedger.readOnly(env.stateDir).get(env.server.url, batch)!;
    expect(rec.state).toBe('submitted');
    expect(rec.batchId).toBe(olderId);
  });
});

describe('no other batch of the name', () => {
  test.each(lookupFaults)('query_batch %s: one batch is created once it has answered', async (_what, fault) => {
    const { batch, jobs, line } = makeBatch(3);
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
    const names = rpcNames(env.server, since);
    expect(names).not.toContain('retire_batch');
    expect(names.filter((n) => n === 'create_batch')).toHaveLength(1);
    expect(names.indexOf('query_batch')).toBeLessThan(names.indexOf('create_batch'));
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expect(env.server.batches().find((b) => b.name === batch)!.state).toBe(1);
  });
});
