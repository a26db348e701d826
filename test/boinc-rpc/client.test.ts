/**
 * BoincClient against the bundled BOINC test server (real HTTP on 127.0.0.1, real temp
 * files): every RPC, successes and errors, the real server's quirks and injected faults.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import type { BoincClientOptions } from '../../boinc-rpc/types.js';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { rejection } from '../support/rpc-errors.js';

let server: ExtendedTestBoincServer;
let tmp: string;
const clients: BoincClient[] = [];
const logLines: string[] = [];
let seq = 0;

function client(extra: Partial<BoincClientOptions> = {}): BoincClient {
  const c = new BoincClient({
    projectUrl: server.url,
    authenticator: server.authenticator,
    timeoutMs: 5000,
    retries: 3,
    retryBaseMs: 5,
    log: (line) => logLines.push(line),
    ...extra,
  });
  clients.push(c);
  return c;
}

function writeTmp(content: string | Buffer): { path: string; physName: string } {
  const p = path.join(tmp, `in-${seq++}`);
  fs.writeFileSync(p, content);
  const md5 = crypto.createHash('md5').update(content).digest('hex');
  return { path: p, physName: `condorv_${md5}` };
}

function uniqueBatchName(app: string): string {
  return `condor#schedd@submit.example.org#${app}#${Date.now()}${seq++}`;
}

/** Creates a batch, stages one distinct input per job, submits, returns names. */
async function submitted(c: BoincClient, app = 'uppercase', njobs = 2): Promise<{ batchName: string; batchId: number; jobNames: string[] }> {
  const batchName = uniqueBatchName(app);
  const batchId = await c.createBatch({ batchName, appName: app, expireTime: Math.floor(Date.now() / 1000) + 3600 });
  const inputs = Array.from({ length: njobs }, (_, i) => writeTmp(`input ${batchName} ${i}\n`));
  const absent = await c.queryFiles({ physNames: inputs.map((f) => f.physName) });
  await c.uploadFiles({ files: absent.map((i) => inputs[i]!), batchId });
  const jobNames = inputs.map((_, i) => `${batchName}#${i}.0`);
  await c.submitBatch({
    batchId,
    batchName,
    appName: app,
    jobs: jobNames.map((name, i) => ({ name, commandLine: '', inputFiles: [inputs[i]!.physName] })),
  });
  return { batchName, batchId, jobNames };
}

beforeAll(async () => {
  server = await startTestServer();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-rpc-test-'));
});

afterEach(() => {
  server.clearFaults();
});

