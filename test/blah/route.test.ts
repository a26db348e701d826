/**
 * `batch boinc` served by the GAHP itself (docs/blah-route.md): bin/boinc-gahp as a child
 * process spoken to as HTCondor's gridmanager speaks BLAH to BOINC_GAHP
 * (test/support/blah-gridmanager.ts), against the test server over HTTP on 127.0.0.1.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';
import { BlahGridmanager, jobAd, submitAdText } from '../support/blah-gridmanager.js';
import { escapeGahpString } from '../support/gridmanager.js';

const LONG = 120_000;
let server: ExtendedTestBoincServer;
let dir: string;
let authFile: string;
const open: BlahGridmanager[] = [];

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-blah-route-');
  authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, `${server.authenticator}\n`, { mode: 0o600 });
});

afterAll(async () => {
  for (const g of open) await g.close().catch(() => undefined);
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Ends every GAHP the tests started so far. */
async function stopAll(): Promise<void> {
  for (const g of open.splice(0)) await g.close().catch(() => undefined);
}

async function gridmanager(stateDir?: string): Promise<BlahGridmanager> {
  const g = await BlahGridmanager.start(server.url, authFile, stateDir ? { stateDir } : {});
  open.push(g);
  return g;
}

/**
 * Polls until `cond` holds or `ms` have passed (the assertion after it says which): bounded
 * by time, not by a count of tries, and generously, for a loaded 2-core machine.
 */
async function eventually(cond: () => boolean, ms = 60_000, tickMs = 100): Promise<void> {
  for (const until = Date.now() + ms; !cond() && Date.now() < until; ) await new Promise((r) => setTimeout(r, tickMs));
}

let seq = 0;
/** A job directory with its input `in`; its own JobDirectory (sandbox id) as the gridmanager makes them. */
function job(input: string, over: Record<string, string | number | boolean> = {}): Record<string, string | number | boolean> & { Iwd: string } {
  const n = seq++;
  const iwd = path.join(dir, `job${n}`);
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, 'in'), input);
  return jobAd({ Iwd: iwd, JobDirectory: `home_bl_127.0.0.1_19718_alice_vm_7.${n}_1796300184`, ...over });
}

const nameOf = (id: string) => id.slice('boinc/'.length);

/**
 * A submit is answered once the job is recorded, before its batch reaches BOINC (the batch
 * fills while the gridmanager sends more): waits until the server has these jobs.
 */
async function onServer(ids: string[]): Promise<void> {
  const want = new Set(ids.map(nameOf));
  const all = () => {
    const have = new Set(server.jobs().map((j) => j.name));
    return [...want].every((n) => have.has(n));
  };
  await eventually(all, 60_000, 50);
  if (all()) return;
  throw new Error(`the server never got ${[...want].filter((n) => !server.jobs().some((j) => j.name === n)).join(', ')}`);
}

test('BLAH_PING answers 0 when the configured project answers', async () => {
  const g = await gridmanager();
  expect(await g.ping()).toEqual({ rc: 0, message: 'No error' });
}, LONG);

