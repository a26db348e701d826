/**
 * `boinc-gahp submit` against a batch-collect project (the test server with `daemons:
 * 'collect'`): the cluster is submitted (--no-wait), its jobs run and the assimilator moves
 * their outputs out of the upload hierarchy; running the file again fetches them, through
 * get_output3.php's get_file (the names submit gives pass BOINC's check), into the places
 * HTCondor would put them.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { until } from '../support/poll.js';
import { runCli, writeSubmitFile } from './cli-support.js';

let server: ExtendedTestBoincServer;
let dir: string;

beforeAll(async () => {
  server = await startTestServer({ daemons: 'collect', deleteAfterDoneSeconds: 0.2 });
  dir = makeTempDir('boinc-gahp-submit-collect-');
  fs.writeFileSync(path.join(dir, 'auth.txt'), server.authenticator + '\n', { mode: 0o600 });
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a cluster whose outputs the assimilator moved is fetched from get_output3.php', async () => {
  for (const p of [0, 1, 2]) fs.writeFileSync(path.join(dir, `in.${p}`), `job ${p}\n`);
  writeSubmitFile(path.join(dir, 'job.sub'), { url: server.url, authFile: 'auth.txt' }, [
    'transfer_input_files = in.$(Process)',
    'transfer_output_files = out',
    'transfer_output_remaps = "out = out.$(Process)"',
    'queue 3',
  ]);
  const submit = (...extra: string[]) => runCli(['--state-dir', path.join(dir, 'state'), 'submit', 'job.sub', '--poll', '0.3', ...extra], { cwd: dir });
  const first = await submit('--no-wait');
  if (first.code !== 0) throw new Error(`exit ${first.code}: ${first.stderr}${first.stdout}`);

  const batch = server.batches().find((b) => b.app === 'uppercase')!;
  server.advanceAll(batch.name);
  await server.settled();
  const results = path.join(server.dataDir, 'results', String(batch.id));
  await until('the assimilator to move the outputs', () => fs.existsSync(results) && fs.readdirSync(results).length === 3);

  server.clearRpcLog();
  const r = await submit();
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}${r.stdout}`);
  expect(r.stdout).toMatch(/3 jobs done, outputs fetched; 0 failed/);
  for (const p of [0, 1, 2]) expect(fs.readFileSync(path.join(dir, `out.${p}`), 'latin1')).toBe(`JOB ${p}\n`);
  const log = server.rpcLog();
  expect(log.filter((e) => e.rpc === 'get_file').length).toBe(3);
  expect(log.filter((e) => e.rpc === 'get_batch_zip').length).toBe(0);
}, 120_000);
