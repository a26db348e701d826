/**
 * Smoke test of the project bench's harness (not of its figures): `dist/test/bench/project.js`
 * as a child process against the bundled test server given by URL and authenticator file,
 * another GAHP given as a command line (here our own, with its own state dir), its submit
 * and many-files measures, one round. The real figures come from a real project
 * (test/bench/README.md, "Against a real project").
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { REPO_ROOT } from './lib/driver.js';
import { benchTempDir, removeTempDir } from './lib/tmp.js';

let server: ExtendedTestBoincServer;
let dir: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = benchTempDir('project-smoke');
});

afterAll(async () => {
  await server.close();
  removeTempDir(dir);
});

test('the submit and many measures run against a project given by URL, beside another GAHP command line', async () => {
  const auth = path.join(dir, 'auth');
  fs.writeFileSync(auth, server.authenticator);
  const json = path.join(dir, 'figures.json');
  const other = [process.execPath, path.join(REPO_ROOT, 'bin', 'boinc-gahp'), '--state-dir', path.join(dir, 'other-state')].join(' ');
  const args = [path.join(REPO_ROOT, 'dist', 'test', 'bench', 'project.js'), '--url', server.url, '--authenticator-file', auth, '--vs', other, '--rounds', '1', '--only', 'submit,many', '--json', json];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect({ code, output: code === 0 ? '' : output }).toEqual({ code: 0, output: '' });
  const { figures } = JSON.parse(fs.readFileSync(json, 'utf8')) as { figures: Record<string, number> };
  for (const side of ['ours', 'other', 'floor']) {
    expect(figures[`submit_cold_s_${side}`]).toBeGreaterThan(0);
    expect(figures[`submit_warm_s_${side}`]).toBeGreaterThan(0);
  }
  expect(figures.submit_peak_rss_mb_other).toBeGreaterThan(0);
  expect([figures.many_ok_ours, figures.many_ok_other]).toEqual([1, 1]);
  // Without an access log, no request counts are claimed.
  expect(Object.keys(figures).filter((k) => k.includes('rpcs'))).toEqual([]);
}, 180_000);
