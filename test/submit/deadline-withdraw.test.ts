/**
 * A BOINC_SUBMIT cut by its command deadline after submit_batch went out (issue 23 point
 * 5a): the gridmanager takes the error result as the batch's end (its jobs are held, a
 * released job goes into a new batch), so the GAHP withdraws what the server made of it:
 * the jobs are aborted and the batch retired, and nobody is left to fetch nothing.
 */
import { batchName, jobName, startEnv, type Env } from '../commands/helpers.js';
import { submitLine, writeInput } from './support.js';

let env: Env;

beforeAll(async () => {
  // A deadline no earlier step reaches on a busy machine; the reply of submit_batch crawls past it.
  env = await startEnv({}, { args: ['--command-timeout', '10'] });
});

afterAll(async () => {
  await env?.close();
});

test('cut during submit_batch: an error naming the deadline, the jobs the server made aborted, the batch retired', async () => {
  const batch = batchName('uppercase');
  const jobs = [0, 1, 2].map((i) => ({ name: jobName(batch, 5, i), inputs: [[writeInput(env.dir, `w${i}.txt`, `withdraw ${i}\n`), 'in']] as [string, string][] }));
  // The server creates the jobs, then sends its reply over a minute.
  env.server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'slow', delayMs: 60_000 });
  const [error] = await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000);
  env.server.clearFaults();
  expect(error).toContain('submit_batch');
  expect(error).toContain('the command timeout of 10 s passed');
  expect(error).toContain('the batch was withdrawn (3 jobs aborted, batch retired)');
  const onServer = env.server.jobs(batch);
  expect(onServer.map((j) => j.name).sort()).toEqual(jobs.map((j) => j.name).sort());
  expect(onServer.every((j) => j.aborted)).toBe(true);
  expect(env.server.batches().find((b) => b.name === batch)!.state).toBe(4);
});