afterAll(async () => {
  for (const c of clients) c.close();
  await server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('RPCs against the test server', () => {
  test('ping', async () => {
    await expect(client().ping()).resolves.toBeUndefined();
    expect(server.rpcLog().at(-1)).toMatchObject({ script: 'submit_rpc_handler.php', rpc: 'ping' });
  });

  test('the whole life of a batch: create, stage, submit, query, fetch, lease, retire', async () => {
    const c = client();
    const batchName = uniqueBatchName('concat');
    const expire = Math.floor(Date.now() / 1000) + 3600;
    const batchId = await c.createBatch({ batchName, appName: 'concat', expireTime: expire });
    expect(batchId).toBeGreaterThan(0);
    expect(server.batches().find((b) => b.id === batchId)).toMatchObject({ name: batchName, app: 'concat', state: 0, expireTime: expire });

    // Files: query (nothing there), upload with the batch, query again (all present).
    const a = writeTmp('alpha\n');
    const b = writeTmp(Buffer.from([0, 1, 2, 255, 254]));
    expect(await c.queryFiles({ physNames: [a.physName, b.physName] })).toEqual([0, 1]);
    await c.uploadFiles({ files: [a, b], batchId, deleteTime: expire });
    const stored = server.files();
    expect(stored.find((f) => f.name === a.physName)).toMatchObject({ size: 6, md5: a.physName.slice(8) });
    expect(stored.find((f) => f.name === b.physName)?.batches).toContain(batchId);
    expect(await c.queryFiles({ physNames: [b.physName, a.physName] })).toEqual([]);
    const up = server.rpcLog().filter((e) => e.rpc === 'upload_files').at(-1)!;
    expect(up.uploaded).toEqual([a.physName, b.physName]);

    // Submit two jobs into the created batch.
    const jobNames = [`${batchName}#1.0`, `${batchName}#1.1`];
    const submittedId = await c.submitBatch({
      batchId,
      batchName,
      appName: 'concat',
      jobParams: { rscFpopsEst: 1e12, delayBound: 86400 },
      jobs: [
        { name: jobNames[0]!, commandLine: '-n 5', inputFiles: [a.physName, b.physName] },
        { name: jobNames[1]!, commandLine: '', inputFiles: [b.physName, a.physName] },
      ],
    });
    expect(submittedId).toBe(batchId);
    const views = server.jobs(batchName);
    expect(views.map((j) => [j.name, j.commandLine, j.inputFiles])).toEqual([
      [jobNames[0], '-n 5', [a.physName, b.physName]],
      [jobNames[1], '', [b.physName, a.physName]],
    ]);
    const raw = server.rpcLog().filter((e) => e.rpc === 'submit_batch').at(-1)!.raw;
    expect(raw).toContain('<rsc_fpops_est>1000000000000</rsc_fpops_est>');
    expect(raw).toContain('<mode>local_staged</mode>');

    // query_batch2: everything, then after completion.
    const q1 = await c.queryBatch2('0', [batchName]);
    expect(Number(q1.serverTime)).toBeGreaterThan(0);
    expect(q1.batches[0]!.jobs.map((j) => j.name)).toEqual(jobNames);
    expect(q1.batches[0]!.jobs.map((j) => j.status)).toEqual(views.map((v) => v.state));
    server.advanceAll(batchName);
    await server.settled();
    const q2 = await c.queryBatch2('0', [batchName]);
    expect(q2.batches[0]!.jobs).toEqual(jobNames.map((name) => ({ name, status: 'DONE' })));

    // query_batch by name and by id (the real server prints PHP deprecations into it).
    const qb = await c.queryBatch({ batchName });
    expect(qb).toMatchObject({ id: batchId, name: batchName, appName: 'concat', njobs: 2 });
    expect(qb.jobs.map((j) => j.name)).toEqual(jobNames);
    expect(qb.jobs.every((j) => (j.canonicalInstanceId ?? 0) > 0)).toBe(true);
    expect((await c.queryBatch({ batchId })).name).toBe(batchName);

    // Completed job, templates, outputs.
    const cj = await c.queryCompletedJob(jobNames[0]!);
    expect(cj.errorMask).toBe(0);
    expect(cj.canonicalResultId).toBeGreaterThan(0);
    expect(cj.exitStatus).toBe(0);
    const concat = { inputOpenNames: ['a', 'b'], outputOpenNames: ['joined', 'info'], rscMemoryBound: 1e8 };
    expect(await c.getTemplates({ appName: 'concat' })).toMatchObject(concat);
    expect(await c.getTemplates({ jobName: jobNames[1]! })).toMatchObject(concat);
    for (const [fileNum, job] of [[0, jobNames[0]!], [1, jobNames[0]!], [0, jobNames[1]!]] as const) {
      const dest = path.join(tmp, `out-${seq++}`);
      const { bytes } = await c.fetchOutputFile({ jobName: job, fileNum, destPath: dest });
      const expected = server.outputOf(job, fileNum)!;
      expect(bytes).toBe(expected.length);
      expect(fs.readFileSync(dest)).toEqual(expected);
    }
    expect(fs.readFileSync(path.join(tmp, `out-${seq - 3}`)).toString('latin1')).toBe('alpha\n\u0000\u0001\u0002\u00ff\u00fe');

    // Lease and retirement.
    await c.setExpireTime(batchName, expire + 100.5);
    expect(server.batches().find((x) => x.id === batchId)!.expireTime).toBe(expire + 100.5);
    await c.retireBatch({ batchName });
    expect(server.batches().find((x) => x.id === batchId)?.state ?? 4).toBe(4);
  });

  test('abort_jobs and retire by id', async () => {
    const c = client();
    const { batchName, batchId, jobNames } = await submitted(c);
    await c.abortJobs([jobNames[0]!]);
    const jobs = server.jobs(batchName);
    expect(jobs.find((j) => j.name === jobNames[0])!.aborted).toBe(true);
    expect(jobs.find((j) => j.name === jobNames[1])!.aborted).toBe(false);
    const q = await c.queryBatch2('0', [batchName]);
    expect(q.batches[0]!.jobs.find((j) => j.name === jobNames[0])!.status).toBe('ERROR');
    await c.retireBatch({ batchId });
    expect(server.batches().find((x) => x.id === batchId)?.state ?? 4).toBe(4);
  });

  test('query_batch with job details and query_job: what the server reports of failed jobs', async () => {
    const c = client();
    const crashed = await submitted(c, 'failing', 1);
    server.advanceAll(crashed.batchName);
    await server.settled();
    const other = await submitted(c, 'uppercase', 3);
    const [aborted, timedOut, done] = other.jobNames as [string, string, string];
    await c.abortJobs([aborted]);
    server.advanceJob(timedOut, 'IN_PROGRESS');
    server.timeOutJob(timedOut);
    server.advanceJob(done, 'DONE');
    await server.settled();

    // The `<error>` flags inside each <job> are data, not an error reply.
    const q = await c.queryBatch({ batchName: crashed.batchName, jobDetails: true });
    expect(server.rpcLog().at(-1)!.raw).toContain('<get_job_details>1</get_job_details>');
    expect(q.jobs).toEqual([expect.objectContaining({ name: crashed.jobNames[0], status: 'error', errors: ['too_many_error_results'], exitStatuses: [7] })]);
    const o = await c.queryBatch({ batchName: other.batchName, jobDetails: true });
    expect(o.jobs.map((j) => [j.name, j.status, j.errors, j.exitStatuses])).toEqual([
      [aborted, 'error', ['cancelled'], undefined],
      [timedOut, 'error', ['too_many_total_results'], undefined],
      [done, 'done', undefined, undefined],
    ]);
    // Without details, as before: no status words (the real server prints none).
    expect((await c.queryBatch({ batchName: other.batchName })).jobs.map((j) => j.status)).toEqual([undefined, undefined, undefined]);

    const states = await Promise.all(o.jobs.map(async (j) => (await c.queryJob(j.id)).map((i) => i.state)));
    expect(states).toEqual([["Didn't need"], ['Timed out - no response'], ['Completed and validated']]);
    const [instance] = await c.queryJob(q.jobs[0]!.id);
    expect([instance?.name, instance?.state]).toEqual([`${crashed.jobNames[0]}_0`, 'Error while computing']);
    expect(instance?.id).toBeGreaterThan(0);
    expect((await rejection(c.queryJob(987654321))).serverMessage).toBe('no such job');
  });

  test('destIsTemp: the output is written to destPath itself, exclusively, and removed on failure', async () => {
    const c = client();
    const { batchName, jobNames } = await submitted(c, 'uppercase', 1);
    server.advanceAll(batchName);
    await server.settled();
    const dir = fs.mkdtempSync(path.join(tmp, 'direct-'));
    const dest = path.join(dir, '.out.tmp');
    expect(await c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest, destIsTemp: true })).toEqual({ bytes: server.outputOf(jobNames[0]!, 0)!.length });
    // No temp file of the client's beside it, nothing renamed: the one file is the caller's.
    expect(fs.readdirSync(dir)).toEqual(['.out.tmp']);
    expect(fs.readFileSync(dest)).toEqual(server.outputOf(jobNames[0]!, 0));
    // Created exclusively: a name already taken is never written over.
    const e = await rejection(c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest, destIsTemp: true }));
    expect(e.kind).toBe('local');
    expect(fs.readFileSync(dest)).toEqual(server.outputOf(jobNames[0]!, 0));
    // A failed download leaves nothing.
    const gone = path.join(dir, '.missing.tmp');
    await rejection(c.fetchOutputFile({ jobName: 'nojob', fileNum: 0, destPath: gone, destIsTemp: true }));
    expect(fs.readdirSync(dir)).toEqual(['.out.tmp']);
  });

  test('query_batch2 of several batches keeps their order; min_mod_time passes through', async () => {
    const c = client();
    const one = await submitted(c, 'uppercase', 1);
    const three = await submitted(c, 'uppercase', 3);
    const q = await c.queryBatch2('0', [three.batchName, one.batchName]);
    expect(q.batches.map((b) => b.jobs.map((j) => j.name))).toEqual([three.jobNames, one.jobNames]);
    // One time, computed once: the clock may cross a second between two readings of it.
    const future = String(Math.ceil(Date.now() / 1000) + 10);
    const later = await c.queryBatch2(future, [one.batchName]);
    expect(later.batches).toEqual([{ jobs: [] }]);
    expect(server.rpcLog().at(-1)!.raw).toContain(`<min_mod_time>${future}</min_mod_time>`);
  });

  test('a non-ASCII name comes back intact (the server echoes the UTF-8 bytes it stored)', async () => {
    const c = client();
    const batchName = `caf\u00e9-\u65e5\u672c-${Date.now()}`;
    const batchId = await c.createBatch({ batchName, appName: 'uppercase', expireTime: 0 });
    const qb = await c.queryBatch({ batchId });
    expect(qb.name).toBe(batchName);
  });
});

