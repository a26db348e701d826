/**
 * boinc_status.sh answers without starting node when the answer is already known (issue 36,
 * item 2; docs/blahp.md, "Status without node"): a job idle or running in a fresh snapshot,
 * or a job with a final record (done, cancelled, held). Through the installed scripts as
 * blahpd runs them, with node replaced by a stand-in that counts its starts; every quick
 * answer is compared byte for byte with what node itself prints at that moment.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GAHP_BIN } from '../support/gahp-process.js';
import type { BlahpJob, StatusOutcome } from '../support/blahpd.js';
import { jobDir, nameOf, blahpEnvForFile } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile({}, {}, 120_000, { countNodeStarts: true });

/** What node itself prints for this status now (it reads blah.config itself: no loader here). */
function nodeAnswer(id: string): string {
  const r = spawnSync(process.execPath, [GAHP_BIN, 'blahp', 'status', id], { env: env().env, cwd: env().dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(r.status).toBe(0);
  return r.stdout;
}

async function status(id: string): Promise<StatusOutcome> {
  const st = await env().blahpd.status(id);
  expect(st.problem).toBeUndefined();
  expect(st.run!.exitCode).toBe(0);
  expect(st.run!.stdinConsumed).toBe('');
  expect(st.run!.stdout).toMatch(/^[^\n]{1,1023}\n$/);
  return st;
}

async function submit(name: string, extra: Partial<BlahpJob> = {}): Promise<{ id: string; iwd: string }> {
  const iwd = jobDir(env(), name, `${name}\n`);
  const sub = await env().blahpd.submit({
    Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', Out: 'o', Err: 'e', JobDirectory: iwd, ...extra,
  });
  expect(sub.problem).toBeUndefined();
  return { id: sub.jobId!, iwd };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('idle and running jobs of a fresh snapshot: answered without node, byte for byte as node answers', async () => {
  env().config({ boinc_status_max_age: '120' });
  const [a, b] = await Promise.all([submit('fresh-a'), submit('fresh-b')]);
  env().server.advanceJob(nameOf(b.id), 'IN_PROGRESS');
  // The first call finds no snapshot: node asks the server.
  await status(a.id);
  const before = env().nodeStarts();
  env().server.clearRpcLog();
  for (let k = 0; k < 5; k++) {
    for (const [job, want] of [[a, 1], [b, 2]] as const) {
      const st = await status(job.id);
      expect(st.answer!.jobStatus).toBe(want);
      expect(st.run!.stdout).toBe(nodeAnswer(job.id));
    }
  }
  expect(env().nodeStarts()).toBe(before);
  expect(env().server.rpcLog().filter((e) => e.rpc === 'query_batch2')).toEqual([]);
}, LONG);

test('a stale snapshot falls through to node, which refreshes it; then answers come without node again', async () => {
  env().config({ boinc_status_max_age: '6' });
  const { id } = await submit('stale');
  expect((await status(id)).answer!.jobStatus).toBe(1); // node: the batch is new to the snapshot
  const fresh = env().nodeStarts();
  env().server.advanceJob(nameOf(id), 'IN_PROGRESS');
  // Still fresh: the snapshot's answer (node would give the same), without node.
  const quick = await status(id);
  expect(quick.run!.stdout).toBe(nodeAnswer(id));
  expect(quick.answer!.jobStatus).toBe(1);
  expect(env().nodeStarts()).toBe(fresh);
  await sleep(6500);
  env().server.clearRpcLog();
  const stale = await status(id);
  expect(stale.answer!.jobStatus).toBe(2);
  expect(env().nodeStarts()).toBe(fresh + 1);
  expect(env().server.rpcLog().filter((e) => e.rpc === 'query_batch2')).toHaveLength(1);
  const again = await status(id);
  expect(again.answer!.jobStatus).toBe(2);
  expect(again.run!.stdout).toBe(nodeAnswer(id));
  expect(env().nodeStarts()).toBe(fresh + 1);
}, LONG);

test('a DONE job never seen running reads idle until its outputs are in place, then 4; done, cancelled and held jobs answer without node', async () => {
  env().config({ boinc_status_max_age: '3' });
  const [done, cancelled, held] = await Promise.all([submit('done'), submit('cancelled'), submit('held', { Queue: 'failing', TransferOutput: undefined })]);
  for (const j of [done, cancelled, held]) expect((await status(j.id)).answer!.jobStatus).toBe(1);
  // The server takes 6 s to describe the finished job: it is DONE there well before its outputs are here.
  env().server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_completed_job', requestContains: nameOf(done.id), kind: 'late', delayMs: 6000 });
  env().server.advanceJob(nameOf(done.id), 'DONE');
  env().server.advanceJob(nameOf(held.id), 'DONE');
  expect((await env().blahpd.cancel(cancelled.id)).answer).toEqual({ rc: 0, errorString: 'No error' });

  const out = path.join(done.iwd, 'out');
  const seen: number[] = [];
  for (const until = Date.now() + 60_000; Date.now() < until; ) {
    const st = await status(done.id);
    const s = st.answer!.jobStatus;
    seen.push(s);
    // 4 only with the outputs in place; never back to running after it.
    if (s === 4) {
      expect(fs.readFileSync(out, 'utf8')).toBe('DONE\n');
      break;
    }
    // Idle, the state last answered, while the outputs are fetched: never 'running' only to fetch them.
    expect(s).toBe(1);
    await sleep(200);
  }
  expect(seen.at(-1)).toBe(4);
  // Answered (idle) while the outputs were fetched (the server took 6 s to describe the job),
  // not held until the fetch ended. Not a count of answers: on a loaded machine one status
  // call can take over a second.
  expect(seen.length).toBeGreaterThanOrEqual(3);
  for (const until = Date.now() + 60_000; Date.now() < until && (await status(held.id)).answer!.jobStatus !== 5; ) await sleep(200);

  const starts = env().nodeStarts();
  for (let k = 0; k < 3; k++) {
    for (const [job, want] of [[done, 4], [cancelled, 3], [held, 5]] as const) {
      const st = await status(job.id);
      expect(st.answer!.jobStatus).toBe(want);
      expect(st.run!.stdout).toBe(nodeAnswer(job.id));
    }
  }
  expect((await status(held.id)).answer!.ad!.get('HoldReason')).toMatch(/BOINC gave up on job/);
  expect(env().nodeStarts()).toBe(starts);
}, LONG);

test('ids that are not well-formed job names go to node, which refuses them; no path is built from them', async () => {
  env().config({ boinc_status_max_age: '120' });
  const { id } = await submit('ids');
  await status(id);
  // A quick-answer file an unchecked id could reach, outside the jobs folder.
  const jobs = path.join(env().stateDir, 'blahp', 'jobs');
  fs.mkdirSync(path.join(env().stateDir, 'blahp', 'evil'), { recursive: true });
  fs.writeFileSync(path.join(env().stateDir, 'blahp', 'evil', '1.final'), '0[BatchjobId="x"; JobStatus=4]\n');
  expect(fs.existsSync(path.join(jobs, '..', 'evil', '1.final'))).toBe(true);
  const bad = ['boinc/../evil_1', `boinc/${nameOf(id)}/../../evil_1`, 'boinc/blahp-x-1-abcdef_1/../../../evil_1', 'boinc/*', `boinc/${nameOf(id)}x`];
  for (const b of bad) {
    const before = env().nodeStarts();
    const st = await env().blahpd.status(b);
    expect(st.run!.stdout).toMatch(/^1/);
    expect(st.run!.stdout).toBe(nodeAnswer(b));
    expect(env().nodeStarts()).toBe(before + 1);
  }
}, LONG);
