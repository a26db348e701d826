/**
 * `npm run htcondor-scale -- --route <direct|blahpd|boinc> --jobs <n>`: one large cluster
 * through a real HTCondor's gridmanager and a BOINC project, timed (test/bench/README.md,
 * "Issue 36"). Not a test: a measurement to run by hand, as an ordinary user.
 *
 * Environment: HTCONDOR_PREFIX (the install), HTCONDOR_CHECK_BOINC_URL and
 * HTCONDOR_CHECK_AUTHENTICATOR_FILE (the project; its app `uppercase` with input `in` and
 * output `out`), SCALE_COMPLETE_CMD (a program completing every unfinished job of the
 * batches whose names match its one argument, an SQL LIKE pattern: BOINC's real server's
 * complete_batches.py), SCALE_CAP (GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE, default
 * 20000), SCALE_PROBE_RATE (GRIDMANAGER_JOB_PROBE_RATE_BATCH; unset: HTCondor's default),
 * SCALE_EXTRA_CONFIG (more configuration lines, `;`-separated), HTCONDOR_CHECK_PROBE_INTERVAL
 * (`default`: HTCondor's own GRIDMANAGER_JOB_PROBE_INTERVAL; else seconds, 10 if unset).
 *
 * On a project where a real BOINC client runs the jobs (docs/htcondor-check.md, "The full
 * project"), leave SCALE_COMPLETE_CMD unset: SCALE_AFTER_SUBMIT_CMD (the client's Update
 * button, `<prefix>/client.sh update`) is run once every job is on BOINC and again every
 * minute while some job is unsent (a client that asked for work and got none backs off for
 * minutes), and each output must be the app's (`tr a-z A-Z`) of the input, SCALE_INPUT (the
 * input's text, default `scale input`). SCALE_PAUSE=<seconds> stops the whole pool as soon as
 * every job is on BOINC and starts it again that long after the last job ended there: the
 * outputs must still be fetched.
 *
 * What it does: a personal pool set up for the route as htcondor-check sets it up
 * (routes.ts), N jobs in one cluster, a directory per job, one shared input; it times
 * condor_submit -> every job on BOINC (workunits counted on the server) -> the completion
 * command (or the client) -> an empty queue (or every job left held), sampling the load
 * average and the pool's processes every second meanwhile, then checks every job's output
 * and says why each held job was held.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BoincProject } from './boinc-project.js';
import { PersonalPool } from './pool.js';
import { run, sleep } from './processes.js';
import { batchRoute, directBatchRoute, gahpRoute, type Route } from './routes.js';

const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
}

interface Sampler {
  maxLoad: number;
  maxProcs: number;
  maxNode: number;
  /** CPU seconds of the pool's node processes (the GAHP, or the scripts), by pid, last seen. */
  nodeCpu: Map<number, number>;
  /** ... and of the gridmanager. */
  gridmanagerCpu: Map<number, number>;
  /** The highest peak RSS (the kernel's VmHWM, which sees peaks between samples) of any node process, in MiB. */
  nodePeakRssMib: number;
  stop(): void;
}

/** utime + stime of a process, in seconds (undefined when it is gone). */
function cpuSeconds(pid: number): number | undefined {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** A process's peak resident set so far (VmHWM), in MiB (undefined when it is gone). */
function peakRssMib(pid: number): number | undefined {
  try {
    const kib = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) / 1024;
  } catch {
    return undefined;
  }
}

/** Every second: the 1-minute load average and the pool's processes (node ones apart). */
function sample(pool: PersonalPool): Sampler {
  const s: Sampler = { maxLoad: 0, maxProcs: 0, maxNode: 0, nodeCpu: new Map(), gridmanagerCpu: new Map(), nodePeakRssMib: 0, stop: () => clearInterval(timer) };
  const timer = setInterval(() => {
    s.maxLoad = Math.max(s.maxLoad, os.loadavg()[0]!);
    const procs = pool.processes();
    s.maxProcs = Math.max(s.maxProcs, procs.length);
    s.maxNode = Math.max(s.maxNode, procs.filter((p) => p.name === 'node').length);
    for (const p of procs) {
      const map = p.name === 'node' ? s.nodeCpu : p.name === 'condor_gridmanager' ? s.gridmanagerCpu : undefined;
      const cpu = map && cpuSeconds(p.pid);
      if (map && cpu !== undefined) map.set(p.pid, cpu);
      if (p.name === 'node') s.nodePeakRssMib = Math.max(s.nodePeakRssMib, peakRssMib(p.pid) ?? 0);
    }
  }, 1000);
  return s;
}

