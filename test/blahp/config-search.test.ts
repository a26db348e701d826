/**
 * The scripts in a folder without blahp's stock scripts (no blah_load_config.sh beside
 * them, as in the packages' /usr/libexec/blahp when blahp is elsewhere) read blah.config
 * themselves, where blahpd reads it: $BLAHPD_CONFIG_LOCATION, else
 * $BLAHPD_LOCATION/etc/blah.config, else /etc/blah.config. boinc_ping.sh run as blahpd runs
 * it (test/support/blahpd.ts) against the test server; with no blah.config anywhere its
 * message names every file it looked for. (This machine must have no /etc/blah.config.)
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { Blahpd } from '../support/blahpd.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';

let server: TestBoincServer;
let dir: string;
let libexec: string;
let configText: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-blahp-config-');
  libexec = path.join(dir, 'libexec');
  fs.mkdirSync(libexec);
  const inst = spawnSync(process.execPath, [GAHP_BIN, 'blahp', 'install', libexec], { encoding: 'utf8' });
  if (inst.status !== 0) throw new Error(`install failed: ${inst.stderr}`);
  const authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, `${server.authenticator}\n`, { mode: 0o600 });
  configText = [
    '# blah.config: quoted and unquoted values, a comment after one',
    'supported_lrms=condor,boinc',
    `boinc_project_url="${server.url}"`,
    `boinc_authenticator_file=${authFile}   # the account`,
    `boinc_state_dir='${path.join(dir, 'state')}'`,
    '',
  ].join('\n');
}, 60_000);
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** boinc_ping.sh as blahpd runs it, with `env` and no BOINC_* variables. */
async function ping(env: NodeJS.ProcessEnv): Promise<string> {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BOINC_') && !k.startsWith('BLAHPD_') && k !== 'GLITE_LOCATION') base[k] = v;
  const tmp = fs.mkdtempSync(path.join(dir, 'tmp-'));
  const blahpd = new Blahpd({ libexecDir: libexec, tmpDir: tmp, cwd: dir, env: { ...base, ...env }, resultsCacheFile: null });
  const p = await blahpd.ping();
  expect(p.run!.exitCode).toBe(0);
  return p.run!.stdout;
}

test('no blah_load_config.sh beside the scripts: blah.config named by BLAHPD_CONFIG_LOCATION is read', async () => {
  expect(fs.existsSync(path.join(libexec, 'blah_load_config.sh'))).toBe(false);
  const config = path.join(dir, 'elsewhere.config');
  fs.writeFileSync(config, configText);
  expect(await ping({ BLAHPD_CONFIG_LOCATION: config })).toBe('0 No error\n');
});

test('no blah_load_config.sh: $BLAHPD_LOCATION/etc/blah.config is read (as under the gridmanager)', async () => {
  const location = path.join(dir, 'condor');
  fs.mkdirSync(path.join(location, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(location, 'etc', 'blah.config'), configText);
  expect(await ping({ BLAHPD_LOCATION: location })).toBe('0 No error\n');
});

test('no blah.config anywhere: the message names every file looked for', async () => {
  const location = path.join(dir, 'no-condor');
  expect(await ping({ BLAHPD_LOCATION: location })).toBe(
    `1 no BOINC project configured: no blah.config could be read (looked for ${location}/etc/blah.config: not readable; /etc/blah.config: ENOENT); ` +
      'create /etc/blah.config with supported_lrms=boinc, boinc_project_url and boinc_authenticator_file, or name another with BLAHPD_CONFIG_LOCATION\n',
  );
  // A blah.config without the keys: named as the file read.
  const empty = path.join(dir, 'empty.config');
  fs.writeFileSync(empty, 'supported_lrms=boinc\n');
  expect(await ping({ BLAHPD_CONFIG_LOCATION: empty })).toBe(
    `1 project URL: none given  -> fix: give boinc_project_url in ${empty} the project's master URL, e.g. https://boinc.example.org/project/\n`,
  );
});
