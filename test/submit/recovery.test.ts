/**
 * BOINC_SUBMIT under failures, against the test server with the real server's
 * non-idempotent file RPCs: injected faults, kill -9 at each stage, reuse of a batch left
 * behind, the hash cache across restarts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEnv, batchName, jobName, sleep, type Env } from '../commands/helpers.js';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import type { FaultSpec } from '../../fixtures/test-server/types.js';
import { submitLine, phys, writeInput, rpcNames, uploadedNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;
let logFile: string;

beforeAll(async () => {
  env = await startEnv();
  logFile = path.join(env.dir, 'gahp.log');
  await env.restart(undefined, { logFile });
});

afterAll(async () => {
  await env?.close();
});

beforeEach(() => {
  env.server.clearFaults();
});

async function submit(line: string, timeoutMs = 60_000): Promise<string[]> {
  return env.gahp.call(`BOINC_SUBMIT ${line}`, timeoutMs);
}

const escapeRe = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

let fileSeq = 0;
/** n distinct small input files; jobs use them round-robin (uppercase app). */
function makeBatch(nfiles: number, njobs: number, app = 'uppercase'): { batch: string; jobs: LineJob[]; line: string; contents: string[]; paths: string[] } {
  const batch = batchName(app);
  const contents: string[] = [];
  const paths: string[] = [];
  const tag = fileSeq++;
  for (let i = 0; i < nfiles; i++) {
    const c = `file ${tag}/${i} of a recovery test\n`.repeat(1 + (i % 7));
    contents.push(c);
    paths.push(writeInput(env.dir, `rec${tag}/f${i}.txt`, c));
  }
  const jobs: LineJob[] = [];
  for (let j = 0; j < njobs; j++) jobs.push({ name: jobName(batch, 10 + tag, j), inputs: [[paths[j % nfiles]!, 'in']] });
  return { batch, jobs, line: submitLine(batch, app, jobs), contents, paths };
}

/** Every name was stored at most once: no name was successfully uploaded twice. */
function expectEachUploadedOnce(contents: string[]): void {
  const stored = env.server.files().map((f) => f.name);
  for (const c of contents) expect(stored.filter((n) => n === phys(c))).toHaveLength(1);
}

