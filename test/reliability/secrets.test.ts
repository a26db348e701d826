/**
 * Secrets and trust, through the real GAHP: the authenticator (and a wrong one tried first)
 * appears in no result, no stdout/stderr byte and no file the GAHP or its CLI writes (state
 * directory with its debug log, output directories), across successes, server errors and
 * injected faults; names with XML metacharacters reach the server literally where BOINC can
 * carry them and are refused before any RPC where it cannot (docs/boinc-server.md, "Command lines");
 * outputs named by the server cannot land outside the job's directory.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { batchName, esc, jobName, startEnv, submitBatch, type Env } from '../commands/helpers.js';
import { makeTempDir } from '../support/gahp-process.js';
import { runCli } from '../cli/cli-support.js';
import { sampleApps, type TestApp } from '../../fixtures/test-server/index.js';
import { submitLine, writeInput } from '../submit/support.js';
import { expectNoSecretIn, walk } from './support.js';
import { makeZip } from '../support/hostile-zip.js';

const xmlEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');


/** Zip outputs chosen by the input text: entries through a symlinked dir, backslashes, duplicates. */
const trapZip: TestApp = {
  name: 'trapzip',
  inputs: [{ openName: 'in' }],
  outputs: [{ openName: 'out.zip' }],
  async run(ctx) {
    const kind = ctx.inputs[0]!.toString('latin1').trim();
    let zip: Buffer;
    if (kind === 'through-link') zip = await makeZip([{ name: 'ok.txt', data: 'ok\n' }, { name: 'link/escaped.txt', data: 'evil\n' }], []);
    else if (kind === 'backslash') zip = await makeZip([{ name: 'ok.txt', data: 'ok\n' }, { name: 'zz/escaped.txt', data: 'evil\n' }], [['zz/escaped.txt', '..\\escaped.txt']]);
    else zip = await makeZip([{ name: 'ok.txt', data: 'ok\n' }, { name: 'dup.txt', data: 'one\n' }, { name: 'dpp.txt', data: 'two\n' }], [['dpp.txt', 'dup.txt']]);
    return { kind: 'success', outputs: [zip], stderr: `trapzip ${kind}\n`, elapsedTime: 1, cpuTime: 1 };
  },
};

/** An app whose output template names a file outside the job's directory. */
const escapingName: TestApp = {
  name: 'escapename',
  inputs: [{ openName: 'in' }],
  outputs: [{ openName: '../escaped-by-name.txt' }],
  run: () => ({ kind: 'success', outputs: [Buffer.from('evil\n')], stderr: 'escapename\n' }),
};

let env: Env;
let stateDir: string;
let outRoot: string;

beforeAll(async () => {
  stateDir = makeTempDir('boinc-gahp-secret-state-');
  outRoot = makeTempDir('boinc-gahp-secret-out-');
  env = await startEnv({ apps: [...sampleApps, trapZip, escapingName] }, { stateDir, logFile: path.join(stateDir, 'gahp.log'), args: ['--rpc-timeout', '60'] });
});

afterAll(async () => {
  await env?.close();
  for (const d of [stateDir, outRoot]) if (d) fs.rmSync(d, { recursive: true, force: true });
});

