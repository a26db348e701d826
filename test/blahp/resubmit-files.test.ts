/**
 * Issue 38, items 5 and 6, on the BLAHP scripts route (the installed scripts run as blahpd
 * runs them, test/support/blahpd.ts): a resubmission's error file holds only that run's
 * stderr; a DONE job whose outputs are being fetched keeps the state last answered; a job
 * that would overwrite another's output (a remap blahpd dropped) is refused.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile();


test("a resubmission's error file holds only that run's stderr; an Err that cannot be written refuses the job", async () => {
  const input = 'second run\n';
  const iwd = jobDir(env(), 'again', input);
  const err = path.join(iwd, 'job.err');
  fs.writeFileSync(err, 'stderr of the last run\n');
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Out: 'job.out', Err: 'job.err', TransferInput: 'in', TransferOutput: 'out' });
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  // Emptied at submit, before the job ran.
  expect(fs.readFileSync(err, 'utf8')).toBe('');
  env().server.advanceJob(nameOf(id), 'DONE');
  expect((await waitForStatus(env(), id, 4)).answer!.jobStatus).toBe(4);
  expect(fs.readFileSync(err, 'utf8')).toMatch(stderrFilePattern(`uppercase: ${input.length} bytes\n`));
  expect(fs.readFileSync(err, 'utf8')).not.toContain('last run');

  const batchesBefore = env().server.rpcLog().filter((e) => ['create_batch', 'submit_batch'].includes(e.rpc)).length;
  const bad = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Err: 'nosuchdir/job.err', TransferInput: 'in', TransferOutput: 'out' });
  expect(bad.jobId).toBeNull();
  expect(bad.run?.stdout + bad.run!.stderr).toContain(`the job's error file ${path.join(iwd, 'nosuchdir', 'job.err')} cannot be written (ENOENT)`);
  expect(env().server.rpcLog().filter((e) => ['create_batch', 'submit_batch'].includes(e.rpc)).length).toBe(batchesBefore);
}, LONG);

test('a DONE job whose outputs are being fetched is answered with the state last answered: idle when it was never seen running', async () => {
  const jobs = await Promise.all(['never', 'ran'].map((name) => env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: jobDir(env(), name, `${name}\n`), TransferInput: 'in', TransferOutput: 'out' })));
  const [never, ran] = jobs.map((s) => s.jobId!) as [string, string];
  const idle = await env().blahpd.status(never);
  expect(idle.answer!.jobStatus).toBe(1);
  expect((await env().blahpd.status(ran)).answer!.jobStatus).toBe(1);
  env().server.advanceJob(nameOf(ran), 'IN_PROGRESS');
  const running = await env().blahpd.status(ran);
  expect(running.answer!.jobStatus).toBe(2);
  // Both DONE; their outputs take a while to come (the completed instance is asked late).
  for (const id of [never, ran]) {
    env().server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_completed_job', requestContains: nameOf(id), kind: 'late', delayMs: 5000 });
    env().server.advanceJob(nameOf(id), 'DONE');
  }
  const fetchingNever = await env().blahpd.status(never);
  const fetchingRan = await env().blahpd.status(ran);
  // The same bytes as the answers before (node's line and the script's quick line are one).
  expect(fetchingNever.run!.stdout).toBe(idle.run!.stdout);
  expect(fetchingNever.answer!.jobStatus).toBe(1);
  expect(fetchingRan.run!.stdout).toBe(running.run!.stdout);
  expect(fetchingRan.answer!.jobStatus).toBe(2);
  for (const id of [never, ran]) expect((await waitForStatus(env(), id, 4)).answer!.jobStatus).toBe(4);
}, LONG);

test("a job whose output destination is an unfinished job's (a remap blahpd dropped: blanks around '=') is refused, saying so", async () => {
  const iwd = jobDir(env(), 'cluster', 'one cluster\n');
  // transfer_output_remaps = "out = out.$(Process)": blahpd sends no remap, both jobs write Iwd/out.
  const job = (k: number) => ({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', TransferOutputRemaps: `out = out.${k}` });
  const first = await env().blahpd.submit(job(0));
  expect(first.problem).toBeUndefined();
  const second = await env().blahpd.submit(job(1));
  expect(second.jobId).toBeNull();
  const said = second.run!.stdout + second.run!.stderr;
  expect(said).toContain(`the job's output ${path.join(iwd, 'out')} is also the output of BOINC job ${nameOf(first.jobId!)}`);
  expect(said).toContain("blanks around '='");
  expect(said).toContain('out=out.$(Process)');
  // Written without blanks, the remaps are applied and the jobs are accepted.
  const third = await env().blahpd.submit({ ...job(1), TransferOutputRemaps: 'out=out.1' });
  expect(third.problem).toBeUndefined();
  // Once the first job is finished, its destination may be used again (a resubmission).
  env().server.advanceJob(nameOf(first.jobId!), 'DONE');
  expect((await waitForStatus(env(), first.jobId!, 4)).answer!.jobStatus).toBe(4);
  const again = await env().blahpd.submit(job(0));
  expect(again.problem).toBeUndefined();
}, LONG);
