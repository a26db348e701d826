/**
 * A state directory that cannot be made, through the real programs (issue 30, finding 1;
 * docs/storage.md, "Making directories"): under /proc (where node's recursive mkdir loops
 * forever), under a regular file, under /sys. `ping` and the GAHP on stdin fall back to the
 * private directory under TMPDIR, said in one warning line; `submit` and the BLAHP scripts'
 * node side stop with one line and exit 2; `doctor` marks it FAIL. Each run must end on its
 * own: a child still running after 20 s (the old CPU loop) is killed and fails the test.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { runCli, writeSubmitFile, type RunResult } from './cli-support.js';

/** Long enough for a slow, shared machine; the old loop never ends at all. */
const RUN_LIMIT_MS = 20_000;
const PROC_MAGIC = 0x9fa0;
const SYSFS_MAGIC = 0x62656572;

let server: TestBoincServer;
let dir: string;
let tmp: string;
let auth: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-gahp-statedir-errors-');
  // The programs' temp dir (os.tmpdir() reads TMPDIR): where the GAHP's fallback goes.
  tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  auth = path.join(dir, 'auth');
  fs.writeFileSync(auth, server.authenticator + '\n', { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'in.txt'), 'hello\n');
  writeSubmitFile(path.join(dir, 'job.sub'), { url: server.url, authFile: 'auth' }, ['transfer_input_files = in.txt', 'queue 1']);
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Whether `where` is a mount of this file system type (statfs magic). */
function mounted(where: string, magic: number): boolean {
  try {
    return fs.statfsSync(where).type === magic;
  } catch {
    return false;
  }
}