describe('server errors', () => {
  test('unknown batch: the gridmanager finds "no batch named <name>" at the end', async () => {
    const e = await rejection(client().queryBatch2('0', ['condor#nosuch#1796200000']));
    expect(e.kind).toBe('server');
    expect(e.errorNum).toBe(-1);
    expect(e.message).toBe('query_batch2 failed: no batch named condor#nosuch#1796200000');
  });

  test("a name with <&'\" is escaped on the wire and comes back raw in the error", async () => {
    const c = client();
    const name = `x<&'">y`;
    const e = await rejection(c.abortJobs([name]));
    expect(e.kind).toBe('server');
    expect(e.serverMessage.toLowerCase()).toContain(`no job ${name}`.toLowerCase());
    const raw = server.rpcLog().filter((x) => x.rpc === 'abort_jobs').at(-1)!.raw;
    expect(raw).toContain('<job_name>x&lt;&amp;&apos;&quot;&gt;y</job_name>');
    expect(raw).not.toContain(name);
    const e2 = await rejection(c.queryBatch2('0', [name]));
    expect(e2.message).toBe(`query_batch2 failed: no batch named ${name}`);
  });

  test('bad authenticator: the authenticator is in no message', async () => {
    const secret = 'deadbeef-secret-auth-0123456789';
    const c = client({ authenticator: secret });
    const e = await rejection(c.queryBatch2('0', ['b']));
    expect(e.message).toBe('query_batch2 failed: bad authenticator');
    const e2 = await rejection(c.fetchOutputFile({ jobName: 'nojob', fileNum: 0, destPath: path.join(tmp, 'never') }));
    expect(e2.message).not.toContain(secret);
    expect(fs.existsSync(path.join(tmp, 'never'))).toBe(false);
  });

  test('no submit access', async () => {
    const auth = server.addUser({ submitApps: ['concat'] });
    const e = await rejection(client({ authenticator: auth }).createBatch({ batchName: uniqueBatchName('uppercase'), appName: 'uppercase', expireTime: 0 }));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('create_batch failed: no submit access');
  });

  test('submit_batch with the wrong number of input files', async () => {
    const c = client();
    const batchName = uniqueBatchName('concat');
    const batchId = await c.createBatch({ batchName, appName: 'concat', expireTime: 0 });
    const f = writeTmp('only one');
    await c.uploadFiles({ files: [f], batchId });
    const e = await rejection(c.submitBatch({ batchId, batchName, appName: 'concat', jobs: [{ name: `${batchName}#0`, commandLine: '', inputFiles: [f.physName] }] }));
    expect(e.kind).toBe('server');
    expect(e.serverMessage).toMatch(/wrong # of input files for job 0: need 2, got 1/);
    expect(e.uncertain).toBe(false);
  });

  test('each RPC reports the server error for an unknown or foreign object', async () => {
    const c = client();
    const other = client({ authenticator: server.addUser() });
    const mine = await submitted(c, 'uppercase', 1);
    const f = writeTmp(`err ${Date.now()}`);
    const bad = client({ authenticator: 'not-a-user' });
    const cases: Array<[string, Promise<unknown>, RegExp]> = [
      ['create_batch', c.createBatch({ batchName: uniqueBatchName('x'), appName: 'nosuchapp', expireTime: 0 }), /nosuchapp|no app/i],
      ['submit_batch', other.submitBatch({ batchId: mine.batchId, batchName: mine.batchName, appName: 'uppercase', jobs: [{ name: 'zz', commandLine: '', inputFiles: [f.physName] }] }), /not owner|no submit|init state/i],
      ['query_batch', c.queryBatch({ batchName: 'nosuchbatch' }), /no such batch|no batch/i],
      ['query_batch2', other.queryBatch2('0', [mine.batchName]), new RegExp(`not owner of ${mine.batchName}`)],
      ['get_templates', c.getTemplates({ appName: 'nosuchapp' }), /nosuchapp|no app/i],
      ['abort_jobs', other.abortJobs([mine.jobNames[0]!]), /not owner/i],
      ['retire_batch', c.retireBatch({ batchName: 'nosuchbatch' }), /no such batch|no batch/i],
      ['set_expire_time', c.setExpireTime('nosuchbatch', 1), /no such batch|no batch/i],
      ['query_files', bad.queryFiles({ physNames: [f.physName] }), /bad authenticator/],
      ['upload_files', bad.uploadFiles({ files: [f] }), /bad authenticator/],
    ];
    for (const [rpc, p, re] of cases) {
      const e = await rejection(p);
      expect([rpc, e.kind, e.uncertain]).toEqual([rpc, 'server', false]);
      expect(e.message.startsWith(`${rpc} failed: `)).toBe(true);
      expect(e.serverMessage).toMatch(re);
    }
  });

  test('query_completed_job of an unknown job', async () => {
    const e = await rejection(client().queryCompletedJob('nosuchjob'));
    expect(e.kind).toBe('server');
    expect(e.serverMessage).toBe('no such job');
  });

  test('query_completed_job of a failed job: fatal, uncertain, text without HTML', async () => {
    const c = client();
    const { batchName, jobNames } = await submitted(c, 'failing', 1);
    server.advanceAll(batchName);
    await server.settled();
    const e = await rejection(c.queryCompletedJob(jobNames[0]!));
    expect(e.kind).toBe('fatal');
    expect(e.uncertain).toBe(true);
    expect(e.serverMessage).toMatch(/^Fatal error: /);
    expect(e.serverMessage).not.toMatch(/<b>|<br/);
  });

  test('uploading a registered name again: a fatal Duplicate entry, uncertain, not repeated', async () => {
    const c = client();
    const f = writeTmp(`dup ${Date.now()}`);
    await c.uploadFiles({ files: [f] });
    const before = server.rpcLog().length;
    const e = await rejection(c.uploadFiles({ files: [f] }));
    expect(e.kind).toBe('fatal');
    expect(e.uncertain).toBe(true);
    expect(e.serverMessage).toContain('Duplicate entry');
    expect(server.rpcLog().length - before).toBe(1);
  });

  test('query_files with a batch_id twice for a linked file: fatal, not retried', async () => {
    const c = client();
    const batchId = await c.createBatch({ batchName: uniqueBatchName('uppercase'), appName: 'uppercase', expireTime: 0 });
    const f = writeTmp(`linked ${Date.now()}`);
    await c.uploadFiles({ files: [f] });
    expect(await c.queryFiles({ physNames: [f.physName], batchId })).toEqual([]);
    const e = await rejection(c.queryFiles({ physNames: [f.physName], batchId }));
    expect(e.kind).toBe('fatal');
    expect(e.serverMessage).toContain('Duplicate entry');
  });

  test('upload of an unreadable file fails locally, sending nothing', async () => {
    const before = server.rpcLog().length;
    const e = await rejection(client().uploadFiles({ files: [{ path: path.join(tmp, 'missing'), physName: 'condorv_x' }] }));
    expect(e.kind).toBe('local');
    expect(server.rpcLog().length).toBe(before);
  });

  test('get_output of a job without output: ERROR body, nothing written', async () => {
    const c = client();
    const { jobNames } = await submitted(c, 'uppercase', 1);
    const dest = path.join(tmp, `no-output-${seq++}`);
    const e = await rejection(c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest }));
    expect(e.kind).toBe('protocol');
    expect(e.message).toBe(`get_output failed: ERROR: no canonical result for wu ${jobNames[0]}`);
    expect(fs.existsSync(dest)).toBe(false);
    expect(fs.readdirSync(tmp).filter((n) => n.includes('no-output'))).toEqual([]);
  });
});

