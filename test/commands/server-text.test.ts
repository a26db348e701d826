/**
 * Text from the server reaches the user as the server meant it. The real server declares
 * ISO-8859-1 but sends the database's bytes as stored, UTF-8 on a default MariaDB
 * (docs/boinc-server.md): a UTF-8 error text must not arrive as `cafÃ©`.
 */
import { startEnv, batchName, jobName, type Env } from './helpers.js';
import { submitLine, writeInput } from '../submit/support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

test('a UTF-8 error text from the server reaches the GAHP result as UTF-8 (create_work quoting a job argument)', async () => {
  const p = writeInput(env.dir, 'cafe.txt', 'x\n');
  const b1 = batchName('uppercase');
  const job = jobName(b1, 1, 0);
  expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(b1, 'uppercase', [{ name: job, inputs: [[p, 'in']] }])}`, 60_000)).toEqual(['NULL']);
  // The same job name again, in another batch: the real server's create_work fails quoting
  // its whole SQL insert, the job's command line included.
  const arg = 'caf\u00e9-\u65e5\u672c';
  const b2 = batchName('uppercase');
  const [msg] = await env.gahp.call(`BOINC_SUBMIT ${submitLine(b2, 'uppercase', [{ name: job, args: [arg], inputs: [[p, 'in']] }])}`, 60_000);
  expect(msg).toMatch(/Duplicate entry/);
  expect(msg).toContain(arg);
  expect(msg).not.toContain('caf\u00c3\u00a9');
});