describe('faults during staging', () => {
  const faults: Array<[string, FaultSpec]> = [
    ['upload_files answers 5xx', { script: 'job_file.php', rpc: 'upload_files', kind: '5xx' }],
    ['upload_files takes effect, then the connection drops', { script: 'job_file.php', rpc: 'upload_files', kind: 'drop-after' }],
    ['the second upload_files takes effect, then drops', { script: 'job_file.php', rpc: 'upload_files', kind: 'drop-after', after: 1 }],
    ['upload_files reply is cut short', { script: 'job_file.php', rpc: 'upload_files', kind: 'truncated' }],
    ['the batch-linked query_files takes effect, then drops', { script: 'job_file.php', rpc: 'query_files', kind: 'drop-after', requestContains: '<batch_id>' }],
    ['the batch-linked query_files answers 5xx twice', { script: 'job_file.php', rpc: 'query_files', kind: '5xx', count: 2, requestContains: '<batch_id>' }],
    ['create_batch takes effect, then drops', { script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'drop-after' }],
    ['submit_batch takes effect, then drops', { script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'drop-after' }],
  ];
  test.each(faults)('%s: the submit recovers with one complete batch', async (_what, fault) => {
    // 45 files: three upload_files requests of at most 20 files.
    const { batch, jobs, line, contents } = makeBatch(45, 60);
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    expect(await submit(line)).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expectEachUploadedOnce(contents);
    expect(rpcNames(env.server, since).filter((n) => n === 'create_batch')).toHaveLength(1);
    // Bounded requests.
    for (const e of env.server.rpcLog().slice(since)) if (e.rpc === 'upload_files') expect(e.uploaded!.length).toBeLessThanOrEqual(20);
    // The fault was met, and staging faults went through recovery.
    expect(rpcNames(env.server, since).filter((n) => n === fault.rpc).length).toBeGreaterThan(fault.rpc === 'create_batch' || fault.rpc === 'submit_batch' ? 0 : 1);
    if (fault.script === 'job_file.php') {
      await sleep(100);
      const log = fs.readFileSync(logFile, 'utf8');
      const m = new RegExp(`${escapeRe(batch)}: 45 distinct files: .* (\\d+) recoveries\\)`).exec(log);
      if (!m) throw new Error(log.split('\n').filter((l) => l.includes(batch)).join('\n'));
      expect(Number(m[1])).toBeGreaterThan(0);
    }
  });

  test('files already on the server: a lost reply of the linking query_files, then kill -9 while the linking query is answered', async () => {
    const first = makeBatch(8, 8);
    expect(await submit(first.line)).toEqual(['NULL']);
    // Same files, new batch: the batch-linked query links all 8 but its reply is lost.
    const b2 = batchName('uppercase');
    const jobs2 = first.jobs.map((j, i) => ({ ...j, name: jobName(b2, 90, i) }));
    env.server.injectFault({ script: 'job_file.php', rpc: 'query_files', kind: 'drop-after', requestContains: '<batch_id>' });
    const since = env.server.rpcLog().length;
    expect(await submit(submitLine(b2, 'uppercase', jobs2))).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, b2, jobs2.map((j) => j.name));
    expect(uploadedNames(env.server, since)).toEqual([]);
    // Every name of the lost linking query is linked again one by one, each answered
    // "Duplicate entry" (already linked): one fatal per file, the documented cost of a lost
    // reply (docs/boinc-server.md, "Crash recovery and the fatal it may cost").
    const linking = env.server.rpcLog().slice(since).filter((e) => e.rpc === 'query_files' && /<batch_id>/.test(e.raw));
    const namesOf = (raw: string) => [...raw.matchAll(/<phys_name>([^<]*)<\/phys_name>/g)].map((m) => m[1]!);
    const lost = namesOf(linking[0]!.raw);
    expect(lost).toHaveLength(8);
    const relinked = new Set(linking.slice(1).filter((e) => namesOf(e.raw).length === 1).map((e) => namesOf(e.raw)[0]!));
    for (const n of lost) expect(relinked.has(n)).toBe(true);
    expect(env.server.rpcLog().slice(since).filter((e) => e.fatal?.includes("for key 'job_file_id'"))).toHaveLength(8);

    // Third batch: kill -9 while the linking query is answered slowly; the repeat reuses the
    // batch, whose files are all linked already.
    const b3 = batchName('uppercase');
    const jobs3 = first.jobs.map((j, i) => ({ ...j, name: jobName(b3, 91, i) }));
    const line3 = submitLine(b3, 'uppercase', jobs3);
    env.server.injectFault({ script: 'job_file.php', rpc: 'query_files', kind: 'slow', delayMs: 20_000, requestContains: '<batch_id>' });
    const since3 = env.server.rpcLog().length;
    expect(await env.gahp.request(`BOINC_SUBMIT ${env.gahp.reqId()} ${line3}`)).toBe('S');
    const linkingSent = () => env.server.rpcLog().slice(since3).some((e) => e.rpc === 'query_files' && /<batch_id>/.test(e.raw));
    for (let i = 0; i < 500 && !linkingSent(); i++) await sleep(10);
    await env.gahp.kill('SIGKILL');
    env.server.clearFaults();
    await env.restart(undefined, { logFile });
    expect(await submit(line3)).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, b3, jobs3.map((j) => j.name));
    expect(uploadedNames(env.server, since3)).toEqual([]);
  });

  test('a persistent upload failure with more upload groups than run at once fails the submit too (groups still queued are not waited for forever)', async () => {
    // 100 files: five upload_files groups of 20, four at a time.
    const { line } = makeBatch(100, 100);
    env.server.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: '5xx', count: 1000 });
    const started = Date.now();
    const [msg] = await submit(line, 30_000);
    expect(msg).toMatch(/^staging input files: upload_files failed: .*500/);
    expect(Date.now() - started).toBeLessThan(20_000);
    env.server.clearFaults();
  });

  test('a persistent upload failure fails the batch after bounded retries, saying where and why, and withdraws the batch', async () => {
    const { line, batch } = makeBatch(2, 2);
    env.server.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: '5xx', count: 1000 });
    const since = env.server.rpcLog().length;
    const [msg] = await submit(line);
    expect(msg).toMatch(/^staging input files: upload_files failed: .*500/);
    // The gridmanager takes the error as the batch's end: the batch is not left empty on the server.
    expect(msg).toMatch(/the batch was withdrawn \(0 jobs aborted, batch retired\)/);
    expect(env.server.batches().find((b) => b.name === batch)!.state).toBe(4);
    const uploads = rpcNames(env.server, since).filter((n) => n === 'upload_files').length;
    expect(uploads).toBeGreaterThan(1);
    expect(uploads).toBeLessThanOrEqual(5);
    expect(rpcNames(env.server, since)).not.toContain('submit_batch');
    env.server.clearFaults();
  });
});

