/**
 * Whole job lifecycles as HTCondor's gridmanager runs them (test/support/gridmanager.ts
 * emulates its GAHP client from its source), against the real bin/boinc-gahp and the
 * bundled test server: the start-up, the lines it builds, how it reads replies and results,
 * and what it does with them (resubmission of missing or empty batches, the query time
 * kept after a lost answer, two resources over one GAHP, a restart with the ledger, abort
 * then retire). Wherever the real gridmanager would abort (an `E` reply to a command it
 * sent, a result of the wrong arity), the emulation records it and the test fails.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { BoincClient } from '../../boinc-rpc/client.js';
import { makeTempDir } from '../support/gahp-process.js';
import {
  BoincResourceEmu,
  GridmanagerGahp,
  boincAbortJobs,
  boincFetchOutput,
  boincPing,
  boincRetireBatch,
  remoteJobName,
  writeAuthenticatorFile,
  type GridJob,
  type ResourceRef,
} from '../support/gridmanager.js';

const upper = (s: string) => s.toUpperCase();

interface World {
  dir: string;
  stateDir: string;
  servers: ExtendedTestBoincServer[];
  gms: GridmanagerGahp[];
}

let world: World;

beforeEach(() => {
  world = { dir: makeTempDir('boinc-gahp-gm-'), stateDir: makeTempDir('boinc-gahp-gm-state-'), servers: [], gms: [] };
});

afterEach(async () => {
  for (const gm of world.gms) await gm.quit().catch(() => undefined);
  for (const s of world.servers) await s.close();
  fs.rmSync(world.dir, { recursive: true, force: true });
  fs.rmSync(world.stateDir, { recursive: true, force: true });
});

async function server(opts: Parameters<typeof startTestServer>[0] = {}): Promise<ExtendedTestBoincServer> {
  const s = await startTestServer(opts);
  world.servers.push(s);
  return s;
}

async function gridmanager(opts: { callTimeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<GridmanagerGahp> {
  const gm = await GridmanagerGahp.start({ stateDir: world.stateDir, ...opts });
  world.gms.push(gm);
  return gm;
}

function resource(s: ExtendedTestBoincServer, name = 'auth', authenticator = s.authenticator): ResourceRef {
  return { url: s.url, authenticatorFile: writeAuthenticatorFile(world.dir, name, authenticator) };
}

/** A job directory with one input file; the job as its ad describes it. */
function job(cluster: number, proc: number, content: string, extra: Partial<GridJob> = {}): GridJob {
  const iwd = path.join(world.dir, `run${cluster}`);
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, `data.${proc}.txt`), content);
  return {
    cluster,
    proc,
    app: 'uppercase',
    args: [],
    iwd,
    transferInput: [`data.${proc}.txt`],
    remoteState: '',
    ...extra,
  };
}

function noAborts(...gms: GridmanagerGahp[]): void {
  for (const gm of gms) expect(gm.aborts.map((a) => a.message)).toEqual([]);
}

