/**
 * The templates BOINC_FETCH_OUTPUT keeps per app and account (docs/boinc-server.md,
 * "Templates kept between fetches"), through bin/boinc-gahp against the test server: how
 * many get_templates a cluster's fetches make, and that a template changed on the server is
 * seen by the refresh rule.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { upperAscii } from '../../fixtures/apps.js';
import { sampleApps, type TestApp } from '../../fixtures/test-server/index.js';
import { batchName, esc, jobName, newJobDir, startEnv, startFetches, type Env } from './helpers.js';
import { submitLine } from '../submit/support.js';

const uppercase = sampleApps.find((a) => a.name === 'uppercase')!;
/** uppercase after its output template was edited: the one output is now called `upper`. */
const renamedOutput: TestApp = { ...uppercase, outputs: [{ openName: 'upper' }] };
/** uppercase after an output was added to its template: `out` and `log`. */
const withLog: TestApp = {
  ...uppercase,
  outputs: [{ openName: 'out' }, { openName: 'log' }],
  run(ctx) {
    return { kind: 'success', outputs: [upperAscii(ctx.inputs[0]!), Buffer.from(`log of ${ctx.jobName}\n`)], stderr: '', elapsedTime: 1, cpuTime: 1 };
  },
};

describe('templates kept between fetches', () => {
  let env: Env;
  let input: string;
  beforeAll(async () => {
    env = await startEnv();
    input = path.join(env.dir, 'data.txt');
    fs.writeFileSync(input, 'kept\n');
  });
  afterAll(async () => {
    await env?.close();
  });
  afterEach(() => env.server.replaceApp(uppercase));

  /** A batch of n uppercase jobs submitted through the GAHP (so its ledger knows them), run to completion. */
  async function submitDone(n: number): Promise<string[]> {
    const batch = batchName('uppercase');
    const jobs = Array.from({ length: n }, (_, i) => ({ name: jobName(batch, 7, i), inputs: [[input, 'in']] as Array<[string, string]> }));
    expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000)).toEqual(['NULL']);
    env.server.advanceAll(batch);
    await env.server.settled();
    return jobs.map((j) => j.name);
  }

  /** Fetches the jobs (all in flight at once, ALL mode), each into a new directory; returns the directories. */
  async function fetchAll(names: string[]): Promise<string[]> {
    const { ids, iwds } = await startFetches(env, names);
    for (const id of ids) expect((await env.gahp.waitResult(id, 60_000))[0]).toBe('NULL');
    return iwds;
  }

  const calls = (rpc: string) => env.server.rpcLog().filter((e) => e.rpc === rpc).length;

  test('100 fetches of one app make one get_templates', async () => {
    const names = await submitDone(100);
    env.server.clearRpcLog();
    const iwds = await fetchAll(names);
    for (const d of iwds) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('KEPT\n');
    expect({ get_templates: calls('get_templates'), query_completed_job: calls('query_completed_job'), workunit_file: calls('workunit_file') })
      .toEqual({ get_templates: 1, query_completed_job: 100, workunit_file: 100 });
  }, 120_000);

  test('a template changed on the server between two fetches is seen', async () => {
    const [first] = await submitDone(1);
    const [before] = await fetchAll([first!]);
    expect(fs.readdirSync(before!).sort()).toEqual(['job.err', 'out']);
    env.server.replaceApp(renamedOutput);
    // A batch made after the kept answer was asked: the next fetch of one of its jobs asks again.
    const names = await submitDone(3);
    env.server.clearRpcLog();
    const iwds = await fetchAll(names);
    for (const d of iwds) {
      expect(fs.readdirSync(d).sort()).toEqual(['job.err', 'upper']);
      expect(fs.readFileSync(path.join(d, 'upper'), 'latin1')).toBe('KEPT\n');
    }
    expect(calls('get_templates')).toBe(1);
  }, 120_000);

  test('a job whose output count disagrees with the kept template is fetched right', async () => {
    // Made with more outputs than the kept answer knows: its batch is newer than that answer.
    const [first] = await submitDone(1);
    await fetchAll([first!]);
    env.server.replaceApp(withLog);
    const names = await submitDone(2);
    env.server.clearRpcLog();
    const iwds = await fetchAll(names);
    iwds.forEach((d, i) => {
      expect(fs.readdirSync(d).sort()).toEqual(['job.err', 'log', 'out']);
      expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('KEPT\n');
      expect(fs.readFileSync(path.join(d, 'log'), 'latin1')).toBe(`log of ${names[i]}\n`);
    });
    expect(calls('get_templates')).toBe(1);

    // A request naming an output the kept answer lacks asks again, once. The job is made
    // with `out` and `log`; the answer kept afterwards (asked after its batch was created, so
    // it would serve it) knows only `out`: the template was changed back meanwhile, and then
    // again.
    env.server.replaceApp(withLog);
    const [job] = await submitDone(1);
    env.server.replaceApp(uppercase);
    const [other] = await submitDone(1);
    await fetchAll([other!]);
    env.server.replaceApp(withLog);
    env.server.clearRpcLog();
    const iwd = newJobDir(env);
    expect(await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job!)} ${esc(iwd)} job.err SOME 1 log job.log`)).toEqual(['NULL', '0', '1.000000', '1.000000']);
    expect(fs.readFileSync(path.join(iwd, 'job.log'), 'latin1')).toBe(`log of ${job}\n`);
    expect(calls('get_templates')).toBe(1);
    // Still lacking after asking again: the fetch fails as before, after one more ask.
    env.server.clearRpcLog();
    const reply = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job!)} ${esc(iwd)} job.err SOME 1 nosuch x`);
    expect(reply[0]).toMatch(/requested output file nosuch is not an output of job/);
    expect(calls('get_templates')).toBe(1);
  }, 120_000);
});
