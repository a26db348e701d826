/**
 * A large cluster through the BOINC_GAHP route (issue 44, item 10), without HTCondor:
 *
 *   node dist/test/bench/blah-scale.js [--jobs 20000] [--in-flight 50] [--bin path/to/boinc-gahp]
 *
 * bin/boinc-gahp is started as the gridmanager starts BOINC_GAHP for `batch boinc` (no
 * arguments but the state dir, the project in its environment, BOINC_GAHP_CONCURRENCY=16 as
 * the README's set-up) and spoken to in BLAH as the gridmanager speaks it
 * (docs/blah-route.md): every job's BLAH_JOB_SUBMIT with at most 50 requests in flight (one
 * cluster: one initialdir, one shared input, outputs remapped to out.<n>, Err err.<n>, Out
 * out.<n>.txt); the test server (its own process) then completes every job, and a
 * BLAH_JOB_STATUS a second asks the route for its refreshes (each DONE job it finds is
 * fetched) until every job's Out is in place, then every job's status must be 4.
 *
 * Printed: the seconds of each phase and the GAHP's peak RSS over each (VmHWM reset at the
 * phase's start, and VmRSS sampled every 20 ms: lib/proc.ts), then the peak per job. `--bin` runs another
 * build's GAHP (at-commit's dirs, for before/after figures).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GahpDriver } from './lib/driver.js';
import { RssSampler } from './lib/proc.js';
import { BenchServer } from './lib/server.js';
import { benchTempDir, cleanupAll } from './lib/tmp.js';
import { jobAd, submitAdText } from '../support/blah-gridmanager.js';
import { escapeGahpString } from '../support/gridmanager.js';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

/**
 * Sends `lines` (request lines without the reqid: `<word> <rest>`) keeping `inFlight`
 * outstanding, reading results as the gridmanager does (on each R, one RESULTS); returns
 * each request's result tokens after the reqid, raw.
 */
async function pump(gahp: GahpDriver, lines: readonly string[], inFlight: number): Promise<string[]> {
  const results = new Array<string>(lines.length);
  const index = new Map<string, number>();
  let next = 0;
  let done = 0;
  const sendNext = async () => {
    const id = gahp.reqId();
    index.set(id, next);
    const line = lines[next++]!;
    const sp = line.indexOf(' ');
    await gahp.expect(`${line.slice(0, sp)} ${id} ${line.slice(sp + 1)}`, /^S$/);
  };
  while (next < Math.min(inFlight, lines.length)) await sendNext();
  while (done < lines.length) {
    await gahp.nextR();
    for (const line of await gahp.results()) {
      const sp = line.indexOf(' ');
      const i = index.get(line.slice(0, sp));
      if (i === undefined) continue;
      index.delete(line.slice(0, sp));
      results[i] = line.slice(sp + 1);
      done++;
      if (next < lines.length) await sendNext();
    }
  }
  return results;
}

/** A result's tokens (split at blanks not escaped; the tokens are left escaped). */
function tokens(result: string): string[] {
  return result.split(/(?<!\\) /);
}

