/**
 * `boinc-gahp submit`'s clusters as things a person names and comes back to (issue 43):
 * each case of the issue through bin/boinc-gahp against the test server. A `$(Cluster)`
 * file's second cluster resumes; `--new` strands no older cluster; a resume from another
 * directory is no change; a batch that vanished from the server is reported, not submitted
 * again behind the person's back; an account the server refuses ends the wait, and a
 * corrected authenticator file is picked up.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { runCli, startCli, type RunResult } from './cli-support.js';

let own: TestBoincServer;
let dir: string;

beforeEach(async () => {
  // A server per test: jobs finish only when the test says so, batches are counted.
  own = await startTestServer();
  dir = makeTempDir('boinc-gahp-clusters-');
  fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'in.txt'), 'abc\n');
});
afterEach(async () => {
  await own.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const state = () => path.join(dir, 'state');
const submit = (file: string, ...extra: string[]) =>
  runCli(['--state-dir', state(), 'submit', file, '--poll', '0.3', ...extra], { cwd: dir });
/** Runs a command the program printed, exactly as printed, through sh in `cwd`. */
const typed = (command: string, cwd = dir) => startCli(['-c', command], { command: 'sh', cwd }).exited;

function writeSubmitFile(name: string, lines: string[], where = dir): void {
  const head = ['executable = uppercase', `grid_resource = boinc ${own.url}`, 'boinc_authenticator_file = auth.txt'];
  fs.writeFileSync(path.join(where, name), [...head, ...lines].join('\n') + '\n');
}

/** Uppercase jobs with argument `arg`, outputs out.$(Cluster).$(Process) as the README writes them. */
const clusterFile = (arg: string, jobs = 2) => writeSubmitFile('job.sub', [
  'transfer_input_files = in.txt', 'transfer_output_files = out',
  'transfer_output_remaps = "out = out.$(Cluster).$(Process)"', `arguments = ${arg}`, `queue ${jobs}`,
]);

const ok = (r: RunResult, what: string): RunResult => {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r;
};

const records = () => JSON.parse(fs.readFileSync(path.join(state(), 'submit', 'clusters.json'), 'utf8')) as
  { entries: Record<string, { cluster: number; leaseUntil: Record<string, number>; batches: Record<string, string> }> };

test('(1) the resume command printed for a $(Cluster) file\'s second cluster resumes it', async () => {
  clusterFile('a');
  const first = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
  await first.waitFor(/^submitted boinc-gahp-/m);
  own.advanceAll();
  ok(await first.exited, 'cluster 1');

  clusterFile('b');
  const second = ok(await submit('job.sub', '--no-wait'), 'the edited file');
  expect(second.stdout).toMatch(/^cluster 2: 2 jobs/m);
  const hint = /^submitted; to wait for the jobs and fetch their outputs, run: (.+)$/m.exec(second.stdout)![1]!;
  own.advanceAll();
  const resumed = ok(await typed(hint), `the hint ${hint}`);
  expect(resumed.stdout).toMatch(/^cluster 2: 2 jobs done, outputs fetched; 0 failed$/m);
  expect(own.batches()).toHaveLength(2);
  for (const p of [0, 1]) expect(fs.readFileSync(path.join(dir, `out.2.${p}`), 'latin1')).toBe(`ABC\n\nargs: b\n`);
});

/** Cluster 1 of arguments a (done on BOINC, nothing fetched), then the edited file as cluster 2 with --new: the command it names to finish cluster 1. */
async function newBesideUnfetched(): Promise<string> {
  clusterFile('a', 3);
  ok(await submit('job.sub', '--no-wait'), 'cluster 1');
  own.advanceAll();
  clusterFile('b', 3);
  const refused = await submit('job.sub', '--no-wait');
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/to finish cluster 1 first, run: \S+ --state-dir \S+ submit --cluster 1;/);
  const fresh = ok(await submit('job.sub', '--no-wait', '--new'), '--new');
  expect(fresh.stdout).toMatch(/^cluster 2: 3 jobs/m);
  return /^cluster 1 \(also from job\.sub\) is not finished: to finish it, run: (.+)$/m.exec(fresh.stdout)![1]!;
}

