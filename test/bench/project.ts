/**
 * The submit and fetch measures against a real BOINC project (issue 31), side by side with
 * another GAHP (BOINC's C++ GAHP) and with got's own floor (project-floor.ts):
 *
 *   npm run bench:project -- --url <project_url> --authenticator-file <file>
 *       [--vs "<GAHP command line>"] [--complete-cmd "<command>"] [--access-log <file>]
 *       [--app uppercase] [--input in] [--output out] [--rounds 5] [--fetch-jobs 2000]
 *       [--in-flight 50] [--only submit,many,fetch] [--json <file>]
 *
 * Both GAHPs are driven as HTCondor's gridmanager drives one (start-up sequence,
 * BOINC_SELECT_PROJECT, BOINC_PING, then the command; S, the R notification, RESULTS), each
 * a fresh process that has pinged. Command lines are split at spaces and run without a
 * shell; the other GAHP runs in a fresh temp dir (it is given the project by
 * BOINC_SELECT_PROJECT). Measures (test/bench/README.md, "Issue 31: real server"):
 *
 * - submit: per round, each side (ours, the other GAHP, got's floor; the order rotating
 *   from round to round) submits 40 jobs over 10 new files of 64 KiB (cold: the files are
 *   new to the server), then the same files again as a new batch (warm: the files are on
 *   the server); seconds from the command to its result; medians over the rounds.
 * - many: one submit of 100 jobs over 100 new files of 64 KiB per GAHP: its outcome.
 * - fetch: each GAHP submits a batch of N jobs over one input file, `--complete-cmd
 *   <batch name>` completes them on the server, then a fresh GAHP of each side (ours on the
 *   state dir it submitted from) fetches the N jobs' output `out`, `--in-flight` commands
 *   outstanding, in halves alternating (ours, other, other, ours): jobs per second, peak
 *   RSS, outputs present.
 *
 * RSS is each GAHP process's peak (VmHWM): over its whole life for submit and many, since
 * its ping for fetch. RPCs per job are counted in the server's access log (`--access-log`:
 * PHP's built-in server logs one `[status]: METHOD /script` line per request) between the
 * start and the end of each measure, the same way for every side; without it they are not
 * reported. The project's server must be used by nothing else meanwhile.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GahpDriver, pumpFetches, REPO_ROOT } from './lib/driver.js';
import { cpuTicks, peakRss, resetPeakRss } from './lib/proc.js';
import { median, round, sleep } from './lib/stats.js';
import { benchTempDir, cleanupAll, onCleanup, removeTempDir } from './lib/tmp.js';
import { writeMany } from './lib/files.js';
import { jobsOver, submitLine } from './figures/submit.js';
import { escapeToken } from '../../gahp/protocol/escape.js';

interface Options {
  url: string;
  authenticatorFile: string;
  authenticator: string;
  app: string;
  input: string;
  output: string;
  vs?: string[];
  completeCmd?: string[];
  accessLog?: string;
  rounds: number;
  fetchJobs: number;
  inFlight: number;
  only: Set<string>;
  json?: string;
}

const USAGE = `usage: npm run bench:project -- --url <project_url> --authenticator-file <file>
  [--vs "<GAHP command line>"] [--complete-cmd "<command>"] [--access-log <file>]
  [--app uppercase] [--input in] [--output out] [--rounds 5] [--fetch-jobs 2000]
  [--in-flight 50] [--only submit,many,fetch] [--json <file>]`;

/** A command line given as one argument: split at spaces (no shell, no quoting). */
const words = (text: string) => text.split(' ').filter((w) => w.length > 0);

function parseArgs(argv: string[]): Options {
  const v: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    if (!a.startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${a}\n${USAGE}`);
    v[a.slice(2)] = argv[++i]!;
  }
  const known = ['url', 'authenticator-file', 'app', 'input', 'output', 'vs', 'complete-cmd', 'access-log', 'rounds', 'fetch-jobs', 'in-flight', 'only', 'json'];
  for (const k of Object.keys(v)) if (!known.includes(k)) throw new Error(`unknown option --${k}\n${USAGE}`);
  if (!v.url || !v['authenticator-file']) throw new Error(USAGE);
  const url = v.url.endsWith('/') ? v.url : v.url + '/';
  const num = (k: string, d: number) => {
    const n = v[k] === undefined ? d : Number(v[k]);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${k} must be a positive integer`);
    return n;
  };
  return {
    url,
    authenticatorFile: path.resolve(v['authenticator-file']),
    authenticator: fs.readFileSync(v['authenticator-file'], 'utf8').trim(),
    app: v.app ?? 'uppercase',
    input: v.input ?? 'in',
    output: v.output ?? 'out',
    ...(v.vs ? { vs: words(v.vs) } : {}),
    ...(v['complete-cmd'] ? { completeCmd: words(v['complete-cmd']) } : {}),
    ...(v['access-log'] ? { accessLog: v['access-log'] } : {}),
    rounds: num('rounds', 5),
    fetchJobs: num('fetch-jobs', 2000),
    inFlight: num('in-flight', 50),
    only: new Set((v.only ?? 'submit,many,fetch').split(',')),
    ...(v.json ? { json: v.json } : {}),
  };
}

