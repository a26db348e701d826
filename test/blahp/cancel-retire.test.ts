/**
 * condor_rm through blahpd (boinc_cancel.sh) of the last unfinished job of a batch closes
 * (retires) the BOINC batch in that call; cancelling a job while others of its batch are
 * unfinished does not. The background worker is stopped before each cancel, so what is
 * retired was retired by the cancel itself, not by a later status call's worker. The
 * BLAHP log (boinc_log) gets a line per cancel and is created group-writable, for every
 * job owner's scripts (docs/blahp.md, "The log").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stopBlahpFetcher } from '../support/blahpd.js';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const LONG = 120_000;
const RETIRED = 4;
// A gather window far longer than a submit call's start-up on a loaded machine: the
// jobs submitted side by side share one batch.
const env = blahpEnvForFile({}, { boinc_submit_gather_ms: '5000' });

const batchOf = (id: string) => nameOf(id).replace(/_\d+$/, '');
const batchState = (batch: string) => env().server.batches().find((b) => b.name === batch)?.state;

async function submitJobs(tag: string, n: number): Promise<string[]> {
  const subs = await Promise.all(
    Array.from({ length: n }, (_, k) => {
      const iwd = jobDir(env(), `${tag}${k}`, `${tag} ${k}\n`);
      return env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', Out: 'o', Err: 'e', JobDirectory: iwd });
    }),
  );
  const ids = subs.map((s) => s.jobId!);
  expect(ids.every((id) => id !== null && batchOf(id) === batchOf(ids[0]!))).toBe(true);
  return ids;
}

async function cancel(id: string): Promise<void> {
  await stopBlahpFetcher(env().stateDir);
  const c = await env().blahpd.cancel(id);
  expect(c.problem).toBeUndefined();
  expect(c.answer).toEqual({ rc: 0, errorString: 'No error' });
}

test('cancelling the only job of a batch retires the batch in the cancel call', async () => {
  const [id] = await submitJobs('lone', 1);
  const batch = batchOf(id!);
  expect(batchState(batch)).toBe(1);
  await cancel(id!);
  expect(batchState(batch)).toBe(RETIRED);
  expect(env().server.jobs(batch)[0]!.aborted).toBe(true);
  expect((await env().blahpd.status(id!)).answer!.jobStatus).toBe(3);
}, LONG);

test('a batch stays open while a job is unfinished; cancelling its last one (after the other completed) retires it', async () => {
  const ids = await submitJobs('pair', 3);
  const batch = batchOf(ids[0]!);
  await cancel(ids[0]!);
  expect(batchState(batch)).toBe(1);
  env().server.advanceJob(nameOf(ids[1]!), 'DONE');
  expect((await waitForStatus(env(), ids[1]!, 4, 60_000)).answer!.jobStatus).toBe(4);
  await cancel(ids[2]!);
  expect(batchState(batch)).toBe(RETIRED);
}, LONG);

test('the log: each condor_rm has its line; the file was created group-writable (0660) under a umask that takes group write away', async () => {
  expect(process.umask() & 0o020).toBe(0o020);
  const logFile = path.join(env().dir, 'blahp.log');
  const log = fs.readFileSync(logFile, 'utf8');
  expect(log.match(/ INFO blahp cancel: blahp-uppercase-\S+: aborted on BOINC\n/g)).toHaveLength(3);
  expect(fs.statSync(logFile).mode & 0o777).toBe(0o660);
});