async function main(): Promise<number> {
  const prefix = process.env.HTCONDOR_PREFIX;
  const url = process.env.HTCONDOR_CHECK_BOINC_URL;
  const auth = process.env.HTCONDOR_CHECK_AUTHENTICATOR_FILE;
  const complete = process.env.SCALE_COMPLETE_CMD;
  const update = process.env.SCALE_AFTER_SUBMIT_CMD;
  const pauseMs = Number(process.env.SCALE_PAUSE ?? 0) * 1000;
  const inputText = process.env.SCALE_INPUT !== undefined ? `${process.env.SCALE_INPUT}\n` : 'scale input\n';
  if (!prefix || !url || !auth || (!complete && !update)) {
    process.stderr.write('htcondor-scale: set HTCONDOR_PREFIX, HTCONDOR_CHECK_BOINC_URL, HTCONDOR_CHECK_AUTHENTICATOR_FILE and SCALE_COMPLETE_CMD (or SCALE_AFTER_SUBMIT_CMD where a real client runs the jobs) (test/htcondor/scale.ts)\n');
    return 2;
  }
  const routeName = arg('route', 'direct');
  const jobs = Number(arg('jobs', '2000'));
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-scale-'));
  const project = BoincProject.external(url, path.resolve(auth), 'uppercase');
  const ctx = { repoDir: REPO_DIR, workDir, project };
  const route: Route = routeName === 'direct' ? directBatchRoute(ctx) : routeName === 'blahpd' ? batchRoute(ctx, prefix) : gahpRoute(ctx);
  const caps = [`GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = ${process.env.SCALE_CAP ?? '20000'}`];
  if (process.env.SCALE_PROBE_RATE) caps.push(`GRIDMANAGER_JOB_PROBE_RATE_BATCH = ${process.env.SCALE_PROBE_RATE}`, `GRIDMANAGER_JOB_PROBE_RATE = ${process.env.SCALE_PROBE_RATE}`);
  const config = route.config.filter((l) => !/^GRIDMANAGER_(MAX_SUBMITTED|JOB_PROBE_RATE)/.test(l));
  // More configuration lines for the pool, `;`-separated (e.g. BOINC_GAHP_CONCURRENCY = 16).
  for (const line of (process.env.SCALE_EXTRA_CONFIG ?? '').split(';')) if (line.trim()) config.push(line.trim());
  // The directory names htcondor-check gives each route's pool (the route's log is under it).
  const poolDir = path.join(workDir, routeName === 'direct' ? 'direct-route' : routeName === 'blahpd' ? 'batch-route' : 'gahp-route');
  fs.mkdirSync(poolDir);
  const pool = new PersonalPool(prefix, poolDir, [...config, ...caps], route.env);
  const say = (line: string) => process.stdout.write(`${line}\n`);
  try {
    await pool.writeConfig();
    if (route.install) await route.install(pool);
    await pool.start();
    const jobsDir = path.join(workDir, 'jobs');
    fs.mkdirSync(jobsDir);
    const input = path.join(jobsDir, 'in');
    fs.writeFileSync(input, inputText);
    for (let p = 0; p < jobs; p++) fs.mkdirSync(path.join(jobsDir, `d${p}`));
    const submit = [
      'universe = grid',
      ...route.submitLines,
      'executable = uppercase',
      'transfer_executable = false',
      'initialdir = d$(Process)',
      `transfer_input_files = ${input}`,
      'transfer_output_files = out',
      'log = ../scale.log',
      `queue ${jobs}`,
      '',
    ].join('\n');
    const sampler = sample(pool);
    const t0 = Date.now();
    const cluster = await pool.submit(jobsDir, submit);
    say(`${route.name}: cluster ${cluster} of ${jobs} jobs submitted (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    // Every job on BOINC: the workunits of the batches this route's GAHP made since t0.
    let onBoinc = 0;
    let tOn = 0;
    while (onBoinc < jobs) {
      await sleep(1000);
      const batches = BoincProject.batchesCreatedSince(route.stateDir, t0 - 1000);
      try {
        onBoinc = batches.length === 0 ? 0 : (await project.jobsOf(batches)).length;
      } catch {
        // A batch the ledger records as being created is not on the server yet: ask again.
      }
      if (Date.now() - t0 > 3600_000) throw new Error(`only ${onBoinc} of ${jobs} jobs reached BOINC in an hour`);
    }
    tOn = Date.now();
    say(`  on BOINC after ${((tOn - t0) / 1000).toFixed(1)} s (${onBoinc} jobs, load so far ${sampler.maxLoad.toFixed(1)})`);
    const batchesOf = BoincProject.batchesCreatedSince(route.stateDir, t0 - 1000);
    if (pauseMs > 0) {
      await pool.stop();
      say(`  pool stopped ${((Date.now() - t0) / 1000).toFixed(1)} s after the submit`);
    }
    let tDone: number;
    if (complete) {
      const c = await run(complete, ['blahp-%'], { timeoutMs: 3600_000 });
      if (route.name === 'boinc') await run(complete, ['condor#%'], { timeoutMs: 3600_000 });
      tDone = Date.now();
      say(`  completed on BOINC (${((tDone - tOn) / 1000).toFixed(1)} s; ${batchesOf.length} batches): ${c.code === 0 ? 'ok' : `exit ${c.code}: ${c.stderr.slice(-300)}`}`);
    } else {
      tDone = await clientRunsThem(project, batchesOf, jobs, update!, say);
      say(`  every job over on BOINC ${((tDone - t0) / 1000).toFixed(1)} s after the submit (${batchesOf.length} batches)`);
    }
    if (pauseMs > 0) {
      await sleep(pauseMs);
      await pool.start();
      say(`  pool started again ${((Date.now() - tDone) / 1000).toFixed(1)} s after the last job ended on BOINC`);
    }
    let held: Array<Record<string, unknown>> = [];
    for (;;) {
      const q = await pool.queue(cluster);
      held = q.filter((j) => j.JobStatus === 5);
      if (q.length === 0 || held.length === q.length) break;
      if (Date.now() - tDone > 7200_000) throw new Error(`${q.length} jobs still queued two hours after completion`);
      await sleep(1000);
    }
    const tEmpty = Date.now();
    sampler.stop();
    const expected = complete ? undefined : inputText.toUpperCase();
    let right = 0;
    const outTimes: number[] = [];
    for (let p = 0; p < jobs; p++) {
      const out = path.join(jobsDir, `d${p}`, 'out');
      if (!fs.existsSync(out)) continue;
      const text = fs.readFileSync(out, 'utf8');
      if (expected === undefined ? text.startsWith('DONE ') : text === expected) right++;
      outTimes.push((fs.statSync(out).mtimeMs - t0) / 1000);
    }
    const drain = (tEmpty - tDone) / 1000;
    say(`  queue ${held.length ? `left with ${held.length} held jobs` : 'empty'} ${drain.toFixed(1)} s after the completions (${(jobs / drain).toFixed(1)} jobs/s); ${right} of ${jobs} outputs right`);
    if (outTimes.length) {
      outTimes.sort((a, b) => a - b);
      say(`  outputs written ${outTimes[0]!.toFixed(1)} s to ${outTimes[outTimes.length - 1]!.toFixed(1)} s after condor_submit (median ${outTimes[Math.floor(outTimes.length / 2)]!.toFixed(1)} s)`);
    }
    const reasons = new Map<string, number>();
    for (const j of held) reasons.set(String(j.HoldReason), (reasons.get(String(j.HoldReason)) ?? 0) + 1);
    for (const [reason, n] of reasons) say(`  held (${n}): ${reason}`);
    const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const nodeCpu = sum(sampler.nodeCpu);
    const gmCpu = sum(sampler.gridmanagerCpu);
    say(`  submit host: load average up to ${sampler.maxLoad.toFixed(1)} (the whole machine), up to ${sampler.maxProcs} pool processes (${sampler.maxNode} node); CPU: node processes ${nodeCpu.toFixed(1)} s (${sampler.nodeCpu.size} processes), gridmanager ${gmCpu.toFixed(1)} s; node processes' peak RSS ${sampler.nodePeakRssMib.toFixed(0)} MiB`);
    say(`RESULT route=${route.name} jobs=${jobs} held=${held.length} pause_s=${pauseMs / 1000} on_boinc_s=${((tOn - t0) / 1000).toFixed(1)} drain_s=${drain.toFixed(1)} outputs_right=${right} max_load=${sampler.maxLoad.toFixed(1)} max_procs=${sampler.maxProcs} max_node=${sampler.maxNode} node_cpu_s=${nodeCpu.toFixed(1)} node_processes=${sampler.nodeCpu.size} gridmanager_cpu_s=${gmCpu.toFixed(1)} node_peak_rss_mib=${sampler.nodePeakRssMib.toFixed(0)} batches=${batchesOf.length}`);
    return right === jobs ? 0 : 1;
  } finally {
    await pool.stop();
    if (route.uninstall) await route.uninstall(pool).catch(() => undefined);
    say(`work directory: ${workDir}`);
  }
}

/**
 * A real client runs the jobs: its Update button is pressed now and every minute while some
 * job is unsent, until every job is over (DONE or ERROR) on BOINC; returns that moment.
 */
async function clientRunsThem(project: BoincProject, batches: string[], jobs: number, update: string, say: (line: string) => void): Promise<number> {
  let lastUpdate = 0;
  let states = '';
  for (;;) {
    let list: Array<{ status: string }> = [];
    try {
      list = await project.jobsOf(batches);
    } catch {
      // The server was busy: ask again.
    }
    const count = (s: string) => list.filter((j) => j.status === s).length;
    const now = `${count('UNSENT')} unsent, ${count('IN_PROGRESS')} in progress, ${count('DONE')} done, ${count('ERROR')} error`;
    if (now !== states) say(`  ${new Date().toISOString().slice(11, 19)} ${now}`);
    states = now;
    if (list.length >= jobs && count('DONE') + count('ERROR') === list.length) return Date.now();
    if (count('UNSENT') > 0 && Date.now() - lastUpdate > 60_000) {
      await run(update, [], { timeoutMs: 60_000 });
      lastUpdate = Date.now();
    }
    await sleep(2000);
  }
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`htcondor-scale: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