describe('repeat safety', () => {
  test('a batch left empty on the server, some files already linked to it, is reused without re-linking errors', async () => {
    const { batch, jobs, line, contents } = makeBatch(6, 12);
    // An earlier attempt created the batch and staged some of the files (linked to it),
    // then died: the ledger says 'creating' (written before create_batch went out).
    await env.restart(async () => {
      const ledger = JournalLedger.open(env.stateDir);
      await ledger.upsert(env.server.url, batch, { app: 'uppercase', state: 'creating', physFiles: [], jobs: {} });
      await ledger.close();
    }, { logFile });
    const batchId = await env.rpc.createBatch({ batchName: batch, appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 60 });
    const pre = path.join(env.dir, 'pre-linked.txt');
    fs.writeFileSync(pre, contents[0]!);
    await env.rpc.uploadFiles({ batchId, files: [{ physName: phys(contents[0]!), path: pre }] });
    fs.writeFileSync(pre, contents[1]!);
    await env.rpc.uploadFiles({ files: [{ physName: phys(contents[1]!), path: pre }] });
    const since = env.server.rpcLog().length;
    expect(await submit(line)).toEqual(['NULL']);
    expect(rpcNames(env.server, since)).not.toContain('create_batch');
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expect(env.server.batches().find((b) => b.name === batch)!.id).toBe(batchId);
    // Its short lease was renewed to a full one.
    expect(env.server.batches().find((b) => b.name === batch)!.expireTime).toBeGreaterThan(Date.now() / 1000 + 5 * 3600);
    expect(uploadedNames(env.server, since).sort()).toEqual(contents.slice(2).map(phys).sort());
  });

  const killPoints: Array<[string, FaultSpec]> = [
    ['create_batch', { script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'slow', delayMs: 20_000 }],
    ['the batch-linked query_files', { script: 'job_file.php', rpc: 'query_files', kind: 'slow', delayMs: 20_000 }],
    ['an upload_files (processed)', { script: 'job_file.php', rpc: 'upload_files', kind: 'slow', delayMs: 20_000, after: 1 }],
    ['an upload_files (never answered)', { script: 'job_file.php', rpc: 'upload_files', kind: 'hang', after: 1 }],
    ['submit_batch', { script: 'submit_rpc_handler.php', rpc: 'submit_batch', kind: 'slow', delayMs: 20_000 }],
  ];
  test.each(killPoints)('kill -9 while waiting for %s, then the same BOINC_SUBMIT: one complete batch', async (_what, fault) => {
    const { batch, jobs, line, contents } = makeBatch(45, 50);
    env.server.injectFault(fault);
    const since = env.server.rpcLog().length;
    const id = env.gahp.reqId();
    expect(await env.gahp.request(`BOINC_SUBMIT ${id} ${line}`)).toBe('S');
    // Wait until the faulty call has reached the server, then kill the GAHP.
    const skip = fault.after ?? 0;
    for (let i = 0; i < 500; i++) {
      if (rpcNames(env.server, since).filter((n) => n === fault.rpc).length > skip) break;
      await sleep(10);
    }
    expect(rpcNames(env.server, since).filter((n) => n === fault.rpc).length).toBeGreaterThan(skip);
    await env.gahp.kill('SIGKILL');
    env.server.clearFaults();
    await env.restart(undefined, { logFile });

    const again = env.server.rpcLog().length;
    expect(await submit(line)).toEqual(['NULL']);
    // The batch created before the kill is the one completed.
    expect(rpcNames(env.server, again)).not.toContain('create_batch');
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expectEachUploadedOnce(contents);
    const ledger = JournalLedger.readOnly(env.stateDir);
    const rec = ledger.get(env.server.url, batch)!;
    expect(rec.state).toBe('submitted');
    expect(rec.batchId).toBe(env.server.batches().find((b) => b.name === batch)!.id);
    expect(Object.keys(rec.jobs).sort()).toEqual(jobs.map((j) => j.name).sort());
  });
});