describe('the authenticator stays secret', () => {
  test('in no result, stdout, stderr, state-dir file, debug log or output file, across successes, errors and faults', async () => {
    const g = env.gahp;
    const auth = env.server.authenticator;
    const wrong = 'ab'.repeat(16);
    const results: string[][] = [];
    const call = async (words: string) => {
      const r = await g.call(words, 60_000);
      results.push(r);
      return r;
    };

    // A wrong authenticator first: every call fails, naming the problem but not the secret.
    await g.selectProject(env.server.url, wrong);
    const b0 = batchName('concat');
    const f0 = writeInput(env.dir, 'sec/a.txt', 'secret test a\n');
    try {
      expect((await call(`BOINC_SUBMIT ${submitLine(b0, 'concat', [{ name: jobName(b0, 1), inputs: [[f0, 'a'], [f0, 'b']] }])}`))[0]).toMatch(/bad authenticator/);
      expect((await call(`BOINC_QUERY_BATCHES 0 1 ${esc(b0)}`))[0]).toMatch(/bad authenticator/);
      expect((await call(`BOINC_FETCH_OUTPUT ${esc(jobName(b0, 1))} ${esc(outRoot)} /dev/null ALL 0`))[0]).not.toBe('NULL');
    } finally {
      await g.selectProject(env.server.url, auth);
    }

    // A whole cycle with faults on the way.
    const batch = batchName('concat');
    const fa = writeInput(env.dir, 'sec/b.txt', 'secret test b\n');
    const jobs = [0, 1, 2].map((i) => ({ name: jobName(batch, 7, i), args: [`-x${i}`], inputs: [[f0, 'a'], [fa, 'b']] as Array<[string, string]> }));
    env.server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'drop-after' });
    env.server.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: '5xx' });
    expect(await call(`BOINC_SUBMIT ${submitLine(batch, 'concat', jobs)}`)).toEqual(['NULL']);
    expect((await call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`))[0]).toBe('NULL');
    env.server.advanceAll(batch);
    const iwd = path.join(outRoot, 'iwd');
    fs.mkdirSync(iwd);
    expect((await call(`BOINC_FETCH_OUTPUT ${esc(jobs[0]!.name)} ${esc(iwd)} job0.err ALL 0`))[0]).toBe('NULL');
    // Download failures: the URL holds the authenticator (auth_str).
    for (const kind of ['error-body', '5xx', 'drop'] as const) {
      env.server.injectFault({ script: 'get_output.php', kind, count: 100 });
      const r = await call(`BOINC_FETCH_OUTPUT ${esc(jobs[1]!.name)} ${esc(iwd)} job1.err SOME 1 joined joined.1`);
      env.server.clearFaults();
      expect(r).toHaveLength(1);
      expect(r[0]).toContain('get_output failed');
    }
    // A job with no output, an unknown job, an unknown batch.
    expect((await call(`BOINC_FETCH_OUTPUT ${esc(batch + '#99.0')} ${esc(iwd)} x.err ALL 0`))[0]).not.toBe('NULL');
    expect((await call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch + 'x')}`))[0]).toContain('no batch named');
    expect(await call(`BOINC_SET_LEASE ${esc(batch)} ${Math.floor(Date.now() / 1000) + 3600}`)).toEqual(['NULL']);
    expect((await call(`BOINC_ABORT_JOBS ${esc(batch + '#98.0')}`))[0]).not.toBe('NULL');
    expect(await call(`BOINC_ABORT_JOBS ${esc(jobs[2]!.name)}`)).toEqual(['NULL']);

    // The CLI on the same state dir, the authenticator in a file kept elsewhere.
    const authFile = path.join(env.dir, 'authenticator');
    fs.writeFileSync(authFile, auth + '\n', { mode: 0o600 });
    const cliLog = path.join(stateDir, 'cli.log');
    const common = ['--state-dir', stateDir, '--log', cliLog, '--log-level', 'debug', '--project-url', env.server.url, '--authenticator-file', authFile];
    const iwd2 = path.join(outRoot, 'cli');
    fs.mkdirSync(iwd2);
    const cli = [
      await runCli([...common, 'ping']),
      await runCli([...common, 'status', '--json']),
      await runCli([...common, 'fetch', jobs[1]!.name, '-d', iwd2, '--stderr', 'err.txt']),
      await runCli([...common, 'lease', batch, '--hours', '2']),
    ];
    expect(cli.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(await call(`BOINC_RETIRE_BATCH ${esc(batch)}`)).toEqual(['NULL']);
    expect(await g.quit()).toBe(0);

    // Where it must not appear.
    const secrets = [auth, wrong];
    for (const r of results) for (const s of secrets) expect(r.join(' ')).not.toContain(s);
    for (const s of secrets) {
      expect(g.rawStdout).not.toContain(s);
      expect(g.stderr).not.toContain(s);
      for (const r of cli) expect(r.stdout + r.stderr).not.toContain(s);
    }
    const scanned = expectNoSecretIn([stateDir, outRoot], secrets);
    // The scan saw the debug logs (with the download URLs), the ledger and the outputs.
    expect(walk(stateDir)).toEqual(expect.arrayContaining(['gahp.log', 'cli.log', 'ledger.jsonl', 'hash-cache.v2']));
    expect(fs.readFileSync(path.join(stateDir, 'gahp.log'), 'utf8')).toMatch(/get_output failed/);
    expect(walk(outRoot)).toEqual(expect.arrayContaining(['iwd/joined', 'iwd/info', 'iwd/job0.err', 'cli/joined', 'cli/err.txt']));
    expect(scanned).toBeGreaterThanOrEqual(9);
    await env.restart();
  }, 180_000);
});

