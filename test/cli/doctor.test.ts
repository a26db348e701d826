/**
 * `boinc-gahp doctor` through the real program against the test server: one test per check
 * family, each with the healthy case and broken ones, asserting the mark, the finding and
 * the fix as printed. HTCondor is a condor_config_val stand-in on PATH made here; blahp's
 * libexec directory and blah.config are temp files. No run ever prints the authenticator.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { sampleApps, uppercaseApp } from '../../fixtures/apps.js';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import type { TestApp } from '../../fixtures/test-server/types.js';
import { startForwardProxy } from '../support/forward-proxy.js';
import { GAHP_BIN, makeTempDir, REPO_ROOT } from '../support/gahp-process.js';
import { until } from '../support/poll.js';
import { startTlsFront } from '../support/tls-front.js';
import { runCli, writeSubmitFile, type RunResult } from './cli-support.js';

/** bin/boinc-gahp as the doctor names this installation. */
const ENTRY = fs.realpathSync(GAHP_BIN);

let server: TestBoincServer;
let dir: string;
let authFile: string;
/** An empty directory: PATH for runs that must not find condor_config_val. */
let noTools: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-gahp-doctor-');
  authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, server.authenticator + '\n', { mode: 0o600 });
  noTools = path.join(dir, 'no-tools');
  fs.mkdirSync(noTools);
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A file's group by name (as doctor names it), from /etc/group. */
function groupOf(p: string): string {
  const gid = fs.statSync(p).gid;
  const entry = fs.readFileSync('/etc/group', 'utf8').split('\n').map((l) => l.split(':')).find((f) => Number(f[2]) === gid && f[2] !== '');
  return entry ? entry[0]! : String(gid);
}

/** A file holding `text`, with `mode`. */
function file(name: string, text: string, mode = 0o600): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  fs.chmodSync(p, mode);
  return p;
}

interface DoctorRun extends RunResult {
  lines: string[];
}

/**
 * Runs `bin/boinc-gahp [globals] doctor [args]` with no HTCondor and no blahp unless `env`
 * says otherwise (BLAHPD_LOCATION and GLITE_LOCATION point into the temp dir, so /usr/libexec/blahp is not looked at).
 */
async function doctor(args: string[], o: { auth?: string; url?: string; globals?: string[]; env?: NodeJS.ProcessEnv; noProject?: boolean; noStateDir?: boolean } = {}): Promise<DoctorRun> {
  const globals = [
    ...(o.noStateDir ? [] : ['--state-dir', path.join(dir, 'state')]),
    ...(o.noProject ? [] : ['--project-url', o.url ?? server.url, '--authenticator-file', o.auth ?? authFile]),
    ...(o.globals ?? []),
  ];
  const env = { PATH: noTools, BLAHPD_LOCATION: path.join(dir, 'no-blahp'), GLITE_LOCATION: path.join(dir, 'no-blahp'), BLAHPD_CONFIG_LOCATION: path.join(dir, 'no-blah.config'), ...o.env };
  const r = await runCli([...globals, 'doctor', ...args], { cwd: dir, env });
  for (const secret of [server.authenticator]) {
    expect(r.stdout).not.toContain(secret);
    expect(r.stderr).not.toContain(secret);
  }
  return { ...r, lines: r.stdout.split('\n').filter(Boolean) };
}

/** The one line whose `what` starts with `what` (after the mark). */
function line(r: DoctorRun, what: string): string {
  const found = r.lines.filter((l) => l.slice(6).startsWith(what));
  expect(found).toHaveLength(1);
  return found[0]!;
}

const marks = (r: DoctorRun) => r.lines.filter((l) => /^(ok|warn|FAIL) /.test(l)).map((l) => l.slice(0, 4).trim());

