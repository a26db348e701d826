/**
 * A submission blahpd repeats gets the job it already has: after blahpd died (seen with
 * HTCondor 25.14: blahpd aborted with heap corruption in a 200-job cluster, and the
 * gridmanager sent the 57 submits it had in flight again), the same job directory (-D,
 * the gridmanager's sandbox id) must not make a second BOINC job.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jobDir, nameOf, blahpEnvForFile } from './support.js';

const env = blahpEnvForFile();

test('the same JobDirectory submitted twice: one BOINC job, the same id; another JobDirectory: a new job', async () => {
  const iwd = jobDir(env(), 'repeat', 'once\n');
  const job = { Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', JobDirectory: 'home_bl_127.0.0.1_9618_alice_vm_3.0_1796300184' };
  const first = await env().blahpd.submit(job);
  expect(first.problem).toBeUndefined();
  const jobsBefore = env().server.jobs().length;
  const again = await env().blahpd.submit(job);
  expect(again.problem).toBeUndefined();
  expect(again.jobId).toBe(first.jobId);
  expect(env().server.jobs().length).toBe(jobsBefore);
  expect(env().server.jobs().filter((j) => j.name === nameOf(first.jobId!))).toHaveLength(1);
  // (Its output remapped: two unfinished jobs writing one file are refused, docs/blahp.md "Jobs".)
  const other = await env().blahpd.submit({ ...job, JobDirectory: 'home_bl_127.0.0.1_9618_alice_vm_3.1_1796300184', TransferOutputRemaps: 'out=out.1' });
  expect(other.jobId).not.toBe(first.jobId);
  expect(env().server.jobs().length).toBe(jobsBefore + 1);
}, 120_000);

test('the leader killed during submit_batch, the same submission repeated: the batch is settled and the repeat gets that job, alive', async () => {
  const iwd = jobDir(env(), 'repeat-killed', 'again\n');
  const job = { Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', JobDirectory: 'home_bl_127.0.0.1_9618_alice_vm_4.0_1796300184' };
  env().server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'hang' });
  env().server.clearRpcLog();
  const first = env().blahpd.submit(job);
  for (let i = 0; i < 600 && !env().server.rpcLog().some((e) => e.rpc === 'submit_batch'); i++) await new Promise((r) => setTimeout(r, 50));
  const lock = path.join(env().stateDir, 'blahp', 'pending', 'uppercase.lock');
  process.kill(-Number(fs.readFileSync(lock, 'utf8')), 'SIGKILL');
  expect((await first).jobId).toBeNull();
  env().server.clearFaults();
  // blahpd died with it; the gridmanager's new blahpd sends the same submission again.
  const again = await env().blahpd.submit(job);
  expect(again.problem).toBeUndefined();
  const onServer = env().server.jobs().find((j) => j.name === nameOf(again.jobId!));
  expect(onServer?.aborted).toBe(false);
  expect(env().server.rpcLog().filter((e) => e.rpc === 'create_batch')).toHaveLength(1);
}, 120_000);
