/**
 * Issue 38, item 1, on the BLAHP scripts route (the installed scripts run as blahpd runs
 * them, test/support/blahpd.ts): a problem BOINC_SUBMIT finds in one job of a gathered
 * batch (here an input over the project's upload_max_filesize, which the test server keeps
 * at PHP's default 2M, as the GAHP assumes) refuses that job alone, with its own reason;
 * the jobs gathered beside it are submitted and finish.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const LONG = 180_000;
const RETIRED = 4;
// A gather window far longer than a submit call's start-up on a loaded machine: the jobs
// submitted side by side share one batch.
const env = blahpEnvForFile({}, { boinc_submit_gather_ms: '5000' });
const batchOf = (id: string) => nameOf(id).replace(/_\d+$/, '');

test('an input over the upload limit fails its own submit with its reason; the jobs gathered with it go to BOINC and finish', async () => {
  const big = 'x'.repeat(3 * 1024 * 1024) + '\n';
  const dirs = [jobDir(env(), 'small1', 'one\n'), jobDir(env(), 'big', big), jobDir(env(), 'small2', 'two\n')];
  const creates = env().server.rpcLog().filter((e) => e.rpc === 'create_batch').length;
  const subs = await Promise.all(dirs.map((iwd) => env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', Out: 'o', Err: 'e', JobDirectory: iwd })));
  const [one, tooBig, two] = subs;
  // The big one: no job id, its own reason naming its file and the limit.
  expect(tooBig!.jobId).toBeNull();
  expect(tooBig!.errorString).toContain(path.join(dirs[1]!, 'in'));
  expect(tooBig!.errorString).toMatch(/upload_max_filesize/);
  // One shape for every refusal, naming no BOINC job (none was made); the refused submit is
  // logged, naming the HTCondor job by its directory.
  expect(tooBig!.run!.stderr).toMatch(/^job not sent to BOINC: checking input files: input file /);
  expect(fs.readFileSync(path.join(env().dir, 'blahp.log'), 'utf8')).toContain(`INFO blahp submit: the HTCondor job in ${dirs[1]!}: job not sent to BOINC: checking input files: input file ${path.join(dirs[1]!, 'in')}`);
  // The others: one batch, with exactly them.
  for (const s of [one!, two!]) expect(s.problem).toBeUndefined();
  expect(batchOf(one!.jobId!)).toBe(batchOf(two!.jobId!));
  const batch = batchOf(one!.jobId!);
  expect(env().server.rpcLog().filter((e) => e.rpc === 'create_batch').length).toBe(creates + 1);
  expect(env().server.jobs(batch).map((j) => j.name).sort()).toEqual([nameOf(one!.jobId!), nameOf(two!.jobId!)].sort());
  env().server.advanceAll(batch, 'DONE');
  for (const [k, s] of [one!, two!].entries()) {
    expect((await waitForStatus(env(), s.jobId!, 4, 60_000)).answer!.jobStatus).toBe(4);
    expect(fs.readFileSync(path.join(dirs[k === 0 ? 0 : 2]!, 'out'), 'utf8')).toMatch(k === 0 ? /^ONE/ : /^TWO/);
  }
  // Every job of the batch final (the refused one too): the batch is retired.
  const state = () => env().server.batches().find((b) => b.name === batch)!.state;
  for (let i = 0; i < 100 && state() !== RETIRED; i++) {
    await env().blahpd.status(one!.jobId!);
    await new Promise((r) => setTimeout(r, 300));
  }
  expect(state()).toBe(RETIRED);
}, LONG);