test('submits arriving together share one BOINC batch; idle, running, then completed only once the outputs are in place', async () => {
  const g = await gridmanager();
  const ads = [0, 1, 2, 3, 4].map((k) => job(`hello ${k}\n`, { TransferOutputRemaps: `out = result.${k}`, Arguments: `n=${k} '--dollar=$HOME'` }));
  server.clearRpcLog();
  const subs = await g.submitMany(ads);
  for (const s of subs) expect(s).toMatchObject({ rc: 0, message: 'No error' });
  const ids = subs.map((s) => s.jobId);
  expect(new Set(ids).size).toBe(5);
  for (const id of ids) expect((await g.status(id)).jobStatus).toBe(1);
  await onServer(ids);
  expect(server.rpcLog().filter((e) => e.rpc === 'create_batch')).toHaveLength(1);
  const batch = nameOf(ids[0]!).replace(/_\d+$/, '');
  expect(server.jobs(batch).map((j) => j.name).sort()).toEqual(ids.map(nameOf).sort());
  // The arguments reach BOINC as the ad holds them: $HOME is not expanded on the submit host.
  const first = server.jobs(batch).find((j) => j.name === nameOf(ids[0]!))!;
  expect(first.commandLine).toBe('n=0 --dollar=$HOME');

  for (const id of ids) expect((await g.status(id)).jobStatus).toBe(1);
  server.advanceAll(batch, 'IN_PROGRESS');
  expect((await g.waitStatus(ids[0]!, 2)).jobStatus).toBe(2);
  server.advanceAll(batch, 'DONE');
  for (const [k, id] of ids.entries()) {
    const st = await g.waitStatus(id, 4);
    expect(st).toMatchObject({ rc: 0, jobStatus: 4 });
    expect(st.ad).toMatch(/ExitCode = 0/);
    // By the time it says 4 the output is in place under its remapped name, and Out exists.
    expect(fs.readFileSync(path.join(ads[k]!.Iwd, `result.${k}`), 'utf8')).toBe(`HELLO ${k}\n\nargs: n=${k} --dollar=$HOME\n`);
    expect(fs.existsSync(path.join(ads[k]!.Iwd, 'job.out'))).toBe(true);
    expect(fs.existsSync(path.join(ads[k]!.Iwd, 'out'))).toBe(false);
  }
  // Every job finished: the batch is retired.
  await eventually(() => server.rpcLog().some((e) => e.rpc === 'retire_batch'));
  expect(server.rpcLog().some((e) => e.rpc === 'retire_batch')).toBe(true);
}, LONG);

test('a bad job is refused alone, with its own reason; the others of its burst are submitted', async () => {
  const g = await gridmanager();
  const good = job('fine\n');
  const blank = job('x\n', { Arguments: "'hello world'" });
  const missing = job('x\n', { TransferInput: 'nosuch.txt' });
  const unknownApp = job('x\n', { Queue: 'nosuchapp' });
  const creates = server.rpcLog().filter((e) => e.rpc === 'create_batch').length;
  const [a, b, c, d] = await g.submitMany([good, blank, missing, unknownApp]);
  expect(a).toMatchObject({ rc: 0 });
  await onServer([a!.jobId]);
  expect(b!.rc).toBe(1);
  expect(b!.jobId).toBe('N/A');
  expect(b!.message).toMatch(/argument 1 "hello world"/);
  expect(c!.rc).toBe(1);
  expect(c!.message).toMatch(/nosuch\.txt/);
  expect(d!.rc).toBe(1);
  expect(d!.message).toMatch(/nosuchapp/);
  // One batch for the good job only; nothing made for the unknown app.
  expect(server.rpcLog().filter((e) => e.rpc === 'create_batch').length).toBe(creates + 1);
  expect(server.batches().some((bt) => bt.app === 'nosuchapp')).toBe(false);
}, LONG);

