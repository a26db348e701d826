/**
 * The BLAHP scripts when things go wrong: a submit leader killed in the middle of its
 * batch's submit_batch (the next leader settles the batch; the job nobody got an id for is
 * aborted), and a status call against a server that never answers (an answer well within
 * blahpd's 30 s, never a kill).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BatchRecord } from '../../gahp/blahp/records.js';
import { jobDir, nameOf, blahpEnvForFile } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile({}, { boinc_rpc_timeout: '3' });

async function until(what: string, cond: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('a leader killed during submit_batch: the next submit settles its batch and aborts the job nobody got an id for', async () => {
  const iwd = jobDir(env(), 'crash', 'crash test\n');
  const job = { Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', Out: 'o', Err: 'e', JobDirectory: iwd };
  env().server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'hang' });
  env().server.clearRpcLog();
  const first = env().blahpd.submit(job);
  await until('submit_batch', () => env().server.rpcLog().some((e) => e.rpc === 'submit_batch'));
  const lock = path.join(env().stateDir, 'blahp', 'pending', 'uppercase.lock');
  const leader = Number(fs.readFileSync(lock, 'utf8'));
  // blahpd's script runs in its own session: kill the whole group, as a crash would.
  process.kill(-leader, 'SIGKILL');
  const killed = await first;
  expect(killed.jobId).toBeNull();
  const inflight = JSON.parse(fs.readFileSync(path.join(env().stateDir, 'blahp', 'pending', 'uppercase.inflight'), 'utf8')) as { batch: string };

  // Another job (its own sandbox id): the killed call's job is never asked for again.
  const second = await env().blahpd.submit({ ...job, JobDirectory: `${iwd}-other` });
  expect(second.problem).toBeUndefined();
  expect(second.jobId).toMatch(/^boinc\//);
  const rec = JSON.parse(fs.readFileSync(path.join(env().stateDir, 'blahp', 'batches', `${inflight.batch}.json`), 'utf8')) as BatchRecord;
  expect(rec.state).toBe('submitted');
  // The killed call's job reached BOINC through the settling, and was aborted: nobody will ask for it.
  const orphan = env().server.jobs().find((j) => j.name === `${inflight.batch}_0`);
  expect(orphan?.aborted).toBe(true);
  expect(fs.existsSync(path.join(env().stateDir, 'blahp', 'jobs', inflight.batch, '0.cancelled.json'))).toBe(true);
  expect(fs.existsSync(path.join(env().stateDir, 'blahp', 'pending', 'uppercase.inflight'))).toBe(false);
  expect(fs.readdirSync(path.join(env().stateDir, 'blahp', 'pending', 'uppercase'))).toEqual([]);
  // The new job is a job of its own batch, alive on the server.
  expect(nameOf(second.jobId!).startsWith(inflight.batch)).toBe(false);
  expect(env().server.jobs().find((j) => j.name === nameOf(second.jobId!))?.aborted).toBe(false);
  const st = await env().blahpd.status(second.jobId!);
  expect(st.answer?.jobStatus).toBe(1);
}, LONG);

test('a status call against a server that never answers returns one line well within 30 s', async () => {
  const iwd = jobDir(env(), 'hang', 'x\n');
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', JobDirectory: iwd });
  expect(sub.jobId).not.toBeNull();
  env().server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_batch2', kind: 'hang', count: 1000 });
  try {
    const st = await env().blahpd.status(sub.jobId!);
    expect(st.run!.silenceTimeout).toBe(false);
    expect(st.run!.ms).toBeLessThan(25_000);
    expect(st.run!.exitCode).toBe(0);
    expect(st.run!.stdout).toMatch(/^1[^\n]*\n$/);
    // The next call does not wait again right away: it answers from what is known.
    const again = await env().blahpd.status(sub.jobId!);
    expect(again.run!.ms).toBeLessThan(5_000);
    expect(again.run!.stdout).toMatch(/^1[^\n]*\n$/);
  } finally {
    env().server.clearFaults();
  }
  // Once the server answers again (and the 5 s pause after a failure is over), so do we.
  let status: number | undefined;
  for (let i = 0; i < 20 && status !== 1; i++) {
    status = (await env().blahpd.status(sub.jobId!)).answer?.jobStatus;
    if (status !== 1) await new Promise((r) => setTimeout(r, 1000));
  }
  expect(status).toBe(1);
}, LONG);

test('a batch the server no longer has is left out of the status query (the error names it): its job is held, the others still answer', async () => {
  const iwd = jobDir(env(), 'kept', 'x\n');
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', JobDirectory: iwd });
  expect(sub.jobId).not.toBeNull();
  // A batch this machine never submitted: query_batch2 answers `no batch named <it>`.
  const missing = 'blahp-uppercase-zzzzzz-abcdef';
  const st = await env().blahpd.status(`boinc/${missing}_0`);
  expect(st.answer?.jobStatus).toBe(5);
  expect(String(st.answer?.ad?.get('HoldReason'))).toContain(`no longer has batch ${missing}`);
  const snap = JSON.parse(fs.readFileSync(path.join(env().stateDir, 'blahp', 'status.json'), 'utf8')) as { gone: string[]; error?: string; batches: Record<string, unknown> };
  expect(snap.gone).toEqual([missing]);
  expect(snap.error).toBeUndefined();
  expect(snap.batches[nameOf(sub.jobId!).replace(/_\d+$/, '')]).toBeDefined();
  expect((await env().blahpd.status(sub.jobId!)).answer?.jobStatus).toBe(1);
}, LONG);