/** Status passes until every job of the batch has the status (the server auto-completes or the test advances). */
async function passUntil(res: BoincResourceEmu, jobs: GridJob[], status: string, tries = 20): Promise<void> {
  for (let i = 0; i < tries; i++) {
    await res.statusPass();
    if (jobs.every((j) => j.remoteState === status)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`jobs not ${status}: ${jobs.map((j) => j.remoteState).join(', ')}`);
}

describe('the gridmanager lifecycle against bin/boinc-gahp', () => {
  test('start-up, submit, lease, full then partial queries, fetch (SOME with remaps, stdout and stderr as the gridmanager adds them), retire', async () => {
    const s = await server();
    const gm = await gridmanager();
    expect(gm.version).toMatch(/^\$GahpVersion: \S+ \w{3} \d\d \d{4} .* \$$/);
    expect(gm.usePrefix).toBe(true);
    expect(gm.condorVersionReply).toBeDefined();
    const ref = resource(s);
    expect((await boincPing(gm, ref)).rc).toBe(0);

    const res = new BoincResourceEmu(gm, ref);
    // Job 0 as most submit files have it; job 1 with `output` and `error` set: the
    // gridmanager then appends (basename(Out), Out) and (basename(Err), Err) to the specs.
    const j0 = job(1001, 0, 'first job\n', { args: ['-n', '0'], transferOutput: ['out'], remaps: 'out = out.1001.0', err: 'job.0.err' });
    const j1 = job(1001, 1, 'second job\n', { transferOutput: ['out'], remaps: 'out = results/out.1001.1', out: 'job.1.out', err: 'job.1.err' });
    fs.mkdirSync(path.join(j1.iwd, 'results'));
    const batch = res.joinNew(j0);
    res.joinNew(j1);
    expect((await res.submit(batch)).rc).toBe(0);
    expect(s.jobs(batch.name).map((j) => j.name).sort()).toEqual([remoteJobName(j0), remoteJobName(j1)].sort());
    expect((await res.renewLease(batch)).rc).toBe(0);
    expect(s.batches().find((b) => b.name === batch.name)!.expireTime).toBe(batch.leaseTime);

    await res.statusPass(); // full: min_mod_time 0, its server_time not kept
    expect(res.queries[0]!.minModTime).toBe('0');
    expect(res.lastQueryTime).toBe('0');
    expect([j0.remoteState, j1.remoteState]).toEqual(['NOT_STARTED', 'NOT_STARTED']);
    await res.statusPass(); // partial from 0: now the server_time is kept
    expect(res.lastQueryTime).not.toBe('0');

    s.advanceAll(batch.name, 'DONE');
    await passUntil(res, [j0, j1], 'DONE');
    expect(res.queries.at(-1)!.minModTime).not.toBe('0');

    const f0 = await boincFetchOutput(gm, ref, j0);
    expect(f0).toMatchObject({ rc: 0, exitStatus: 0 });
    expect(fs.readFileSync(path.join(j0.iwd, 'out.1001.0'), 'latin1')).toBe(upper('first job\n') + '\nargs: -n 0\n');
    expect(fs.readFileSync(path.join(j0.iwd, 'job.0.err'), 'latin1')).toContain('uppercase: 10 bytes');

    const f1 = await boincFetchOutput(gm, ref, j1);
    expect(f1.error).toBeUndefined();
    expect(f1).toMatchObject({ rc: 0, exitStatus: 0, wallclock: 12.5, cpu: 10.25 });
    expect(fs.readFileSync(path.join(j1.iwd, 'results', 'out.1001.1'), 'latin1')).toBe(upper('second job\n'));
    expect(fs.readFileSync(path.join(j1.iwd, 'job.1.err'), 'latin1')).toContain('uppercase: 11 bytes');
    // The app has no output named job.1.out (BOINC has no stdout): HTCondor's `output` file is there, empty.
    expect(fs.readFileSync(path.join(j1.iwd, 'job.1.out'), 'latin1')).toBe('');

    // GM_DONE_COMMIT: the last job of the batch done -> retire.
    expect(await boincRetireBatch(gm, ref, batch.name)).toEqual({ rc: 0 });
    expect(s.batches().find((b) => b.name === batch.name)!.state).toBe(4);
    noAborts(gm);
    expect(gm.sent.filter((l) => l.startsWith('BOINC_SELECT_PROJECT'))).toEqual([`BOINC_SELECT_PROJECT ${s.url} XXXXXXXX`]);
    expect(await gm.quit()).toEqual({ code: 0, signal: null });
  });

  test('fetch with ALL (no transfer_output_files): every output into the iwd; error /dev/null', async () => {
    const s = await server();
    const gm = await gridmanager();
    const ref = resource(s);
    const res = new BoincResourceEmu(gm, ref);
    const j = job(2001, 0, 'all of it\n', { app: 'concat', transferInput: ['data.0.txt', 'b.txt'] });
    fs.writeFileSync(path.join(j.iwd, 'b.txt'), 'bee');
    const batch = res.joinNew(j);
    expect(await res.submit(batch)).toEqual({ rc: 0 });
    s.advanceAll(batch.name, 'DONE');
    await passUntil(res, [j], 'DONE');
    const f = await boincFetchOutput(gm, ref, j);
    expect(f.rc).toBe(0);
    expect(gm.sent.find((l) => l.startsWith('BOINC_FETCH_OUTPUT'))).toMatch(/ \/dev\/null ALL 0$/);
    expect(fs.readFileSync(path.join(j.iwd, 'joined'), 'latin1')).toBe('all of it\nbee');
    expect(fs.existsSync(path.join(j.iwd, 'info'))).toBe(true);
    // Err = "" in the job ad: an empty token; no stderr is written, nothing else changes.
    const again = await boincFetchOutput(gm, ref, { ...j, err: '' });
    expect(gm.sent.filter((l) => l.startsWith('BOINC_FETCH_OUTPUT')).at(-1)).toMatch(/ \S+ {2}ALL 0$/);
    expect(again).toMatchObject({ rc: 0, exitStatus: 0 });
    noAborts(gm);
  });

  test('a query answer lost to the call timeout: the same min_mod_time again reports the change', async () => {
    const s = await server();
    const gm = await gridmanager();
    const ref = resource(s);
    const res = new BoincResourceEmu(gm, ref);
    const j0 = job(3001, 0, 'a');
    const j1 = job(3001, 1, 'b');
    const batch = res.joinNew(j0);
    res.joinNew(j1);
    expect((await res.submit(batch)).rc).toBe(0);
    await res.statusPass();
    await res.statusPass();
    const kept = res.lastQueryTime;
    expect(kept).not.toBe('0');

    s.advanceJob(remoteJobName(j0), 'DONE');
    s.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_batch2', kind: 'slow', delayMs: 1500 });
    expect(await res.statusPass(300)).toBe('error');
    expect(res.queries.at(-1)!.outcome.rc).toBe('timeout');
    expect(res.lastQueryTime).toBe(kept);
    // The late answer arrives and is dropped, as clear_pending() arranged.
    for (let i = 0; i < 40 && gm.droppedResults === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await gm.pollNow();
    }
    expect(gm.droppedResults).toBe(1);
    expect(j0.remoteState).toBe('NOT_STARTED');

    await res.statusPass();
    expect(res.queries.at(-1)!.minModTime).toBe(kept);
    expect(j0.remoteState).toBe('DONE');
    expect(j1.remoteState).toBe('NOT_STARTED');
    noAborts(gm);
  });

  test('two resources over one GAHP: each command lands on its own project, SELECT_PROJECT before each switch', async () => {
    const a = await server({ latencyMs: 50 });
    const b = await server({ latencyMs: 50 });
    const gm = await gridmanager();
    const resA = new BoincResourceEmu(gm, resource(a, 'authA'));
    const resB = new BoincResourceEmu(gm, resource(b, 'authB'));
    const ja = job(4001, 0, 'on a');
    const jb = job(4002, 0, 'on b');
    const batchA = resA.joinNew(ja);
    const batchB = resB.joinNew(jb);
    // Issued back to back: the second is written (after its SELECT_PROJECT) while the first runs.
    const [sa, sb] = await Promise.all([resA.submit(batchA), resB.submit(batchB)]);
    expect([sa.rc, sb.rc]).toEqual([0, 0]);
    expect(a.batches().map((x) => x.name)).toEqual([batchA.name]);
    expect(b.batches().map((x) => x.name)).toEqual([batchB.name]);
    await Promise.all([resA.renewLease(batchA), resB.renewLease(batchB), resA.statusPass(), resB.statusPass()]);
    a.advanceAll(undefined, 'DONE');
    b.advanceAll(undefined, 'DONE');
    await Promise.all([passUntil(resA, [ja], 'DONE'), passUntil(resB, [jb], 'DONE')]);
    const [fa, fb] = await Promise.all([boincFetchOutput(gm, resA.ref, ja), boincFetchOutput(gm, resB.ref, jb)]);
    expect([fa.rc, fb.rc]).toEqual([0, 0]);
    expect(fs.readFileSync(path.join(ja.iwd, 'out'), 'latin1')).toBe('ON A');
    expect(fs.readFileSync(path.join(jb.iwd, 'out'), 'latin1')).toBe('ON B');
    const selects = gm.sent.filter((l) => l.startsWith('BOINC_SELECT_PROJECT'));
    expect(selects.length).toBeGreaterThanOrEqual(4);
    noAborts(gm);
  });

  test('a resource the GAHP cannot use (URL without a scheme, odd authenticator) holds its jobs and leaves the gridmanager running', async () => {
    const s = await server();
    const gm = await gridmanager();
    const good = resource(s);
    // grid_resource = boinc boinc.example.org/proj/ (the scheme forgotten); the authenticator
    // file read with fscanf(" %79s") may hold any bytes but whitespace.
    const noScheme: ResourceRef = { url: s.url.replace(/^http:\/\//, ''), authenticatorFile: good.authenticatorFile };
    const oddAuth: ResourceRef = { url: s.url, authenticatorFile: writeAuthenticatorFile(world.dir, 'odd', 'caf\u00e9\u00e9') };
    const bad1 = await boincPing(gm, noScheme);
    expect(bad1.rc).toBe(1);
    expect(bad1.error).toMatch(/URL/);
    const res = new BoincResourceEmu(gm, oddAuth);
    const j = job(5001, 0, 'x');
    const r = await res.submit(res.joinNew(j));
    expect(r.rc).toBe(1);
    expect(r.error).toMatch(/authenticator/);
    expect(r.error).not.toContain('caf');
    // The good resource still works, in the same GAHP.
    expect(await boincPing(gm, good)).toEqual({ rc: 0 });
    noAborts(gm);
  });

  test('what a job ad can put on a BOINC_SUBMIT line never draws an E (it would abort the gridmanager): an empty argument, a job parameter that is no number', async () => {
    const s = await server();
    const gm = await gridmanager();
    const ref = resource(s);
    const res = new BoincResourceEmu(gm, ref);
    // arguments = "a '' b" (new syntax): ArgList holds an empty argument, sent as an empty token.
    const j0 = job(6001, 0, 'x', { args: ['a', '', 'b'] });
    const r0 = await res.submit(res.joinNew(j0));
    expect(r0.rc).toBe(1);
    expect(r0.error).toMatch(/argument 2/);
    // +rsc_memory_bound = "2GB": a string attribute, sent as it is.
    const res2 = new BoincResourceEmu(gm, ref, 'schedd2@submit.example.org');
    const j1 = job(6002, 0, 'y', { vars: { rsc_memory_bound: '2GB' } });
    const r1 = await res2.submit(res2.joinNew(j1));
    expect(r1.rc).toBe(1);
    expect(r1.error).toMatch(/rsc_memory_bound/);
    expect(s.batches()).toEqual([]);
    noAborts(gm);
  });

  test('a batch missing on the server is submitted again; so is one that exists but is empty (crash recovery)', async () => {
    const s = await server();
    const gm = await gridmanager();
    const ref = resource(s);
    const res = new BoincResourceEmu(gm, ref);
    // Recovered from the schedd: GridJobId names a batch, GridJobStatus unset.
    const missing = 'condor#schedd@submit.example.org#uppercase#1796200000';
    const empty = 'condor#schedd@submit.example.org#uppercase#1796200001';
    const rpc = new BoincClient({ projectUrl: s.url, authenticator: s.authenticator });
    await rpc.createBatch({ batchName: empty, appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 3600 });
    rpc.close();
    const jm = job(7001, 0, 'missing', { remoteBatchName: missing });
    const je = job(7002, 0, 'empty', { remoteBatchName: empty });
    res.joinRecovered(jm);
    res.joinRecovered(je);
    expect(res.batch(missing).status).toBe('MaybeSubmitted');

    await res.statusPass();
    // The first answer: "... no batch named <missing>", parsed exactly; then the query again without it.
    expect(res.queries[0]!.outcome.error).toMatch(/no batch named condor#schedd@submit\.example\.org#uppercase#1796200000$/);
    expect(res.queries[1]!.names).toEqual([empty]);
    expect(res.batch(missing).status).toBe('Unsubmitted');
    expect(res.batch(empty).status).toBe('Unsubmitted');

    expect(await res.submit(res.batch(missing))).toEqual({ rc: 0 });
    expect(await res.submit(res.batch(empty))).toEqual({ rc: 0 });
    expect(s.jobs(missing).map((j) => j.name)).toEqual([remoteJobName(jm)]);
    expect(s.jobs(empty).map((j) => j.name)).toEqual([remoteJobName(je)]);
    s.advanceAll(undefined, 'DONE');
    res.needFullQuery = true;
    await passUntil(res, [jm, je], 'DONE');
    expect((await boincFetchOutput(gm, ref, jm)).rc).toBe(0);
    expect(fs.readFileSync(path.join(jm.iwd, 'out'), 'latin1')).toBe('MISSING');
    noAborts(gm);
  });

  test('the GAHP killed mid-submit: the gridmanager restarts it, finds the batch by a full query and completes the jobs with the same state directory', async () => {
    const s = await server({ latencyMs: 150 });
    const gm1 = await gridmanager();
    const ref = resource(s);
    const res1 = new BoincResourceEmu(gm1, ref);
    const jobs = [0, 1, 2].map((p) => job(8001, p, `job ${p}`));
    const batch = res1.joinNew(jobs[0]!);
    res1.joinNew(jobs[1]!);
    res1.joinNew(jobs[2]!);
    const submitting = res1.submit(batch).catch((e: Error) => e);
    // Killed once the batch exists on the server (created; its jobs not yet submitted).
    for (let i = 0; i < 200 && !s.batches().some((b) => b.name === batch.name); i++) await new Promise((r) => setTimeout(r, 10));
    expect(s.batches().some((b) => b.name === batch.name)).toBe(true);
    await gm1.kill();
    void submitting;

    // The gridmanager EXCEPTs, the schedd starts a new one: jobs come back with their
    // GridJobId (batch name) and without a GridJobStatus.
    const gm2 = await gridmanager();
    const res2 = new BoincResourceEmu(gm2, ref);
    const recovered = jobs.map((j) => ({ ...j, remoteState: '' }));
    for (const j of recovered) res2.joinRecovered(j);
    await res2.statusPass();
    const state = res2.batch(batch.name).status;
    if (state === 'Unsubmitted') expect(await res2.submit(res2.batch(batch.name))).toEqual({ rc: 0 });
    expect(s.jobs(batch.name).map((j) => j.name).sort()).toEqual(recovered.map(remoteJobName).sort());
    s.advanceAll(batch.name, 'DONE');
    res2.needFullQuery = true;
    await passUntil(res2, recovered, 'DONE');
    for (const j of recovered) {
      expect((await boincFetchOutput(gm2, ref, j)).rc).toBe(0);
      expect(fs.readFileSync(path.join(j.iwd, 'out'), 'latin1')).toBe(upper(`job ${j.proc}`));
    }
    expect((await boincRetireBatch(gm2, ref, batch.name)).rc).toBe(0);
    noAborts(gm1, gm2);
  });

  test('a BOINC_SUBMIT slower than the call timeout: the GAHP stops it first (its command timeout sits under the call timeout), so no batch gets jobs after the gridmanager held them', async () => {
    // Scaled down from 290 s under 300 s: every call takes 1.5 s, so the submit needs more
    // than 7 s; the gridmanager gives up at 4 s, the GAHP at 2.5 s.
    const s = await server({ latencyMs: 1500 });
    const gm = await gridmanager({ callTimeoutMs: 4000, env: { BOINC_GAHP_COMMAND_TIMEOUT: '2.5' } });
    const res = new BoincResourceEmu(gm, resource(s));
    const batch = res.joinNew(job(8001, 0, 'slow submit\n'));
    const r = await res.submit(batch);
    expect(r.rc).toBe(1);
    expect(r.error).toMatch(/the command timeout of 2\.5 s passed/);
    expect(batch.status).toBe('Failed');
    // Whatever the server had already been sent settles; no job is created afterwards.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    expect(s.jobs(batch.name)).toEqual([]);
  });

  test('abort one job (condor_rm), fetch the other, then retire the batch', async () => {
    const s = await server();
    const gm = await gridmanager();
    const ref = resource(s);
    const res = new BoincResourceEmu(gm, ref);
    const j0 = job(9001, 0, 'removed');
    const j1 = job(9001, 1, 'kept');
    const batch = res.joinNew(j0);
    res.joinNew(j1);
    expect((await res.submit(batch)).rc).toBe(0);
    await res.statusPass();
    // GM_CANCEL: one job per BOINC_ABORT_JOBS.
    expect(await boincAbortJobs(gm, ref, [remoteJobName(j0)])).toEqual({ rc: 0 });
    expect(s.jobs(batch.name).find((j) => j.name === remoteJobName(j0))!.aborted).toBe(true);
    s.advanceJob(remoteJobName(j1), 'DONE');
    await res.statusPass();
    await passUntil(res, [j1], 'DONE');
    expect((await boincFetchOutput(gm, ref, j1)).rc).toBe(0);
    // GM_DONE_COMMIT of the last job: retire (its errors are ignored by the gridmanager, but there are none).
    expect(await boincRetireBatch(gm, ref, batch.name)).toEqual({ rc: 0 });
    expect(s.batches().find((b) => b.name === batch.name)!.state).toBe(4);
    noAborts(gm);
  });
});
