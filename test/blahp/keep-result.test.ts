/**
 * Issue 38, item 2, on the BLAHP scripts route (the installed scripts run as blahpd runs
 * them, test/support/blahpd.ts): a finished result is never run again. A DONE job whose
 * outputs cannot be put in place is held with its result kept on BOINC; the gridmanager's
 * cancel of the held job aborts nothing; the job submitted again on release (a new -D, the
 * same schedd, owner and cluster.proc) gets its kept result fetched, with no new BOINC job.
 * A kept result nobody comes back for ends with its batch's lease: not renewed, then retired.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BlahpJob } from '../support/blahpd.js';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus, type BlahpEnv } from './support.js';

const LONG = 180_000;
const RETIRED = 4;

/** The gridmanager's JobDirectory for a job, `home_bl_<schedd>_<owner>_<cluster>.<proc>_<time>`: a new time on each release. */
const sandbox = (clusterProc: string, time: number) => `home_bl_127.0.0.1_19718_alice_vm_${clusterProc}_${time}`;
const batchOf = (id: string) => nameOf(id).replace(/_\d+$/, '');

/** The environment the running describe block started (each block has its own). */
let env: () => BlahpEnv;
const serverBatch = (batch: string) => env().server.batches().find((b) => b.name === batch);


/** A job whose output is remapped into a directory that does not exist; DONE on the server, then held. */
async function heldWithResultKept(name: string, clusterProc: string): Promise<{ job: BlahpJob; id: string; iwd: string }> {
  const iwd = jobDir(env(), name, `${name}\n`);
  const job: BlahpJob = {
    Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Out: 'job.out', Err: 'job.err', TransferInput: 'in', TransferOutput: 'out',
    TransferOutputRemaps: 'out=nodir/out.0', JobDirectory: sandbox(clusterProc, 1796300001),
  };
  const sub = await env().blahpd.submit(job);
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  env().server.advanceJob(nameOf(id), 'DONE');
  const held = await waitForStatus(env(), id, 5, 60_000);
  expect(held.answer!.jobStatus).toBe(5);
  expect(String(held.answer!.ad!.get('HoldReason'))).toMatch(/outputs could not be put in place .*nodir.*The result is kept on BOINC/);
  return { job, id, iwd };
}

describe('a kept result taken back on release', () => {
  const own = blahpEnvForFile();
  beforeAll(() => {
    env = own;
  });

  test('held with its result kept; the cancel aborts nothing; submitted again on release, the kept result is fetched with no new BOINC job', async () => {
    const { job, id, iwd } = await heldWithResultKept('kept', '9.0');
    // The gridmanager cancels the held job: success, and the BOINC job is neither aborted nor its batch retired.
    const c = await env().blahpd.cancel(id);
    expect(c.problem).toBeUndefined();
    expect(c.answer).toEqual({ rc: 0, errorString: 'No error' });
    expect(env().server.jobs().find((j) => j.name === nameOf(id))!.aborted).toBe(false);
    expect(serverBatch(batchOf(id))!.state).not.toBe(RETIRED);

    // The user makes the directory and releases the job: the gridmanager submits it again, with a new sandbox id.
    fs.mkdirSync(path.join(iwd, 'nodir'));
    const jobsBefore = env().server.jobs().length;
    const batchesBefore = env().server.batches().length;
    const again = await env().blahpd.submit({ ...job, JobDirectory: sandbox('9.0', 1796300999) });
    expect(again.problem).toBeUndefined();
    expect(again.jobId).toBe(id);
    expect(env().server.jobs().length).toBe(jobsBefore);
    expect(env().server.batches().length).toBe(batchesBefore);
    expect((await waitForStatus(env(), id, 4, 60_000)).answer!.jobStatus).toBe(4);
    expect(fs.readFileSync(path.join(iwd, 'nodir', 'out.0'), 'utf8')).toBe('KEPT\n');
    expect(fs.existsSync(path.join(iwd, 'job.out'))).toBe(true);
    // Done, the job no longer keeps its batch open: the background worker retires it.
    // (A detached node process: bounded by time, generously, for a loaded machine.)
    for (const until = Date.now() + 60_000; serverBatch(batchOf(id))!.state !== RETIRED && Date.now() < until; ) await new Promise((r) => setTimeout(r, 200));
    expect(serverBatch(batchOf(id))!.state).toBe(RETIRED);
    // The same submission repeated (blahpd died after it): the same job, still nothing new on the server.
    const repeated = await env().blahpd.submit({ ...job, JobDirectory: sandbox('9.0', 1796300999) });
    expect(repeated.jobId).toBe(id);
    expect(env().server.jobs().length).toBe(jobsBefore);
  }, LONG);

  test("another job (another cluster.proc, or the same one with other inputs) does not get a kept result; a normal cancel still aborts", async () => {
    const { job, id } = await heldWithResultKept('other', '10.0');
    // Another proc of the cluster, into a directory that exists: a new BOINC job.
    const other = await env().blahpd.submit({ ...job, TransferOutputRemaps: 'out=out.1', JobDirectory: sandbox('10.1', 1796300999) });
    expect(other.problem).toBeUndefined();
    expect(other.jobId).not.toBe(id);
    // The same cluster.proc with other inputs is not the same submission: a new BOINC job too.
    fs.writeFileSync(path.join(job.Iwd!, 'in2'), 'changed\n');
    const changed = await env().blahpd.submit({ ...job, TransferInput: 'in2', TransferOutputRemaps: 'out=out.2', JobDirectory: sandbox('10.0', 1796300999) });
    expect(changed.problem).toBeUndefined();
    expect(changed.jobId).not.toBe(id);
    for (const s of [other, changed]) {
      const c = await env().blahpd.cancel(s.jobId!);
      expect(c.answer).toEqual({ rc: 0, errorString: 'No error' });
      expect(env().server.jobs().find((j) => j.name === nameOf(s.jobId!))!.aborted).toBe(true);
    }
    expect(env().server.jobs().find((j) => j.name === nameOf(id))!.aborted).toBe(false);
  }, LONG);
});