describe('changed inputs', () => {
  test('a file changed after it was hashed is never uploaded under its old name; the failed batch is withdrawn and the job, released into a new one, takes the new content', async () => {
    const p = writeInput(env.dir, `changing${fileSeq++}.txt`, 'before the change\n');
    const batch = batchName('uppercase');
    const line = submitLine(batch, 'uppercase', [{ name: jobName(batch, 95, 0), inputs: [[p, 'in']] }]);
    env.server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'slow', delayMs: 3000 });
    const since = env.server.rpcLog().length;
    const id = env.gahp.reqId();
    expect(await env.gahp.request(`BOINC_SUBMIT ${id} ${line}`)).toBe('S');
    // Change it once it is hashed (the GAHP's log says so) and create_batch is under way.
    const hashedLine = new RegExp(`${escapeRe(batch)}: 1 jobs, 1 input paths`);
    for (let i = 0; i < 1000; i++) {
      if (rpcNames(env.server, since).includes('create_batch') && hashedLine.test(fs.readFileSync(logFile, 'utf8'))) break;
      await sleep(10);
    }
    expect(rpcNames(env.server, since)).toContain('create_batch');
    fs.writeFileSync(p, 'after the change, longer\n');
    const [msg] = await env.gahp.waitResult(id);
    expect(msg).toContain(p);
    expect(msg).toContain('changed');
    expect(uploadedNames(env.server, since)).toEqual([]);
    // The error is the batch's end for the gridmanager (it holds the job and puts it in a
    // new batch when released): the batch is withdrawn, not left empty on the server.
    expect(msg).toContain('the batch was withdrawn (0 jobs aborted, batch retired)');
    expect(env.server.batches().find((b) => b.name === batch)!.state).toBe(4);
    // Released, the job goes into a new batch, with the new content.
    const again = batchName('uppercase');
    await sleep(60);
    expect(await submit(submitLine(again, 'uppercase', [{ name: jobName(again, 95, 0), inputs: [[p, 'in']] }]))).toEqual(['NULL']);
    expect(env.server.jobs(again)[0]!.inputFiles).toEqual([phys('after the change, longer\n')]);
  });
});

describe('hash cache', () => {
  test('an unchanged file is hashed once, across commands and restarts; a changed one again', async () => {
    const { line, jobs } = makeBatch(5, 5);
    // Hashes of files changed (ctime) within the timestamp granularity are not cached.
    await sleep(100);
    expect(await submit(line)).toEqual(['NULL']);
    const second = () => {
      const b = batchName('uppercase');
      return { b, line: submitLine(b, 'uppercase', jobs.map((j, i) => ({ ...j, name: jobName(b, 77, i) }))) };
    };
    const hashedCounts = async (b: string) => {
      await sleep(100);
      const log = fs.readFileSync(logFile, 'utf8');
      const m = new RegExp(`BOINC_SUBMIT \\d+ ${escapeRe(b)}: \\d+ jobs, \\d+ input paths \\((\\d+) hashes cached, (\\d+) hashed`).exec(log);
      expect(m).not.toBeNull();
      return { cached: Number(m![1]), hashed: Number(m![2]) };
    };
    const s1 = second();
    expect(await submit(s1.line)).toEqual(['NULL']);
    expect(await hashedCounts(s1.b)).toEqual({ cached: 5, hashed: 0 });

    await env.restart(undefined, { logFile });
    const s2 = second();
    expect(await submit(s2.line)).toEqual(['NULL']);
    expect(await hashedCounts(s2.b)).toEqual({ cached: 5, hashed: 0 });

    // Change one file (new content, new mtime): it is hashed again and gets its new name.
    const changed = jobs[0]!.inputs[0]![0];
    fs.writeFileSync(changed, 'new content\n');
    const past = new Date(Date.now() - 30_000);
    fs.utimesSync(changed, past, past);
    await sleep(100);
    const s3 = second();
    expect(await submit(s3.line)).toEqual(['NULL']);
    expect(await hashedCounts(s3.b)).toEqual({ cached: 4, hashed: 1 });
    expect(env.server.jobs(s3.b).find((j) => j.name === jobName(s3.b, 77, 0))!.inputFiles).toEqual([phys('new content\n')]);
  });
});

