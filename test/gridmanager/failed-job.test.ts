/**
 * A job BOINC gives up on, on HTCondor 10.0's `boinc` grid type (issue 44, item 2): the
 * gridmanager holds it with its own words, "Reason unknown, check the server", and asks
 * nothing more. So the GAHP (bin/boinc-gahp, driven as the gridmanager drives it,
 * test/support/gridmanager.ts) logs at info, the first time a status answer reports the job
 * ERROR, what the server says of it (its exit status), and `boinc-gahp query <batch>` shows
 * the same beside the status.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { BoincResourceEmu, GridmanagerGahp, remoteJobName, writeAuthenticatorFile, type GridJob, type ResourceRef } from '../support/gridmanager.js';
import { cliEnv, runCli } from '../cli/cli-support.js';

const LONG = 120_000;
let dir: string;
let stateDir: string;
let server: ExtendedTestBoincServer;
const gms: GridmanagerGahp[] = [];

beforeAll(async () => {
  dir = makeTempDir('boinc-gahp-failed-');
  stateDir = makeTempDir('boinc-gahp-failed-state-');
  server = await startTestServer({});
});

afterAll(async () => {
  for (const gm of gms.splice(0)) await gm.quit().catch(() => undefined);
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(stateDir, { recursive: true, force: true });
});


async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !ok(); i++) await new Promise((r) => setTimeout(r, 100));
  if (!ok()) throw new Error(`never happened: ${what}`);
}

test("a failed job's exit status is logged at info when a query first reports it ERROR, and `boinc-gahp query` shows it", async () => {
  const log = path.join(dir, 'gahp.log');
  const gm = await GridmanagerGahp.start({ stateDir, env: { BOINC_GAHP_LOG: log, BOINC_GAHP_LOG_LEVEL: 'info' } });
  gms.push(gm);
  const ref: ResourceRef = { url: server.url, authenticatorFile: writeAuthenticatorFile(dir, 'auth', server.authenticator) };
  const res = new BoincResourceEmu(gm, ref);
  const iwd = path.join(dir, 'run7');
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, 'data.txt'), 'boom\n');
  const failing: GridJob = { cluster: 7, proc: 0, app: 'failing', args: [], iwd, transferInput: ['data.txt'], remoteState: '' };
  const fine: GridJob = { cluster: 7, proc: 1, app: 'failing', args: [], iwd, transferInput: ['data.txt'], remoteState: '' };
  const batch = res.joinNew(failing);
  res.joinNew(fine);
  expect(await res.submit(batch)).toEqual({ rc: 0 });
  const name = remoteJobName(failing);
  server.advanceJob(name, 'ERROR');
  for (let i = 0; i < 50 && failing.remoteState !== 'ERROR'; i++) {
    await res.statusPass();
    if (failing.remoteState !== 'ERROR') await new Promise((r) => setTimeout(r, 200));
  }
  // What 10.0 holds it with is its own text; what the server says is in the GAHP's log.
  expect(failing.remoteState).toBe('ERROR');
  const said = new RegExp(`^\\S+ \\[\\d+ \\S+\\] INFO job ${name.replace(/[.#@]/g, '\\$&')} of batch ${batch.name.replace(/[.#@]/g, '\\$&')} failed on BOINC: its instance failed with exit status 7 \\(too many error results\\)$`, 'm');
  await until('the log names the failure', () => fs.existsSync(log) && said.test(fs.readFileSync(log, 'utf8')));
  // Once: a later answer reporting it again adds no line.
  res.lastQueryTime = '0';
  await res.statusPass();
  await new Promise((r) => setTimeout(r, 1000));
  expect(fs.readFileSync(log, 'utf8').split('\n').filter((l) => said.test(l))).toHaveLength(1);

  const q = await runCli(['--state-dir', stateDir, '--project-url', server.url, '--authenticator-file', ref.authenticatorFile, 'query', batch.name], { env: cliEnv() });
  expect(q.code).toBe(0);
  expect(q.stdout).toContain(`  ${name}  ERROR: its instance failed with exit status 7 (too many error results)\n`);
  const json = await runCli(['--state-dir', stateDir, '--project-url', server.url, '--authenticator-file', ref.authenticatorFile, 'query', batch.name, '--json'], { env: cliEnv() });
  expect((JSON.parse(json.stdout) as { batches: Array<{ failures?: Record<string, string> }> }).batches[0]!.failures).toEqual({ [name]: 'its instance failed with exit status 7 (too many error results)' });
}, LONG);
