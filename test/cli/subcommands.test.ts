/**
 * Subcommands for people, each through bin/boinc-gahp: ping, status, fetch, abort, retire,
 * lease, with their exit codes (0 ok, 1 failure reported, 2 usage/configuration), plus
 * --help, --version and environment-variable configuration.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, stderrFilePattern, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { GAHP_VERSION } from '../../gahp/version.js';
import { GahpProcess, makeTempDir, REPO_ROOT } from '../support/gahp-process.js';
import { runCli } from './cli-support.js';

let server: TestBoincServer;
let dir: string;
let authFile: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-gahp-sub-');
  authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, server.authenticator + '\n', { mode: 0o600 });
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const stateDir = () => path.join(dir, 'state');
const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(['--state-dir', stateDir(), '--project-url', server.url, '--authenticator-file', authFile, ...args], { cwd: dir, env });

test('--version, --help, usage errors', async () => {
  const [v, h, bogus, lease, timeout, noProject, badAuth] = await Promise.all([
    runCli(['--version']),
    runCli(['--help']),
    runCli(['--bogus']),
    runCli(['lease']),
    runCli(['--rpc-timeout', 'soon', 'ping']),
    runCli(['ping']),
    runCli(['--project-url', server.url, '--authenticator-file', path.join(dir, 'nope'), 'ping']),
  ]);
  expect(v).toMatchObject({ code: 0, stdout: `${GAHP_VERSION}\n` });
  expect(h.code).toBe(0);
  for (const word of ['ping', 'status', 'query', 'fetch', 'abort', 'retire', 'lease', 'submit', 'BOINC_GAHP_STATE_DIR', 'BOINC_GAHP_PROJECT_URL',
    'BOINC_GAHP_AUTHENTICATOR_FILE', 'BOINC_GAHP_LOG', 'BOINC_GAHP_RPC_TIMEOUT', 'BOINC_GAHP_CONCURRENCY', 'Exit codes']) {
    expect(h.stdout).toContain(word);
  }
  // Every command, blahp install with what it is for, and every exit status, as README says.
  expect(h.stdout).toMatch(/\n {2}blahp .*install \[<libexec dir>\] \[--force\].*uninstall \[<libexec dir>\]/s);
  expect(h.stdout.replace(/\s+/g, ' ')).toContain('grid_resource = batch boinc');
  const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const readmeCodes = [...readme.matchAll(/^\| (\d+) \|/gm)].map((m) => m[1]);
  const helpCodes = [...h.stdout.slice(h.stdout.indexOf('Exit codes:')).matchAll(/^ {2}(\d+) /gm)].map((m) => m[1]);
  expect(helpCodes).toEqual(['0', '1', '2', '70', '130']);
  expect(readmeCodes).toEqual(helpCodes);
  expect(bogus.code).toBe(2);
  expect(bogus.stderr).toMatch(/unknown option '--bogus'/);
  expect(lease.code).toBe(2);
  expect(timeout.code).toBe(2);
  expect(noProject.code).toBe(2);
  expect(noProject.stderr).toMatch(/^boinc-gahp: project URL: none given {2}-> fix: give --project-url/);
  expect(badAuth.code).toBe(2);
  expect(badAuth.stderr).toMatch(/^boinc-gahp: authenticator file .*nope: cannot be read: ENOENT/);
});

test('an unknown command gets the one meant', async () => {
  const typo = await runCli(['--state-dir', stateDir(), 'submitt', 'job.sub']);
  expect(typo.code).toBe(2);
  expect(typo.stderr).toMatch(/^error: unknown command 'submitt'\n\(Did you mean submit\?\)\n/);
  // Option values are not taken for commands; no command at all is still the GAHP.
  const gahp = await runCli(['--state-dir', stateDir(), '--log-level', 'info', '--protocol']);
  expect(gahp.code).toBe(0);
  expect(gahp.stdout).toMatch(/^\$GahpVersion: /);
});

test('a bad project URL or authenticator file: exit 2 in the words doctor uses, from ping, submit and the GAHP (which starts, for a file it cannot read)', async () => {
  const subFile = path.join(dir, 'conf.sub');
  fs.writeFileSync(subFile, 'executable = uppercase\nqueue\n');
  for (const [url, auth] of [['htp://127.0.0.1/x/', authFile], [server.url, path.join(dir, 'nosuch.auth')]] as const) {
    const settings = ['--state-dir', stateDir(), '--project-url', url, '--authenticator-file', auth];
    const doctor = await runCli([...settings, 'doctor'], { cwd: dir });
    const fails = doctor.stdout.split('\n').filter((l) => l.startsWith('FAIL  ')).map((l) => l.slice(6));
    expect(fails).toHaveLength(1);
    for (const args of [['ping'], ['submit', subFile], ['--protocol']]) {
      const r = await runCli([...settings, ...args], { cwd: dir });
      if (args[0] === '--protocol' && url === server.url) {
        // The GAHP on a pipe starts without the file (issue 44, item 7): batch boinc's
        // commands say what is wrong with it, and it is read again until it can be used.
        expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: `boinc-gahp: warning: batch boinc cannot use project ${server.url}: ${fails[0]} (named by --authenticator-file (or BOINC_GAHP_AUTHENTICATOR_FILE); read again at the next ping or submit: HTCondor pings a batch boinc that is down every GRIDMANAGER_RESOURCE_PROBE_INTERVAL, 300 s by default)\n` });
        continue;
      }
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 2, stderr: `boinc-gahp: ${fails[0]}\n` });
    }
  }
});

test('ping: 0 when the project answers and accepts the account, 1 when it refuses it; never prints the authenticator', async () => {
  const ok = await cli(['ping']);
  expect(ok.code).toBe(0);
  // First the way the RPCs go (which proxy, which certificates are trusted), then the answer.
  expect(ok.stdout).toMatch(/^proxy: .*\ntrust: node's bundled roots.*\nok: http:\/\/127\.0\.0\.1:[0-9]+\/\S+ answered in [0-9]+ ms and accepts the account\n$/);
  // Configured through the environment instead of options.
  const viaEnv = await runCli(['ping'], { env: { BOINC_GAHP_PROJECT_URL: server.url, BOINC_GAHP_AUTHENTICATOR_FILE: authFile, BOINC_GAHP_STATE_DIR: stateDir() } });
  expect(viaEnv.code).toBe(0);

  const badFile = path.join(dir, 'bad-auth');
  fs.writeFileSync(badFile, 'ffffffffffffffffffffffffffffffff\n');
  const bad = await runCli(['--state-dir', stateDir(), '--project-url', server.url, '--authenticator-file', badFile, 'ping']);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/the project answers, but refuses the account: .*bad authenticator/);
  for (const r of [ok, bad]) expect(r.stdout + r.stderr).not.toContain(server.authenticator);
});

test('status, lease, fetch, abort, retire on a batch submitted through the GAHP', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'hello\n');
  fs.writeFileSync(path.join(dir, 'job.sub'), [
    'executable = uppercase',
    'transfer_input_files = in.txt',
    'arguments = x$(Process)',
    'queue 3',
  ].join('\n'));
  const sub = await cli(['submit', 'job.sub', '--no-wait']);
  expect(sub.code).toBe(0);
  const batch = /^batch (\S+)$/m.exec(sub.stdout)![1]!;

  const st = await cli(['status', '--json']);
  expect(st.code).toBe(0);
  const rows = (JSON.parse(st.stdout) as { batches: Array<Record<string, unknown>> }).batches;
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ batch, app: 'uppercase', state: 'submitted', jobs: 3, project: server.url });
  expect(rows[0]!.leaseExpiresIn).toBeGreaterThan(6 * 3600 - 120);
  const human = await cli(['status']);
  expect(human.stdout).toContain(batch);
  // A 6-hour lease seen a moment later: 5h59m, or 6h00m when the status rounds up within the same second.
  expect(human.stdout).toMatch(/lease until \S+ \((?:5h5[0-9]|6h00)m left\)/);
  expect(human.stdout).toMatch(/3 jobs: /);

  const q = await cli(['query', batch, '--json']);
  expect(q.code).toBe(0);
  const qj = JSON.parse(q.stdout) as { serverTime: string; batches: Array<{ batch: string; jobs: Record<string, string> }> };
  expect(Object.keys(qj.batches[0]!.jobs).sort()).toEqual([0, 1, 2].map((p) => `${batch}_1.${p}`));
  for (const st of Object.values(qj.batches[0]!.jobs)) expect(['NOT_STARTED', 'IN_PROGRESS']).toContain(st);
  const qmissing = await cli(['query', 'no-such-batch']);
  expect(qmissing.code).toBe(1);
  expect(qmissing.stderr).toMatch(/no batch named no-such-batch/);

  const until = Math.floor(Date.now() / 1000) + 600;
  const lease = await cli(['lease', batch, '--until', String(until)]);
  expect(lease.code).toBe(0);
  expect(server.batches().find((b) => b.name === batch)!.expireTime).toBe(until);
  expect((JSON.parse((await cli(['status', '--json'])).stdout) as { batches: Array<{ leaseExpiresAt?: number }> }).batches[0]!.leaseExpiresAt).toBe(until);

  // fetch before the job is done: the GAHP's error, exit 1.
  const early = await cli(['fetch', `${batch}_1.0`, '-d', 'outs']);
  expect(early.code).toBe(1);
  expect(early.stderr).toMatch(/BOINC_FETCH_OUTPUT failed: /);

  server.advanceJob(`${batch}_1.0`, 'DONE');
  fs.mkdirSync(path.join(dir, 'outs'));
  const f = await cli(['fetch', `${batch}_1.0`, '-d', 'outs', '--stderr', 'job.err', '-f', 'out=renamed.txt']);
  expect(f.code).toBe(0);
  expect(f.stdout).toMatch(/exit status 0, wall clock 12\.5/);
  expect(fs.readFileSync(path.join(dir, 'outs', 'renamed.txt'), 'utf8')).toBe('HELLO\n\nargs: x0\n');
  expect(fs.readFileSync(path.join(dir, 'outs', 'job.err'), 'utf8')).toMatch(stderrFilePattern('uppercase: 6 bytes\n'));

  const ab = await cli(['abort', `${batch}_1.1`, `${batch}_1.2`]);
  expect(ab.code).toBe(0);
  expect(server.jobs(batch).filter((j) => j.aborted).map((j) => j.name).sort()).toEqual([`${batch}_1.1`, `${batch}_1.2`]);
  expect((await cli(['abort', 'no#such#job#1.0'])).code).toBe(1);

  const rt = await cli(['retire', batch]);
  expect(rt.code).toBe(0);
  expect(server.batches().find((b) => b.name === batch)!.state).toBe(4);
  expect((JSON.parse((await cli(['status', '--json'])).stdout) as { batches: unknown[] }).batches).toEqual([]);
  expect((JSON.parse((await cli(['status', '--json', '--all'])).stdout) as { batches: unknown[] }).batches).toHaveLength(1);
});

test('the GAHP on stdio with the project pre-selected from options (what a wrapper script for BOINC_GAHP can do)', async () => {
  const log = path.join(dir, 'gahp.log');
  const gahp = await GahpProcess.start({ args: ['--project-url', server.url, '--authenticator-file', authFile], logFile: log });
  try {
    await gahp.startup();
    expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
    const q = await gahp.call('BOINC_QUERY_BATCHES 0 1 nosuch');
    expect(q.join(' ')).toMatch(/no batch named nosuch$/);
    expect(await gahp.quit()).toBe(0);
  } finally {
    await gahp.close();
  }
  const text = fs.readFileSync(log, 'utf8');
  expect(text).toContain('BOINC_PING');
  expect(text).not.toContain(server.authenticator);
});
