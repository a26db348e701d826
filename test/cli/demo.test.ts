/**
 * The README's main command: `npm run demo` (node dist/fixtures/demo.js) exits 0 within a
 * minute, prints the protocol exchange with the authenticator masked, and leaves 20
 * correct outputs (checked here again, independently of the demo's own checks).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { upperAscii } from '../../fixtures/apps.js';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import { REPO_ROOT, makeTempDir } from '../support/gahp-process.js';
import { runCli } from './cli-support.js';

test('the demo runs the whole cycle and every output is correct', async () => {
  const dir = makeTempDir('boinc-gahp-demo-test-');
  try {
    const out = path.join(dir, 'demo-output');
    const started = Date.now();
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(REPO_ROOT, 'dist', 'fixtures', 'demo.js'), '--output-dir', out], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let so = '';
      let se = '';
      child.stdout.setEncoding('utf8');
      child.stderr.setEncoding('utf8');
      child.stdout.on('data', (d: string) => (so += d));
      child.stderr.on('data', (d: string) => (se += d));
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`demo did not finish in 60 s:\n${so}\n${se}`));
      }, 60_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve({ code: c, stdout: so, stderr: se });
      });
    });
    if (code !== 0) throw new Error(`demo exited ${code}:\n${stdout.slice(-4000)}\n${stderr}`);
    expect(Date.now() - started).toBeLessThan(60_000);

    // What the gridmanager would do, in order, readable.
    const order = ['COMMANDS', 'CONDOR_VERSION', 'RESPONSE_PREFIX GAHP:', 'ASYNC_MODE_ON', 'BOINC_SELECT_PROJECT', 'BOINC_PING',
      'BOINC_SUBMIT', 'BOINC_SET_LEASE', 'BOINC_QUERY_BATCHES', 'BOINC_FETCH_OUTPUT', 'BOINC_RETIRE_BATCH', 'QUIT'];
    let at = 0;
    for (const word of order) {
      const i = stdout.indexOf(`gridmanager -> GAHP  ${word}`, at);
      expect({ word, found: i >= 0 }).toEqual({ word, found: true });
      at = i;
    }
    expect(stdout).toMatch(/BOINC_SELECT_PROJECT http:\/\/127\.0\.0\.1:[0-9]+\/\S+ \*\*\*\n/);
    expect(stdout).not.toMatch(/BOINC_SELECT_PROJECT \S+ [0-9a-f]{32}/);
    expect(stdout).toMatch(/outputs correct +20\/20/);
    expect(stdout).toMatch(/input files uploaded +1 /);
    expect(stdout).toMatch(/^OK: /m);

    // The outputs, checked against the uppercase app's formula.
    const input = Buffer.from('volunteer computing with htcondor and boinc\nthe quick brown fox jumps over the lazy dog\n');
    const files = fs.readdirSync(out).sort();
    expect(files.filter((f) => f.startsWith('out.'))).toHaveLength(20);
    for (let p = 0; p < 20; p++) {
      expect(fs.readFileSync(path.join(out, `out.1001.${p}`))).toEqual(Buffer.concat([upperAscii(input), Buffer.from(`\nargs: -n ${p}\n`)]));
      expect(fs.readFileSync(path.join(out, `job.1001.${p}.err`), 'utf8')).toMatch(stderrFilePattern(`uppercase: ${input.length} bytes\n`));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('boinc-gahp-demo --help prints its usage; a wrong option is a usage error', async () => {
  const bin = path.join(REPO_ROOT, 'bin', 'boinc-gahp-demo');
  const help = await runCli(['--help'], { bin });
  expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: '' });
  expect(help.stdout).toMatch(/^Usage: boinc-gahp-demo \[options\]\n/);
  for (const option of ['--output-dir <dir>', '--quiet', '--help']) expect(help.stdout).toContain(option);
  const wrong = await runCli(['--bogus'], { bin });
  expect(wrong.code).toBe(2);
  expect(wrong.stderr).toMatch(/^error: unknown option '--bogus'\n/);
});