test('(2) after --new the older cluster is finished by the command the tool names, even with the file edited, and its lease is renewed meanwhile', async () => {
  clusterFile('a', 3);
  ok(await submit('job.sub', '--no-wait'), 'cluster 1');
  own.advanceAll();
  // As if hours had passed: cluster 1's lease runs out soon. Any run renews it.
  const clusters = path.join(state(), 'submit', 'clusters.json');
  const soon = Math.floor(Date.now() / 1000) + 600;
  const b1 = Object.values(records().entries[1]!.batches)[0]!;
  const text = JSON.parse(fs.readFileSync(clusters, 'utf8')) as ReturnType<typeof records>;
  text.entries[1]!.leaseUntil[b1] = soon;
  fs.writeFileSync(clusters, JSON.stringify(text));

  clusterFile('b', 3);
  const fresh = ok(await submit('job.sub', '--no-wait', '--new'), '--new');
  const finish = /^cluster 1 \(also from job\.sub\) is not finished: to finish it, run: (.+)$/m.exec(fresh.stdout)![1]!;
  const renewed = records().entries[1]!.leaseUntil[b1]!;
  expect(renewed).toBeGreaterThan(Date.now() / 1000 + 5 * 3600);
  expect(own.batches().find((b) => b.name === b1)!.expireTime).toBe(renewed);

  // The file says b now; the command finishes cluster 1 with its own jobs (arguments a).
  const done = ok(await typed(finish), `the hint ${finish}`);
  expect(done.stdout).toMatch(/^cluster 1: 3 jobs done, outputs fetched; 0 failed$/m);
  for (const p of [0, 1, 2]) expect(fs.readFileSync(path.join(dir, `out.1.${p}`), 'latin1')).toBe('ABC\n\nargs: a\n');
  expect(own.batches()).toHaveLength(2);
});

test('(2) restoring the original file after --new resumes the older, unfetched cluster: no new BOINC job', async () => {
  await newBesideUnfetched();
  own.advanceAll();
  ok(await submit('job.sub'), 'cluster 2');
  clusterFile('a', 3);
  const jobs = own.jobs().length;
  const restored = ok(await submit('job.sub'), 'the restored file');
  expect(restored.stdout).toMatch(/^cluster 1: 3 jobs done, outputs fetched; 0 failed$/m);
  expect(own.jobs().length).toBe(jobs);
  expect(own.batches()).toHaveLength(2);
  for (const p of [0, 1, 2]) expect(fs.readFileSync(path.join(dir, `out.1.${p}`), 'latin1')).toBe('ABC\n\nargs: a\n');
});

test('(3) a resume from the parent directory resolves relative paths from where the file was submitted: nothing submitted again', async () => {
  const work = path.join(dir, 'work', 'cwd');
  fs.mkdirSync(work, { recursive: true });
  fs.copyFileSync(path.join(dir, 'auth.txt'), path.join(work, 'auth.txt'));
  fs.writeFileSync(path.join(work, 'c.txt'), 'from cwd\n');
  writeSubmitFile('c.sub', ['transfer_input_files = c.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Process)"', 'queue 2'], work);
  ok(await runCli(['--state-dir', state(), 'submit', 'c.sub', '--no-wait'], { cwd: work }), 'the first submit');
  own.advanceAll();
  const jobs = own.jobs().length;
  const resumed = ok(await runCli(['--state-dir', state(), 'submit', 'work/cwd/c.sub', '--poll', '0.3'], { cwd: dir }), 'the resume from the parent');
  expect(resumed.stdout).toMatch(/^cluster 1: 2 jobs done, outputs fetched; 0 failed$/m);
  expect(resumed.stderr).toContain(`relative paths in work/cwd/c.sub are read from ${work}, where cluster 1 was submitted`);
  expect(own.jobs().length).toBe(jobs);
  for (const p of [0, 1]) expect(fs.readFileSync(path.join(work, `out.${p}`), 'latin1')).toBe('FROM CWD\n');

  // Complete now: the command that submits it again as a new cluster runs where it was submitted from.
  const complete = ok(await runCli(['--state-dir', state(), 'submit', 'work/cwd/c.sub'], { cwd: dir }), 'the complete cluster');
  const hint = /^cluster 1 is already complete \(batches retired\); to submit work\/cwd\/c\.sub again as a new cluster \(as it reads now\), run: (cd \S+ && .+)$/m.exec(complete.stdout)![1]!;
  fs.rmSync(path.join(work, 'out.0'));
  const again = startCli(['-c', hint], { command: 'sh', cwd: dir });
  await again.waitFor(/^submitted boinc-gahp-/m);
  own.advanceAll();
  ok(await again.exited, `the hint ${hint}`);
  expect(own.batches()).toHaveLength(2);
  expect(fs.readFileSync(path.join(work, 'out.0'), 'latin1')).toBe('FROM CWD\n');
});

