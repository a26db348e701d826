/**
 * One GAHP for several projects and accounts, as HTCondor's gridmanager runs it: it selects
 * another project before a command for another resource while earlier commands are still
 * pending. Every command must run against the project and account selected when its line
 * was read, whether it started at once or waited for its turn.
 */
import * as fs from 'node:fs';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { GahpProcess, makeTempDir } from '../support/gahp-process.js';
import { batchName, esc, jobName } from './helpers.js';
import { submitLine, writeInput } from '../submit/support.js';

describe('commands keep the project selected when their line was read', () => {
  let serverA: ExtendedTestBoincServer;
  let serverB: ExtendedTestBoincServer;
  let gahp: GahpProcess;
  let dir: string;

  beforeAll(async () => {
    // Slow projects keep the first commands busy, so that later ones wait for their turn
    // (the GAHP runs 32 commands at once) while the selection changes.
    serverA = await startTestServer({ latencyMs: 100 });
    serverB = await startTestServer({ latencyMs: 100 });
    dir = makeTempDir('boinc-gahp-binding-');
    gahp = await GahpProcess.start();
    await gahp.startup();
  });

  afterAll(async () => {
    await gahp?.close();
    await serverA?.close();
    await serverB?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('40 submits pending for project A, then submits for another account on A and for project B: each batch lands where it was sent', async () => {
    const secondUserOfA = serverA.addUser({ submitApps: 'all' });
    const sent = new Map<string, string>(); // reqid -> batch name
    const batches = { a: [] as string[], a2: [] as string[], b: [] as string[] };
    let n = 0;
    const submitAll = async (into: string[], count: number) => {
      for (let i = 0; i < count; i++) {
        const batch = batchName('uppercase');
        // Each batch its own input content: no batch depends on another's files.
        const input = writeInput(dir, `in-${n++}.txt`, `input of ${batch}\n`);
        const id = gahp.reqId();
        const line = submitLine(batch, 'uppercase', [{ name: jobName(batch, 700 + n, 0), inputs: [[input, 'in']] }]);
        expect(await gahp.request(`BOINC_SUBMIT ${id} ${line}`)).toBe('S');
        sent.set(id, batch);
        into.push(batch);
      }
    };

    await gahp.selectProject(serverA.url, serverA.authenticator);
    await submitAll(batches.a, 40);
    await gahp.selectProject(serverA.url, secondUserOfA);
    await submitAll(batches.a2, 6);
    await gahp.selectProject(serverB.url, serverB.authenticator);
    await submitAll(batches.b, 6);
    // None of them has finished yet: the switches happened while all were pending.
    expect(serverA.batches().length + serverB.batches().length).toBeLessThan(52);

    for (const [id, batch] of sent) {
      expect([batch, await gahp.waitResult(id, 120_000)]).toEqual([batch, ['NULL']]);
    }

    const owners = (s: ExtendedTestBoincServer) => Object.fromEntries(s.batches().map((b) => [b.name, b.owner]));
    const expectedA = Object.fromEntries([
      ...batches.a.map((b) => [b, serverA.authenticator] as const),
      ...batches.a2.map((b) => [b, secondUserOfA] as const),
    ]);
    expect(owners(serverA)).toEqual(expectedA);
    expect(owners(serverB)).toEqual(Object.fromEntries(batches.b.map((b) => [b, serverB.authenticator])));
    // Each batch holds its job, its input staged on its own server.
    for (const b of [...batches.a, ...batches.a2]) expect(serverA.jobs(b)).toHaveLength(1);
    for (const b of batches.b) expect(serverB.jobs(b)).toHaveLength(1);
  }, 180_000);

  test('a status query and a lease pending for project A still go to A after B is selected', async () => {
    await gahp.selectProject(serverA.url, serverA.authenticator);
    const batch = batchName('uppercase');
    const input = writeInput(dir, 'query-me.txt', 'query me\n');
    expect(await gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: jobName(batch, 900, 0), inputs: [[input, 'in']] }])}`, 60_000)).toEqual(['NULL']);

    // Keep A's commands waiting: 40 pings first fill the 32 command slots.
    const pings: string[] = [];
    for (let i = 0; i < 40; i++) {
      const id = gahp.reqId();
      expect(await gahp.request(`BOINC_PING ${id}`)).toBe('S');
      pings.push(id);
    }
    const queryId = gahp.reqId();
    expect(await gahp.request(`BOINC_QUERY_BATCHES ${queryId} 0 1 ${esc(batch)}`)).toBe('S');
    const lease = Math.floor(Date.now() / 1000) + 7200;
    const leaseId = gahp.reqId();
    expect(await gahp.request(`BOINC_SET_LEASE ${leaseId} ${esc(batch)} ${lease}`)).toBe('S');
    await gahp.selectProject(serverB.url, serverB.authenticator);

    for (const id of pings) expect(await gahp.waitResult(id, 60_000)).toEqual(['NULL']);
    const query = await gahp.waitResult(queryId, 60_000);
    expect(query.slice(0, 1)).toEqual(['NULL']);
    expect(query.slice(2)).toEqual(['1', jobName(batch, 900, 0), 'NOT_STARTED']);
    expect(await gahp.waitResult(leaseId, 60_000)).toEqual(['NULL']);
    expect(serverA.batches().find((b) => b.name === batch)!.expireTime).toBe(lease);
  }, 120_000);
});