test('host: node, state directory, authenticator file, proxy and trust; a state dir under a file, a readable or missing authenticator file', async () => {
  const underFile = path.join(authFile, 'state');
  const open = file('auth-open', server.authenticator + '\n', 0o644);
  const [good, broken, missing, json] = await Promise.all([
    doctor([]),
    doctor([], { auth: open, globals: ['--state-dir', underFile] }),
    doctor([], { auth: path.join(dir, 'nope') }),
    doctor(['--json']),
  ]);
  expect(good.code).toBe(0);
  expect(line(good, 'node version')).toMatch(new RegExp(`^ok {4}node version: ${process.version.replace(/\./g, '\\.')} `));
  expect(line(good, 'state directory')).toMatch(/^ok {4}state directory .*\/state: does not exist yet, will be created in .*; [\d.]+ GiB free \(from --state-dir/);
  expect(line(good, 'authenticator file')).toBe(`ok    authenticator file ${authFile}: one line, mode 0600`);
  expect(line(good, 'proxy')).toMatch(/^ok {4}proxy for http:\/\/127\.0\.0\.1:\d+: none: direct connection$/);
  expect(line(good, 'trust sources')).toMatch(/^ok {4}trust sources: node's bundled roots(;|$)/);
  expect(good.lines.at(-1)).toMatch(/^\d+ checks: \d+ ok, 0 warn, 0 FAIL$/);

  expect(broken.code).toBe(1);
  expect(line(broken, 'state directory')).toBe(`FAIL  state directory ${underFile}: cannot be created: ${authFile} is a file, not a directory (from --state-dir / BOINC_GAHP_STATE_DIR)` +
    `  -> fix: give --state-dir (or BOINC_GAHP_STATE_DIR) a directory this user can create or write, e.g. ~/.local/state/boinc-gahp (meanwhile the GAHP falls back to ${path.join(os.tmpdir(), `boinc-gahp-${process.getuid!()}`)}, which the temp dir's cleaning empties, and submit and the BLAHP scripts stop with this error)`);
  expect(line(broken, 'authenticator file')).toBe(`warn  authenticator file ${open}: one line, mode 0644, group ${groupOf(open)}: readable by other users, who could submit as this account  -> fix: chmod o-rwx ${open} (its group keeps read, as the README sets it up for the job owners)`);

  expect(missing.code).toBe(1);
  expect(line(missing, 'authenticator file')).toMatch(new RegExp(`^FAIL  authenticator file ${dir}/nope: cannot be read: ENOENT.*  -> fix: write the account's authenticator .* into ${dir}/nope as one line, then chmod 600 ${dir}/nope$`));
  // No authenticator: nothing that needs the account runs.
  expect(missing.lines.some((l) => l.slice(6).startsWith('account'))).toBe(false);

  expect(json.code).toBe(0);
  const parsed = JSON.parse(json.stdout) as { ok: boolean; checks: Array<{ family: string; mark: string; what: string; found: string; fix?: string }> };
  expect(parsed.ok).toBe(true);
  expect(parsed.checks.map((c) => c.mark)).toEqual(marks(good));
  expect(parsed.checks.find((c) => c.what.startsWith('authenticator file'))).toEqual({ family: 'host', mark: 'ok', what: `authenticator file ${authFile}`, found: 'one line, mode 0600' });
});

test('project: answers, is BOINC, accepts the account, submit access; wrong authenticator, no submit access, not a BOINC project', async () => {
  const wrong = file('auth-wrong', '0123456789abcdef0123456789abcdef\n');
  const nobody = file('auth-nobody', server.addUser({ submitApps: [] }) + '\n');
  const notBoinc = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<html><body>a web site, not BOINC</body></html>\n');
  });
  await new Promise<void>((resolve) => notBoinc.listen(0, '127.0.0.1', resolve));
  const notBoincUrl = `http://127.0.0.1:${(notBoinc.address() as { port: number }).port}/project/`;
  try {
    const [good, badAuth, noAccess, html, wrongPath, refused, withPassword] = await Promise.all([
      doctor([]),
      doctor([], { auth: wrong }),
      doctor([], { auth: nobody }),
      doctor([], { url: notBoincUrl }),
      doctor([], { url: server.url.replace('/boinc_test/', '/elsewhere/') }),
      doctor([], { url: 'http://127.0.0.1:1/project/' }),
      doctor([], { url: server.url.replace('http://', 'http://site:pw-secret@') }),
    ]);
    expect(good.code).toBe(0);
    expect(line(good, 'project URL')).toMatch(/^ok {4}project URL http:\/\/127\.0\.0\.1:\d+\/boinc_test\/: DNS 127\.0\.0\.1 -> 127\.0\.0\.1, TCP 127\.0\.0\.1:\d+ connected in \d+ ms, HTTP 200$/);
    expect(line(good, 'BOINC project')).toBe(`ok    BOINC project: ${server.url}submit_rpc_handler.php answers ping`);
    expect(line(good, 'account')).toMatch(/^ok {4}account: accepted/);
    expect(line(good, 'submit access')).toBe("ok    submit access: to uppercase, concat, zipper, failing (4 of the project's 4 app(s))");

    // A password in the project URL (Basic auth in front of a project) is used, never printed.
    expect(withPassword.code).toBe(0);
    expect(withPassword.stdout + withPassword.stderr).not.toContain('pw-secret');
    expect(line(withPassword, 'project URL')).toMatch(/^ok {4}project URL http:\/\/site:\*\*\*@127\.0\.0\.1:\d+\/boinc_test\/: /);

    expect(badAuth.code).toBe(1);
    expect(line(badAuth, 'account')).toBe(`FAIL  account: refused: bad authenticator  -> fix: put this project's authenticator for the account (its web site's account keys page) into ${wrong}`);

    expect(noAccess.code).toBe(1);
    expect(line(noAccess, 'account')).toBe('ok    account: accepted');
    expect(line(noAccess, 'submit access')).toBe(`FAIL  submit access: none: no submit access  -> fix: ask the project's administrators to give this account remote job submission access (BOINC's "manage submitters" page)`);

    expect(html.code).toBe(1);
    expect(line(html, 'project URL')).toMatch(/^ok .*HTTP 200$/);
    expect(line(html, 'BOINC project')).toMatch(new RegExp(`^FAIL  BOINC project: not a BOINC project: ${notBoincUrl}submit_rpc_handler\\.php answers, but not as BOINC does \\(.*\\)  -> fix: give the project's master URL`));
    expect(wrongPath.code).toBe(1);
    expect(line(wrongPath, 'project URL')).toMatch(/^warn .*HTTP 404: no home page here {2}-> fix: check that this is the master URL/);
    expect(line(wrongPath, 'BOINC project')).toMatch(/^FAIL {2}BOINC project: not a BOINC project: .*\/elsewhere\/submit_rpc_handler\.php answers HTTP 404/);
    expect(refused.code).toBe(1);
    expect(line(refused, 'project URL')).toMatch(/^FAIL {2}project URL http:\/\/127\.0\.0\.1:1\/project\/: DNS 127\.0\.0\.1 -> 127\.0\.0\.1, then TCP failed: .*ECONNREFUSED.* {2}-> fix: check the URL's port, that the project's web server runs/);
  } finally {
    await new Promise((resolve) => notBoinc.close(resolve));
  }
});