test("an input over the project's upload limit holds that job alone, with its own reason; the others of its batch go to BOINC", async () => {
  const logFile = path.join(dir, 'upload-limit.log');
  const g = await BlahGridmanager.start(server.url, authFile, { logFile });
  open.push(g);
  // The test server keeps PHP's default upload_max_filesize (2M), as the GAHP assumes.
  const big = 'x'.repeat(3 * 1024 * 1024) + '\n';
  const ads = [job('one\n'), job(big), job('two\n')];
  const creates = server.rpcLog().filter((e) => e.rpc === 'create_batch').length;
  const subs = await g.submitMany(ads);
  // Each job passed the checks a submit can make alone: every one gets an id.
  for (const s of subs) expect(s).toMatchObject({ rc: 0 });
  const [one, tooBig, two] = subs.map((s) => s.jobId);
  await onServer([one!, two!]);
  const held = await g.waitStatus(tooBig!, 5);
  expect(held.ad).toContain(path.join(ads[1]!.Iwd, 'in'));
  expect(held.ad).toMatch(/upload_max_filesize/);
  // In the one shape of a refusal, naming no BOINC job (none was made); the log names the
  // HTCondor job (cluster.proc from its sandbox id) and its directory.
  expect(held.ad).toMatch(/HoldReason = "job not sent to BOINC: checking input files: input file /);
  expect(/HoldReason = ("[^"]*")/.exec(held.ad)![1]).not.toContain(nameOf(tooBig!));
  const proc = /_(\d+\.\d+)_\d+$/.exec(String(ads[1]!.JobDirectory))![1]!;
  for (let i = 0; i < 50 && !fs.readFileSync(logFile, 'utf8').includes(`HTCondor job ${proc} `); i++) await new Promise((r) => setTimeout(r, 100));
  expect(fs.readFileSync(logFile, 'utf8')).toMatch(new RegExp(`INFO batch boinc: HTCondor job ${proc.replace('.', '\\.')} \\(sandbox \\S+, in ${ads[1]!.Iwd}\\): job not sent to BOINC: checking input files: input file `));
  expect(server.jobs().some((j) => j.name === nameOf(tooBig!))).toBe(false);
  // One batch, with the two good jobs; the big file was never sent.
  expect(server.rpcLog().filter((e) => e.rpc === 'create_batch').length).toBe(creates + 1);
  const batch = nameOf(one!).replace(/_\d+$/, '');
  expect(server.jobs(batch).map((j) => j.name).sort()).toEqual([nameOf(one!), nameOf(two!)].sort());
  server.advanceAll(batch, 'DONE');
  for (const id of [one!, two!]) expect((await g.waitStatus(id, 4)).jobStatus).toBe(4);
  // The batch's jobs are all final (the held one included): it is retired.
  await eventually(() => server.rpcLog().some((e) => e.rpc === 'retire_batch' && e.raw.includes(batch)));
  expect(server.rpcLog().some((e) => e.rpc === 'retire_batch' && e.raw.includes(batch))).toBe(true);
}, LONG);

test('cancel aborts the BOINC job and the status says removed', async () => {
  const g = await gridmanager();
  const { jobId } = await g.submit(job('to cancel\n'));
  // At once: the cancel waits for the job's batch to reach BOINC, then aborts it.
  expect(await g.cancel(jobId)).toEqual({ rc: 0, message: 'No error' });
  expect((await g.status(jobId)).jobStatus).toBe(3);
  expect(server.jobs().find((j) => j.name === nameOf(jobId))!.aborted).toBe(true);
}, LONG);

test('a job BOINC gave up on is held with what the server reports', async () => {
  const g = await gridmanager();
  const { jobId } = await g.submit(job('boom\n', { Queue: 'failing' }));
  await onServer([jobId]);
  server.advanceJob(nameOf(jobId), 'ERROR');
  const st = await g.waitStatus(jobId, 5);
  expect(st.jobStatus).toBe(5);
  expect(st.ad).toMatch(/HoldReason = "BOINC gave up on job [^"]*exit status 7/);
}, LONG);

test('killed with -9 and started again: the ids it gave still resolve, and a repeated submission gets the same job', async () => {
  const stateDir = makeTempDir('boinc-blah-state-');
  try {
    const first = await gridmanager(stateDir);
    const ad = job('once\n');
    const { jobId } = await first.submit(ad);
    await onServer([jobId]);
    await first.gahp.kill('SIGKILL');
    const second = await gridmanager(stateDir);
    expect((await second.status(jobId)).jobStatus).toBe(1);
    // The gridmanager resubmits a job whose id it had not saved: same JobDirectory, same job.
    const again = await second.submit(ad);
    expect(again).toMatchObject({ rc: 0, jobId });
    expect(server.jobs().filter((j) => j.name.startsWith(nameOf(jobId).replace(/_\d+$/, '')))).toHaveLength(1);
    server.advanceJob(nameOf(jobId), 'DONE');
    expect((await second.waitStatus(jobId, 4)).jobStatus).toBe(4);
    expect(fs.readFileSync(path.join(ad.Iwd, 'out'), 'utf8')).toBe('ONCE\n');
  } finally {
    // The GAHPs of this state directory first: one still writing (a retirement) races the removal.
    await stopAll();
    fs.rmSync(stateDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
}, LONG);

test('without a configured project every BLAH command says how to configure it, with the arity the gridmanager asserts', async () => {
  const g = await BlahGridmanager.start('', '', { env: { BOINC_GAHP_PROJECT_URL: '', BOINC_GAHP_AUTHENTICATOR_FILE: '' } });
  open.push(g);
  const p = await g.ping();
  expect(p.rc).toBe(1);
  expect(p.message).toMatch(/BOINC_GAHP_PROJECT_URL/);
  const s = await g.submit(job('x\n'));
  expect(s).toMatchObject({ rc: 1, jobId: 'N/A' });
  const st = await g.status('boinc/blahp-uppercase-mx7ir8sa-1dae41_2');
  expect(st).toMatchObject({ rc: 1, jobStatus: 0, ad: 'N/A' });
}, LONG);

test("started as the gridmanager starts it (no arguments, no BOINC_GAHP_* variables), it reads the project from HTCondor's configuration", async () => {
  // A condor_config_val stand-in answering the one query the GAHP makes, as HTCondor would.
  const bin = path.join(dir, 'condor-bin');
  fs.mkdirSync(bin, { recursive: true });
  const args = path.join(dir, 'condor_config_val.args');
  fs.writeFileSync(path.join(bin, 'condor_config_val'), [
    '#!/bin/sh',
    `printf '%s\\n' "$@" > '${args}'`,
    `printf '# Configuration from machine: test\\nBOINC_GAHP_PROJECT_URL = ${server.url}\\nBOINC_GAHP_AUTHENTICATOR_FILE = ${authFile}\\nBOINC_GAHP_SOMETHING_NEW = 1\\n'`,
    '',
  ].join('\n'), { mode: 0o755 });
  const env: NodeJS.ProcessEnv = { PATH: `${bin}:${process.env.PATH}` };
  const g = await BlahGridmanager.start(undefined, undefined, { env });
  open.push(g);
  expect(await g.ping()).toEqual({ rc: 0, message: 'No error' });
  expect(fs.readFileSync(args, 'utf8').split('\n')).toEqual(['-dump', '-expanded', '^BOINC_GAHP_', '']);
  const { rc, jobId } = await g.submit(job('from condor config\n'));
  expect(rc).toBe(0);
  await onServer([jobId]);
  // A variable in the GAHP's environment comes before HTCondor's configuration.
  const g2 = await BlahGridmanager.start('http://127.0.0.1:1/nothing/', authFile, { env });
  open.push(g2);
  expect((await g2.ping()).rc).toBe(1);
}, LONG);

/**
 * An authenticator file the GAHP cannot read, made as robustly as the machine allows: run
 * as root with a user `nobody` that can run the GAHP from this checkout, the GAHP runs as
 * nobody and the file is root's, mode 0640 (EACCES), fixed as README step 2 sets it up
 * (the file's group becomes nobody's); run as another user, the file is mode 0000 (EACCES),
 * fixed by chmod 0640; else (root, nobody cannot run it) the path goes through a regular
 * file (ENOTDIR), fixed by making that a directory holding the file.
 */
function unreadableAuthenticator(base: string): { file: string; code: string; user?: { uid: number; gid: number }; fix(): void } {
  const nobody = { uid: 65534, gid: 65534 };
  const root = process.getuid?.() === 0;
  const write = (file: string, mode: number) => fs.writeFileSync(file, `${server.authenticator}\n`, { mode });
  if (root && spawnSync(process.execPath, [GAHP_BIN, '--version'], { ...nobody, stdio: 'ignore' }).status === 0) {
    const file = path.join(base, 'auth');
    write(file, 0o640);
    fs.chmodSync(file, 0o640);
    return { file, code: 'EACCES', user: nobody, fix: () => fs.chownSync(file, 0, nobody.gid) };
  }
  if (!root) {
    const file = path.join(base, 'auth');
    write(file, 0o000);
    fs.chmodSync(file, 0o000);
    return { file, code: 'EACCES', fix: () => fs.chmodSync(file, 0o640) };
  }
  const notDir = path.join(base, 'auth.d');
  fs.writeFileSync(notDir, 'a file, not a directory\n');
  const file = path.join(notDir, 'auth');
  return {
    file,
    code: 'ENOTDIR',
    fix: () => {
      fs.rmSync(notDir);
      fs.mkdirSync(notDir);
      write(file, 0o600);
    },
  };
}

test('an authenticator file the GAHP cannot read: it starts anyway, ping and submit name the file and the error; once readable, the same GAHP submits', async () => {
  const base = makeTempDir('boinc-blah-unreadable-');
  fs.chmodSync(base, 0o755);
  try {
    const auth = unreadableAuthenticator(base);
    const stateDir = path.join(base, 'state');
    fs.mkdirSync(stateDir);
    if (auth.user) fs.chownSync(stateDir, auth.user.uid, auth.user.gid);
    const adOf = (input: string) => {
      const ad = job(input);
      fs.chmodSync(ad.Iwd, 0o777);
      fs.chmodSync(path.dirname(ad.Iwd), 0o755);
      return ad;
    };
    // Named in the GAHP's environment (not HTCondor's configuration): it starts all the same.
    const g = await BlahGridmanager.start(server.url, auth.file, { stateDir, ...(auth.user ?? {}) });
    open.push(g);
    const pid = g.gahp.child.pid;
    const before = await g.ping();
    expect(before.rc).toBe(1);
    expect(before.message).toContain(`authenticator file ${auth.file}`);
    expect(before.message).toContain(auth.code);
    expect(before.message).not.toMatch(/no BOINC project is configured/);
    // The advice keeps the file shared by the job owners' group (README step 2).
    expect(before.message).not.toMatch(/chmod 600|chown/);
    if (auth.code === 'EACCES') expect(before.message).toMatch(/chmod 0640/);
    // When the jobs will go after the fix: the gridmanager pings a resource that is down
    // only every GRIDMANAGER_RESOURCE_PROBE_INTERVAL (docs/htcondor-check.md, measured).
    expect(before.message).toMatch(/read again at the next ping or submit: HTCondor pings a batch boinc that is down every GRIDMANAGER_RESOURCE_PROBE_INTERVAL, 300 s by default\)$/);
    const refused = await g.submit(adOf('too early\n'));
    expect(refused).toMatchObject({ rc: 1, jobId: 'N/A' });
    expect(refused.message).toMatch(new RegExp(`^job not sent to BOINC: .*authenticator file ${auth.file.replace(/[.]/g, '\\.')}.*${auth.code}`));
    expect(g.gahp.stderr).toContain(`authenticator file ${auth.file}`);

    auth.fix();
    // Read again at the next ping (at most every few seconds): no restart.
    let after = await g.ping();
    for (let i = 0; i < 60 && after.rc !== 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      after = await g.ping();
    }
    expect(after).toEqual({ rc: 0, message: 'No error' });
    const { rc, jobId } = await g.submit(adOf('in time\n'));
    expect(rc).toBe(0);
    await onServer([jobId]);
    expect(g.gahp.hasExited).toBe(false);
    expect(g.gahp.child.pid).toBe(pid);
    expect(g.gahp.stderr).not.toContain(server.authenticator);
  } finally {
    await stopAll();
    fs.rmSync(base, { recursive: true, force: true });
  }
}, LONG);

test("an authenticator file named by HTCondor's configuration that cannot be read: the ping says which setting named it; readable, the next submit goes", async () => {
  const base = makeTempDir('boinc-blah-condor-auth-');
  try {
    const notDir = path.join(base, 'auth.d');
    fs.writeFileSync(notDir, 'a file\n');
    const file = path.join(notDir, 'auth');
    const bin = path.join(base, 'condor-bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, 'condor_config_val'), [
      '#!/bin/sh',
      `printf 'BOINC_GAHP_PROJECT_URL = ${server.url}\\nBOINC_GAHP_AUTHENTICATOR_FILE = ${file}\\n'`,
      '',
    ].join('\n'), { mode: 0o755 });
    const g = await BlahGridmanager.start(undefined, undefined, { env: { PATH: `${bin}:${process.env.PATH}` } });
    open.push(g);
    const p = await g.ping();
    expect(p.rc).toBe(1);
    expect(p.message).toContain(`authenticator file ${file}: cannot be read: ENOTDIR`);
    expect(p.message).toContain("BOINC_GAHP_AUTHENTICATOR_FILE in HTCondor's configuration");
    fs.rmSync(notDir);
    fs.mkdirSync(notDir);
    fs.writeFileSync(file, `${server.authenticator}\n`, { mode: 0o600 });
    let s = await g.submit(job('after the fix\n'));
    for (let i = 0; i < 60 && s.rc !== 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      s = await g.submit(job('after the fix\n'));
    }
    expect(s.rc).toBe(0);
    await onServer([s.jobId]);
  } finally {
    await stopAll();
    fs.rmSync(base, { recursive: true, force: true });
  }
}, LONG);

test('outputs that cannot be put in place: held, the BOINC job kept; released (a new sandbox id), its result is fetched with no new BOINC job', async () => {
  const g = await gridmanager();
  const ad = job('kept\n', { TransferOutputRemaps: 'out = nodir/out.0', JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_9.0_1796300001' });
  const { jobId } = await g.submit(ad);
  await onServer([jobId]);
  server.advanceJob(nameOf(jobId), 'DONE');
  const held = await g.waitStatus(jobId, 5, 60_000);
  expect(held.jobStatus).toBe(5);
  expect(held.ad).toMatch(/outputs could not be put in place .*nodir.*The result is kept on BOINC/);
  // condor_hold (as the gridmanager cancels a held job): nothing is aborted on BOINC.
  expect(await g.cancel(jobId)).toMatchObject({ rc: 0 });
  expect(server.jobs().find((j) => j.name === nameOf(jobId))!.aborted).toBe(false);
  // The user makes the directory and releases the job: the gridmanager submits it again, with a new sandbox id.
  fs.mkdirSync(path.join(ad.Iwd, 'nodir'));
  const jobsBefore = server.jobs().length;
  const again = await g.submit({ ...ad, JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_9.0_1796300999' });
  expect(again).toMatchObject({ rc: 0, jobId });
  expect(server.jobs().length).toBe(jobsBefore);
  expect((await g.waitStatus(jobId, 4)).jobStatus).toBe(4);
  expect(fs.readFileSync(path.join(ad.Iwd, 'nodir', 'out.0'), 'utf8')).toBe('KEPT\n');
}, LONG);

test('a kept result nobody comes back for: its lease is not renewed, and once it has run out its batch is retired', async () => {
  // --lease-hours 0.01 = 36 s: a batch is renewed once less than half is left.
  const g = await BlahGridmanager.start(server.url, authFile, { env: { BOINC_GAHP_LEASE_HOURS: '0.01' } });
  open.push(g);
  const batchOf = (id: string) => server.batches().find((b) => b.name === nameOf(id).replace(/_\d+$/, ''))!;
  const kept = await g.submit(job('abandoned\n', { TransferOutputRemaps: 'out = nodir/out.0', JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_11.0_1796300001' }));
  await onServer([kept.jobId]);
  server.advanceJob(nameOf(kept.jobId), 'DONE');
  expect((await g.waitStatus(kept.jobId, 5, 60_000)).ad).toMatch(/The result is kept on BOINC/);
  expect(await g.cancel(kept.jobId)).toMatchObject({ rc: 0 });
  // Read once the job is held: until then its job was unfinished, and a slow hold (a loaded
  // machine) may rightly have had the lease renewed once. The batch got the short lease.
  const leaseEnd = batchOf(kept.jobId).expireTime;
  expect(leaseEnd - Date.now() / 1000).toBeLessThan(40);
  // Another batch, its job unfinished: its lease is renewed meanwhile.
  const running = await g.submit(job('running\n'));
  await onServer([running.jobId]);
  const runningLease = batchOf(running.jobId).expireTime;
  // Both are due within one lease (36 s) of now, checked every quarter lease: the kept
  // result's retirement once its lease has run out, the other batch's renewal once less than
  // half of its own is left. Which comes first depends on how long the hold took, so both are
  // waited for, within a bound far past both (a loaded machine runs the GAHP late).
  let retiredSeen = false;
  await eventually(() => {
    const b = batchOf(kept.jobId);
    // Never renewed, and not retired before its lease ran out (the state read, then the clock).
    expect(b.expireTime).toBe(leaseEnd);
    if (b.state === 4) {
      expect(Date.now() / 1000).toBeGreaterThanOrEqual(leaseEnd);
      retiredSeen = true;
    }
    return retiredSeen && batchOf(running.jobId).expireTime > runningLease;
  }, 240_000, 500);
  expect(batchOf(kept.jobId).state).toBe(4);
  expect(batchOf(kept.jobId).expireTime).toBe(leaseEnd);
  expect(Date.now() / 1000).toBeGreaterThanOrEqual(leaseEnd);
  // Given up before the batch is retired: aborted on BOINC (which deletes a finished job's files).
  expect(server.rpcLog().some((e) => e.rpc === 'abort_jobs' && e.raw.includes(`<job_name>${nameOf(kept.jobId)}</job_name>`))).toBe(true);
  expect(batchOf(running.jobId).expireTime).toBeGreaterThan(runningLease);
  expect(batchOf(running.jobId).state).not.toBe(4);
}, 4 * LONG);

test('a kept result whose job never comes back (held, then removed: no cancel comes) is given up when the lease it was kept under runs out, though other jobs keep its batch open and renewed', async () => {
  // --lease-hours 0.01 = 36 s: a batch is renewed once less than half is left.
  const g = await BlahGridmanager.start(server.url, authFile, { env: { BOINC_GAHP_LEASE_HOURS: '0.01' } });
  open.push(g);
  const batchOf = (id: string) => server.batches().find((b) => b.name === nameOf(id).replace(/_\d+$/, ''))!;
  // Submitted together: one batch, one job whose outputs cannot be put in place, one that runs on.
  const [kept, running] = await g.submitMany([
    job('removed\n', { TransferOutputRemaps: 'out = nodir/out.0', JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_12.0_1796300001' }),
    job('runs on\n', { JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_12.1_1796300001' }),
  ]);
  await onServer([kept!.jobId, running!.jobId]);
  expect(batchOf(kept!.jobId).name).toBe(batchOf(running!.jobId).name);
  server.advanceJob(nameOf(running!.jobId), 'IN_PROGRESS');
  server.clearRpcLog();
  const keptLease = batchOf(kept!.jobId).expireTime;
  server.advanceJob(nameOf(kept!.jobId), 'DONE');
  const held = await g.waitStatus(kept!.jobId, 5, 60_000);
  expect(held.ad).toMatch(/The result is kept on BOINC/);
  // condor_rm of the held job: the gridmanager sends nothing. Statuses of the running job go on.
  const abortOf = () => server.rpcLog().find((e) => e.rpc === 'abort_jobs' && e.raw.includes(`<job_name>${nameOf(kept!.jobId)}</job_name>`));
  const until = Math.max(Date.now(), keptLease * 1000) + 90_000;
  while (!abortOf() && Date.now() < until) {
    expect((await g.status(running!.jobId)).jobStatus).toBe(2);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const abort = abortOf();
  expect(abort).toBeDefined();
  // Not before the lease it was kept under ran out, though the batch's was renewed meanwhile;
  // the hold said until when.
  expect(abort!.time).toBeGreaterThanOrEqual(keptLease - 1);
  expect(held.ad).toMatch(/The result is kept on BOINC until \d{4}-\d\d-\d\dT[0-9:.]+Z: fix the cause and release the job before then/);
  expect(batchOf(kept!.jobId).expireTime).toBeGreaterThan(keptLease);
  expect(abort!.raw).not.toContain(`<job_name>${nameOf(running!.jobId)}</job_name>`);
  // Released now, it would run again: the held state says so.
  expect((await g.status(kept!.jobId)).ad).toMatch(/kept on BOINC until .* and is given up: a release runs the job again/);
  // The other job ends: nothing is left and the batch is retired at once.
  server.advanceJob(nameOf(running!.jobId), 'DONE');
  expect((await g.waitStatus(running!.jobId, 4, 60_000)).jobStatus).toBe(4);
  for (let i = 0; i < 120 && batchOf(kept!.jobId).state !== 4; i++) await new Promise((r) => setTimeout(r, 500));
  expect(batchOf(kept!.jobId).state).toBe(4);
}, 3 * LONG);

test('a batch retired over a day ago leaves the start-up path: the next start does not read it, and its jobs still answer', async () => {
  const stateDir = makeTempDir('boinc-blah-archive-');
  const g = await gridmanager(stateDir);
  const ids = (await g.submitMany([job('old 0\n'), job('old 1\n')])).map((s) => s.jobId);
  await onServer(ids);
  const batch = nameOf(ids[0]!).replace(/_\d+$/, '');
  for (const id of ids) server.advanceJob(nameOf(id), 'DONE');
  const done = [];
  for (const id of ids) done.push(await g.waitStatus(id, 4, 60_000));
  expect(done.map((d) => d.jobStatus)).toEqual([4, 4]);
  const batchFile = path.join(stateDir, 'blah', 'batches', `${batch}.json`);
  const retired = () => JSON.parse(fs.readFileSync(batchFile, 'utf8')) as { state: string; retiredAt?: number };
  for (let i = 0; i < 120 && retired().state !== 'retired'; i++) await new Promise((r) => setTimeout(r, 500));
  expect(retired().state).toBe('retired');
  await g.close();
  // A day and more passes (the record's retirement time moved back).
  fs.writeFileSync(batchFile, JSON.stringify({ ...retired(), retiredAt: Date.now() - 25 * 3600 * 1000 }) + '\n');
  // The next start reads it once more and moves it to the archive.
  const log1 = path.join(stateDir, 'gahp1.log');
  const g1 = await BlahGridmanager.start(server.url, authFile, { stateDir, logFile: log1 });
  open.push(g1);
  expect((await g1.status(ids[0]!)).jobStatus).toBe(4);
  await g1.close();
  expect(fs.readFileSync(log1, 'utf8')).toMatch(/batch boinc: 1 batches retired more than a day ago moved to .*archive/);
  expect(fs.existsSync(batchFile)).toBe(false);
  expect(fs.existsSync(path.join(stateDir, 'blah', 'archive', `${batch}.json`))).toBe(true);
  // The start after that reads nothing of it; its jobs answer as before, a cancel of one is harmless.
  const log2 = path.join(stateDir, 'gahp2.log');
  const g2 = await BlahGridmanager.start(server.url, authFile, { stateDir, logFile: log2 });
  open.push(g2);
  for (const [k, id] of ids.entries()) expect(await g2.status(id)).toEqual(done[k]);
  expect(await g2.cancel(ids[1]!)).toMatchObject({ rc: 0 });
  expect((await g2.status(ids[1]!)).jobStatus).toBe(4);
  await g2.close();
  expect(fs.readFileSync(log2, 'utf8')).not.toMatch(/batch boinc: \d+ batches and \d+ finished jobs read/);
}, 3 * LONG);

test("a run's error file holds only that run's stderr; a job never seen running is not reported running while its outputs are fetched", async () => {
  const g = await gridmanager();
  const ad = job('fresh\n', { Err: 'job.err' });
  fs.writeFileSync(path.join(ad.Iwd, 'job.err'), 'stderr of an earlier run\n');
  const { jobId } = await g.submit(ad);
  expect(fs.readFileSync(path.join(ad.Iwd, 'job.err'), 'utf8')).toBe('');
  await onServer([jobId]);
  server.advanceJob(nameOf(jobId), 'DONE');
  const seen = new Set<number>();
  for (const until = Date.now() + 60_000; Date.now() < until; ) {
    const st = await g.status(jobId);
    seen.add(st.jobStatus);
    if (st.jobStatus === 4) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect([...seen].sort()).toEqual(seen.has(1) ? [1, 4] : [4]);
  expect(fs.readFileSync(path.join(ad.Iwd, 'job.err'), 'utf8')).not.toContain('earlier run');
}, LONG);

test('killed with -9 while submit_batch is on its way: the repeated submission completes that batch, one BOINC job per HTCondor job', async () => {
  const stateDir = makeTempDir('boinc-blah-state-');
  try {
    const first = await gridmanager(stateDir);
    const ads = [job('crash 0\n'), job('crash 1\n')];
    server.clearRpcLog();
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'hang' });
    for (const ad of ads) {
      const reply = await first.gahp.request(`BLAH_JOB_SUBMIT ${first.gahp.reqId()} ${escapeGahpString(submitAdText(ad))}`);
      expect(reply).toBe('S');
    }
    await eventually(() => server.rpcLog().some((e) => e.rpc === 'submit_batch'), 60_000, 50);
    expect(server.rpcLog().some((e) => e.rpc === 'submit_batch')).toBe(true);
    await first.gahp.kill('SIGKILL');
    server.clearFaults();
    // The gridmanager's new GAHP gets the same submissions again (the same JobDirectory each).
    const second = await gridmanager(stateDir);
    const again = await second.submitMany(ads);
    for (const r of again) expect(r.rc).toBe(0);
    const batch = nameOf(again[0]!.jobId).replace(/_\d+$/, '');
    expect(nameOf(again[1]!.jobId).startsWith(batch)).toBe(true);
    // The new GAHP completes the batch the killed one left (at start-up, without waiting to be asked).
    await onServer(again.map((r) => r.jobId));
    expect(server.jobs(batch).map((j) => j.name).sort()).toEqual(again.map((r) => nameOf(r.jobId)).sort());
    expect(server.rpcLog().filter((e) => e.rpc === 'create_batch')).toHaveLength(1);
  } finally {
    // The GAHPs of this state directory first: one still writing (a retirement) races the removal.
    await stopAll();
    fs.rmSync(stateDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
}, LONG);
