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
 * SCALE_EXTRA_CONFIG (more configuration lines, `;`-separated).
 *
 * What it does: a personal pool set up for the route as htcondor-check sets it up
 * (routes.ts), N jobs in one cluster, a directory per job, one shared input; it times
 * condor_submit -> every job on BOINC (workunits counted on the server) -> the completion
 * command -> an empty queue, sampling the load average and the pool's processes every
 * second meanwhile, then checks every job's output.
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

/** Every second: the 1-minute load average and the pool's processes (node ones apart). */
function sample(pool: PersonalPool): Sampler {
  const s: Sampler = { maxLoad: 0, maxProcs: 0, maxNode: 0, nodeCpu: new Map(), gridmanagerCpu: new Map(), stop: () => clearInterval(timer) };
  const timer = setInterval(() => {
    s.maxLoad = Math.max(s.maxLoad, os.loadavg()[0]!);
    const procs = pool.processes();
    s.maxProcs = Math.max(s.maxProcs, procs.length);
    s.maxNode = Math.max(s.maxNode, procs.filter((p) => p.name === 'node').length);
    for (const p of procs) {
      const map = p.name === 'node' ? s.nodeCpu : p.name === 'condor_gridmanager' ? s.gridmanagerCpu : undefined;
      const cpu = map && cpuSeconds(p.pid);
      if (map && cpu !== undefined) map.set(p.pid, cpu);
    }
  }, 1000);
  return s;
}

async function main(): Promise<number> {
  const prefix = process.env.HTCONDOR_PREFIX;
  const url = process.env.HTCONDOR_CHECK_BOINC_URL;
  const auth = process.env.HTCONDOR_CHECK_AUTHENTICATOR_FILE;
  const complete = process.env.SCALE_COMPLETE_CMD;
  if (!prefix || !url || !auth || !complete) {
    process.stderr.write('htcondor-scale: set HTCONDOR_PREFIX, HTCONDOR_CHECK_BOINC_URL, HTCONDOR_CHECK_AUTHENTICATOR_FILE and SCALE_COMPLETE_CMD (test/htcondor/scale.ts)\n');
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
    fs.writeFileSync(input, 'scale input\n');
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
    const c = await run(complete, ['blahp-%'], { timeoutMs: 3600_000 });
    const batchesOf = BoincProject.batchesCreatedSince(route.stateDir, t0 - 1000);
    if (route.name === 'boinc') await run(complete, ['condor#%'], { timeoutMs: 3600_000 });
    const tDone = Date.now();
    say(`  completed on BOINC (${((tDone - tOn) / 1000).toFixed(1)} s; ${batchesOf.length} batches): ${c.code === 0 ? 'ok' : `exit ${c.code}: ${c.stderr.slice(-300)}`}`);
    for (;;) {
      const q = await pool.tool('condor_q', [String(cluster), '-af', 'ProcId']);
      const left = q.stdout.split('\n').filter((l) => l.trim() !== '').length;
      if (q.code === 0 && left === 0) break;
      if (Date.now() - tDone > 7200_000) throw new Error(`${left} jobs still queued two hours after completion`);
      await sleep(1000);
    }
    const tEmpty = Date.now();
    sampler.stop();
    let right = 0;
    for (let p = 0; p < jobs; p++) {
      const out = path.join(jobsDir, `d${p}`, 'out');
      if (fs.existsSync(out) && fs.readFileSync(out, 'utf8').startsWith('DONE ')) right++;
    }
    const drain = (tEmpty - tDone) / 1000;
    say(`  queue empty ${drain.toFixed(1)} s after the completions (${(jobs / drain).toFixed(1)} jobs/s); ${right} of ${jobs} outputs right`);
    const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const nodeCpu = sum(sampler.nodeCpu);
    const gmCpu = sum(sampler.gridmanagerCpu);
    say(`  submit host: load average up to ${sampler.maxLoad.toFixed(1)} (the whole machine), up to ${sampler.maxProcs} pool processes (${sampler.maxNode} node); CPU: node processes ${nodeCpu.toFixed(1)} s (${sampler.nodeCpu.size} processes), gridmanager ${gmCpu.toFixed(1)} s`);
    say(`RESULT route=${route.name} jobs=${jobs} on_boinc_s=${((tOn - t0) / 1000).toFixed(1)} drain_s=${drain.toFixed(1)} outputs_right=${right} max_load=${sampler.maxLoad.toFixed(1)} max_procs=${sampler.maxProcs} max_node=${sampler.maxNode} node_cpu_s=${nodeCpu.toFixed(1)} node_processes=${sampler.nodeCpu.size} gridmanager_cpu_s=${gmCpu.toFixed(1)} batches=${batchesOf.length}`);
    return right === jobs ? 0 : 1;
  } finally {
    await pool.stop();
    if (route.uninstall) await route.uninstall(pool).catch(() => undefined);
    say(`work directory: ${workDir}`);
  }
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`htcondor-scale: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