test('apps: templates as transfer_input_files / transfer_output_files; an unknown app, an app without submit access', async () => {
  const limited = file('auth-limited', server.addUser({ submitApps: ['concat'] }) + '\n');
  const [all, given, limitedRun] = await Promise.all([
    doctor([]),
    doctor(['--app', 'concat', 'nope']),
    doctor(['--app', 'concat', 'uppercase'], { auth: limited }),
  ]);
  expect(line(all, 'app uppercase')).toBe('ok    app uppercase: get_templates works; transfer_input_files: 1 file, read by the app as in; transfer_output_files = out');
  expect(line(all, 'app concat')).toBe('ok    app concat: get_templates works; transfer_input_files: 2 files, read by the app as a, b (a file of one of these names goes there, else in this order); transfer_output_files = joined, info');
  expect(all.lines.filter((l) => l.startsWith('ok    app '))).toHaveLength(4);
  // What the project keeps (issue 42, item 5): get_output3.php asked once, one line per app checked.
  expect(line(all, 'get_output3.php')).toBe('ok    get_output3.php (batch-collect outputs): answers with the cookie (get_batch_zip of batch 2147483647, which does not exist, got "not owner")');
  expect(line(all, 'files kept of uppercase')).toBe('ok    files kept of uppercase: the app\'s templates: inputs: 0 of 1 marked <no_delete/>, outputs: 0 of 1 marked <no_delete/>; ' +
    'this GAHP marks each job\'s files <no_delete/> (--keep-files yes, the default): outputs stay in the project\'s upload directory after they are fetched, until its administrator removes them (README, "What the project keeps"); ' +
    'output-ways.json: no fetch of its outputs learnt yet. So: outputs are fetched from the upload hierarchy; if the project runs batch_collect_assimilator they are moved out of it and come from get_output3.php');
  expect(all.lines.filter((l) => l.startsWith('ok    files kept of '))).toHaveLength(4);
  expect(given.lines.filter((l) => l.slice(6).startsWith('files kept of '))).toHaveLength(1);

  expect(given.code).toBe(1);
  expect(given.lines.filter((l) => / app /.test(l))).toHaveLength(2);
  expect(line(given, 'app nope')).toBe("FAIL  app nope: get_templates: app not found: nope  -> fix: check the app's name in your submit file (batch_queue, or the executable's name) (the project's apps: uppercase, concat, zipper, failing)");
  expect(line(given, 'submit access')).toBe('ok    submit access: to concat (1 of the 2 app(s) given with --app)');

  expect(limitedRun.code).toBe(1);
  expect(line(limitedRun, 'submit access')).toBe('ok    submit access: to concat; not to uppercase');
  expect(line(limitedRun, 'app uppercase')).toBe("FAIL  app uppercase: get_templates: no submit access  -> fix: ask the project's administrators to give this account submit access to uppercase");
});

test("what the project keeps, on a batch-collect project with --keep-files no: warned where nothing keeps the outputs; ok where the app's templates mark them no_delete, or where output-ways.json learnt get_output3.php (issue 42, item 5)", async () => {
  const keeperApp: TestApp = { ...uppercaseApp, name: 'keeper', inputs: [{ openName: 'in', noDelete: true }], outputs: [{ openName: 'out', noDelete: true, gzipWhenDone: true }] };
  const collect = await startTestServer({ daemons: 'collect', deleteAfterDoneSeconds: 0.2, apps: [...sampleApps, keeperApp] });
  const cdir = makeTempDir('boinc-gahp-doctor-collect-');
  try {
    const auth = path.join(cdir, 'auth');
    fs.writeFileSync(auth, collect.authenticator + '\n', { mode: 0o600 });
    const state = path.join(cdir, 'state');
    // One uppercase job through submit, fetched after the assimilator moved its output: the state dir learns get_output3.php.
    fs.writeFileSync(path.join(cdir, 'in'), 'kept?\n');
    writeSubmitFile(path.join(cdir, 'job.sub'), { url: collect.url, authFile: 'auth' }, ['transfer_input_files = in', 'transfer_output_files = out', 'queue']);
    const submit = (...extra: string[]) => runCli(['--state-dir', state, '--keep-files', 'no', 'submit', 'job.sub', '--poll', '0.3', ...extra], { cwd: cdir });
    const first = await submit('--no-wait');
    if (first.code !== 0) throw new Error(`exit ${first.code}: ${first.stderr}${first.stdout}`);
    const batch = collect.batches().find((b) => b.app === 'uppercase')!;
    collect.advanceAll(batch.name);
    await collect.settled();
    const results = path.join(collect.dataDir, 'results', String(batch.id));
    await until('the assimilator to move the output', () => fs.existsSync(results) && fs.readdirSync(results).length === 1);
    const fetched = await submit();
    if (fetched.code !== 0) throw new Error(`exit ${fetched.code}: ${fetched.stderr}${fetched.stdout}`);

    const r = await doctor(['--app', 'uppercase', 'concat', 'keeper'], { url: collect.url, auth, globals: ['--state-dir', state, '--keep-files', 'no'] });
    expect(r.code).toBe(0);
    expect(line(r, 'get_output3.php')).toMatch(/^ok {4}get_output3.php \(batch-collect outputs\): answers with the cookie/);
    expect(line(r, 'files kept of uppercase')).toBe('ok    files kept of uppercase: the app\'s templates: inputs: 0 of 1 marked <no_delete/>, outputs: 0 of 1 marked <no_delete/>; ' +
      'this GAHP does not mark jobs\' files (--keep-files no, from --keep-files (or BOINC_GAHP_KEEP_FILES)); output-ways.json: its outputs were fetched from get_output3.php (the project runs batch_collect_assimilator for it). ' +
      'So: the project moves them out of the upload hierarchy (batch_collect_assimilator) and get_output3.php serves them until the batch is retired');
    expect(line(r, 'files kept of concat')).toBe('warn  files kept of concat: the app\'s templates: inputs: 0 of 2 marked <no_delete/>, outputs: 0 of 2 marked <no_delete/>; ' +
      'this GAHP does not mark jobs\' files (--keep-files no, from --keep-files (or BOINC_GAHP_KEEP_FILES)); output-ways.json: no fetch of its outputs learnt yet. ' +
      'So: outputs must be fetched before the project\'s file_deleter removes them, seconds after validation, unless the project keeps them its own way (file_deleter --preserve_result_files, a long <delete_delay_hours>, or batch_collect_assimilator, whose outputs come from get_output3.php); an output deleted first is reported gone and its job fails' +
      '  -> fix: set --keep-files yes (BOINC_GAHP_KEEP_FILES=yes), or make sure the project keeps outputs until they are fetched (README, "What the project keeps")');
    expect(line(r, 'files kept of keeper')).toBe('ok    files kept of keeper: the app\'s templates: inputs: 1 of 1 marked <no_delete/>, outputs: 1 of 1 marked <no_delete/>; <gzip_when_done/>: out (gzipped by the volunteer\'s client, unpacked by the GAHP); ' +
      'this GAHP does not mark jobs\' files (--keep-files no, from --keep-files (or BOINC_GAHP_KEEP_FILES)); output-ways.json: no fetch of its outputs learnt yet. ' +
      'So: the app\'s own templates mark every output <no_delete/>, so the file_deleter leaves them');
    expect(r.stdout).toMatch(/ 1 warn, 0 FAIL$/m);

    // BOINC_GAHP_KEEP_FILES=no says the same as --keep-files no.
    const byEnv = await doctor(['--app', 'concat'], { url: collect.url, auth, env: { BOINC_GAHP_KEEP_FILES: 'no' } });
    expect(line(byEnv, 'files kept of concat')).toMatch(/^warn {2}files kept of concat: .*--keep-files no, from --keep-files \(or BOINC_GAHP_KEEP_FILES\)/);
  } finally {
    await collect.close();
    fs.rmSync(cdir, { recursive: true, force: true });
  }
}, 120_000);