/** Requests in the server's access log (PHP's built-in server: one `[status]: METHOD /path` line each). */
class AccessLog {
  constructor(private readonly file: string | undefined) {}

  private size(): number {
    return this.file ? fs.statSync(this.file).size : 0;
  }

  mark(): number {
    return this.size();
  }

  /** Requests logged since `mark`, once the log has stopped growing for 200 ms (a line is written as its request ends). */
  async since(mark: number): Promise<number | undefined> {
    if (!this.file) return undefined;
    for (let last = -1, size = this.size(); size !== last; last = size, size = this.size()) await sleep(200);
    const fd = fs.openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(this.size() - mark);
      fs.readSync(fd, buf, 0, buf.length, mark);
      return (buf.toString('latin1').match(/\]: (?:GET|POST|HEAD|PUT) \//g) ?? []).length;
    } finally {
      fs.closeSync(fd);
    }
  }
}

/** One participant of the submit measure, fresh and pinged: a GAHP or got's floor. */
interface Submitter {
  submit(batch: string, njobs: number, files: string[]): Promise<{ seconds: number; result: string }>;
  /** Peak RSS of its process so far, MiB. */
  peakMb(): number;
  close(): Promise<void>;
}

type SideName = 'ours' | 'other' | 'floor';

const nowS = () => Number(process.hrtime.bigint()) / 1e9;
const mb = (bytes: number | undefined) => (bytes ?? NaN) / (1024 * 1024);

/** A fresh GAHP of `side` through the gridmanager's start-up, BOINC_SELECT_PROJECT and a BOINC_PING. */
async function pingedGahp(opts: Options, side: 'ours' | 'other', stateDir?: string): Promise<GahpDriver> {
  const gahp = await GahpDriver.start(side === 'other' ? { command: opts.vs! } : stateDir ? { stateDir } : {});
  try {
    await gahp.startup();
    await gahp.selectProject(opts.url, opts.authenticator);
    const ping = await gahp.callNotified('BOINC_PING', '');
    if (ping !== 'NULL') throw new Error(`BOINC_PING failed: ${ping.slice(0, 300)}`);
    return gahp;
  } catch (err) {
    await gahp.close();
    throw err;
  }
}

async function gahpSubmitter(opts: Options, side: 'ours' | 'other'): Promise<Submitter> {
  const gahp = await pingedGahp(opts, side);
  return {
    async submit(batch, njobs, files) {
      const t0 = nowS();
      const result = await gahp.callNotified('BOINC_SUBMIT', submitLine(batch, jobsOver(batch, files, njobs), opts.app, opts.input));
      return { seconds: nowS() - t0, result };
    },
    peakMb: () => mb(peakRss(gahp.pid)),
    close: () => gahp.close(),
  };
}

/** got's floor (project-floor.ts) in a fresh process, pinged. */
async function floorSubmitter(opts: Options): Promise<Submitter> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [path.join(REPO_ROOT, 'dist', 'test', 'bench', 'project-floor.js'), opts.url, opts.authenticatorFile, opts.app], { stdio: ['pipe', 'pipe', 'pipe'] });
  const unregister = onCleanup(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  let buf = '';
  child.stdout.on('data', (c: Buffer) => {
    const parts = (buf + c.toString()).split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
    wake?.();
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => (resolve(), wake?.())));
  let done = false;
  void exited.then(() => (done = true));
  const readLine = async (): Promise<string> => {
    while (lines.length === 0) {
      if (done) throw new Error(`got floor exited: ${stderr.slice(-500)}`);
      await new Promise<void>((r) => (wake = r));
    }
    return lines.shift()!;
  };
  const ready = await readLine();
  if (ready !== 'ready') throw new Error(`got floor: ${ready}`);
  return {
    async submit(batch, njobs, files) {
      const t0 = nowS();
      child.stdin.write(`SUBMIT ${batch} ${njobs} ${files.join(' ')}\n`);
      const line = await readLine();
      return { seconds: nowS() - t0, result: line.startsWith('OK') ? 'NULL' : line };
    },
    peakMb: () => mb(peakRss(child.pid!)),
    async close() {
      child.stdin.end();
      await exited;
      unregister();
    },
  };
}