describe('kill -9 at random moments', () => {
  test('killed four times at random points of the same submit, the fifth run ends with one complete batch', async () => {
    // Slow RPCs (30 ms each) spread the submit over time, so random kills land anywhere.
    const slow = await startEnv({ latencyMs: 30 });
    try {
      const tag = fileSeq++;
      const batch = batchName('concat');
      const paths: string[] = [];
      const contents: string[] = [];
      for (let i = 0; i < 70; i++) {
        contents.push(`random kill ${tag} ${i}\n`.repeat(50));
        paths.push(writeInput(slow.dir, `rk${tag}/f${i}`, contents[i]!));
      }
      const jobs: LineJob[] = [];
      for (let j = 0; j < 120; j++) jobs.push({ name: jobName(batch, 50, j), args: ['-k', String(j)], inputs: [[paths[j % 70]!, 'a'], [paths[(j * 7) % 70]!, 'b']] });
      const line = submitLine(batch, 'concat', jobs);
      let seed = 12345;
      const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
      for (let k = 0; k < 4; k++) {
        expect(await slow.gahp.request(`BOINC_SUBMIT ${slow.gahp.reqId()} ${line}`)).toBe('S');
        await sleep(20 + Math.floor(rand() * 400));
        await slow.gahp.kill('SIGKILL');
        await slow.restart();
      }
      expect(await slow.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
      expectOneCompleteBatch(slow.server, batch, jobs.map((j) => j.name));
      const stored = slow.server.files().map((f) => f.name);
      for (const c of contents) expect(stored.filter((n) => n === phys(c))).toHaveLength(1);
      for (const j of slow.server.jobs(batch)) expect(j.commandLine).toMatch(/^-k \d+$/);
    } finally {
      await slow.close();
    }
  });

  test('two GAHPs sharing a state directory submit batches over the same files at once', async () => {
    const { jobs } = makeBatch(30, 30);
    const other = await startEnv({}, { stateDir: env.stateDir });
    try {
      // Both GAHPs talk to the first server; the second env's GAHP is re-pointed there.
      await other.gahp.selectProject(env.server.url, env.server.authenticator);
      const b1 = batchName('uppercase');
      const b2 = batchName('uppercase');
      const l1 = submitLine(b1, 'uppercase', jobs.map((j, i) => ({ ...j, name: jobName(b1, 60, i) })));
      const l2 = submitLine(b2, 'uppercase', jobs.map((j, i) => ({ ...j, name: jobName(b2, 61, i) })));
      const [r1, r2] = await Promise.all([env.gahp.call(`BOINC_SUBMIT ${l1}`, 60_000), other.gahp.call(`BOINC_SUBMIT ${l2}`, 60_000)]);
      expect(r1).toEqual(['NULL']);
      expect(r2).toEqual(['NULL']);
      expectOneCompleteBatch(env.server, b1, jobs.map((_, i) => jobName(b1, 60, i)));
      expectOneCompleteBatch(env.server, b2, jobs.map((_, i) => jobName(b2, 61, i)));
      // The shared hash cache holds only intact records.
      const lines = fs.readFileSync(path.join(env.stateDir, 'hash-cache.v2'), 'utf8').split('\n').filter((l) => l);
      expect(lines.length).toBeGreaterThanOrEqual(30);
      for (const l of lines) expect(l).toMatch(/^v2 \d+ \d+ \d+ \d+ \d+ \d+ [0-9a-f]{32} [0-9a-f]{8}$/);
    } finally {
      await other.close();
    }
  });
});