test('uploads: the limits in effect and one small upload left as a file only with a short delete_time; a project whose PHP refuses it', async () => {
  const tiny = await startTestServer({ php: { uploadMaxFilesize: 16 } });
  const tinyAuth = file('auth-tiny', tiny.authenticator + '\n');
  try {
    const before = Date.now() / 1000;
    const [good, set, refused] = await Promise.all([
      doctor([]),
      doctor([], { globals: ['--max-file-uploads', '5', '--post-max-size', '4M'] }),
      doctor([], { url: tiny.url, auth: tinyAuth }),
    ]);
    expect(line(good, 'upload limits')).toBe("ok    upload limits: --max-file-uploads 20 (default), --post-max-size 8M (default), --upload-max-filesize 2M (default): uploads are split to fit these; each must not exceed the project's php.ini value");
    expect(line(set, 'upload limits')).toMatch(/^ok {4}upload limits: --max-file-uploads 5, --post-max-size 4M, --upload-max-filesize 2M \(default\)/);
    const upload = line(good, 'upload through job_file.php');
    const name = /(condorv_[0-9a-f]{32})/.exec(upload)?.[1];
    expect(upload).toMatch(/^ok {4}upload through job_file\.php: \d+-byte file condorv_[0-9a-f]{32} uploaded and found by query_files; left on the server as a file only \(no batch\) with delete_time in 10 min/);
    const stored = server.files().find((f) => f.name === name);
    expect(stored).toBeDefined();
    expect(stored!.batches).toEqual([]);
    expect(stored!.deleteTime).toBeGreaterThanOrEqual(Math.floor(before) + 600);
    expect(stored!.deleteTime).toBeLessThanOrEqual(Date.now() / 1000 + 600);
    expect(server.batches().some((b) => b.name.includes('doctor'))).toBe(false);

    expect(refused.code).toBe(1);
    expect(line(refused, 'upload through job_file.php')).toMatch(/^FAIL {2}upload through job_file\.php: failed: .*upload failed because: The uploaded file exceeds upload_max_filesize.* {2}-> fix: the project's PHP refused a \d+-byte upload: ask its administrators to raise upload_max_filesize and post_max_size in php.ini$/);
    expect(tiny.files()).toEqual([]);
  } finally {
    await tiny.close();
  }
});

/** A directory holding a condor_config_val stand-in that knows `values` (others: "Not defined"). */
function condorStandIn(name: string, values: Record<string, string>): string {
  const binDir = path.join(dir, name);
  fs.mkdirSync(binDir);
  const cases = Object.entries(values).map(([k, v]) => `  ${k}) echo '${v}' ;;\n`).join('');
  // `-dump -expanded ^BOINC_GAHP_`: every BOINC_GAHP_* value, as HTCondor prints them.
  const dump = Object.entries(values).filter(([k]) => k.startsWith('BOINC_GAHP_')).map(([k, v]) => `echo '${k} = ${v}'; `).join('');
  file(`${name}/condor_config_val`, `#!/bin/sh\ncase "$1" in\n  -dump) echo '# Configuration from machine: test'; ${dump}exit 0 ;;\n${cases}  *) echo "Not defined: $1" >&2; exit 1 ;;\nesac\n`, 0o755);
  return binDir;
}

/** A libexec directory with the BLAHP scripts written by the real `boinc-gahp blahp install`. */
async function installedLibexec(name: string): Promise<string> {
  const libexec = path.join(dir, name);
  fs.mkdirSync(libexec);
  const r = await runCli(['blahp', 'install', libexec]);
  expect(r.code).toBe(0);
  return libexec;
}

test('htcondor: BOINC_GAHP and the call timeout; BOINC_GAHP missing its file, set beside the BLAHP scripts (it serves batch boinc), a command timeout past the call timeout; the BOINC_GAHP route\'s project and caps', async () => {
  const good = condorStandIn('condor-good', { BOINC_GAHP: ENTRY });
  const gone = condorStandIn('condor-gone', { BOINC_GAHP: path.join(dir, 'sbin', 'boinc_gahp'), GRIDMANAGER_GAHP_CALL_TIMEOUT: '120' });
  const none = condorStandIn('condor-none', {});
  const direct = condorStandIn('condor-direct', {
    BOINC_GAHP: ENTRY,
    BOINC_GAHP_PROJECT_URL: server.url,
    BOINC_GAHP_AUTHENTICATOR_FILE: authFile,
    GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE: '20000',
    GRIDMANAGER_JOB_PROBE_RATE_BATCH: '500',
  });
  const libexec = await installedLibexec('libexec-condor');
  const [ok, missing, undef, both, noCondor, route] = await Promise.all([
    doctor([], { env: { PATH: good } }),
    doctor([], { env: { PATH: gone } }),
    doctor([], { env: { PATH: none } }),
    doctor(['--blahp', libexec], { env: { PATH: good } }),
    doctor([]),
    // No project on the command line: the BOINC_GAHP route's, from HTCondor's configuration.
    doctor([], { env: { PATH: direct }, noProject: true }),
  ]);
  expect(ok.code).toBe(0);
  expect(line(ok, 'BOINC_GAHP')).toBe(`ok    BOINC_GAHP: ${ENTRY}: this installation; it serves batch boinc (and the boinc grid type of HTCondor 10.0)`);
  expect(line(ok, 'GRIDMANAGER_GAHP_CALL_TIMEOUT')).toBe('ok    GRIDMANAGER_GAHP_CALL_TIMEOUT: 300 s (default); --command-timeout 290 s: commands give their result before the gridmanager gives up');
  expect(line(ok, 'batch boinc project')).toMatch(/^warn {2}batch boinc project: BOINC_GAHP_PROJECT_URL and BOINC_GAHP_AUTHENTICATOR_FILE not in HTCondor's configuration/);
  expect(line(ok, 'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE')).toMatch(/^warn {2}GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE: 1000 \(default\): jobs of a cluster past 1000 wait idle/);
  expect(line(ok, 'GRIDMANAGER_JOB_PROBE_RATE_BATCH')).toMatch(/^warn {2}GRIDMANAGER_JOB_PROBE_RATE_BATCH: 5 a second \(default\): .* -> fix: set GRIDMANAGER_JOB_PROBE_RATE_BATCH = 500/);

  expect(missing.code).toBe(1);
  expect(line(missing, 'BOINC_GAHP')).toBe(`FAIL  BOINC_GAHP: set to ${dir}/sbin/boinc_gahp, which does not exist  -> fix: add "BOINC_GAHP = ${ENTRY}" to the HTCondor configuration (e.g. /etc/condor/config.d/50-boinc.conf), then condor_reconfig`);
  expect(line(missing, 'GRIDMANAGER_GAHP_CALL_TIMEOUT')).toBe("warn  GRIDMANAGER_GAHP_CALL_TIMEOUT: 120 s; --command-timeout 290 s: a slow BOINC_* command outlives the gridmanager's wait, and the gridmanager then kills the GAHP  -> fix: set --command-timeout (BOINC_GAHP_COMMAND_TIMEOUT) below 120, e.g. 110, or raise GRIDMANAGER_GAHP_CALL_TIMEOUT");

  expect(undef.code).toBe(0);
  expect(line(undef, 'BOINC_GAHP')).toMatch(/^warn {2}BOINC_GAHP: not defined, and no BLAHP scripts were found: HTCondor cannot reach BOINC {2}-> fix: add "BOINC_GAHP = /);

  expect(line(both, 'BOINC_GAHP')).toBe(`ok    BOINC_GAHP: ${ENTRY}: this installation; it serves batch boinc (and the boinc grid type of HTCondor 10.0): blahpd and the boinc_*.sh scripts are not used for batch boinc`);

  expect(route.code).toBe(0);
  expect(route.lines.some((l) => l.startsWith('FAIL') || l.startsWith('warn'))).toBe(false);
  expect(line(route, 'batch boinc project')).toBe(`ok    batch boinc project: BOINC_GAHP_PROJECT_URL ${server.url}, BOINC_GAHP_AUTHENTICATOR_FILE ${authFile} (checked above)`);
  expect(line(route, 'GRIDMANAGER_JOB_PROBE_RATE_BATCH')).toBe('ok    GRIDMANAGER_JOB_PROBE_RATE_BATCH: 500 a second: statuses answered from memory');
  expect(route.lines.some((l) => l.startsWith('ok    project') && l.includes(server.url))).toBe(true);

  // No condor_config_val on PATH: no HTCondor lines at all.
  expect(noCondor.lines.some((l) => /^(BOINC_GAHP|GRIDMANAGER)/.test(l.slice(6)))).toBe(false);
});

test('blahp: scripts installed and pointing here, blah.config with boinc and its keys (whose project passes checks 1-4); a missing script, blah.config without boinc, a wrong authenticator in blah.config', async () => {
  const libexec = await installedLibexec('libexec-good');
  const broken = await installedLibexec('libexec-broken');
  fs.rmSync(path.join(broken, 'boinc_status.sh'));
  const config = (name: string, lrms: string, auth = authFile) =>
    file(name, `# blah.config\nsupported_lrms=${lrms}\nboinc_project_url="${server.url}"\nboinc_authenticator_file=${auth}\n`, 0o644);
  const goodConfig = config('blah-good.config', 'condor,pbs,boinc');
  const noBoinc = config('blah-no-boinc.config', 'condor,pbs');
  const wrongAuth = config('blah-wrong-auth.config', 'boinc', file('auth-wrong-blah', '0123456789abcdef0123456789abcdef\n'));
  // blahpd's folder without HTCondor's answer: $BLAHPD_LOCATION/libexec when it has no blahp/.
  const home = path.join(dir, 'blahp-home');
  fs.mkdirSync(home);
  fs.symlinkSync(libexec, path.join(home, 'libexec'));
  const scripts = 'boinc_submit.sh, boinc_status.sh, boinc_cancel.sh, boinc_hold.sh, boinc_resume.sh, boinc_ping.sh';
  const [good, byDefault, missing, lrms, other] = await Promise.all([
    doctor(['--blahp', libexec], { env: { BLAHPD_CONFIG_LOCATION: goodConfig } }),
    doctor([], { env: { BLAHPD_LOCATION: home, BLAHPD_CONFIG_LOCATION: goodConfig } }),
    doctor(['--blahp', broken], { env: { BLAHPD_CONFIG_LOCATION: goodConfig } }),
    doctor(['--blahp', libexec], { env: { BLAHPD_CONFIG_LOCATION: noBoinc } }),
    doctor(['--blahp', libexec], { env: { BLAHPD_CONFIG_LOCATION: wrongAuth } }),
  ]);
  expect(good.code).toBe(0);
  expect(line(good, 'blahp scripts')).toBe(`ok    blahp scripts in ${libexec}: ${scripts} installed, executable, run ${process.execPath} ${ENTRY}`);
  expect(line(good, 'blah.config /')).toBe(`ok    blah.config ${goodConfig}: supported_lrms has boinc; boinc_project_url=${server.url}; boinc_authenticator_file=${authFile}`);
  expect(line(good, 'blah.config project')).toBe('ok    blah.config project: the same project URL and authenticator file as checked above');
  expect(byDefault.code).toBe(0);
  expect(line(byDefault, 'blahp scripts')).toMatch(/^ok {4}blahp scripts in .*\/blahp-home\/libexec \(blahpd's folder: \$BLAHPD_LOCATION \+ libexec, which has no blahp\/\): /);

  expect(missing.code).toBe(1);
  expect(line(missing, 'blahp scripts')).toBe(`FAIL  blahp scripts in ${broken}: boinc_status.sh missing  -> fix: run boinc-gahp blahp install ${broken}`);

  expect(lrms.code).toBe(1);
  expect(line(lrms, 'blah.config /')).toBe(`FAIL  blah.config ${noBoinc}: supported_lrms is condor,pbs: no boinc  -> fix: add boinc to supported_lrms in ${noBoinc} (e.g. supported_lrms=condor,pbs,boinc), then restart blahpd (condor_restart)`);

  // blah.config names another authenticator file: checks 1-4 run again for it, labelled.
  expect(other.code).toBe(1);
  expect(line(other, 'blah.config: account')).toBe(`FAIL  blah.config: account: refused: bad authenticator  -> fix: put this project's authenticator for the account (its web site's account keys page) into ${dir}/auth-wrong-blah`);
  expect(line(other, 'blah.config: authenticator file')).toMatch(/^ok {4}blah\.config: authenticator file .*auth-wrong-blah: one line, mode 0600$/);
  expect(line(other, 'account')).toMatch(/^ok {4}account: accepted/);
});

/** Every file of a directory: name, mode and content (to compare a folder before and after). */
function folderState(folder: string): string[] {
  return fs.readdirSync(folder).sort().map((n) => {
    const p = path.join(folder, n);
    return `${n} ${(fs.statSync(p).mode & 0o7777).toString(8)} ${fs.readFileSync(p, 'utf8')}`;
  });
}

test("run as a job owner on a BOINC_GAHP pool set up by the README: HTCondor's state directory, the shared 0640 file, blahpd's scripts not used: all ok (issue 44, item 5)", async () => {
  // README step 2: the authenticator, mode 0640, of a group of the job owners (this user's).
  const shared = path.join(dir, 'pool-auth');
  fs.writeFileSync(shared, server.authenticator + '\n');
  fs.chmodSync(shared, 0o640);
  fs.chownSync(shared, process.getuid!(), process.getgid!());
  const stateDir = path.join(dir, 'pool-state');
  // HTCondor under a prefix whose blahpd folder lacks the scripts, the packages' folder has them.
  const release = path.join(dir, 'pool-prefix');
  fs.mkdirSync(path.join(release, 'libexec', 'blahp'), { recursive: true });
  const usr = path.join(dir, 'pool-usr');
  fs.mkdirSync(path.join(usr, 'libexec'), { recursive: true });
  await installedLibexec('pool-usr/libexec/blahp');
  const condor = condorStandIn('condor-pool', {
    RELEASE_DIR: release,
    BOINC_GAHP: ENTRY,
    BOINC_GAHP_PROJECT_URL: server.url,
    BOINC_GAHP_AUTHENTICATOR_FILE: shared,
    BOINC_GAHP_STATE_DIR: stateDir,
    GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE: '20000',
    GRIDMANAGER_JOB_PROBE_RATE_BATCH: '500',
  });
  const r = await doctor([], { env: { PATH: condor, GLITE_LOCATION: usr }, noProject: true, noStateDir: true });
  expect(r.lines.filter((l) => !l.startsWith('ok'))).toEqual([expect.stringMatching(/^\d+ checks: \d+ ok, 0 warn, 0 FAIL$/)]);
  expect(r.code).toBe(0);
  expect(line(r, 'state directory')).toMatch(new RegExp(`^ok {4}state directory ${stateDir}: does not exist yet, will be created in ${dir}; [\\d.]+ GiB free \\(from BOINC_GAHP_STATE_DIR in HTCondor's configuration\\)$`));
  expect(line(r, 'authenticator file')).toBe(`ok    authenticator file ${shared}: one line, mode 0640, group ${groupOf(shared)} (readable by the job owners' group, as the README sets it up)`);
  expect(line(r, 'blahp scripts')).toBe(`ok    blahp scripts and blah.config: not used: BOINC_GAHP is defined (${ENTRY}), so batch boinc is served by boinc-gahp itself, not by blahpd`);

  // The GAHP HTCondor starts reads BOINC_GAHP_KEEP_FILES from HTCondor's configuration: so does doctor (issue 42, item 5).
  const noKeep = condorStandIn('condor-pool-no-keep', { RELEASE_DIR: release, BOINC_GAHP: ENTRY, BOINC_GAHP_PROJECT_URL: server.url, BOINC_GAHP_AUTHENTICATOR_FILE: shared, BOINC_GAHP_STATE_DIR: stateDir, BOINC_GAHP_KEEP_FILES: 'no' });
  const k = await doctor(['--app', 'uppercase'], { env: { PATH: noKeep, GLITE_LOCATION: usr }, noProject: true, noStateDir: true });
  expect(line(k, 'files kept of uppercase')).toMatch(/^warn {2}files kept of uppercase: .*this GAHP does not mark jobs' files \(--keep-files no, from BOINC_GAHP_KEEP_FILES in HTCondor's configuration\);/);
});

test('blahp: the folder blahpd uses is asked of HTCondor (RELEASE_DIR): FAIL first while it lacks the scripts, whatever blahp\'s default folder holds; ok after `blahp install` with no directory; `blahp uninstall` leaves the folder as before', async () => {
  // An HTCondor under a prefix: RELEASE_DIR/libexec/blahp holds blahp's own scripts.
  const release = path.join(dir, 'condor-prefix');
  const folder = path.join(release, 'libexec', 'blahp');
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(path.join(folder, 'slurm_submit.sh'), '#!/bin/bash\n# blahp\'s own\n', { mode: 0o755 });
  fs.writeFileSync(path.join(folder, 'blah_common_submit_functions.sh'), '# blahp\'s own\n', { mode: 0o644 });
  const before = folderState(folder);
  // blahp's default folder ($GLITE_LOCATION, else /usr, + libexec/blahp: where the packages put the scripts) has them.
  const usr = path.join(dir, 'usr-stand-in');
  fs.mkdirSync(path.join(usr, 'libexec'), { recursive: true });
  await installedLibexec('usr-stand-in/libexec/blahp');
  const condor = condorStandIn('condor-prefix-bin', { RELEASE_DIR: release });
  const config = file('blah-prefix.config', `supported_lrms=boinc\nboinc_project_url=${server.url}\nboinc_authenticator_file=${authFile}\n`, 0o644);
  const env = { PATH: condor, GLITE_LOCATION: usr, BLAHPD_CONFIG_LOCATION: config };
  const what = `blahp scripts in ${folder} (blahpd's folder: RELEASE_DIR from condor_config_val + libexec/blahp)`;

  const missing = await doctor([], { env });
  expect(missing.code).toBe(1);
  expect(missing.lines[0]).toBe(`FAIL  ${what}: boinc_submit.sh, boinc_status.sh, boinc_cancel.sh, boinc_hold.sh, boinc_resume.sh, boinc_ping.sh missing: ` +
    'blahpd cannot run boinc_ping.sh, so HTCondor takes batch boinc for down (job.log: Detected Down Grid Resource) and its jobs stay idle; ' +
    `${usr}/libexec/blahp has them, but this blahpd does not look there  -> fix: run boinc-gahp blahp install (it writes them into ${folder})`);
  // --blahp names the folder to check; the same folder is found without it.
  expect(line(await doctor(['--blahp', folder], { env }), 'blahp scripts')).toMatch(/^FAIL {2}blahp scripts in \S+: boinc_submit\.sh, .* missing: blahpd cannot run boinc_ping\.sh.*-> fix: run boinc-gahp blahp install \S+$/);
  // --blahp naming the default folder, which has them: the folder blahpd uses is checked too, and named first.
  const given = await doctor(['--blahp', path.join(usr, 'libexec', 'blahp')], { env });
  expect(given.code).toBe(1);
  expect(given.lines[0]).toMatch(new RegExp(`^FAIL  ${what.replace(/[()+.]/g, '\\$&')}: boinc_submit\\.sh, .* missing: blahpd cannot run boinc_ping\\.sh`));
  expect(given.lines[1]).toMatch(new RegExp(`^ok    blahp scripts in ${usr.replace(/[()+.]/g, '\\$&')}/libexec/blahp: `));

  // Neither HTCondor's answer nor a blahp/ folder: no guess at a place to write.
  const nowhere = path.join(dir, 'no-blahp');
  const guess = await runCli(['blahp', 'install'], { env: { PATH: noTools, BLAHPD_LOCATION: nowhere } });
  expect(guess.code).toBe(1);
  expect(guess.stderr).toBe(`boinc-gahp blahp install: condor_config_val is not on PATH and ${nowhere}/libexec/blahp does not exist: put HTCondor's bin/ on PATH, or give the folder (boinc-gahp blahp install <libexec dir>)\n`);

  const installed = await runCli(['blahp', 'install'], { env });
  expect(installed.code).toBe(0);
  expect(installed.stdout.split('\n')[0]).toBe(`blahpd runs batch scripts from ${folder} (RELEASE_DIR from condor_config_val + libexec/blahp)`);
  expect(installed.stdout).toContain(`wrote ${folder}/boinc_ping.sh\n`);
  const ok = await doctor([], { env });
  expect(ok.code).toBe(0);
  expect(ok.lines[0]).toBe(`ok    ${what}: boinc_submit.sh, boinc_status.sh, boinc_cancel.sh, boinc_hold.sh, boinc_resume.sh, boinc_ping.sh installed, executable, run ${process.execPath} ${ENTRY}`);

  const removed = await runCli(['blahp', 'uninstall'], { env });
  expect(removed.code).toBe(0);
  expect(removed.stdout).toContain(`removed ${folder}/boinc_submit.sh\n`);
  expect(folderState(folder)).toEqual(before);
  // A file of one of the names that install did not write stays.
  fs.writeFileSync(path.join(folder, 'boinc_ping.sh'), '#!/bin/sh\necho mine\n', { mode: 0o755 });
  const again = await runCli(['blahp', 'uninstall', folder]);
  expect(again.stdout).toBe(`left ${folder}/boinc_ping.sh: not written by boinc-gahp\nno boinc_*.sh written by boinc-gahp in ${folder}\n`);
  expect(fs.readFileSync(path.join(folder, 'boinc_ping.sh'), 'utf8')).toBe('#!/bin/sh\necho mine\n');
});

test('project over https: the certificate verified through NODE_EXTRA_CA_CERTS; refused when nothing trusts it', async () => {
  const tlsDir = path.join(REPO_ROOT, 'test', 'support', 'tls');
  const cert = path.join(tlsDir, 'test-cert.pem');
  const target = new URL(server.url);
  // A TLS front for the test server, as a site's https project would have.
  const front = await startTlsFront(target, path.join(tlsDir, 'test-key.pem'), cert);
  const httpsUrl = `https://127.0.0.1:${front.port}${target.pathname}`;
  try {
    const [trusted, untrusted] = await Promise.all([
      doctor([], { url: httpsUrl, env: { NODE_EXTRA_CA_CERTS: cert } }),
      doctor([], { url: httpsUrl, env: { NODE_EXTRA_CA_CERTS: '' } }),
    ]);
    expect(trusted.code).toBe(0);
    expect(line(trusted, 'trust sources')).toMatch(new RegExp(`^ok {4}trust sources: .*NODE_EXTRA_CA_CERTS ${cert}`));
    expect(line(trusted, 'project URL')).toMatch(/^ok {4}project URL https:\/\/127\.0\.0\.1:\d+\/boinc_test\/: DNS .*, TCP .*, TLS TLSv1\.3 certificate of boinc-gahp test server issued by boinc-gahp test server verified, HTTP 200$/);
    expect(line(trusted, 'upload through job_file.php')).toMatch(/^ok /);
    expect(untrusted.code).toBe(1);
    // A refused certificate's subject and issuer are not known: node drops the certificate
    // with the failed handshake, and the probe does not connect a second time unverified.
    expect(line(untrusted, 'project URL')).toMatch(/^FAIL {2}project URL https:.*, TCP 127\.0\.0\.1:\d+ connected in \d+ ms, then TLS failed: certificate problem with 127\.0\.0\.1:\d+: self-signed certificate \(DEPTH_ZERO_SELF_SIGNED_CERT\); trusted: node's bundled roots.* {2}-> fix: if the project's certificate is signed by a site CA, give that CA with --ca-file <PEM file> \(BOINC_GAHP_CA_FILE\)/);
  } finally {
    await front.close();
  }
});

test('project through a proxy: every rung and RPC through it, credentials never printed; wrong credentials are a FAIL at the HTTP rung', async () => {
  // boinc.invalid resolves only in the proxy: a check that passes went through it.
  const proxy = await startForwardProxy({ hosts: { 'boinc.invalid': '127.0.0.1' }, credentials: 'site:s3cret-pass' });
  const viaProxy = server.url.replace('127.0.0.1', 'boinc.invalid');
  const proxyWith = (password: string) => `http://site:${password}@127.0.0.1:${proxy.port}`;
  try {
    const [good, wrong] = await Promise.all([
      doctor([], { url: viaProxy, env: { http_proxy: proxyWith('s3cret-pass') } }),
      doctor([], { url: viaProxy, env: { http_proxy: proxyWith('wrong-pass') } }),
    ]);
    for (const r of [good, wrong]) expect(r.stdout + r.stderr).not.toMatch(/s3cret-pass|wrong-pass/);
    expect(good.code).toBe(0);
    expect(line(good, 'proxy')).toBe(`ok    proxy for ${new URL(viaProxy).origin}: http://127.0.0.1:${proxy.port} (with credentials, not shown)`);
    expect(line(good, 'project URL')).toMatch(new RegExp(`^ok {4}project URL ${viaProxy}: DNS 127\\.0\\.0\\.1 \\(proxy\\) -> 127\\.0\\.0\\.1, TCP 127\\.0\\.0\\.1:${proxy.port} connected in \\d+ ms, HTTP 200$`));
    expect(line(good, 'upload through job_file.php')).toMatch(/^ok /);
    const targets = proxy.requests.filter((r) => r.refused === undefined).map((r) => new URL(r.target).pathname.replace('/boinc_test/', ''));
    expect(new Set(targets)).toEqual(new Set(['', 'apps.php', 'submit_rpc_handler.php', 'get_output3.php', 'job_file.php']));

    expect(wrong.code).toBe(1);
    expect(line(wrong, 'project URL')).toBe(`FAIL  project URL ${viaProxy}: DNS 127.0.0.1 (proxy) -> 127.0.0.1, TCP 127.0.0.1:${proxy.port} connected in ${/connected in (\d+) ms/.exec(line(wrong, 'project URL'))?.[1]} ms, HTTP 407: ` +
      "the proxy wants credentials it did not get or refused them  -> fix: put the proxy's user and password into its URL (--proxy http://user:password@host:port, or the proxy variable)");
  } finally {
    await proxy.close();
  }
});
