/**
 * BOINC as a BLAHP batch system, end to end: the installed scripts run exactly as blahpd
 * runs them (test/support/blahpd.ts) against the test server: submit, statuses 1 and 2,
 * completion with the outputs in place before status 4, cancel, a failed job, bad input.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { upperAscii } from '../../fixtures/apps.js';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import { v2Arguments, type BlahpJob, type StatusOutcome } from '../support/blahpd.js';
import { jobDir, nameOf, blahpEnvForFile } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile();

async function submit(job: BlahpJob) {
  const sub = await env().blahpd.submit(job);
  expect(sub.listFilesLeft).toEqual([]);
  expect(sub.run?.stdinConsumed ?? '').toBe('');
  expect(sub.run?.silenceTimeout).toBe(false);
  return sub;
}

async function status(id: string): Promise<StatusOutcome> {
  const st = await env().blahpd.status(id);
  expect(st.problem).toBeUndefined();
  expect(st.run?.exitCode).toBe(0);
  expect(st.run?.silenceTimeout).toBe(false);
  expect(st.run?.stdinConsumed).toBe('');
  // Exactly one newline-terminated line, within blahpd's 1,023 characters.
  expect(st.run!.stdout).toMatch(/^[^\n]{1,1023}\n$/);
  return st;
}

/** As support.ts's waitForStatus (generous bound), each answer checked as blahpd reads it. */
async function waitForStatus(id: string, want: number, ms = 60_000): Promise<StatusOutcome> {
  const until = Date.now() + ms;
  for (;;) {
    const st = await status(id);
    if (st.answer?.jobStatus === want || Date.now() > until) return st;
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('submit -> idle -> running -> completed with outputs in Iwd and remaps applied; cancel -> removed', async () => {
  fs.mkdirSync(path.join(env().dir, 'elsewhere'));
  const inputs = [0, 1, 2, 3].map((k) => `hello ${k}\nsecond line\n`);
  const jobs: BlahpJob[] = inputs.map((input, k) => {
    const iwd = jobDir(env(), `job${k}`, input);
    const remap = k === 2 ? path.join(env().dir, 'elsewhere', 'abs.out') : `result.${k}`;
    return {
      // Job 1 names its app by the basename of Cmd, the others by batch_queue.
      Cmd: k === 1 ? '/opt/apps/uppercase' : '/usr/bin/true',
      ...(k === 1 ? {} : { Queue: 'uppercase' }),
      Iwd: iwd,
      Out: `job${k}.out`,
      Err: `job${k}.err`,
      TransferInput: 'in',
      TransferOutput: 'out',
      TransferOutputRemaps: `out=${remap}`,
      Arguments: v2Arguments([`n=${k}`, 'x(y)']),
      JobDirectory: iwd,
    };
  });
  env().server.clearRpcLog();
  // blahpd runs submits side by side: they share a batch.
  const subs = await Promise.all(jobs.map((j) => submit(j)));
  for (const s of subs) {
    expect(s.problem).toBeUndefined();
    expect(s.run!.exitCode).toBe(0);
    expect(s.jobId).toMatch(/^boinc\/[A-Za-z0-9._-]+$/);
  }
  const ids = subs.map((s) => s.jobId!);
  expect(new Set(ids).size).toBe(4);
  const creates = env().server.rpcLog().filter((e) => e.rpc === 'create_batch').length;
  expect(creates).toBeLessThan(jobs.length);

  for (const id of ids) expect((await status(id)).answer).toMatchObject({ rc: 0, jobStatus: 1 });
  const onServer = env().server.jobs();
  for (const id of ids) expect(onServer.some((j) => j.name === nameOf(id))).toBe(true);
  // The arguments arrive as the user wrote them (blahpd's backslashes before the parentheses undone).
  expect(onServer.find((j) => j.name === nameOf(ids[0]!))!.commandLine).toBe('n=0 x(y)');

  env().server.advanceJob(nameOf(ids[0]!), 'IN_PROGRESS');
  const running = await status(ids[0]!);
  expect(running.answer!.jobStatus).toBe(2);
  expect(running.answer!.ad!.get('BatchjobId')).toBe(nameOf(ids[0]!));

  // Cancel job 3 while the others run to completion.
  const c = await env().blahpd.cancel(ids[3]!);
  expect(c.problem).toBeUndefined();
  expect(c.answer).toEqual({ rc: 0, errorString: 'No error' });
  for (const k of [0, 1, 2]) env().server.advanceJob(nameOf(ids[k]!), 'DONE');

  for (const k of [0, 1, 2]) {
    const st = await waitForStatus(ids[k]!, 4);
    expect(st.answer!.jobStatus).toBe(4);
    expect(st.answer!.ad!.toObject()).toMatchObject({ ExitCode: 0, RemoteWallClockTime: 12.5, RemoteUserCpu: 10.25 });
    const iwd = jobs[k]!.Iwd!;
    const expected = Buffer.concat([upperAscii(Buffer.from(inputs[k]!)), Buffer.from(`\nargs: n=${k} x(y)\n`)]);
    const dest = k === 2 ? path.join(env().dir, 'elsewhere', 'abs.out') : path.join(iwd, `result.${k}`);
    // Status 4 means the outputs are already in place.
    expect(fs.readFileSync(dest)).toEqual(expected);
    expect(fs.existsSync(path.join(iwd, 'out'))).toBe(false);
    expect(fs.readFileSync(path.join(iwd, `job${k}.err`), 'utf8')).toMatch(stderrFilePattern(`uppercase: ${inputs[k]!.length} bytes\n`));
    expect(fs.readFileSync(path.join(iwd, `job${k}.out`), 'utf8')).toBe('');
    expect(fs.readdirSync(iwd).filter((n) => n.includes('.part'))).toEqual([]);
  }
  const removed = await status(ids[3]!);
  expect(removed.answer!.jobStatus).toBe(3);
  expect(env().server.jobs().find((j) => j.name === nameOf(ids[3]!))!.aborted).toBe(true);
}, LONG);

test('a job BOINC gives up on is held with the reason', async () => {
  const iwd = jobDir(env(), 'failing', 'boom\n');
  const sub = await submit({ Cmd: '/usr/bin/true', Queue: 'failing', Iwd: iwd, TransferInput: 'in', Out: 'o', Err: 'e', JobDirectory: iwd });
  expect(sub.jobId).not.toBeNull();
  const id = sub.jobId!;
  env().server.advanceJob(nameOf(id), 'DONE');
  expect(env().server.jobs().find((j) => j.name === nameOf(id))!.state).toBe('ERROR');
  const st = await waitForStatus(id, 5);
  expect(st.answer!.jobStatus).toBe(5);
  expect(st.answer!.ad!.get('HoldReason')).toMatch(/BOINC gave up on job/);
  expect(typeof st.answer!.ad!.get('HoldReasonCode')).toBe('number');
  // blahpd runs boinc_resume.sh for a held job: BOINC cannot resume it.
  const r = await env().blahpd.resume(id);
  expect(r.problem).toBeUndefined();
  expect(r.answer!.rc).not.toBe(0);
  expect(r.answer!.errorString).toMatch(/BOINC cannot resume a job/);
}, LONG);

test('bad input: a clear error, a failed submit, nothing created on the server', async () => {
  const iwd = jobDir(env(), 'bad', 'x\n');
  env().server.clearRpcLog();
  const base: BlahpJob = { Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', JobDirectory: iwd };
  const cases: Array<[BlahpJob, RegExp]> = [
    [{ ...base, Queue: 'nosuchapp' }, /BOINC app nosuchapp: get_templates failed: app not found/],
    [{ ...base, TransferInput: 'missing' }, /missing does not exist/],
    [{ ...base, Arguments: v2Arguments(['a b']) }, /argument 1 "a b" holds character U\+0020/],
    [{ ...base, Arguments: v2Arguments(['it\'s']) }, /argument 1 "it's" holds character '/],
    [{ ...base, Environment: 'A=1' }, /environment/],
    [{ ...base, TransferInput: 'in,in2' }, /2 input files, but the app's input template has 1|in2 does not exist/],
    [{ ...base, TransferOutput: 'nothere' }, /output file "nothere" is not an output of BOINC app uppercase/],
    [{ ...base, In: 'stdin.txt' }, /standard input/],
    [{ ...base, Queue: 'bad:app' }, /app name/],
  ];
  fs.writeFileSync(path.join(iwd, 'in2'), 'y\n');
  for (const [job, want] of cases) {
    const sub = await submit(job);
    expect(sub.jobId).toBeNull();
    expect(sub.run!.exitCode).not.toBe(0);
    expect(sub.run!.stderr).toMatch(want);
    // Each layer's prefix once (not `get_templates failed: get_templates failed: ...`).
    expect(sub.run!.stderr).not.toMatch(/(\w+ failed: )\1/);
  }
  // Nothing created or uploaded (the background worker may retire the earlier tests' batches meanwhile).
  const changes = ['create_batch', 'query_files', 'upload_files', 'submit_batch'];
  expect(env().server.rpcLog().filter((e) => changes.includes(e.rpc))).toEqual([]);
}, LONG);

test('no configuration: submit fails with a message, status answers one error line', async () => {
  const saved = env().env.BLAHPD_CONFIG_LOCATION;
  fs.writeFileSync(path.join(env().dir, 'empty.config'), '# nothing\n');
  env().env.BLAHPD_CONFIG_LOCATION = path.join(env().dir, 'empty.config');
  try {
    const iwd = jobDir(env(), 'noconf', 'x\n');
    const sub = await submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in' });
    expect(sub.jobId).toBeNull();
    expect(sub.run!.stderr).toMatch(/project URL: none given {2}-> fix: give boinc_project_url in [^\n]*blah\.config[^\n]* the project's master URL/);
    const st = await env().blahpd.status('boinc/blahp-uppercase-abc-123456_0');
    expect(st.run!.stdout).toMatch(/^1[^\n]*boinc_project_url[^\n]*\n$/);
  } finally {
    env().env.BLAHPD_CONFIG_LOCATION = saved;
  }
}, LONG);

test('ping, hold, resume, malformed ids', async () => {
  const p = await env().blahpd.ping();
  expect(p.problem).toBeUndefined();
  expect(p.answer).toEqual({ rc: 0, errorString: 'No error' });
  // BOINC has no hold: blahpd runs boinc_hold.sh for an idle job, which fails with the reason.
  const iwd = jobDir(env(), 'hold', 'x\n');
  const sub = await submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', JobDirectory: iwd });
  const h = await env().blahpd.hold(sub.jobId!);
  expect(h.problem).toBeUndefined();
  expect(h.answer!.rc).not.toBe(0);
  expect(h.answer!.errorString).toMatch(/BOINC cannot hold a job/);
  const s = await env().blahpd.status('boinc/not-ours');
  expect(s.run!.stdout).toBe('1malformed BOINC job id boinc/not-ours\n');
  const c = await env().blahpd.cancel('boinc/not-ours');
  expect(c.run!.exitCode).not.toBe(0);
  expect(c.answer?.rc).not.toBe(0);
}, LONG);

test('install refuses to replace a script it did not write, and writes executable scripts', async () => {
  const { spawnSync } = await import('node:child_process');
  const { GAHP_BIN } = await import('../support/gahp-process.js');
  const dir = path.join(env().dir, 'libexec2');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'boinc_status.sh'), '#!/bin/sh\necho mine\n');
  const r = spawnSync(process.execPath, [GAHP_BIN, 'blahp', 'install', dir], { encoding: 'utf8' });
  expect(r.status).not.toBe(0);
  expect(r.stderr).toMatch(/boinc_status.sh exists and was not written by boinc-gahp/);
  expect(fs.readdirSync(dir)).toEqual(['boinc_status.sh']);
  const f = spawnSync(process.execPath, [GAHP_BIN, 'blahp', 'install', dir, '--force'], { encoding: 'utf8' });
  expect(f.status).toBe(0);
  for (const a of ['submit', 'status', 'cancel', 'hold', 'resume', 'ping']) {
    expect(fs.statSync(path.join(dir, `boinc_${a}.sh`)).mode & 0o111).toBe(0o111);
  }
}, LONG);
