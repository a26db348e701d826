/**
 * BOINC_QUERY_BATCHES for 100 batches of 1,000 jobs through the real GAHP: the whole
 * command within 2 s and 300 MB RSS, the protocol loop answering meanwhile, and the
 * statuses recorded in the ledger.
 */
import * as fs from 'node:fs';
import { batchName, esc, jobName, readLedgerWhen, seedLedger, sleep, startEnv, submitBatch, type Env } from './helpers.js';

const NBATCHES = 100;
const NJOBS = 1000;

function vmHwmMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

describe('BOINC_QUERY_BATCHES, 100 batches x 1,000 jobs', () => {
  let env: Env;
  const batches = Array.from({ length: NBATCHES }, () => batchName('uppercase'));
  // One cluster per batch, as the gridmanager's batches have: the same cluster.proc in a
  // later batch would be a resubmission, which supersedes the earlier job.
  const jobsOf = (b: string) => Array.from({ length: NJOBS }, (_, k) => jobName(b, 5000 + batches.indexOf(b), k));

  beforeAll(async () => {
    env = await startEnv();
    const ids: number[] = [];
    for (const b of batches) ids.push(await submitBatch(env, b, 'uppercase', jobsOf(b).map((name) => ({ name, inputs: ['same input\n'] }))));
    await env.restart(() =>
      seedLedger(env.stateDir, env.server.url, batches.map((name, i) => ({ name, app: 'uppercase', batchId: ids[i]!, jobs: jobsOf(name) }))),
      process.env.GAHP_TEST_LOG ? { logFile: process.env.GAHP_TEST_LOG } : undefined,
    );
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  test('answers within 2 s and 300 MB while VERSION keeps being answered', async () => {
    // Half the jobs of every batch are running.
    for (const b of batches) for (const j of jobsOf(b).slice(0, NJOBS / 2)) env.server.advanceJob(j, 'IN_PROGRESS');
    const gahp = env.gahp;
    const id = gahp.reqId();
    const n0 = gahp.notifications;
    const started = performance.now();
    expect(await gahp.request(`BOINC_QUERY_BATCHES ${id} 0 ${NBATCHES} ${batches.map(esc).join(' ')}`)).toBe('S');
    let maxVersionMs = 0;
    let versions = 0;
    while (gahp.notifications === n0 && performance.now() - started < 10_000) {
      const t = performance.now();
      expect(await gahp.request('VERSION')).toMatch(/^S \$GahpVersion/);
      maxVersionMs = Math.max(maxVersionMs, performance.now() - t);
      versions++;
      await sleep(5);
    }
    const elapsed = performance.now() - started;
    const result = await gahp.waitResult(id);
    const rss = vmHwmMb(gahp.child.pid!);
    console.log(`query 100x1000 via GAHP: ${elapsed.toFixed(0)} ms, peak RSS ${rss.toFixed(0)} MB, ${versions} VERSIONs answered meanwhile, slowest ${maxVersionMs.toFixed(0)} ms`);

    expect(result).toHaveLength(2 + NBATCHES * (1 + 2 * NJOBS));
    expect(result[0]).toBe('NULL');
    let t = 2;
    for (const b of batches) {
      expect(result[t++]).toBe(String(NJOBS));
      const jobs = jobsOf(b);
      for (let k = 0; k < NJOBS; k++) {
        if (result[t] !== jobs[k] || result[t + 1] !== (k < NJOBS / 2 ? 'IN_PROGRESS' : 'NOT_STARTED')) {
          throw new Error(`unexpected pair at ${t}: ${result[t]} ${result[t + 1]}`);
        }
        t += 2;
      }
    }
    // Speed and memory are figures of `npm run bench` (query_100k_s, query_100k_rss_mb), not
    // asserted here. What is asserted: the protocol loop kept answering while the reply was
    // built. Measured from this process, which also runs the test server (it builds the
    // 14 MB reply synchronously): a generous liveness bound that still catches a stalled loop.
    expect(versions).toBeGreaterThan(0);
    expect(maxVersionMs).toBeLessThan(5000);

    const ledger = await readLedgerWhen(env.stateDir, (l) => l.get(env.server.url, batches[7]!)?.lastServerTime === result[1], 15_000);
    const rec = ledger.get(env.server.url, batches[7]!)!;
    expect(rec.lastServerTime).toBe(result[1]);
    expect(rec.jobs[jobsOf(batches[7]!)[0]!]).toBe('IN_PROGRESS');
    expect(rec.jobs[jobsOf(batches[7]!)[NJOBS - 1]!]).toBe('NOT_STARTED');
  }, 60_000);
});