describe('transport and faults', () => {
  test('a 5xx on a safe call is retried', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: '5xx', count: 2 });
    const before = server.rpcLog().length;
    await client().ping();
    expect(server.rpcLog().slice(before).map((e) => e.rpc)).toEqual(['ping', 'ping', 'ping']);
  });

  test('retries give up after options.retries', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: '5xx', count: 10, status: 503 });
    const before = server.rpcLog().length;
    const e = await rejection(client({ retries: 2 }).ping());
    expect(e.kind).toBe('transport');
    expect(e.options.httpStatus).toBe(503);
    expect(server.rpcLog().length - before).toBe(3);
  });

  test('a 5xx on create_batch is not repeated and is uncertain', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: '5xx' });
    const before = server.rpcLog().length;
    const e = await rejection(client().createBatch({ batchName: uniqueBatchName('uppercase'), appName: 'uppercase', expireTime: 0 }));
    expect(e.kind).toBe('transport');
    expect(e.uncertain).toBe(true);
    expect(e.message).toBe('create_batch failed: HTTP 500 Internal Server Error');
    expect(server.rpcLog().length - before).toBe(1);
  });

  test('a timeout: safe calls retry, then fail; no hang', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_batch2', kind: 'hang', count: 1 });
    const c = client({ timeoutMs: 300 });
    const { batchName } = await submitted(c, 'uppercase', 1);
    const q = await c.queryBatch2('0', [batchName]); // first attempt hangs, the retry answers
    expect(q.batches[0]!.jobs).toHaveLength(1);
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: 'hang', count: 5 });
    const t0 = Date.now();
    const e = await rejection(client({ timeoutMs: 200, retries: 1 }).ping());
    expect(e.kind).toBe('transport');
    expect(e.message).toMatch(/^ping failed: timeout after 200 ms/);
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  test('a hang fails a safe call after two timed-out attempts, whatever the retries left', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: 'hang', count: 10 });
    const before = server.rpcLog().length;
    const t0 = Date.now();
    const e = await rejection(client({ timeoutMs: 300, retries: 4 }).ping());
    const ms = Date.now() - t0;
    expect(e.kind).toBe('transport');
    expect(e.timedOut).toBe(true);
    expect(server.rpcLog().length - before).toBe(2);
    expect(ms).toBeGreaterThanOrEqual(590);
    expect(ms).toBeLessThan(1500);
  });

  test('no new attempt starts past the call budget of 2 x timeout, even after fast failures', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: '5xx', count: 10 });
    const before = server.rpcLog().length;
    // The first backoff (1000-3000 ms) would end past the budget (600 ms): no retry.
    const e = await rejection(client({ timeoutMs: 300, retries: 4, retryBaseMs: 2000 }).ping());
    expect(e.options.httpStatus).toBe(500);
    expect(e.timedOut).toBe(false);
    expect(server.rpcLog().length - before).toBe(1);
  });

  test('an upload in flight is cancelled by its signal: a local error, aborted and uncertain, at once', async () => {
    server.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: 'hang', count: 1 });
    const f = writeTmp(crypto.randomBytes(2 << 20));
    const ac = new AbortController();
    const c = client({ timeoutMs: 5000 });
    const p = c.uploadFiles({ files: [f], signal: ac.signal });
    setTimeout(() => ac.abort(), 200);
    const t0 = Date.now();
    const e = await rejection(p);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(e.kind).toBe('local');
    expect(e.aborted).toBe(true);
    expect(e.uncertain).toBe(true);
    expect(e.message).toBe('upload_files failed: aborted');
    // The client still works, and the file is absent (the hang never stored it).
    expect(await c.queryFiles({ physNames: [f.physName] })).toEqual([0]);
  });

  test('a call waiting for a slot is cancelled without being sent; the reason is in the message', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: 'hang', count: 1 });
    const c = client({ timeoutMs: 5000, concurrency: 1 });
    const first = new AbortController();
    const second = new AbortController();
    const before = server.rpcLog().length;
    const p1 = c.ping({ signal: first.signal });
    const p2 = c.queryBatch2('0', [], { signal: second.signal });
    await new Promise((r) => setTimeout(r, 100));
    second.abort(new Error('command timeout of 5 s reached'));
    const e2 = await rejection(p2);
    expect(e2.message).toBe('query_batch2 failed: aborted: command timeout of 5 s reached');
    expect(e2.uncertain).toBe(false);
    first.abort();
    const e1 = await rejection(p1);
    expect(e1.aborted).toBe(true);
    // Only submit_rpc_handler.php calls count: the previous test's hung upload may reach the
    // server's log late (it logs an upload once the whole body is read), under load after
    // `before` was taken.
    const submitCalls = () => server.rpcLog().slice(before).filter((x) => x.script === 'submit_rpc_handler.php');
    expect(submitCalls().map((x) => x.rpc)).toEqual(['ping']);
    // An already aborted signal sends nothing.
    const e3 = await rejection(c.ping({ signal: AbortSignal.abort() }));
    expect(e3.aborted).toBe(true);
    expect(submitCalls()).toHaveLength(1);
  });

  test('a timeout on create_batch after sending: uncertain, not repeated', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'hang' });
    const before = server.rpcLog().length;
    const e = await rejection(client({ timeoutMs: 300 }).createBatch({ batchName: uniqueBatchName('uppercase'), appName: 'uppercase', expireTime: 0 }));
    expect(e.kind).toBe('transport');
    expect(e.uncertain).toBe(true);
    expect(server.rpcLog().length - before).toBe(1);
  });

  test('a dropped connection after the server acted: uncertain, and the batch exists', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'drop-after' });
    const batchName = uniqueBatchName('uppercase');
    const e = await rejection(client().createBatch({ batchName, appName: 'uppercase', expireTime: 0 }));
    expect(e.kind).toBe('transport');
    expect(e.uncertain).toBe(true);
    expect(server.batches().some((b) => b.name === batchName)).toBe(true);
  });

  test('a reply cut short on a safe call is retried', async () => {
    const c = client();
    const { batchName } = await submitted(c, 'uppercase', 2);
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'query_batch2', kind: 'truncated' });
    const before = server.rpcLog().length;
    const q = await c.queryBatch2('0', [batchName]);
    expect(q.batches[0]!.jobs).toHaveLength(2);
    expect(server.rpcLog().length - before).toBe(2);
  });

  test('garbage is a protocol error', async () => {
    server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: 'garbage' });
    const e = await rejection(client().ping());
    expect(e.kind).toBe('protocol');
    expect(e.uncertain).toBe(true);
  });

  test('a connection refused is transport, certain (nothing sent), so even create_batch retries it', async () => {
    const lines: string[] = [];
    const e = await rejection(client({ projectUrl: 'http://127.0.0.1:1/x/', retries: 2, log: (l) => lines.push(l) }).createBatch({ batchName: 'b', appName: 'a', expireTime: 0 }));
    expect(e.kind).toBe('transport');
    expect(e.uncertain).toBe(false);
    expect(e.message).toMatch(/^create_batch failed: ECONNREFUSED/);
    expect(lines.filter((l) => l.includes('retry'))).toHaveLength(2);
  });

  test('an ERROR: download body (injected) writes nothing, and a slow download can be aborted', async () => {
    const c = client();
    const { batchName, jobNames } = await submitted(c, 'uppercase', 1);
    server.advanceAll(batchName);
    await server.settled();
    server.injectFault({ script: 'get_output.php', kind: 'error-body' });
    const dest = path.join(tmp, `faulty-${seq++}`);
    const e = await rejection(c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest }));
    expect(e.message).toBe('get_output failed: ERROR: injected fault: database unavailable');
    expect(fs.existsSync(dest)).toBe(false);

    server.injectFault({ script: 'get_output.php', kind: 'slow', delayMs: 3000 });
    const ac = new AbortController();
    const p = c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest, signal: ac.signal });
    setTimeout(() => ac.abort(), 150);
    const e2 = await rejection(p);
    expect(e2.message).toBe('get_output failed: aborted');
    expect(fs.readdirSync(tmp).filter((n) => n.includes('faulty'))).toEqual([]);

    // And a good fetch afterwards still works.
    await c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest });
    expect(fs.readFileSync(dest)).toEqual(server.outputOf(jobNames[0]!, 0));
  });

  test('a download into a missing directory is a local error', async () => {
    const c = client();
    const { batchName, jobNames } = await submitted(c, 'uppercase', 1);
    server.advanceAll(batchName);
    await server.settled();
    const e = await rejection(c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: path.join(tmp, 'no-such-dir', 'out') }));
    expect(e.kind).toBe('local');
    expect(e.message).toMatch(/^get_output failed: cannot write .*ENOENT/);
  });

  test('a 5xx download is retried', async () => {
    const c = client();
    const { batchName, jobNames } = await submitted(c, 'uppercase', 1);
    server.advanceAll(batchName);
    await server.settled();
    server.injectFault({ script: 'get_output.php', kind: '5xx', count: 1 });
    const dest = path.join(tmp, `retried-${seq++}`);
    await c.fetchOutputFile({ jobName: jobNames[0]!, fileNum: 0, destPath: dest });
    expect(fs.readFileSync(dest)).toEqual(server.outputOf(jobNames[0]!, 0));
  });

  test('the debug log holds one line per call and never the authenticator', () => {
    expect(logLines.length).toBeGreaterThan(20);
    expect(logLines.some((l) => l.includes('get_output'))).toBe(true);
    expect(logLines.some((l) => l.includes('retry'))).toBe(true);
    for (const l of logLines) {
      expect(l).not.toContain(server.authenticator);
      expect(l).not.toContain('deadbeef-secret-auth');
    }
  });
});

