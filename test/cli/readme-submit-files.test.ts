/**
 * Every submit file the README shows (a fenced block with a `queue` line) runs through
 * bin/boinc-gahp submit against the bundled test server, as written: only the project URL
 * and the authenticator file's path are put in, and the input files it names are made.
 * A block fenced as ```condor_submit is one for HTCondor alone (the `batch boinc` and
 * job-router examples): boinc-gahp submit must refuse it with a usage error, so the mark
 * goes when the CLI learns to run it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';
import { runCli } from './cli-support.js';

const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
const submitFiles = [...readme.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)]
  .filter((m) => /^queue\b/m.test(m[2]!))
  .map((m) => ({ lang: m[1]!, text: m[2]!, line: readme.slice(0, m.index).split('\n').length }));

let server: TestBoincServer;
let dir: string;
beforeAll(async () => {
  server = await startTestServer({ autoCompleteSeconds: 0.1 });
  dir = makeTempDir('boinc-gahp-readme-');
  fs.writeFileSync(path.join(dir, 'auth'), `${server.authenticator}\n`, { mode: 0o600 });
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const submit = (file: string) =>
  runCli(['--state-dir', path.join(dir, 'state'), '--project-url', server.url, '--authenticator-file', path.join(dir, 'auth'), 'submit', file, '--poll', '1'], { cwd: dir, timeoutMs: 100_000 });

test('the README shows submit files: some to run here, some for HTCondor alone', () => {
  expect(submitFiles.filter((f) => f.lang === '').length).toBeGreaterThanOrEqual(2);
  expect(submitFiles.filter((f) => f.lang === 'condor_submit').length).toBeGreaterThanOrEqual(1);
  expect(submitFiles.filter((f) => f.lang !== '' && f.lang !== 'condor_submit')).toEqual([]);
});

test.each(submitFiles.map((f) => [f.line, f] as const))('README line %i: the submit file runs through boinc-gahp submit (or is refused, when marked condor_submit)', async (line, f) => {
  const file = `readme-${line}.sub`;
  const text = f.text
    .replace(/^(grid_resource\s*=\s*boinc\s+)\S+$/m, `$1${server.url}`)
    .replace(/^(boinc_authenticator_file\s*=\s*).*$/m, `$1${path.join(dir, 'auth')}`);
  fs.writeFileSync(path.join(dir, file), text);
  const inputs = /^transfer_input_files\s*=\s*(.*)$/m.exec(text)?.[1]?.split(/\s*,\s*/) ?? [];
  for (const input of inputs) fs.writeFileSync(path.join(dir, input), `input of README line ${line}\n`);
  const r = await submit(file);
  if (f.lang === 'condor_submit') {
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^boinc-gahp: ${file}:\\d+: .*not supported`));
    return;
  }
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}${r.stdout}`);
  const jobs = Number(/^queue\s+(\d+)/m.exec(text)?.[1] ?? 1);
  expect(r.stdout).toMatch(new RegExp(`^cluster \\d+: ${jobs} jobs done, outputs fetched; 0 failed$`, 'm'));
  expect(r.stderr).not.toMatch(/warning|error/i);
}, 120_000);