async function main(): Promise<number> {
  const njobs = Number(option('--jobs', '20000'));
  const inFlight = Number(option('--in-flight', '50'));
  const bin = process.argv.includes('--bin') ? option('--bin', '') : undefined;
  const dir = benchTempDir('blah-scale');
  const iwd = path.join(dir, 'cluster');
  fs.mkdirSync(iwd);
  fs.writeFileSync(path.join(iwd, 'in'), 'one shared input\n');
  const authFile = path.join(dir, 'auth');
  const server = await BenchServer.start({});
  fs.writeFileSync(authFile, server.authenticator + '\n', { mode: 0o600 });
  const load = [os.loadavg()[0]!];
  const gahp = await GahpDriver.start({
    ...(bin ? { bin } : {}),
    env: { BOINC_GAHP_PROJECT_URL: server.url, BOINC_GAHP_AUTHENTICATOR_FILE: authFile, BOINC_GAHP_CONCURRENCY: '16' },
  });
  try {
    await gahp.startup();
    const stamp = Math.floor(Date.now() / 1000);
    const submits = [];
    for (let n = 0; n < njobs; n++) {
      const ad = jobAd({ Iwd: iwd, JobDirectory: `home_bl_127.0.0.1_19718_alice_vm_100.${n}_${stamp}`, TransferOutputRemaps: `out = out.${n}`, Err: `err.${n}`, Out: `out.${n}.txt`, Arguments: `--job ${n}` });
      submits.push(`BLAH_JOB_SUBMIT ${escapeGahpString(submitAdText(ad))}`);
    }
    const t0 = Date.now();
    const rssSubmit = new RssSampler(gahp.pid);
    const subs = await pump(gahp, submits, inFlight);
    const ids = subs.map((r, n) => {
      const [rc, , id] = tokens(r);
      if (rc !== '0' || !id) throw new Error(`submit of job ${n} answered ${r.slice(0, 300)}`);
      return id;
    });
    // Every job on BOINC (the route's batches go out after the last answer).
    for (;;) {
      const s = await server.summary();
      if (s.jobs >= njobs) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const submitS = (Date.now() - t0) / 1000;
    const submitPeak = rssSubmit.stop();
    await server.advanceAll(undefined, 'DONE');
    const t1 = Date.now();
    const rssDrain = new RssSampler(gahp.pid);
    // The route fetches every DONE job a refresh finds; a status asks for the refresh (one
    // every 5 s at most). One status a second until every output is in place (the
    // gridmanager asks far more, which only waits on those fetches), then every job's.
    let rounds = 0;
    for (;;) {
      const present = new Set(fs.readdirSync(iwd));
      const missing = ids.findIndex((_, n) => !present.has(`out.${n}.txt`));
      if (missing < 0) break;
      rounds++;
      await pump(gahp, [`BLAH_JOB_STATUS ${escapeGahpString(ids[missing]!)}`], 1);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const res = await pump(gahp, ids.map((id) => `BLAH_JOB_STATUS ${escapeGahpString(id)}`), inFlight);
    res.forEach((r, i) => {
      const [rc, , st] = tokens(r);
      if (rc !== '0' || st !== '4') throw new Error(`status of ${ids[i]} answered ${r.slice(0, 300)}`);
    });
    const drainS = (Date.now() - t1) / 1000;
    const drainPeak = rssDrain.stop();
    const hwm = Math.max(submitPeak, drainPeak);
    for (const n of [0, njobs - 1]) {
      const want = `ONE SHARED INPUT\n\nargs: --job ${n}\n`;
      if (fs.readFileSync(path.join(iwd, `out.${n}`), 'utf8') !== want) throw new Error(`out.${n} is not the job's output`);
    }
    load.push(os.loadavg()[0]!);
    const mb = (m: number) => m.toFixed(1);
    console.log(`blah_scale: ${njobs} jobs, ${inFlight} requests in flight, load ${load.map((x) => x.toFixed(1)).join(' -> ')}${bin ? `, GAHP ${bin}` : ''}`);
    console.log(`  submit: ${submitS.toFixed(1)} s to all on BOINC, peak RSS ${mb(submitPeak)} MiB`);
    console.log(`  drain: ${drainS.toFixed(1)} s after the completions (${rounds} statuses asked first), peak RSS ${mb(drainPeak)} MiB`);
    console.log(`  GAHP peak RSS (whole run): ${mb(hwm)} MiB, ${((hwm * 1024) / njobs).toFixed(1)} KiB a job`);
    return 0;
  } finally {
    await gahp.close();
    await server.close();
  }
}

main().then(
  (code) => {
    cleanupAll();
    process.exit(code);
  },
  (err) => {
    console.error(`blah-scale: ${(err as Error).stack ?? err}`);
    cleanupAll();
    process.exit(2);
  },
);
