/**
 * QUIT (and EOF) while submits are uploading and fetches are downloading: the real GAHP
 * exits promptly (uploads and downloads are cancelled, not waited for: well under the
 * server's 3 s grace), leaving no temporary file in the output directories or the
 * state directory and no partial file under a destination name; the ledger and hash cache
 * are sound; a new GAHP then completes the same commands.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { batchName, esc, jobName, sleep, startEnv, submitBatch, type Env } from '../commands/helpers.js';
import { makeTempDir } from '../support/gahp-process.js';
import { submitLine, writeInput, expectOneCompleteBatch, type LineJob } from '../submit/support.js';
import { expectHashCacheSound, expectLedgerMatchesServer, tempFiles, walk } from './support.js';

let env: Env;
let stateDir: string;
let logDir: string;
const done: string[] = [];
const inputs: string[] = [];

beforeAll(async () => {
  stateDir = makeTempDir('boinc-gahp-quit-state-');
  logDir = makeTempDir('boinc-gahp-quit-log-');
  env = await startEnv({ latencyMs: 10 }, { stateDir, logFile: path.join(logDir, 'gahp.log') });
  const b = batchName('uppercase');
  const jobs = Array.from({ length: 4 }, (_, i) => ({ name: jobName(b, 1, i), inputs: [Buffer.alloc(300_000, 100 + i)] }));
  await submitBatch(env, b, 'uppercase', jobs);
  env.server.advanceAll(b);
  done.push(...jobs.map((j) => j.name));
});

afterAll(async () => {
  await env?.close();
  if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
  if (logDir) fs.rmSync(logDir, { recursive: true, force: true });
});

describe.each(['QUIT', 'EOF'])('%s with work in flight', (how) => {
  test('exits promptly (uploads and downloads cancelled), nothing temporary or partial left; a new GAHP completes the same commands', async () => {
    const g = env.gahp;
    const tag = how.toLowerCase();
    // Two submits with 1 MiB inputs (three upload groups each), four fetches of 300 kB outputs.
    const submits = [0, 1].map((k) => {
      const batch = batchName('uppercase');
      const jobs: LineJob[] = [];
      for (let i = 0; i < 45; i++) {
        const p = writeInput(env.dir, `${tag}/${k}/f${i}.bin`, Buffer.alloc(1 << 20, `${tag}${k}:${i};`));
        inputs.push(p);
        jobs.push({ name: jobName(batch, 10 + k, i), inputs: [[p, 'in']] });
      }
      return { batch, jobs, line: `BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}` };
    });
    const fetches = done.map((job, i) => {
      const iwd = path.join(env.dir, `${tag}-iwd${i}`);
      fs.mkdirSync(iwd);
      return { job, iwd, line: `BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err SOME 1 out out.txt` };
    });
    // Replies crawl: uploads and downloads are in flight when the GAHP is told to stop.
    env.server.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: 'slow', delayMs: 20_000, count: 100 });
    env.server.injectFault({ script: 'get_output.php', kind: 'slow', delayMs: 20_000, count: 100 });
    const since = env.server.rpcLog().length;
    for (const c of [...submits, ...fetches]) {
      const sp = c.line.indexOf(' ');
      expect(await g.request(`${c.line.slice(0, sp)} ${g.reqId()}${c.line.slice(sp)}`)).toBe('S');
    }
    // Wait until uploads were sent and downloads are writing. Which of them get the GAHP's
    // RPC slots first depends on the machine (hashing 90 MiB against the first replies), so
    // one of each in flight is what is waited for, by a deadline rather than a count of
    // polls (a loaded machine polls slowly); the slow replies take 20 s, so 15 s is safe.
    const partsGrowing = () => fetches.filter((f) => walk(f.iwd).some((n) => n.endsWith('.part') && fs.statSync(path.join(f.iwd, n)).size > 0)).length;
    const uploadsSent = () => env.server.rpcLog().slice(since).filter((e) => e.rpc === 'upload_files').length;
    const waitUntil = Date.now() + 15_000;
    while (Date.now() < waitUntil && !(uploadsSent() >= 1 && partsGrowing() >= 1)) await sleep(20);
    expect(uploadsSent()).toBeGreaterThanOrEqual(1);
    expect(partsGrowing()).toBeGreaterThanOrEqual(1);

    const inFlight = `${uploadsSent()} upload_files sent, ${partsGrowing()} downloads writing`;
    const t0 = Date.now();
    if (how === 'QUIT') g.send('QUIT');
    g.child.stdin.end();
    const { code } = await g.exited;
    const exitMs = Date.now() - t0;
    process.stdout.write(`[reliability] shutdown: ${how} with 2 submits and 4 fetches started (${inFlight}): exit code ${code} after ${exitMs} ms\n`);
    env.server.clearFaults();
    expect(code).toBe(0);
    // Cancelled, not waited for: the 3 s grace is not reached (timing noise allowed).
    expect(exitMs).toBeLessThan(2000);

    // Nothing temporary, nothing partial.
    for (const f of fetches) {
      expect(tempFiles(f.iwd)).toEqual([]);
      const out = path.join(f.iwd, 'out.txt');
      if (fs.existsSync(out)) expect(fs.readFileSync(out).equals(env.server.outputOf(f.job, 0)!)).toBe(true);
    }
    expect(tempFiles(stateDir)).toEqual([]);
    expectLedgerMatchesServer(stateDir, env.server);
    expectHashCacheSound(stateDir, inputs);
    // Cancelling left no stray rejection or exception behind.
    expect(fs.readFileSync(path.join(logDir, 'gahp.log'), 'utf8')).not.toMatch(/unhandled rejection|uncaught exception/);

    // A new GAHP completes the same commands.
    await env.restart(undefined, { stateDir });
    const ids: string[] = [];
    for (const c of [...submits, ...fetches]) {
      const id = env.gahp.reqId();
      const sp = c.line.indexOf(' ');
      expect(await env.gahp.request(`${c.line.slice(0, sp)} ${id}${c.line.slice(sp)}`)).toBe('S');
      ids.push(id);
    }
    for (const id of ids) expect(await env.gahp.waitResult(id, 120_000)).toEqual(expect.arrayContaining(['NULL']));
    for (const s of submits) expectOneCompleteBatch(env.server, s.batch, s.jobs.map((j) => j.name));
    for (const f of fetches) {
      expect(walk(f.iwd)).toEqual(['job.err', 'out.txt']);
      expect(fs.readFileSync(path.join(f.iwd, 'out.txt')).equals(env.server.outputOf(f.job, 0)!)).toBe(true);
    }
    expectLedgerMatchesServer(stateDir, env.server);
  }, 180_000);
});