// A file environment of its own, with the short lease from the start: run after the
// blocks above in one environment, this case once waited past its limit in CI.
describe('a kept result nobody comes back for', () => {
  // 0.01 h = 36 s: a batch is renewed once less than 18 s is left.
  const own = blahpEnvForFile({}, { boinc_lease_hours: '0.01' });
  beforeAll(() => {
    env = own;
  });

  test('a kept result nobody comes back for: its lease is not renewed, and once it has run out the batch is retired', async () => {
    const { id } = await heldWithResultKept('abandoned', '11.0');
    expect((await env().blahpd.cancel(id)).answer).toEqual({ rc: 0, errorString: 'No error' });
    const batch = batchOf(id);
    const leaseEnd = serverBatch(batch)!.expireTime;
    // The batch got the short lease (else the wait below would be hours).
    expect(leaseEnd - Date.now() / 1000).toBeLessThan(40);
    // Status calls of another job keep the snapshot refreshed, and its background worker at work.
    const watcher = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: jobDir(env(), 'watcher', 'w\n'), TransferInput: 'in', TransferOutput: 'out', JobDirectory: sandbox('12.0', 1796300001) });
    const watcherBatch = batchOf(watcher.jobId!);
    const watcherLease = serverBatch(watcherBatch)!.expireTime;
    // Both are due within one lease (36 s) of now: the retirement once the kept result's lease
    // has run out, the watcher's renewal once less than half of its own is left. Which comes
    // first depends on how long the hold took, so the loop waits for both. Each status call
    // refreshes the snapshot and starts the worker; a loaded machine (CI) runs both late,
    // hence the bound, far past both.
    const until = Date.now() + 240_000;
    let retiredSeen = false;
    let renewedSeen = false;
    while (!(retiredSeen && renewedSeen) && Date.now() < until) {
      expect((await env().blahpd.status(watcher.jobId!)).answer?.rc).toBe(0);
      const kept = serverBatch(batch)!;
      // Never renewed, and not retired before its lease ran out (the state read, then the clock).
      expect(kept.expireTime).toBe(leaseEnd);
      if (kept.state === RETIRED) {
        expect(Date.now() / 1000).toBeGreaterThanOrEqual(leaseEnd);
        retiredSeen = true;
      }
      // The watcher's own batch, with a job unfinished, is renewed.
      renewedSeen = serverBatch(watcherBatch)!.expireTime > watcherLease;
      if (!(retiredSeen && renewedSeen)) await new Promise((r) => setTimeout(r, 1000));
    }
    expect(serverBatch(batch)!.state).toBe(RETIRED);
    expect(serverBatch(batch)!.expireTime).toBe(leaseEnd);
    expect(Date.now() / 1000).toBeGreaterThan(leaseEnd);
    expect(serverBatch(watcherBatch)!.expireTime).toBeGreaterThan(watcherLease);
    expect(serverBatch(watcherBatch)!.state).not.toBe(RETIRED);
    expect(env().server.jobs().find((j) => j.name === nameOf(id))!.aborted).toBe(false);
  }, 3 * LONG);
});