const fallback = () => path.join(tmp, `boinc-gahp-${process.getuid?.() ?? 'user'}`);
const lines = (text: string) => text.split('\n').filter((l) => l.length > 0);
const run = (args: string[], opts: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<RunResult> =>
  runCli(args, { cwd: dir, timeoutMs: RUN_LIMIT_MS, env: { TMPDIR: tmp, ...opts.env }, input: opts.input });

/** `text` matched literally inside a RegExp. */
const lit = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

interface Place {
  name: string;
  /** Why the test cannot run here, or undefined. */
  skip: () => string | undefined;
  stateDir: () => string;
  /** The one failed step and its errno, as every message but the doctor's says it (a RegExp source). */
  detail: () => string;
  /** What the doctor found (a RegExp source). */
  doctor: () => string;
}

const places: Place[] = [
  {
    name: 'under /proc',
    skip: () => (mounted('/proc', PROC_MAGIC) ? undefined : '/proc is not mounted'),
    stateDir: () => '/proc/nope/state',
    detail: () => lit('mkdir /proc/nope: ENOENT (no such file or directory)'),
    doctor: () => lit('a directory cannot be made in /proc: ENOENT (no such file or directory)'),
  },
  {
    name: 'under a regular file',
    skip: () => undefined,
    stateDir: () => path.join(auth, 'state'),
    detail: () => lit(`${auth}: ENOTDIR (not a directory)`),
    doctor: () => lit(`${auth} is a file, not a directory`),
  },
  {
    name: 'under /sys',
    skip: () => (mounted('/sys', SYSFS_MAGIC) ? undefined : '/sys is not mounted'),
    stateDir: () => '/sys/nope/state',
    // EPERM for root, EACCES for other users.
    detail: () => `${lit('mkdir /sys/nope: ')}E(PERM|ACCES) \\([a-z ]+\\)`,
    doctor: () => `${lit('a directory cannot be made in /sys: ')}E(PERM|ACCES) \\([a-z ]+\\)`,
  },
];

for (const place of places) {
  const why = place.skip();
  const name = (what: string) => `a state directory ${place.name}: ${what}${why ? ` (skipped: ${why})` : ''}`;
  const maybe = why ? test.skip : test;

  maybe(name('ping and the GAHP on stdin use the fallback, said in one line; submit exits 2 with one line'), async () => {
    const sd = place.stateDir();
    const globals = ['--state-dir', sd, '--project-url', server.url, '--authenticator-file', auth];
    const [ping, gahp, submit] = await Promise.all([
      run([...globals, 'ping']),
      run(['--state-dir', sd], { input: 'VERSION\nQUIT\n' }),
      run([...globals, 'submit', 'job.sub', '--poll', '0.3']),
    ]);
    const warning = new RegExp(`^boinc-gahp: warning: state directory ${lit(sd)} cannot be used: ${place.detail()}; using ${lit(fallback())} instead\\. What is lost: `);

    expect(ping.code).toBe(0);
    expect(lines(ping.stderr)).toEqual([expect.stringMatching(warning)]);
    expect(ping.stdout).toMatch(/^ok: .* accepts the account$/m);

    expect(gahp.code).toBe(0);
    expect(lines(gahp.stderr)).toEqual([expect.stringMatching(warning)]);
    expect(lines(gahp.stdout)).toEqual([expect.stringMatching(/^\$GahpVersion: /), expect.stringMatching(/^S \$GahpVersion: /), 'S']);

    expect(submit.code).toBe(2);
    expect(lines(submit.stderr)).toEqual([expect.stringMatching(new RegExp(
      `^boinc-gahp: the state directory ${lit(sd)} cannot be used: ${place.detail()}; give --state-dir \\(or BOINC_GAHP_STATE_DIR\\) a directory this user can create and write$`))]);
    expect(submit.stdout).toBe('');
    // Nothing was created on the server.
    expect(server.rpcLog().filter((e) => e.rpc === 'create_batch' || e.rpc === 'submit_batch')).toEqual([]);
  }, 60_000);

  maybe(name("the BLAHP scripts' node side: submit exits 2, ping answers 1, each in one line"), async () => {
    const sd = place.stateDir();
    const env = { BOINC_GAHP_STATE_DIR: sd, BOINC_GAHP_PROJECT_URL: server.url, BOINC_GAHP_AUTHENTICATOR_FILE: auth };
    const [submit, ping] = await Promise.all([
      run(['blahp', 'submit', '-c', 'uppercase', '-T', tmp, '-w', dir], { env }),
      run(['blahp', 'ping'], { env }),
    ]);
    const said = `cannot create the BLAHP state directory ${lit(sd)}/blahp: ${place.detail()}; set boinc_state_dir in blah\\.config to a directory this user can create and write`;
    expect(submit.code).toBe(2);
    expect(lines(submit.stderr)).toEqual([expect.stringMatching(new RegExp(`^job not sent to BOINC: ${said}$`))]);
    expect(submit.stdout).toBe('');
    expect(ping.code).toBe(0);
    expect(lines(ping.stdout)).toEqual([expect.stringMatching(new RegExp(`^1 ${said}$`))]);
  }, 60_000);

  maybe(name('doctor marks it FAIL with the fix'), async () => {
    const sd = place.stateDir();
    const r = await run(['--state-dir', sd, '--project-url', server.url, '--authenticator-file', auth, 'doctor'], {
      env: { PATH: path.join(dir, 'no-tools'), BLAHPD_LOCATION: path.join(dir, 'no-blahp'), BLAHPD_CONFIG_LOCATION: path.join(dir, 'no-blah.config') },
    });
    expect(r.code).toBe(1);
    expect(lines(r.stdout).filter((l) => l.includes(`state directory ${sd}`))).toEqual([expect.stringMatching(new RegExp(
      `^FAIL  state directory ${lit(sd)}: cannot be created: ${place.doctor()} \\(from --state-dir / BOINC_GAHP_STATE_DIR\\)  -> fix: give --state-dir `))]);
  }, 60_000);
}

test('a --log file in a directory that does not exist: one line, exit 2, for ping and the GAHP on stdin', async () => {
  const log = path.join(dir, 'no-such-dir', 'gahp.log');
  const said = `boinc-gahp: cannot open the log file ${log}: ENOENT (no such file or directory); give --log (BOINC_GAHP_LOG) a file in a directory this user can write`;
  const [ping, gahp] = await Promise.all([
    run(['--log', log, '--project-url', server.url, '--authenticator-file', auth, 'ping']),
    run(['--log', log], { input: 'VERSION\nQUIT\n' }),
  ]);
  for (const r of [ping, gahp]) {
    expect(r.code).toBe(2);
    expect(lines(r.stderr)).toEqual([said]);
  }
}, 60_000);