test('(4) a batch that vanished from the server before its lease ended is reported as vanished; nothing is submitted again until the command it names', async () => {
  writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'queue']);
  const first = ok(await submit('job.sub', '--no-wait'), 'the first submit');
  const submitted = /^batch (\S+)$/m.exec(first.stdout)![1]!;
  // As if an administrator had removed it (or the server been restored from a backup):
  // the record names a batch, submitted and leased, that the server does not have.
  const vanished = `${submitted}0`;
  const clusters = path.join(state(), 'submit', 'clusters.json');
  fs.writeFileSync(clusters, fs.readFileSync(clusters, 'utf8').split(submitted).join(vanished));
  const jobs = own.jobs().length;

  const r = await submit('job.sub');
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(new RegExp(`^boinc-gahp: batch ${vanished.replace(/[#.]/g, '\\$&')} vanished from the server before its lease ended \\(removed there, or the server restored from an earlier backup\\): its 1 unfinished job is not on the server; nothing was submitted again\\. To submit it again, run: (.+)$`, 'm'));
  expect(own.jobs().length).toBe(jobs);
  expect(own.batches().some((b) => b.name === vanished)).toBe(false);
  // Asked again, the same answer: still nothing submitted.
  expect((await submit('job.sub')).code).toBe(1);
  expect(own.jobs().length).toBe(jobs);

  const again = /To submit it again, run: (.+)$/m.exec(r.stderr)![1]!;
  const resubmitted = startCli(['-c', again], { command: 'sh', cwd: dir });
  await resubmitted.waitFor(/^submitted boinc-gahp-/m);
  own.advanceAll();
  ok(await resubmitted.exited, `the hint ${again}`);
  expect(own.batches().filter((b) => b.name === vanished).map((b) => b.jobNames.length)).toEqual([1]);
  expect(fs.readFileSync(path.join(dir, 'out'), 'latin1')).toBe('ABC\n');
});

test('(5) an account the server refuses ends the wait with a clear message after one more read of the authenticator file', async () => {
  writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'queue 2']);
  ok(await submit('job.sub', '--no-wait'), 'the first submit');
  fs.writeFileSync(path.join(dir, 'auth.txt'), 'ffffffffffffffffffffffffffffffff\n', { mode: 0o600 });
  const r = await runCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(new RegExp(`^boinc-gahp: ${own.url.replace(/[.]/g, '\\.')} refuses the account: bad authenticator \\(the one in ${path.join(dir, 'auth.txt').replace(/[.]/g, '\\.')}, read again\\); put the account's authenticator there and resume: \\S+ --state-dir \\S+ submit job\\.sub$`, 'm'));
  expect(r.stdout + r.stderr).not.toContain('will retry');
});

test('(5) an authenticator file corrected while submit waits is picked up', async () => {
  writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Process)"', 'queue 2']);
  ok(await submit('job.sub', '--no-wait'), 'the first submit');
  fs.writeFileSync(path.join(dir, 'auth.txt'), 'ffffffffffffffffffffffffffffffff\n', { mode: 0o600 });
  // The first status query is answered late: the file is corrected before its refusal comes.
  own.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_batch2', kind: 'late', delayMs: 4000 });
  const run = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
  await run.waitFor(/^cluster 1: /m);
  fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
  own.advanceAll();
  const r = ok(await run.exited, 'the waiting submit');
  expect(r.stdout).toMatch(/^cluster 1: 2 jobs done, outputs fetched; 0 failed$/m);
  expect(r.stderr).toMatch(/bad authenticator; read \S+auth\.txt again: a new authenticator, used from now on/);
  for (const p of [0, 1]) expect(fs.readFileSync(path.join(dir, `out.${p}`), 'latin1')).toBe('ABC\n');
});

