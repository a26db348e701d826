/**
 * BOINC_QUERY_BATCHES end to end, with the ledger it feeds and the lease warning it checks.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { batchName, esc, jobName, readLedgerWhen, seedLedger, startEnv, submitBatch, waitPast, type Env } from './helpers.js';

describe('BOINC_QUERY_BATCHES', () => {
  let env: Env;
  const A = batchName('uppercase');
  const B = batchName('uppercase');
  const a = [1, 2, 3].map((n) => jobName(A, 100, n));
  const b = [1, 2].map((n) => jobName(B, 200, n));
  const logFile = () => path.join(env.dir, 'gahp.log');

  beforeAll(async () => {
    env = await startEnv();
    const idA = await submitBatch(env, A, 'uppercase', a.map((name) => ({ name, inputs: ['a\n'] })));
    const idB = await submitBatch(env, B, 'uppercase', b.map((name) => ({ name, inputs: ['b\n'] })));
    // The ledger knows both batches (as BOINC_SUBMIT records them); A's lease ends soon.
    await env.restart(
      () =>
        seedLedger(env.stateDir, env.server.url, [
          { name: A, app: 'uppercase', batchId: idA, jobs: a, leaseExpiresAt: Math.floor(Date.now() / 1000) + 600 },
          { name: B, app: 'uppercase', batchId: idB, jobs: b, leaseExpiresAt: Math.floor(Date.now() / 1000) + 6 * 3600 },
        ]),
      { logFile: logFile() },
    );
  });

  afterAll(async () => {
    await env?.close();
  });

  test('full query, then min_mod_time queries see only the changes; ledger follows', async () => {
    const full = await env.gahp.call(`BOINC_QUERY_BATCHES 0 2 ${esc(A)} ${esc(B)}`);
    expect(full[0]).toBe('NULL');
    const st1 = full[1]!;
    expect(st1).toMatch(/^[0-9]+(\.[0-9]+)?$/);
    expect(full.slice(2)).toEqual(['3', a[0], 'NOT_STARTED', a[1], 'NOT_STARTED', a[2], 'NOT_STARTED', '2', b[0], 'NOT_STARTED', b[1], 'NOT_STARTED']);

    // The real server keeps mod_time in whole seconds: change things after the next second.
    await waitPast(Math.ceil(Number(st1)));
    env.server.advanceJob(a[1]!, 'IN_PROGRESS');
    env.server.advanceJob(b[0]!, 'DONE');
    env.server.clearRpcLog();
    const delta = await env.gahp.call(`BOINC_QUERY_BATCHES ${st1} 2 ${esc(A)} ${esc(B)}`);
    // The server was asked from one whole second earlier (mod_time has whole seconds);
    // jobs re-read through that overlap with an unchanged status were left out again.
    expect(env.server.rpcLog().find((e) => e.rpc === 'query_batch2')!.raw).toContain(`<min_mod_time>${Math.floor(Number(st1)) - 1}</min_mod_time>`);
    const st2 = delta[1]!;
    expect(delta).toEqual(['NULL', st2, '1', a[1], 'IN_PROGRESS', '1', b[0], 'DONE']);

    await waitPast(Math.ceil(Number(st2)));
    env.server.advanceJob(a[1]!, 'ERROR');
    const delta2 = await env.gahp.call(`BOINC_QUERY_BATCHES ${st2} 2 ${esc(A)} ${esc(B)}`);
    expect(delta2.slice(2)).toEqual(['1', a[1], 'ERROR', '0']);

    const ledger = await readLedgerWhen(env.stateDir, (l) => l.get(env.server.url, A)?.lastServerTime === delta2[1]);
    const recA = ledger.get(env.server.url, A)!;
    expect(recA.jobs).toEqual({ [a[0]!]: 'NOT_STARTED', [a[1]!]: 'ERROR', [a[2]!]: 'NOT_STARTED' });
    expect(recA.lastServerTime).toBe(delta2[1]);
    expect(ledger.get(env.server.url, B)!.jobs).toEqual({ [b[0]!]: 'DONE', [b[1]!]: 'NOT_STARTED' });
    // One journal entry per query.
    const lines = fs.readFileSync(path.join(env.stateDir, 'ledger.jsonl'), 'utf8').split('\n').filter((l) => l.includes('"op":"query"'));
    expect(lines).toHaveLength(3);
  });

  test('a change in the same second as the previous poll is still reported, once', async () => {
    const C = batchName('uppercase');
    const c = [1, 2].map((n) => jobName(C, 400, n));
    await submitBatch(env, C, 'uppercase', c.map((name) => ({ name, inputs: ['c\n'] })));
    const full = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(C)}`);
    const st1 = full[1]!;
    // No wait: the job changes within the second of the poll, so its mod_time (whole
    // seconds) is not after st1. A query passing st1 through would never see it.
    env.server.advanceJob(c[0]!, 'IN_PROGRESS');
    const delta = await env.gahp.call(`BOINC_QUERY_BATCHES ${st1} 1 ${esc(C)}`);
    expect(delta.slice(2)).toEqual(['1', c[0], 'IN_PROGRESS']);
    // Asked again from the new time, nothing changed: the job that answer reported is not
    // reported again. (The other one may be, if its creation falls in the overlap: that
    // answer did not carry it, so nothing proves the client has it.)
    const again = await env.gahp.call(`BOINC_QUERY_BATCHES ${delta[1]} 1 ${esc(C)}`);
    expect([['0'], ['1', c[1], 'NOT_STARTED']]).toContainEqual(again.slice(2));
  });

  test('a min_mod_time sent again (its answer lost or timed out) reports every change since it again', async () => {
    const D = batchName('uppercase');
    const d = [1, 2, 3].map((n) => jobName(D, 500, n));
    await submitBatch(env, D, 'uppercase', d.map((name) => ({ name, inputs: ['d\n'] })));
    // Past the overlap of the creation (mod_time in whole seconds): only changes show.
    await waitPast(Math.floor(Date.now() / 1000) + 2);
    const full = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(D)}`);
    expect(full.slice(2)).toEqual(['3', d[0], 'NOT_STARTED', d[1], 'NOT_STARTED', d[2], 'NOT_STARTED']);
    const st1 = full[1]!;

    env.server.advanceJob(d[0]!, 'DONE');
    const lost = await env.gahp.call(`BOINC_QUERY_BATCHES ${st1} 1 ${esc(D)}`);
    expect(lost.slice(2)).toEqual(['1', d[0], 'DONE']);
    // The gridmanager never saw that answer (its call timed out): it asks again from st1.
    const retry = await env.gahp.call(`BOINC_QUERY_BATCHES ${st1} 1 ${esc(D)}`);
    expect(retry.slice(2)).toEqual(['1', d[0], 'DONE']);
    // And once more, the retry lost as well.
    const retry2 = await env.gahp.call(`BOINC_QUERY_BATCHES ${st1} 1 ${esc(D)}`);
    expect(retry2.slice(2)).toEqual(['1', d[0], 'DONE']);

    // From the token of the answer it did get, what that answer reported is not repeated.
    env.server.advanceJob(d[1]!, 'IN_PROGRESS');
    const next = await env.gahp.call(`BOINC_QUERY_BATCHES ${retry2[1]} 1 ${esc(D)}`);
    expect(next.slice(2)).toEqual(['1', d[1], 'IN_PROGRESS']);
    // The token of a lost answer (never sent back by the gridmanager, but a client may)
    // leaves out only what that answer carried.
    const fromLost = await env.gahp.call(`BOINC_QUERY_BATCHES ${lost[1]} 1 ${esc(D)}`);
    expect(fromLost.slice(2)).toEqual(['1', d[1], 'IN_PROGRESS']);
  });

  test('a lease ending within the hour without renewal is warned about once in the log', async () => {
    await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(A)}`);
    await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(A)}`);
    const log = fs.readFileSync(logFile(), 'utf8');
    const warnings = log.split('\n').filter((l) => l.includes('WARN') && l.includes(`lease of batch ${A}`));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/has not been renewed; \d+ jobs unfinished/);
    expect(log).not.toContain(`lease of batch ${B}`);

    // Renewed: no more warnings.
    const lease = Math.floor(Date.now() / 1000) + 6 * 3600;
    expect(await env.gahp.call(`BOINC_SET_LEASE ${esc(A)} ${lease}`)).toEqual(['NULL']);
    expect(JournalLedger.readOnly(env.stateDir).get(env.server.url, A)!.leaseExpiresAt).toBe(lease);
    await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(A)}`);
    const after = fs.readFileSync(logFile(), 'utf8').split('\n').filter((l) => l.includes(`lease of batch ${A}`));
    expect(after).toHaveLength(1);
  });

  test('an unknown batch: error result ending `no batch named <name>`', async () => {
    const nosuch = 'condor#schedd@submit.example.org#nosuch#1796200000';
    const r = await env.gahp.call(`BOINC_QUERY_BATCHES 0 2 ${esc(A)} ${esc(nosuch)}`);
    expect(r).toHaveLength(1);
    expect(r[0]!.endsWith(`no batch named ${nosuch}`)).toBe(true);
  });

  test('a batch name with a space travels escaped both ways', async () => {
    const odd = 'no such batch';
    const r = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(odd)}`);
    expect(r).toHaveLength(1);
    expect(r[0]!.endsWith(`no batch named ${odd}`)).toBe(true);
  });

  test('malformed requests get E', async () => {
    for (const line of [
      'BOINC_QUERY_BATCHES 9001 0 2 onlyone',
      'BOINC_QUERY_BATCHES 9002 notatime 1 x',
      'BOINC_QUERY_BATCHES 9003 0',
      'BOINC_QUERY_BATCHES 9004 0 x y',
    ]) {
      expect(await env.gahp.request(line)).toMatch(/^E /);
    }
  });
});

describe('BOINC_SET_LEASE, BOINC_ABORT_JOBS, BOINC_RETIRE_BATCH', () => {
  let env: Env;
  const A = batchName('uppercase');
  const jobs = [1, 2, 3].map((n) => jobName(A, 300, n));

  beforeAll(async () => {
    env = await startEnv();
    const id = await submitBatch(env, A, 'uppercase', jobs.map((name) => ({ name, inputs: ['x\n'] })));
    await env.restart(() => seedLedger(env.stateDir, env.server.url, [{ name: A, app: 'uppercase', batchId: id, jobs }]));
  });

  afterAll(async () => {
    await env?.close();
  });

  test('set_expire_time with the given time; recorded in the ledger', async () => {
    const t = Math.floor(Date.now() / 1000) + 7200;
    expect(await env.gahp.call(`BOINC_SET_LEASE ${esc(A)} ${t}`)).toEqual(['NULL']);
    expect(env.server.batches().find((x) => x.name === A)!.expireTime).toBe(t);
    expect(JournalLedger.readOnly(env.stateDir).get(env.server.url, A)!.leaseExpiresAt).toBe(t);
  });

  test('lease of an unknown batch: error result', async () => {
    const r = await env.gahp.call(`BOINC_SET_LEASE nosuch ${Math.floor(Date.now() / 1000) + 60}`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/set_expire_time failed/);
  });

  test('abort: jobs become ERROR; an unknown job is an error result', async () => {
    expect(await env.gahp.call(`BOINC_ABORT_JOBS ${esc(jobs[0]!)} ${esc(jobs[1]!)}`)).toEqual(['NULL']);
    const aborted = env.server.jobs(A).filter((j) => j.aborted).map((j) => j.name).sort();
    expect(aborted).toEqual([jobs[0], jobs[1]].sort());
    const q = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(A)}`);
    expect(q.slice(2)).toEqual(['3', jobs[0], 'ERROR', jobs[1], 'ERROR', jobs[2], 'NOT_STARTED']);

    const r = await env.gahp.call(`BOINC_ABORT_JOBS ${esc(A + '#999.0')}`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/abort_jobs failed: .*no job/);
  });

  test('retire: the batch is retired on the server and in the ledger', async () => {
    expect(await env.gahp.call(`BOINC_RETIRE_BATCH ${esc(A)}`)).toEqual(['NULL']);
    expect(env.server.batches().find((x) => x.name === A)!.state).toBe(4);
    expect(JournalLedger.readOnly(env.stateDir).get(env.server.url, A)!.state).toBe('retired');
  });

  test('malformed requests get E', async () => {
    for (const line of ['BOINC_SET_LEASE 9001 batch soon', 'BOINC_SET_LEASE 9002 batch', 'BOINC_ABORT_JOBS 9003', 'BOINC_RETIRE_BATCH 9004', 'BOINC_RETIRE_BATCH 9005 a b']) {
      expect(await env.gahp.request(line)).toMatch(/^E /);
    }
  });
});

describe('the whole cycle through the GAHP: BOINC_SUBMIT, query, fetch, retire', () => {
  let env: Env;
  beforeAll(async () => {
    env = await startEnv();
  });
  afterAll(async () => {
    await env?.close();
  });

  test('submitted jobs are tracked in the ledger from submit to retirement', async () => {
    const batch = batchName('uppercase');
    const input = path.join(env.dir, 'data file.txt');
    fs.writeFileSync(input, 'cycle\n');
    const j0 = jobName(batch, 1001, 0);
    const j1 = jobName(batch, 1001, 1);
    const submit = `BOINC_SUBMIT ${esc(batch)} uppercase 2 ${esc(j0)} 0 1 ${esc(input)} in ${esc(j1)} 2 -n 5 1 ${esc(input)} in NULL NULL NULL NULL NULL NULL`;
    expect(await env.gahp.call(submit)).toEqual(['NULL']);
    const lease = Math.floor(Date.now() / 1000) + 6 * 3600;
    expect(await env.gahp.call(`BOINC_SET_LEASE ${esc(batch)} ${lease}`)).toEqual(['NULL']);

    const q1 = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
    expect(q1.slice(2)).toEqual(['2', j0, 'NOT_STARTED', j1, 'NOT_STARTED']);
    await waitPast(Math.ceil(Number(q1[1])));
    env.server.advanceAll(batch);
    const q2 = await env.gahp.call(`BOINC_QUERY_BATCHES ${q1[1]} 1 ${esc(batch)}`);
    expect(q2.slice(2)).toEqual(['2', j0, 'DONE', j1, 'DONE']);
    const ledger = await readLedgerWhen(env.stateDir, (l) => l.get(env.server.url, batch)?.lastServerTime === q2[1]);
    expect(ledger.get(env.server.url, batch)).toMatchObject({ state: 'submitted', app: 'uppercase', leaseExpiresAt: lease, jobs: { [j0]: 'DONE', [j1]: 'DONE' } });

    const iwd = path.join(env.dir, 'run');
    fs.mkdirSync(iwd);
    expect(await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(j1)} ${esc(iwd)} job.err SOME 1 out out.1001.1`)).toEqual(['NULL', '0', '12.500000', '10.250000']);
    expect(fs.readFileSync(path.join(iwd, 'out.1001.1'), 'latin1')).toBe('CYCLE\n\nargs: -n 5\n');
    expect(await env.gahp.call(`BOINC_RETIRE_BATCH ${esc(batch)}`)).toEqual(['NULL']);
    expect(JournalLedger.readOnly(env.stateDir).get(env.server.url, batch)!.state).toBe('retired');
  });
});