let batchSeq = 0;
const runTag = `${Math.floor(Date.now() / 1000)}`;
/** A batch name as the gridmanager makes them (`condor#<schedd>#<app>#<time>`), unique in this run. */
const batchName = (opts: Options, tag: string) => `condor#projbench@localhost#${opts.app}#${runTag}${tag}${++batchSeq}`;

let seed = 310000;

interface Note {
  (text: string): void;
}

const load = () => os.loadavg()[0]!.toFixed(2);

async function submitMeasure(opts: Options, log: AccessLog, note: Note): Promise<Record<string, number>> {
  const sides: SideName[] = ['ours', ...(opts.vs ? (['other'] as const) : []), 'floor'];
  const rec: Record<SideName, { cold: number[]; warm: number[]; rss: number[]; coldRpcs: number[]; warmRpcs: number[] }> = {
    ours: { cold: [], warm: [], rss: [], coldRpcs: [], warmRpcs: [] },
    other: { cold: [], warm: [], rss: [], coldRpcs: [], warmRpcs: [] },
    floor: { cold: [], warm: [], rss: [], coldRpcs: [], warmRpcs: [] },
  };
  const dir = benchTempDir('project-submit');
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const order = sides.map((_, i) => sides[(i + r) % sides.length]!);
      const parts: string[] = [];
      for (const side of order) {
        const filesDir = path.join(dir, `r${r}-${side}`);
        fs.mkdirSync(filesDir);
        const files = writeMany(filesDir, 10, 64 << 10, (seed += 100));
        const s = side === 'floor' ? await floorSubmitter(opts) : await gahpSubmitter(opts, side);
        try {
          const times: number[] = [];
          for (const [kind, tag] of [['cold', 'c'], ['warm', 'w']] as const) {
            const mark = log.mark();
            const { seconds, result } = await s.submit(batchName(opts, tag), 40, files);
            if (result !== 'NULL') throw new Error(`${side} ${kind} submit failed: ${result.slice(0, 300)}`);
            rec[side][kind].push(seconds);
            const rpcs = await log.since(mark);
            if (rpcs !== undefined) rec[side][kind === 'cold' ? 'coldRpcs' : 'warmRpcs'].push(rpcs);
            times.push(seconds);
          }
          rec[side].rss.push(s.peakMb());
          parts.push(`${side} ${times.map((t) => t.toFixed(3)).join('/')}`);
        } finally {
          await s.close();
        }
        removeTempDir(filesDir);
      }
      note(`submit round ${r + 1} (cold/warm s, load ${load()}): ${parts.join(', ')}`);
    }
  } finally {
    removeTempDir(dir);
  }
  const out: Record<string, number> = {};
  for (const side of sides) {
    const x = rec[side];
    Object.assign(out, {
      [`submit_cold_s_${side}`]: median(x.cold),
      [`submit_warm_s_${side}`]: median(x.warm),
      [`submit_peak_rss_mb_${side}`]: median(x.rss),
    });
    if (x.coldRpcs.length) Object.assign(out, { [`submit_cold_rpcs_${side}`]: median(x.coldRpcs), [`submit_warm_rpcs_${side}`]: median(x.warmRpcs) });
  }
  if (opts.vs) {
    out.submit_cold_ours_over_other = out.submit_cold_s_ours! / out.submit_cold_s_other!;
    out.submit_warm_ours_over_other = out.submit_warm_s_ours! / out.submit_warm_s_other!;
  }
  out.submit_cold_ours_over_floor = out.submit_cold_s_ours! / out.submit_cold_s_floor!;
  out.submit_warm_ours_over_floor = out.submit_warm_s_ours! / out.submit_warm_s_floor!;
  return out;
}