describe('names with XML metacharacters', () => {
  const hostile = 'condor#schedd#uppercase#1796204752</batch_name><x>&';

  test('BOINC_SUBMIT refuses a batch name BOINC cannot carry before any RPC, naming it', async () => {
    const p = writeInput(env.dir, 'names/in.txt', 'names\n');
    env.server.clearRpcLog();
    const r = await env.gahp.call(`BOINC_SUBMIT ${submitLine(hostile, 'uppercase', [{ name: `${hostile}#1.0`, inputs: [[p, 'in']] }])}`);
    expect(r).toHaveLength(1);
    expect(r[0]).toContain('batch name');
    expect(r[0]).toContain('</batch_name><x>&');
    expect(env.server.rpcLog()).toEqual([]);
    expect(env.server.batches().some((b) => b.name.includes('<x>'))).toBe(false);
  });

  test('commands that only name an existing batch or job send it literally (XML-escaped, URL-encoded) and get the server\'s answer', async () => {
    const checks: Array<[string, string, (r: string[]) => void]> = [
      ['query_batch2', `BOINC_QUERY_BATCHES 0 1 ${esc(hostile)}`, (r) => expect(r[0]).toMatch(new RegExp(`no batch named ${hostile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`))],
      ['set_expire_time', `BOINC_SET_LEASE ${esc(hostile)} 1900000000`, (r) => expect(r[0]).toMatch(/^set_expire_time failed: /)],
      ['retire_batch', `BOINC_RETIRE_BATCH ${esc(hostile)}`, (r) => expect(r[0]).toMatch(/^retire_batch failed: /)],
      ['abort_jobs', `BOINC_ABORT_JOBS ${esc(hostile + '#1.0')}`, (r) => expect(r[0]).toMatch(/^abort_jobs failed: .*<x>&#1\.0/)],
    ];
    for (const [rpc, words, check] of checks) {
      env.server.clearRpcLog();
      const r = await env.gahp.call(words);
      expect(r).toHaveLength(1);
      check(r);
      const log = env.server.rpcLog();
      expect(log.map((e) => e.rpc)).toEqual([rpc]);
      expect(log[0]!.raw).toContain(xmlEscape(hostile));
      expect(log[0]!.raw).not.toContain('<x>');
    }
    // A fetch: the job name travels in get_output's URL after the template and status calls.
    const iwd = makeTempDir('boinc-gahp-names-');
    try {
      env.server.clearRpcLog();
      const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(hostile + '#1.0')} ${esc(iwd)} err ALL 0`);
      expect(r).toHaveLength(1);
      for (const e of env.server.rpcLog()) {
        if (e.script === 'get_output.php') expect(new URL(e.raw, env.server.url).searchParams.get('wu_name')).toBe(hostile + '#1.0');
        else expect(e.raw).toContain(xmlEscape(hostile + '#1.0'));
      }
      expect(walk(iwd)).toEqual([]);
    } finally {
      fs.rmSync(iwd, { recursive: true, force: true });
    }
  });

  test('job names and arguments BOINC cannot carry are refused before any RPC, naming the job and the argument', async () => {
    const p = writeInput(env.dir, 'names/in2.txt', 'names 2\n');
    const batch = batchName('uppercase');
    const badArgs = ['two words', "it's", 'say"hi"', 'back\\slash', '<tag>', 'a&b', 'tab\there', 'line\nbreak', 'nb\u00a0sp', 'bell\u0007', 'ls\u2028'];
    const badNames = [`${batch}#1 0`, `${batch}#<1>.0`, `${batch}#1.0&`, `-${batch}#1.0`, `${batch}#jöb.0`, `${batch}#it's.0`, `${batch}#q"t.0`];
    const cases: Array<[string, string]> = [
      // A bad job is refused alone (its neighbours go): alone in its batch, nothing is sent.
      ...badArgs.map((a): [string, string] => [submitLine(batch, 'uppercase', [{ name: jobName(batch, 2), args: ['ok', a], inputs: [[p, 'in']] }]), jobName(batch, 2)]),
      ...badNames.map((n): [string, string] => [submitLine(batch, 'uppercase', [{ name: n, inputs: [[p, 'in']] }]), n.slice(batch.length)]),
    ];
    for (const [line, named] of cases) {
      env.server.clearRpcLog();
      const r = await env.gahp.call(`BOINC_SUBMIT ${line}`);
      expect(r).toHaveLength(1);
      expect(r[0]).toMatch(/^no job was sent to BOINC: checking names and arguments: /);
      expect(r[0]).toContain(JSON.stringify(named).slice(1, -1));
      expect(env.server.rpcLog()).toEqual([]);
    }
    expect(env.server.batches().some((b) => b.name === batch)).toBe(false);
    // What BOINC can carry (no shell on the way: `$` and backquotes too) arrives intact.
    const fine = ['$HOME', '`id`', 'a=b/c*', '--x=1,2;3', 'ü'];
    expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: jobName(batch, 3), args: fine, inputs: [[p, 'in']] }])}`)).toEqual(['NULL']);
    expect(env.server.jobs(batch).map((j) => j.commandLine)).toEqual([fine.join(' ')]);
  });
});

describe('outputs cannot land outside the job directory', () => {
  let batch: string;
  beforeAll(async () => {
    batch = batchName('trapzip');
    await submitBatch(env, batch, 'trapzip', ['through-link', 'backslash', 'duplicate'].map((k, i) => ({ name: jobName(batch, 1, i), inputs: [k] })));
    await submitBatch(env, batch + 'n', 'escapename', [{ name: jobName(batch + 'n', 1), inputs: ['x'] }]);
    env.server.advanceAll();
    await env.server.settled();
  });

  test.each([
    ['an entry through a symbolic link in iwd', 0, /symbolic link/],
    ['an entry with a backslash (..\\)', 1, /unsafe|outside/],
    ['an entry that appears twice', 2, /twice/],
  ])('zip with %s: refused, nothing written anywhere', async (_what, n, pattern) => {
    const root = makeTempDir('boinc-gahp-zip-');
    try {
      const iwd = path.join(root, 'iwd');
      const outside = path.join(root, 'outside');
      fs.mkdirSync(iwd);
      fs.mkdirSync(outside);
      fs.symlinkSync(outside, path.join(iwd, 'link'));
      const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch, 1, n))} ${esc(iwd)} err ALL 0`);
      expect(r).toHaveLength(1);
      expect(r[0]).toMatch(pattern);
      expect(walk(outside)).toEqual([]);
      expect(fs.readdirSync(iwd)).toEqual(['link']);
      expect(walk(root)).toEqual(['iwd/link']);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('an output template name with ../ is refused; an explicit destination for it works', async () => {
    const root = makeTempDir('boinc-gahp-name-');
    try {
      const iwd = path.join(root, 'iwd');
      fs.mkdirSync(iwd);
      const job = jobName(batch + 'n', 1);
      const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} err ALL 0`);
      expect(r).toHaveLength(1);
      expect(r[0]).toMatch(/outside the job's directory/);
      expect(walk(root)).toEqual([]);
      // The user (HTCondor) may name where it goes.
      const r2 = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} err SOME 1 ../escaped-by-name.txt mine.txt`);
      expect(r2[0]).toBe('NULL');
      expect(walk(root)).toEqual(['iwd/err', 'iwd/mine.txt']);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
