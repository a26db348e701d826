/**
 * BOINC_FETCH_OUTPUT from a batch-collect project (docs/boinc-server.md, "Batch-collect
 * projects: get_output3.php"), through bin/boinc-gahp against the test server with
 * `daemons: 'collect'`: a few tenths of a second after a job is done its outputs leave the
 * upload hierarchy (get_output.php: `ERROR: no such file`) for results/<batch id>/.
 * - jobs whose names BOINC's check takes come from get_output3.php's get_file;
 * - HTCondor 10.0's names (`condor#...#<cluster>.<proc>`) from the batch's zip, fetched once
 *   for the batch, kept in the state directory until its jobs are placed;
 * - two GAHP processes sharing the state directory share the zip too;
 * - the way is learnt per app: the next batch's fetches go to get_output3.php first;
 * - a `<gzip_when_done/>` output arrives as the job wrote it, from either page.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { upperAscii } from '../../fixtures/apps.js';
import { sampleApps, type TestApp } from '../../fixtures/test-server/index.js';
import { batchName, esc, jobName, launch, startEnv, startFetches, type Env } from './helpers.js';
import { submitLine } from '../submit/support.js';
import { until } from '../support/poll.js';

/** Like uppercase, its output `out.txt` marked `<gzip_when_done/>`: the client gzips it before uploading. */
const gzipApp: TestApp = {
  name: 'gzipped',
  inputs: [{ openName: 'in' }],
  outputs: [{ openName: 'out.txt', gzipWhenDone: true }],
  run(ctx) {
    return { kind: 'success', outputs: [upperAscii(ctx.inputs[0]!)], stderr: '', elapsedTime: 1, cpuTime: 1 };
  },
};

