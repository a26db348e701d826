/**
 * The BOINC_GAHP route (`batch boinc` with BOINC_GAHP naming this program) on a
 * batch-collect project: the test server with `daemons: 'collect'` moves each done job's
 * outputs to results/<batch id>/ (get_output.php: `no such file`). The route's job names
 * pass BOINC's name check, so each output comes from get_output3.php's get_file, and the
 * job is completed (4) with its output in place under its remapped name.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { BlahGridmanager, jobAd } from '../support/blah-gridmanager.js';

let server: ExtendedTestBoincServer;
let dir: string;
let authFile: string;
let g: BlahGridmanager | undefined;

beforeAll(async () => {
  server = await startTestServer({ daemons: 'collect', deleteAfterDoneSeconds: 0.2 });
  dir = makeTempDir('boinc-blah-collect-');
  authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, `${server.authenticator}\n`, { mode: 0o600 });
});

afterAll(async () => {
  await g?.close().catch(() => undefined);
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const nameOf = (id: string) => id.slice('boinc/'.length);

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 30_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('outputs moved by the batch-collect assimilator reach the job directories through get_file', async () => {
  g = await BlahGridmanager.start(server.url, authFile);
  const ads = [0, 1, 2].map((k) => {
    const iwd = path.join(dir, `job${k}`);
    fs.mkdirSync(iwd);
    fs.writeFileSync(path.join(iwd, 'in'), `moved ${k}\n`);
    return jobAd({ Iwd: iwd, JobDirectory: `home_bl_127.0.0.1_19718_alice_vm_9.${k}_1796300184`, TransferOutputRemaps: `out = result.${k}` });
  });
  const subs = await g.submitMany(ads);
  for (const s of subs) expect(s).toMatchObject({ rc: 0 });
  const ids = subs.map((s) => s.jobId);
  for (const id of ids) expect(nameOf(id)).toMatch(/^[\w\-. ]{1,255}$/);
  await until(() => ids.every((id) => server.jobs().some((j) => j.name === nameOf(id))), 'the jobs on the server');
  const batch = server.jobs().find((j) => j.name === nameOf(ids[0]!))!;
  server.advanceAll(server.batches().find((b) => b.id === batch.batchId)!.name, 'DONE');
  await server.settled();
  const results = path.join(server.dataDir, 'results', String(batch.batchId));
  await until(() => fs.existsSync(results) && fs.readdirSync(results).length === 3, 'the assimilator');

  server.clearRpcLog();
  for (const [k, id] of ids.entries()) {
    expect(await g.waitStatus(id, 4)).toMatchObject({ rc: 0, jobStatus: 4 });
    expect(fs.readFileSync(path.join(ads[k]!.Iwd, `result.${k}`), 'latin1')).toBe(`MOVED ${k}\n`);
  }
  const log = server.rpcLog();
  expect(log.filter((e) => e.rpc === 'get_file').length).toBe(3);
  expect(log.filter((e) => e.rpc === 'get_batch_zip').length).toBe(0);
}, 120_000);