describe('smaller points of the same family (issue 43, item 6)', () => {
  test('cancel of a complete cluster gives nothing up and status keeps calling it finished; status N and status --json show clusters, with the failures counted and the command that finishes one', async () => {
    writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'queue 2']);
    const first = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await first.waitFor(/^submitted boinc-gahp-/m);
    own.advanceAll();
    ok(await first.exited, 'cluster 1');
    const c = await runCli(['--state-dir', state(), 'cancel', '1'], { cwd: dir });
    expect(c.code).toBe(0);
    expect(c.stdout).toBe(`cluster 1 (${dir}/job.sub) is complete (its batches are retired): nothing to cancel\n`);
    writeSubmitFile('two.sub', ['transfer_input_files = in.txt', 'queue 3']);
    ok(await submit('two.sub', '--no-wait'), 'cluster 2');

    const st = await runCli(['--state-dir', state(), 'status'], { cwd: dir });
    expect(st.stdout).toMatch(new RegExp(`^cluster 1 of ${dir}/job\\.sub: finished \\(1 batch\\)$`, 'm'));
    expect(st.stdout).toMatch(new RegExp(`^cluster 2 of ${dir}/two\\.sub: not finished \\(1 batch\\)\\n {2}to finish it, run: \\S+ --state-dir \\S+ submit --cluster 2$`, 'm'));
    const one = await runCli(['--state-dir', state(), 'status', '2'], { cwd: dir });
    expect(one.stdout).not.toMatch(/^cluster 1 /m);
    expect(one.stdout).toMatch(/^ {2}cluster 2 of /m);
    const json = JSON.parse((await runCli(['--state-dir', state(), 'status', '--json'], { cwd: dir })).stdout) as
      { clusters: Array<{ cluster: number; state: string; jobs: number; failed: number; next?: string }>; batches: Array<{ cluster: number }> };
    expect(json.clusters.map((x) => [x.cluster, x.state, x.jobs, x.failed])).toEqual([[1, 'finished', 2, 0], [2, 'not finished', 3, 0]]);
    expect(json.clusters[1]!.next).toMatch(/^to finish it, run: \S+ --state-dir \S+ submit --cluster 2$/);
    expect(json.batches.map((b) => b.cluster)).toEqual([2]);
  });

  test('a cluster cancelled while a submit waits on it: the submit says cancelled, status says cancelled', async () => {
    writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'queue 2']);
    const waiting = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await waiting.waitFor(/^submitted boinc-gahp-/m);
    ok(await runCli(['--state-dir', state(), 'cancel', '1'], { cwd: dir }), 'cancel');
    const r = await waiting.exited;
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^cluster 1 was cancelled \(boinc-gahp cancel\) while this run waited: 0 jobs done, outputs fetched; 2 cancelled$/m);
    const st = await runCli(['--state-dir', state(), 'status', '--all'], { cwd: dir });
    expect(st.stdout).toMatch(/^cluster 1 of \S+: cancelled \(1 batch\)$/m);
  });

  test('--rerun-failed runs just the failed jobs of a finished cluster again; status counts the failures', async () => {
    writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Cluster).$(Process)"', 'error = err.$(Process)', 'queue 3']);
    const first = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await first.waitFor(/^submitted boinc-gahp-/m);
    const [j0, j1, j2] = own.batches()[0]!.jobNames;
    own.advanceJob(j0!, 'DONE');
    own.advanceJob(j1!, 'ERROR');
    own.advanceJob(j2!, 'DONE');
    const r = await first.exited;
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^cluster 1 is already complete|^cluster 1: 2 jobs done, outputs fetched; 1 failed$/m);
    const st = await runCli(['--state-dir', state(), 'status'], { cwd: dir });
    expect(st.stdout).toMatch(/^cluster 1 of \S+: finished, 1 job failed \(1 batch\)$/m);
    const again = await submit('job.sub');
    expect(again.stdout).toMatch(/to run just its failed jobs again, run: \S+ --state-dir \S+ submit --cluster 1 --rerun-failed$/m);
    const hint = /to run just its failed jobs again, run: (.+)$/m.exec(again.stdout)![1]!;

    const rerun = startCli(['-c', hint], { command: 'sh', cwd: dir });
    await rerun.waitFor(/^submitted boinc-gahp-/m);
    own.advanceAll();
    const done = ok(await rerun.exited, `the hint ${hint}`);
    expect(done.stdout).toMatch(/^cluster 2 \(the failed jobs of cluster 1, run again\): 1 job in 1 batch/m);
    expect(done.stdout).toMatch(/^cluster 2: 1 job done, outputs fetched; 0 failed$/m);
    expect(own.batches()[1]!.jobNames).toHaveLength(1);
    // The job as it was: its output where cluster 1's job 1 would have put it.
    expect(fs.readFileSync(path.join(dir, 'out.1.1'), 'latin1')).toBe('ABC\n');
    const later = await submit('job.sub');
    expect(later.stdout).toMatch(/its failed jobs were run again as cluster 2: \S+ --state-dir \S+ status 2$/m);
  });

  test("a second cluster's error file starts fresh, as condor_submit starts it", async () => {
    writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'error = job.err', 'arguments = a', 'queue']);
    const one = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await one.waitFor(/^submitted boinc-gahp-/m);
    own.advanceAll();
    ok(await one.exited, 'cluster 1');
    const firstErr = fs.readFileSync(path.join(dir, 'job.err'), 'latin1');
    expect(firstErr.length).toBeGreaterThan(0);
    writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'error = job.err', 'arguments = b', 'queue']);
    const two = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await two.waitFor(/^submitted boinc-gahp-/m);
    own.advanceAll();
    ok(await two.exited, 'cluster 2');
    // One job's stderr, not two.
    expect(fs.readFileSync(path.join(dir, 'job.err'), 'latin1').length).toBe(firstErr.length);
  });
});

