/**
 * The GAHP's own command line without commander (gahp/cli/gahp-args.ts): a plain line
 * gives the same options program.ts's commander definitions give; everything else is left to
 * commander (undefined), so its messages and exit codes stay the only ones. And the real
 * GAHP started that way, as HTCondor starts it, never loads commander, nor the modules
 * only some runs need (docs/architecture.md, "Round trips and memory").
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { plainGahpOptions } from '../../gahp/cli/gahp-args.js';
import { createServices, DEFAULT_COMMAND_TIMEOUT_MS } from '../../gahp/create-services.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';

test('plain GAHP lines and BOINC_GAHP_* variables are read as commander would', () => {
  expect(plainGahpOptions([], {}, false)).toEqual({});
  expect(plainGahpOptions(['--state-dir', '/s', '--log=/l', '--log-level', 'info', '--debug', '--rpc-timeout', '2.5', '--concurrency', '3', '--protocol'], {}, true)).toEqual({
    stateDir: '/s', log: '/l', logLevel: 'info', debug: true, rpcTimeout: 2.5, concurrency: 3, protocol: true,
  });
  expect(plainGahpOptions(['--state-dir', '/cli'], { BOINC_GAHP_STATE_DIR: '/env', BOINC_GAHP_COMMAND_TIMEOUT: '60', BOINC_GAHP_PROJECT_URL: 'http://p/', BOINC_GAHP_AUTHENTICATOR_FILE: '/a' }, false)).toEqual({
    stateDir: '/cli', commandTimeout: 60, projectUrl: 'http://p/', authenticatorFile: '/a',
  });
  expect(plainGahpOptions(['--proxy', 'http://p:3128', '--ca-file', '/ca.pem'], {}, false)).toEqual({ proxy: 'http://p:3128', caFile: '/ca.pem' });
  expect(plainGahpOptions([], { BOINC_GAHP_PROXY: '', BOINC_GAHP_NO_PROXY: '.example.org', BOINC_GAHP_CA_FILE: '/ca.pem' }, false)).toEqual({ proxy: '', noProxy: '.example.org', caFile: '/ca.pem' });
  expect(plainGahpOptions(['--max-log', '0', '--max-num-log', '2'], { BOINC_GAHP_MAX_LOG: '1M' }, false)).toEqual({ maxLog: 0, maxNumLog: 2 });
  expect(plainGahpOptions([], { BOINC_GAHP_MAX_LOG: '512K', BOINC_GAHP_MAX_NUM_LOG: '7' }, false)).toEqual({ maxLog: 512 * 1024, maxNumLog: 7 });
  // The option that opened connections ahead is gone: commander rejects it.
  expect(plainGahpOptions(['--connect-ahead', '2'], {}, false)).toBeUndefined();
});

test('--command-timeout: 0 means none; without it the GAHP stops a command just before the gridmanager\'s 300 s call timeout', async () => {
  expect(plainGahpOptions(['--command-timeout', '0'], {}, false)).toEqual({ commandTimeout: 0 });
  expect(plainGahpOptions(['--command-timeout', '-1'], {}, false)).toBeUndefined();
  expect(plainGahpOptions(['--command-timeout', ''], {}, false)).toBeUndefined();
  const dir = makeTempDir('boinc-gahp-args-');
  try {
    const byDefault = createServices({ stateDir: dir });
    const none = createServices({ stateDir: dir, commandTimeoutMs: 0 });
    const given = createServices({ stateDir: dir, commandTimeoutMs: 5000 });
    try {
      expect(byDefault.config.commandTimeoutMs).toBe(DEFAULT_COMMAND_TIMEOUT_MS);
      expect(DEFAULT_COMMAND_TIMEOUT_MS).toBeLessThan(300_000);
      expect(none.config.commandTimeoutMs).toBeUndefined();
      expect(given.config.commandTimeoutMs).toBe(5000);
    } finally {
      for (const s of [byDefault, none, given]) {
        s.session.close();
        await s.ledger.close();
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('anything else is left to commander', () => {
  for (const args of [['ping'], ['--help'], ['-V'], ['--version'], ['--interactive'], ['--nope'], ['--rpc-timeout', '0'], ['--rpc-timeout', 'soon'], ['--concurrency', '1.5'], ['--log-level', 'loud'], ['--max-log', '10 MB'], ['--max-num-log', '0'], ['--state-dir'], ['status', '--json']]) {
    expect({ args, got: plainGahpOptions(args, {}, false) }).toEqual({ args, got: undefined });
  }
  expect(plainGahpOptions([], { BOINC_GAHP_RPC_TIMEOUT: '-1' }, false)).toBeUndefined();
  expect(plainGahpOptions([], { BOINC_GAHP_SOMETHING_NEW: 'x' }, false)).toBeUndefined();
  // On a terminal with no --protocol it is the interactive prompt: commander's path.
  expect(plainGahpOptions([], {}, true)).toBeUndefined();
});

test('the GAHP as HTCondor starts it answers without loading commander; a bad value still gets commander\'s usage error', async () => {
  const stateDir = makeTempDir('boinc-gahp-args-');
  const probe = path.join(stateDir, 'probe.cjs');
  // Reports at exit whether any module of commander was loaded into the process.
  fs.writeFileSync(probe, "process.on('exit', () => process.stderr.write('commander loaded: ' + Object.keys(require.cache).some((k) => k.includes('/commander/')) + '\\n'));\n");
  try {
    const run = (args: string[], input: string) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        const child = spawn(process.execPath, ['-r', probe, GAHP_BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (err += d));
        child.on('close', (code) => resolve({ code, out, err }));
        child.stdin.end(input);
      });
    const plain = await run(['--state-dir', stateDir], 'VERSION\nQUIT\n');
    expect(plain.code).toBe(0);
    expect(plain.out).toMatch(/^\$GahpVersion: /);
    expect(plain.err).toContain('commander loaded: false');
    const bad = await run(['--state-dir', stateDir, '--rpc-timeout', '0'], '');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--rpc-timeout must be a positive number');
    expect(bad.err).toContain('commander loaded: true');
  } finally {
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
}, 30_000);

test('the GAHP as HTCondor starts it loads no CLI subcommands and no BOINC_FETCH_OUTPUT modules until a fetch comes', async () => {
  const dir = makeTempDir('boinc-gahp-modules-');
  const log = path.join(dir, 'modules.log');
  // A module loader hook (node:module register) that writes down every file module loaded.
  fs.writeFileSync(path.join(dir, 'hooks.mjs'), `import * as fs from 'node:fs';
export async function load(url, context, next) {
  if (url.startsWith('file:')) fs.appendFileSync(${JSON.stringify(log)}, url + '\\n');
  return next(url, context);
}
`);
  fs.writeFileSync(path.join(dir, 'register.mjs'), "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n");
  try {
    const run = (input: string) =>
      new Promise<{ code: number | null; out: string; loaded: string[] }>((resolve) => {
        fs.rmSync(log, { force: true });
        const child = spawn(process.execPath, ['--import', path.join(dir, 'register.mjs'), GAHP_BIN, '--state-dir', path.join(dir, 'state')], { stdio: ['pipe', 'pipe', 'ignore'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('close', (code) => resolve({ code, out, loaded: fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n') : [] }));
        child.stdin.end(input);
      });
    const startup = 'COMMANDS\nRESPONSE_PREFIX GAHP:\nASYNC_MODE_ON\nBOINC_SELECT_PROJECT http://127.0.0.1:9/ x\n';
    const idle = await run(startup + 'QUIT\n');
    expect(idle.code).toBe(0);
    // The hook sees the GAHP's modules (BOINC_SUBMIT's are loaded at start-up on purpose).
    expect(idle.loaded.some((u) => u.endsWith('/dist/gahp/commands/submit.js'))).toBe(true);
    const lazy = ['/dist/gahp/cli/program.js', '/dist/gahp/cli/subcommands.js', '/dist/gahp/cli/gahp-client.js', '/dist/gahp/commands/fetch-output.js', '/dist/gahp/output/', '/commander/'];
    expect(idle.loaded.filter((u) => lazy.some((l) => u.includes(l)))).toEqual([]);
    // The first fetch loads its module and runs (no such project: an error result, not a crash).
    const fetch = await run(startup + `BOINC_FETCH_OUTPUT 7 job_1 ${dir} /dev/null ALL 0\n` + 'QUIT\n');
    expect(fetch.code).toBe(0);
    expect(fetch.out).toContain('GAHP:S\n');
    expect(fetch.loaded.some((u) => u.endsWith('/dist/gahp/commands/fetch-output.js'))).toBe(true);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