async function manyMeasure(opts: Options, log: AccessLog, note: Note): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const dir = benchTempDir('project-many');
  try {
    const files = writeMany(dir, 100, 64 << 10, (seed += 1000));
    for (const side of ['ours', ...(opts.vs ? ['other'] : [])] as Array<'ours' | 'other'>) {
      // New content for each side: both find none of the files on the server.
      for (const f of files) fs.appendFileSync(f, side);
      const s = await gahpSubmitter(opts, side);
      try {
        const mark = log.mark();
        const { seconds, result } = await s.submit(batchName(opts, 'm'), 100, files);
        const rpcs = await log.since(mark);
        out[`many_ok_${side}`] = result === 'NULL' ? 1 : 0;
        out[`many_s_${side}`] = seconds;
        note(`many (100 jobs over 100 new files of 64 KiB, load ${load()}): ${side} ${result === 'NULL' ? 'succeeded' : `FAILED: ${result.slice(0, 300)}`} in ${seconds.toFixed(2)} s${rpcs !== undefined ? `, ${rpcs} requests` : ''}, peak RSS ${s.peakMb().toFixed(1)} MiB`);
      } finally {
        await s.close();
      }
    }
  } finally {
    removeTempDir(dir);
  }
  return out;
}

function runCommand(argv: readonly string[], extra: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, [...argv.slice(1), extra], { stdio: ['ignore', 'ignore', 'inherit'], shell: false });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${argv.join(' ')} ${extra} exited with ${code}`))));
  });
}

async function fetchMeasure(opts: Options, log: AccessLog, note: Note): Promise<Record<string, number>> {
  if (!opts.completeCmd) throw new Error('fetch needs --complete-cmd (jobs must be completed on the server between submit and fetch)');
  const sides = ['ours', ...(opts.vs ? ['other'] : [])] as Array<'ours' | 'other'>;
  const n = opts.fetchJobs;
  const dir = benchTempDir('project-fetch');
  const out: Record<string, number> = {};
  try {
    const [input] = writeMany(dir, 1, 1024, (seed += 1000));
    const worlds = new Map<string, { batch: string; stateDir?: string }>();
    for (const side of sides) {
      const stateDir = side === 'ours' ? path.join(dir, 'ours-state') : undefined;
      if (stateDir) fs.mkdirSync(stateDir);
      const batch = batchName(opts, 'f');
      const gahp = await pingedGahp(opts, side, stateDir);
      try {
        const t0 = nowS();
        const result = await gahp.callNotified('BOINC_SUBMIT', submitLine(batch, jobsOver(batch, [input!], n), opts.app, opts.input));
        if (result !== 'NULL') throw new Error(`${side}'s submit of ${n} jobs failed: ${result.slice(0, 300)}`);
        note(`fetch set-up: ${side} submitted ${n} jobs in ${(nowS() - t0).toFixed(1)} s`);
      } finally {
        await gahp.close();
      }
      const t0 = nowS();
      await runCommand(opts.completeCmd, batch);
      note(`fetch set-up: ${opts.completeCmd.join(' ')} ${batch}: ${(nowS() - t0).toFixed(1)} s`);
      worlds.set(side, { batch, ...(stateDir ? { stateDir } : {}) });
    }
    // One side after the other, in halves (ours, other, other, ours; one GAHP process per
    // side throughout): a drift of the machine's speed falls on both alike.
    const fetchers = new Map<string, { gahp: GahpDriver; jobs: string[]; lines: string[]; seconds: number; rpcs: number; ticks: number; results: string[] }>();
    try {
      for (const side of sides) {
        const { batch, stateDir } = worlds.get(side)!;
        const jobs = jobsOver(batch, [input!], n).map((j) => j.name);
        fs.mkdirSync(path.join(dir, `${side}-out`));
        const lines = jobs.map((job, i) => {
          const jobDir = path.join(dir, `${side}-out`, String(i));
          fs.mkdirSync(jobDir);
          // As the gridmanager sends it for transfer_output_files = out: (out, basename).
          return `${escapeToken(job)} ${escapeToken(jobDir)} err SOME 1 ${opts.output} ${opts.output}`;
        });
        const gahp = await pingedGahp(opts, side, stateDir);
        resetPeakRss(gahp.pid);
        fetchers.set(side, { gahp, jobs, lines, seconds: 0, rpcs: 0, ticks: 0, results: [] });
      }
      const half = Math.ceil(n / 2);
      const order = sides.length === 2 ? (['ours', 'other', 'other', 'ours'] as const) : (['ours', 'ours'] as const);
      const l0 = load();
      for (const side of order) {
        const f = fetchers.get(side)!;
        const part = f.results.length === 0 ? f.lines.slice(0, half) : f.lines.slice(half);
        const mark = log.mark();
        const t0 = nowS();
        const ticks0 = cpuTicks(f.gahp.pid) ?? NaN;
        f.results.push(...(await pumpFetches(f.gahp, part, opts.inFlight)));
        f.seconds += nowS() - t0;
        f.ticks += (cpuTicks(f.gahp.pid) ?? NaN) - ticks0;
        f.rpcs += (await log.since(mark)) ?? NaN;
      }
      for (const side of sides) {
        const { gahp, jobs, seconds, rpcs, ticks, results } = fetchers.get(side)!;
        // Clock ticks of the whole process (every thread), 100 a second on Linux.
        const cpu = ticks / 100;
        const rss = mb(peakRss(gahp.pid));
        const failed = results.filter((r) => !r.startsWith('NULL'));
        let present = 0;
        let right = 0;
        jobs.forEach((job, i) => {
          const file = path.join(dir, `${side}-out`, String(i), opts.output);
          const text = fs.existsSync(file) ? fs.readFileSync(file, 'latin1') : undefined;
          if (text !== undefined && text.length > 0) present++;
          if (text === `DONE ${job}\n`) right++;
        });
        Object.assign(out, {
          [`fetch_jobs_per_s_${side}`]: n / seconds,
          [`fetch_peak_rss_mb_${side}`]: rss,
          [`fetch_cpu_s_${side}`]: cpu,
          [`fetch_failed_${side}`]: failed.length,
          [`fetch_outputs_present_${side}`]: present,
          ...(opts.accessLog ? { [`fetch_rpcs_per_job_${side}`]: rpcs / n } : {}),
        });
        note(`fetch (${n} jobs in two halves, ${opts.inFlight} in flight, load ${l0} -> ${load()}): ${side} ${seconds.toFixed(1)} s = ${(n / seconds).toFixed(1)} jobs/s, ${cpu.toFixed(1)} s of CPU, peak RSS ${rss.toFixed(1)} MiB, ${failed.length} failed${failed[0] ? ` (first: ${failed[0].slice(0, 200)})` : ''}, ${present} outputs present (${right} reading "DONE <job name>")${opts.accessLog ? `, ${rpcs} requests = ${(rpcs / n).toFixed(2)} per job` : ''}`);
      }
    } finally {
      for (const f of fetchers.values()) await f.gahp.close();
    }
  } finally {
    removeTempDir(dir);
  }
  if (opts.vs) out.fetch_ours_over_other = out.fetch_jobs_per_s_ours! / out.fetch_jobs_per_s_other!;
  return out;
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  const log = new AccessLog(opts.accessLog);
  const notes: string[] = [];
  const note: Note = (t) => {
    notes.push(t);
    console.error(`  ${t}`);
  };
  console.error(`bench:project: ${opts.url}, app ${opts.app}, ours ${REPO_ROOT}${opts.vs ? `, vs ${opts.vs.join(' ')}` : ''}, ${os.availableParallelism()} cores, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const figures: Record<string, number> = { load_1m_start: os.loadavg()[0]! };
  const measures: Array<[string, (o: Options, l: AccessLog, n: Note) => Promise<Record<string, number>>]> = [
    ['submit', submitMeasure],
    ['many', manyMeasure],
    ['fetch', fetchMeasure],
  ];
  let failed = false;
  for (const [id, run] of measures) {
    if (!opts.only.has(id)) continue;
    console.error(`bench:project: ${id} ...`);
    try {
      Object.assign(figures, await run(opts, log, note));
    } catch (err) {
      failed = true;
      note(`${id} FAILED: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  figures.load_1m_end = os.loadavg()[0]!;
  console.log(`\nboinc-gahp project bench, ${new Date().toISOString()}, ${opts.url}, ${opts.rounds} submit rounds`);
  for (const [k, v] of Object.entries(figures)) console.log(`${k.padEnd(34)} ${round(v, 3)}`);
  for (const n of notes) console.log(`note: ${n}`);
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify({ figures, notes }, null, 2) + '\n');
  return failed ? 1 : 0;
}

main().then(
  (code) => {
    cleanupAll();
    process.exit(code);
  },
  (err) => {
    console.error(`bench:project: ${(err as Error).stack ?? err}`);
    cleanupAll();
    process.exit(2);
  },
);