describe('with a tiny local server', () => {
  let local: http.Server;
  let url: string;
  let inFlight = 0;
  let maxInFlight = 0;
  let handler: (body: string, res: http.ServerResponse) => void = () => undefined;

  beforeAll(async () => {
    local = http.createServer((req, res) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      let body = '';
      req.setEncoding('latin1');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => {
        res.on('close', () => inFlight--);
        handler(body, res);
      });
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(local.address() as AddressInfo).port}/p/`;
  });

  afterAll(async () => {
    local.closeAllConnections();
    await new Promise((resolve) => local.close(resolve));
  });

  test('concurrency is bounded per client', async () => {
    handler = (_body, res) => {
      setTimeout(() => {
        res.writeHead(200, { Connection: 'close' });
        res.end('<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<success>1</success>\n</ping>\n');
      }, 60);
    };
    maxInFlight = 0;
    const c = client({ projectUrl: url, concurrency: 2 });
    await Promise.all(Array.from({ length: 6 }, () => c.ping()));
    expect(maxInFlight).toBe(2);
  });

  test('the request is multipart with one field `request` holding the escaped XML', async () => {
    let seen = '';
    handler = (body, res) => {
      seen = body;
      res.end('<?xml version="1.0" encoding="ISO-8859-1" ?>\n<set_expire_time>\n<success>1</success>\n</set_expire_time>\n');
    };
    await client({ projectUrl: url, authenticator: 'a&b' }).setExpireTime('n<1>', 17.5);
    expect(seen).toMatch(/Content-Disposition: form-data; name="request"\r\n\r\n<set_expire_time>\n/);
    expect(seen).toContain('<authenticator>a&amp;b</authenticator>\n<batch_name>n&lt;1&gt;</batch_name>\n<expire_time>17.5</expire_time>\n</set_expire_time>');
  });

  test('a server text that echoes the authenticator is redacted', async () => {
    const secret = 'f00dfeed0123456789abcdef';
    handler = (_body, res) => {
      res.end(`<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<error>\n<error_num>-1</error_num>\n<error_msg>bad authenticator ${secret}</error_msg>\n</error>\n</ping>\n`);
    };
    const lines: string[] = [];
    const e = await rejection(client({ projectUrl: url, authenticator: secret, log: (l) => lines.push(l) }).queryBatch2('0', ['x']));
    expect(e.message).toBe('query_batch2 failed: bad authenticator ***');
    expect(lines.join('\n')).not.toContain(secret);
  });

  test('close() fails calls in flight and queued ones; none hangs', async () => {
    handler = (_body, res) => {
      setTimeout(() => {
        if (!res.destroyed) res.end('<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping><success>1</success></ping>\n');
      }, 300);
    };
    const c = client({ projectUrl: url, concurrency: 1, retries: 0 });
    const calls = [c.ping(), c.ping(), c.ping()].map((p) => p.then(() => 'ok', (e: BoincRpcError) => e.kind));
    await new Promise((r) => setTimeout(r, 50));
    c.close();
    const kinds = await Promise.all(calls);
    expect(kinds[0]).toBe('transport');
    expect(kinds.slice(1)).toEqual(['local', 'local']);
  });

  test('a download cut short after its Content-Length is an error and leaves nothing', async () => {
    handler = (_body, res) => {
      res.writeHead(200, { 'Content-Length': '1000' });
      res.write('only part of it');
      setTimeout(() => res.destroy(), 20);
    };
    const dest = path.join(tmp, `cut-${seq++}`);
    const e = await rejection(client({ projectUrl: url, retries: 1 }).fetchOutputFile({ jobName: 'j', fileNum: 0, destPath: dest }));
    expect(e.kind).toBe('transport');
    expect(fs.existsSync(dest)).toBe(false);
    expect(fs.readdirSync(tmp).filter((n) => n.includes(`cut-`))).toEqual([]);
  });
});
