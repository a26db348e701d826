/**
 * Jobs BOINC gave up on, through the BLAHP scripts: held, the reason saying what the server
 * reports of each (gahp/failed-job.ts). Against the test server as the real one behaves
 * (query_completed_job dies for a failed job): the exit status of a crashed instance from
 * one query_batch with job details for the batch; aborted on the server; an instance that
 * timed out, from query_job. And against a server that reports failed instances
 * (reportFailedJobs): the instance's stderr appended to Err before the hold.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import type { BlahpJob } from '../support/blahpd.js';
import { jobDir, nameOf, blahpEnvForFile, type BlahpEnv } from './support.js';

const LONG = 120_000;
// A gather window far longer than a submit call's start-up on a loaded machine: the two
// jobs submitted side by side share one batch (the crashed jobs' case asserts it).
const realEnv = blahpEnvForFile({}, { boinc_submit_gather_ms: '5000' });
const reportingEnv = blahpEnvForFile({ reportFailedJobs: true });

async function submitSideBySide(env: BlahpEnv, jobs: BlahpJob[]): Promise<string[]> {
  const subs = await Promise.all(jobs.map((job) => env.blahpd.submit(job)));
  for (const s of subs) expect(s.problem).toBeUndefined();
  return subs.map((s) => s.jobId!);
}

/**
 * Status calls until the job is held; its HoldReason. Until then it reads as the state last
 * answered (docs/blahp.md): idle, as none of these jobs was ever seen running by a snapshot.
 * Held only once the background worker has asked for the details, within a status call's
 * short wait for it or not, as the machine's load goes.
 */
async function holdReason(env: BlahpEnv, id: string): Promise<unknown> {
  const until = Date.now() + 60_000; // generous: the hold takes the background worker, late on a loaded machine
  for (;;) {
    const st = await env.blahpd.status(id);
    expect(st.problem).toBeUndefined();
    if (st.answer?.jobStatus === 5 || Date.now() > until) {
      expect(st.answer?.jobStatus).toBe(5);
      return st.answer?.ad?.get('HoldReason');
    }
    expect(st.answer?.jobStatus).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('crashed jobs of one batch: held with their exit status, from one query_batch for the batch', async () => {
  const env = realEnv();
  const jobs = [0, 1].map((k) => {
    const iwd = jobDir(env, `crash${k}`, `input ${k}\n`);
    return { Cmd: '/usr/bin/true', Queue: 'failing', Iwd: iwd, TransferInput: 'in', Out: 'job.out', Err: 'job.err', JobDirectory: iwd };
  });
  const ids = await submitSideBySide(env, jobs);
  const names = ids.map(nameOf);
  const batch = env.server.batches().find((b) => b.jobNames.includes(names[0]!))!;
  expect([...batch.jobNames].sort()).toEqual([...names].sort());
  env.server.clearRpcLog();
  for (const n of names) env.server.advanceJob(n, 'DONE');
  for (const id of ids) {
    expect(await holdReason(env, id)).toBe(`BOINC gave up on job ${nameOf(id)}: its instance failed with exit status 7 (too many error results)`);
  }
  const detailed = env.server.rpcLog().filter((e) => e.rpc === 'query_batch');
  expect(detailed.length).toBe(1);
  expect(detailed[0]!.raw).toContain('<get_job_details>1</get_job_details>');
  expect(env.server.rpcLog().filter((e) => e.rpc === 'query_job')).toEqual([]);
}, LONG);

test('aborted on the server, and an instance that timed out: held saying so', async () => {
  const env = realEnv();
  const jobs = [0, 1].map((k) => {
    const iwd = jobDir(env, `other${k}`, `input ${k}\n`);
    return { Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', Out: 'job.out', Err: 'job.err', JobDirectory: iwd };
  });
  const [aborted, timedOut] = (await submitSideBySide(env, jobs)).map((id) => ({ id, name: nameOf(id) }));
  // Someone aborts the first on the server (the project's web pages, another client).
  const client = new BoincClient({ projectUrl: env.server.url, authenticator: env.server.authenticator });
  try {
    await client.abortJobs([aborted!.name]);
  } finally {
    client.close();
  }
  env.server.advanceJob(timedOut!.name, 'IN_PROGRESS');
  env.server.timeOutJob(timedOut!.name);
  expect(await holdReason(env, aborted!.id)).toBe(`BOINC gave up on job ${aborted!.name}: aborted on the server`);
  expect(await holdReason(env, timedOut!.id)).toBe(`BOINC gave up on job ${timedOut!.name}: its instance: Timed out - no response (too many total results)`);
}, LONG);

test('a server that reports failed instances: the stderr is in Err too', async () => {
  const env = reportingEnv();
  const iwd = jobDir(env, 'failing', 'first "line" <here>\nsecond\n');
  const [id] = await submitSideBySide(env, [{ Cmd: '/usr/bin/true', Queue: 'failing', Iwd: iwd, TransferInput: 'in', Out: 'job.out', Err: 'job.err', JobDirectory: iwd }]);
  env.server.advanceJob(nameOf(id!), 'DONE');
  expect(await holdReason(env, id!)).toBe(`BOINC gave up on job ${nameOf(id!)}: its instance failed with exit status 7 (too many error results); its stderr is in job.err`);
  expect(fs.readFileSync(path.join(iwd, 'job.err'), 'utf8')).toMatch(stderrFilePattern('failing: fatal error <&> in "first "line" <here>"\nexit 7\n', 7));
}, LONG);