describe("BOINC_FETCH_OUTPUT on a batch-collect project (daemons 'collect')", () => {
  let env: Env;
  let input: string;
  let seq = 0;
  beforeAll(async () => {
    env = await startEnv({ daemons: 'collect', deleteAfterDoneSeconds: 0.3, apps: [...sampleApps, gzipApp] });
    input = path.join(env.dir, 'data.txt');
    fs.writeFileSync(input, 'collected\n');
  });
  afterAll(async () => {
    await env?.close();
  });

  const calls = (rpc: string) => env.server.rpcLog().filter((e) => e.rpc === rpc).length;
  const zipsKept = () => (fs.existsSync(path.join(env.stateDir, 'collected')) ? fs.readdirSync(path.join(env.stateDir, 'collected')).filter((n) => n.endsWith('.zip')) : []);

  /** Submits the jobs (one of `app` each, input `input`) through the GAHP, so its ledger knows them; returns the directory the assimilator moves the batch's outputs to. */
  async function submitJobs(app: string, batch: string, names: string[]): Promise<string> {
    const jobs = names.map((name) => ({ name, inputs: [[input, 'in']] as Array<[string, string]> }));
    expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, app, jobs)}`, 60_000)).toEqual(['NULL']);
    const id = env.server.batches().find((b) => b.name === batch)!.id;
    return path.join(env.server.dataDir, 'results', String(id));
  }

  /** submitJobs(), then runs the jobs and waits until the assimilator moved them; returns that directory. */
  async function submitCollected(app: string, batch: string, names: string[]): Promise<string> {
    const dir = await submitJobs(app, batch, names);
    env.server.advanceAll(batch);
    await env.server.settled();
    await until('the assimilator', () => names.every((n) => fs.existsSync(dir) && fs.readdirSync(dir).some((f) => f.startsWith(`${n}__file_`))));
    return dir;
  }

  /** Fetches the jobs all at once (ALL mode), each into a new directory; returns the directories. */
  async function fetchAll(names: string[]): Promise<string[]> {
    const { ids, iwds } = await startFetches(env, names);
    for (const id of ids) expect((await env.gahp.waitResult(id, 60_000)).slice(0, 2)).toEqual(['NULL', '0']);
    return iwds;
  }

  test("HTCondor 10.0's job names: every output from the batch's zip, fetched once for the batch, removed once all are placed", async () => {
    const batch = batchName('uppercase');
    const names = Array.from({ length: 5 }, (_, i) => jobName(batch, 123, i));
    await submitCollected('uppercase', batch, names);
    env.server.clearRpcLog();
    const iwds = await fetchAll(names);
    for (const d of iwds) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
    expect({ get_batch_zip: calls('get_batch_zip'), get_file: calls('get_file') }).toEqual({ get_batch_zip: 1, get_file: 0 });
    expect(zipsKept()).toEqual([]);
  }, 120_000);

  test('the zip is kept on disk while a job of its batch is still to come; a job the kept zip lacks gets it fetched again; then it goes', async () => {
    const batch = batchName('uppercase');
    const names = [jobName(batch, 124, 0), jobName(batch, 124, 1)];
    const results = await submitJobs('uppercase', batch, names);
    const moved = (n: string) => fs.existsSync(path.join(results, `${n}__file_out`));
    env.server.advanceJob(names[0]!, 'DONE');
    await until('the assimilator (job 0)', () => moved(names[0]!));
    env.server.clearRpcLog();
    await fetchAll([names[0]!]);
    expect(calls('get_batch_zip')).toBe(1);
    expect(zipsKept()).toHaveLength(1);

    env.server.advanceJob(names[1]!, 'DONE');
    await until('the assimilator (job 1)', () => moved(names[1]!));
    const [d] = await fetchAll([names[1]!]);
    expect(fs.readFileSync(path.join(d!, 'out'), 'latin1')).toBe('COLLECTED\n');
    expect(calls('get_batch_zip')).toBe(2);
    expect(zipsKept()).toEqual([]);
  }, 120_000);

  test('concurrent fetches of one batch share one zip download; jobs assimilated after it was taken share one fresh zip', async () => {
    // As on BOINC's real project (HTCondor 10.0's gridmanager, 200 jobs): the fetches of the
    // jobs done first take the batch's zip; meanwhile more jobs are assimilated and reported
    // DONE, and their fetches start while that zip is still downloading. It lacks them: they
    // wait for it, then share one fresh download (not one each, and no job declared gone).
    const batch = batchName('uppercase');
    const names = Array.from({ length: 12 }, (_, i) => jobName(batch, 126, i));
    const [early, late] = [names.slice(0, 4), names.slice(4)];
    const results = await submitJobs('uppercase', batch, names);
    const moved = (n: string) => fs.existsSync(path.join(results, `${n}__file_out`));
    for (const n of early) env.server.advanceJob(n, 'DONE');
    await until('the assimilator (early jobs)', () => early.every(moved));
    env.server.clearRpcLog();
    // The first zip (made when the request comes: early jobs only) takes a few seconds to arrive.
    env.server.injectFault({ script: 'get_output3.php', rpc: 'get_batch_zip', kind: 'slow', delayMs: 4000 });
    const first = await startFetches(env, early);
    await until('the first zip request', () => calls('get_batch_zip') === 1);
    for (const n of late) env.server.advanceJob(n, 'DONE');
    await until('the assimilator (late jobs)', () => late.every(moved));
    const second = await startFetches(env, late);
    for (const rid of [...first.ids, ...second.ids]) expect((await env.gahp.waitResult(rid, 90_000)).slice(0, 2)).toEqual(['NULL', '0']);
    for (const d of [...first.iwds, ...second.iwds]) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
    expect(calls('get_batch_zip')).toBe(2);
  }, 180_000);

  test('two GAHP processes sharing the state directory, fetching jobs of one batch at once, download its zip once', async () => {
    // The second process waits on the zip's lock while the first downloads; then it finds the
    // zip the first kept, holding its job, and takes it instead of downloading the batch again.
    const batch = batchName('uppercase');
    const names = [jobName(batch, 127, 0), jobName(batch, 127, 1)];
    await submitCollected('uppercase', batch, names);
    const other = await launch(env.server, { stateDir: env.stateDir });
    try {
      env.server.clearRpcLog();
      // The zip takes seconds to arrive: the second fetch begins long before it is kept.
      env.server.injectFault({ script: 'get_output3.php', rpc: 'get_batch_zip', kind: 'slow', delayMs: 5000 });
      const [a, b] = await Promise.all([startFetches(env, [names[0]!]), startFetches({ ...env, gahp: other }, [names[1]!])]);
      expect((await env.gahp.waitResult(a.ids[0]!, 90_000)).slice(0, 2)).toEqual(['NULL', '0']);
      expect((await other.waitResult(b.ids[0]!, 90_000)).slice(0, 2)).toEqual(['NULL', '0']);
      for (const d of [...a.iwds, ...b.iwds]) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
      expect(calls('get_batch_zip')).toBe(1);
      expect(zipsKept()).toEqual([]);
    } finally {
      await other.close();
    }
  }, 180_000);

  test('a zip another process kept that predates a waiting fetch is taken only for the jobs it holds: a job it lacks gets a fresh one', async () => {
    // The first GAHP downloads the zip while job 2 is not yet assimilated. The second asks
    // for jobs 1 and 2 during that download: the zip the first keeps holds job 1 (taken from
    // it, no download of its own) but not job 2, which must not be declared gone for that:
    // it gets one zip downloaded after its fetch began.
    const batch = batchName('uppercase');
    const names = [0, 1, 2].map((i) => jobName(batch, 128, i));
    const results = await submitJobs('uppercase', batch, names);
    const moved = (n: string) => fs.existsSync(path.join(results, `${n}__file_out`));
    env.server.advanceJob(names[0]!, 'DONE');
    env.server.advanceJob(names[1]!, 'DONE');
    await until('the assimilator (jobs 0 and 1)', () => moved(names[0]!) && moved(names[1]!));
    const other = await launch(env.server, { stateDir: env.stateDir });
    try {
      env.server.clearRpcLog();
      env.server.injectFault({ script: 'get_output3.php', rpc: 'get_batch_zip', kind: 'slow', delayMs: 8000 });
      const a = await startFetches(env, [names[0]!]);
      await until('the first zip request', () => calls('get_batch_zip') === 1);
      env.server.advanceJob(names[2]!, 'DONE');
      await until('the assimilator (job 2)', () => moved(names[2]!));
      const b = await startFetches({ ...env, gahp: other }, [names[1]!, names[2]!]);
      expect((await env.gahp.waitResult(a.ids[0]!, 90_000)).slice(0, 2)).toEqual(['NULL', '0']);
      for (const id of b.ids) expect((await other.waitResult(id, 90_000)).slice(0, 2)).toEqual(['NULL', '0']);
      for (const d of [...a.iwds, ...b.iwds]) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
      expect(calls('get_batch_zip')).toBe(2);
    } finally {
      await other.close();
    }
  }, 180_000);

  test('BOINC_RETIRE_BATCH removes the kept zip of its batch', async () => {
    const batch = batchName('uppercase');
    const names = [jobName(batch, 125, 0), jobName(batch, 125, 1)];
    const results = await submitJobs('uppercase', batch, names);
    env.server.advanceJob(names[0]!, 'DONE');
    await until('the assimilator', () => fs.existsSync(path.join(results, `${names[0]}__file_out`)));
    await fetchAll([names[0]!]);
    expect(zipsKept()).toHaveLength(1);
    expect(await env.gahp.call(`BOINC_RETIRE_BATCH ${esc(batch)}`, 60_000)).toEqual(['NULL']);
    expect(zipsKept()).toEqual([]);
  }, 120_000);

  test('names BOINC accepts: get_file per output, no zip; the next batch of the app goes straight to get_output3.php', async () => {
    const b1 = `gahp_collect_${process.pid}_${seq++}`;
    const n1 = Array.from({ length: 3 }, (_, i) => `${b1}_${i}`);
    await submitCollected('uppercase', b1, n1);
    env.server.clearRpcLog();
    for (const d of await fetchAll(n1)) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
    expect({ get_file: calls('get_file'), get_batch_zip: calls('get_batch_zip') }).toEqual({ get_file: 3, get_batch_zip: 0 });
    expect(fs.readFileSync(path.join(env.stateDir, 'output-ways.json'), 'utf8')).toContain('"collect"');

    // Learnt: a new GAHP (the memory is on disk) asks get_output.php nothing for this app.
    await env.restart();
    const b2 = `gahp_collect_${process.pid}_${seq++}`;
    const n2 = Array.from({ length: 3 }, (_, i) => `${b2}_${i}`);
    await submitCollected('uppercase', b2, n2);
    env.server.clearRpcLog();
    for (const d of await fetchAll(n2)) expect(fs.readFileSync(path.join(d, 'out'), 'latin1')).toBe('COLLECTED\n');
    expect({ workunit_file: calls('workunit_file'), get_file: calls('get_file') }).toEqual({ workunit_file: 0, get_file: 3 });
  }, 120_000);

  test('a gzip_when_done output arrives as the job wrote it (the assimilator kept the gzip bytes; get_file looks for .gz, the zip has it)', async () => {
    const batch = `gahp_gz_${process.pid}_${seq++}`;
    const names = [`${batch}_0`, `${batch}_1`];
    const results = await submitCollected('gzipped', batch, names);
    const kept = fs.readFileSync(path.join(results, `${names[0]}__file_out.txt`));
    expect(gunzipSync(kept).toString('latin1')).toBe('COLLECTED\n');
    for (const d of await fetchAll(names)) expect(fs.readFileSync(path.join(d, 'out.txt'), 'latin1')).toBe('COLLECTED\n');
  }, 120_000);
});

describe("BOINC_FETCH_OUTPUT of a gzip_when_done output from the upload hierarchy (daemons 'none')", () => {
  let env: Env;
  beforeAll(async () => {
    env = await startEnv({ apps: [...sampleApps, gzipApp] });
  });
  afterAll(async () => {
    await env?.close();
  });

  test('get_output.php serves the gzip the client uploaded: the file is unpacked', async () => {
    const input = path.join(env.dir, 'data.txt');
    fs.writeFileSync(input, 'uploaded gz\n');
    const batch = batchName('gzipped');
    const name = jobName(batch, 9, 0);
    expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'gzipped', [{ name, inputs: [[input, 'in']] }])}`, 60_000)).toEqual(['NULL']);
    env.server.advanceAll(batch);
    await env.server.settled();
    const iwd = path.join(env.dir, 'iwd');
    fs.mkdirSync(iwd);
    expect((await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(name)} ${esc(iwd)} job.err ALL 0`, 60_000)).slice(0, 2)).toEqual(['NULL', '0']);
    expect(fs.readFileSync(path.join(iwd, 'out.txt'), 'latin1')).toBe('UPLOADED GZ\n');
  }, 60_000);
});