test("doctor job.sub checks the project and authenticator file the submit file names (issue 43, item 6)", async () => {
  writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'queue']);
  const none = path.join(dir, 'none');
  const env = { PATH: none, BLAHPD_LOCATION: none, GLITE_LOCATION: none, BLAHPD_CONFIG_LOCATION: path.join(none, 'blah.config') };
  const doctor = () => runCli(['--state-dir', state(), 'doctor', 'job.sub'], { cwd: dir, env, timeoutMs: 60_000 });
  const good = await doctor();
  expect(good.stderr).not.toMatch(/too many arguments/);
  expect(good.stdout).toMatch(/^ok {4}account: accepted/m);
  expect(good.stdout).toContain(own.url);
  fs.writeFileSync(path.join(dir, 'auth.txt'), 'ffffffffffffffffffffffffffffffff\n', { mode: 0o600 });
  const bad = await doctor();
  expect(bad.code).toBe(1);
  expect(bad.stdout).toMatch(new RegExp(`^FAIL {2}account: refused: bad authenticator {2}-> fix: .* into ${path.join(dir, 'auth.txt').replace(/\./g, '\\.')}$`, 'm'));
});

test('Ctrl-C while outputs are fetched: the last lines count the jobs finished on BOINC whose outputs are not fetched yet as such, not as running (issue 43, item 6)', async () => {
  writeSubmitFile('job.sub', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Process)"', 'queue 6']);
  ok(await submit('job.sub', '--no-wait'), 'the first submit');
  own.advanceAll();
  // Each download is slow: the Ctrl-C comes while the first outputs are being fetched.
  own.injectFault({ script: 'get_output.php', kind: 'slow', delayMs: 3000, count: 1000 });
  const run = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
  while (!own.rpcLog().some((e) => e.script === 'get_output.php')) await new Promise((resolve) => setTimeout(resolve, 50));
  run.child.kill('SIGINT');
  const r = await run.exited;
  expect(r.code).toBe(130);
  const summary = /^cluster 1: (\d+) jobs? done, outputs fetched; (\d+) finished on BOINC, outputs not fetched yet; 0 not finished; 0 failed$/m.exec(r.stdout);
  expect(summary).not.toBeNull();
  expect(Number(summary![1]) + Number(summary![2])).toBe(6);
  expect(Number(summary![2])).toBeGreaterThan(0);
  expect(r.stdout + r.stderr).not.toMatch(/[1-9][0-9]* running/);
});
