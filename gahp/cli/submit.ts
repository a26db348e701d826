/**
 * `boinc-gahp submit job.sub`: submits an HTCondor submit description to BOINC through the
 * GAHP protocol, doing what HTCondor's gridmanager would (boincjob.cpp, boincresource.cpp):
 * one batch per app named `condor#<schedd>#<app>#<time>`, jobs `<batch>#<cluster>.<proc>`,
 * BOINC_SUBMIT, a 6-hour lease renewed while waiting, BOINC_QUERY_BATCHES polling,
 * BOINC_FETCH_OUTPUT with the specs HTCondor sends, BOINC_RETIRE_BATCH when all are done.
 *
 * Re-runnable: the cluster id and batch names are kept in <state-dir>/submit/, keyed by the
 * submit file's path and content, so running the same file again resumes (waits, fetches
 * what is missing) instead of submitting twice. `--new` starts a fresh cluster.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GahpClient, GahpRequestError, GahpResultError } from './gahp-client.js';
import { fetchOutputSpec, parseSubmitDescription, SubmitFileError, type SubmitProc } from './submit-file.js';
import {
  EXIT_FAILED, EXIT_OK, UsageError, projectFrom, readAuthenticator, runOptions, type GlobalOptions,
} from './subcommands.js';
import { defaultStateDir } from './run-gahp.js';
import { ProgressLine, SubmitProgressView } from './progress.js';

export interface SubmitOptions {
  wait: boolean;
  new?: boolean;
  poll: number;
  timeout?: number;
  spawn?: boolean;
}

const LEASE_SECONDS = 6 * 3600;
/** Renew when less than this is left (the gridmanager renews every couple of hours). */
const LEASE_RENEW_BELOW = 4 * 3600;
const FETCH_ATTEMPTS = 3;

export interface SubmitRecord {
  key: string;
  submitFile: string;
  cluster: number;
  /** Unix time in the batch names. */
  createdAt: number;
  /** app -> batch name */
  batches: Record<string, string>;
  submitted: string[];
  retired: string[];
  fetched: string[];
  failed: Record<string, string>;
  leaseUntil: Record<string, number>;
}

interface SubmitState {
  nextCluster: number;
  lastCreatedAt: number;
  entries: Record<string, SubmitRecord>;
}

function stateFile(stateDir: string): string {
  return path.join(stateDir, 'submit', 'clusters.json');
}

function loadState(stateDir: string): SubmitState {
  try {
    const s = JSON.parse(fs.readFileSync(stateFile(stateDir), 'utf8')) as SubmitState;
    if (typeof s.nextCluster === 'number' && s.entries) return s;
  } catch {
    /* first use */
  }
  return { nextCluster: 1, lastCreatedAt: 0, entries: {} };
}

/**
 * Writes the state, merged with what is on disk now: another `submit` may have run
 * meanwhile, so only our own entries replace theirs and the counters only grow.
 */
function saveState(stateDir: string, state: SubmitState, ownKeys: string[]): void {
  const onDisk = loadState(stateDir);
  for (const k of ownKeys) if (state.entries[k]) onDisk.entries[k] = state.entries[k]!;
  onDisk.nextCluster = Math.max(onDisk.nextCluster, state.nextCluster);
  onDisk.lastCreatedAt = Math.max(onDisk.lastCreatedAt, state.lastCreatedAt);
  state.nextCluster = onDisk.nextCluster;
  state.lastCreatedAt = onDisk.lastCreatedAt;
  const file = stateFile(stateDir);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(onDisk, null, 1), { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/**
 * Runs fn holding <state-dir>/submit/lock (O_EXCL file with our pid), so two `submit`s
 * started together never take the same cluster id. A lock left by a dead process is broken.
 */
function withStateLock<T>(stateDir: string, fn: () => T): T {
  const lock = path.join(stateDir, 'submit', 'lock');
  fs.mkdirSync(path.dirname(lock), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const fd = fs.openSync(lock, 'wx', 0o600);
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = NaN;
      try {
        holder = Number(fs.readFileSync(lock, 'utf8'));
      } catch {
        /* just released */
      }
      let alive = true;
      if (Number.isInteger(holder) && holder > 0) {
        try {
          process.kill(holder, 0);
        } catch (e) {
          alive = (e as NodeJS.ErrnoException).code === 'EPERM';
        }
      }
      if (!alive) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${lock} is held by process ${holder}; remove it if no boinc-gahp submit is running`, { cause: err });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

/** The schedd part of batch names: stable per machine. */
export function scheddName(): string {
  const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '-') || 'localhost';
  return `boinc-gahp@${host}`;
}

export function jobName(batch: string, cluster: number, proc: number): string {
  return `${batch}#${cluster}.${proc}`;
}

/** BOINC_SUBMIT arguments after the reqid, exactly as the gridmanager builds them. */
export function submitArgs(batch: string, app: string, cluster: number, procs: SubmitProc[]): string[] {
  const args = [batch, app, String(procs.length)];
  for (const p of procs) {
    args.push(jobName(batch, cluster, p.proc), String(p.args.length), ...p.args, String(p.inputs.length));
    for (const i of p.inputs) args.push(i.src, i.dst);
  }
  args.push('NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL');
  return args;
}

/** Parses a BOINC_QUERY_BATCHES success (tokens after NULL). */
export function parseQueryResult(tokens: string[], nbatches: number): { serverTime: string; batches: Array<Array<[string, string]>> } {
  const serverTime = tokens[0] ?? '0';
  const batches: Array<Array<[string, string]>> = [];
  let i = 1;
  for (let b = 0; b < nbatches; b++) {
    const n = Number(tokens[i++]);
    if (!Number.isInteger(n) || n < 0) throw new Error('malformed BOINC_QUERY_BATCHES result');
    const jobs: Array<[string, string]> = [];
    for (let k = 0; k < n; k++) {
      const name = tokens[i++];
      const status = tokens[i++];
      if (name === undefined || status === undefined) throw new Error('malformed BOINC_QUERY_BATCHES result');
      jobs.push([name, status]);
    }
    batches.push(jobs);
  }
  return { serverTime, batches };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function submitCmd(g: GlobalOptions, file: string, o: SubmitOptions): Promise<number> {
  const stateDir = g.stateDir ?? defaultStateDir();
  const abs = path.resolve(file);
  let text: string;
  try {
    text = fs.readFileSync(abs, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? errMessage(err)}`);
  }
  const key = createHash('sha256').update(abs).update('\0').update(text).digest('hex').slice(0, 32);
  let state = loadState(stateDir);
  let record = o.new ? undefined : state.entries[key];
  // Parse with the cluster id this file has (or would get) before taking one for good:
  // a broken file must not use up cluster ids.
  const tentativeCluster = record?.cluster ?? state.nextCluster;
  let desc = parseSubmitDescription(text, { file, cwd: process.cwd(), cluster: tentativeCluster });
  for (const w of desc.warnings) process.stderr.write(`warning: ${w}\n`);
  if (desc.procs.length === 0) throw new SubmitFileError(file, 1, 'the queue statements make no jobs');

  // One project and account for the whole file.
  const urls = new Set(desc.procs.map((p) => p.projectUrl).filter((u): u is string => !!u));
  const auths = new Set(desc.procs.map((p) => p.authenticatorFile).filter((u): u is string => !!u));
  if (urls.size > 1) throw new UsageError(`${file}: jobs name different grid_resource URLs; submit one project per file`);
  if (auths.size > 1) throw new UsageError(`${file}: jobs name different boinc_authenticator_file values; use one per file`);
  const project = projectFrom(
    { ...g, projectUrl: g.projectUrl ?? [...urls][0], authenticatorFile: [...auths][0] ?? g.authenticatorFile },
  );
  // Like condor_submit: every job's directory and input file must exist now.
  for (const p of desc.procs) {
    if (!fs.statSync(p.iwd, { throwIfNoEntry: false })?.isDirectory()) {
      throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: initialdir ${p.iwd} is not an existing directory`);
    }
    for (const i of p.inputs) {
      let st: fs.Stats;
      try {
        st = fs.statSync(i.src);
      } catch {
        throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: input file ${i.src} does not exist`);
      }
      if (!st.isFile()) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: input ${i.src} is not a regular file`);
    }
  }

  if (!record) {
    const taken = withStateLock(stateDir, () => {
      state = loadState(stateDir);
      const existing = o.new ? undefined : state.entries[key];
      if (existing) return existing;
      const cluster = state.nextCluster;
      const now = Math.floor(Date.now() / 1000);
      const createdAt = Math.max(now, state.lastCreatedAt + 1);
      const batches: Record<string, string> = {};
      for (const p of desc.procs) batches[p.app] ??= `condor#${scheddName()}#${p.app}#${createdAt}`;
      const fresh: SubmitRecord = { key, submitFile: abs, cluster, createdAt, batches, submitted: [], retired: [], fetched: [], failed: {}, leaseUntil: {} };
      state.entries[key] = fresh;
      state.nextCluster = cluster + 1;
      state.lastCreatedAt = createdAt;
      saveState(stateDir, state, [key]);
      return fresh;
    });
    record = taken;
  }
  if (record.cluster !== tentativeCluster) {
    // Another submit took the cluster id we parsed with: expand $(Cluster) again.
    desc = parseSubmitDescription(text, { file, cwd: process.cwd(), cluster: record.cluster });
  }
  const rec = record;
  const save = () => {
    state.entries[key] = rec;
    saveState(stateDir, state, [key]);
  };

  const procsByApp = new Map<string, SubmitProc[]>();
  for (const p of desc.procs) {
    if (!procsByApp.has(p.app)) procsByApp.set(p.app, []);
    procsByApp.get(p.app)!.push(p);
    rec.batches[p.app] ??= `condor#${scheddName()}#${p.app}#${rec.createdAt}`;
  }
  const procByJob = new Map<string, SubmitProc>();
  for (const [app, procs] of procsByApp) for (const p of procs) procByJob.set(jobName(rec.batches[app]!, rec.cluster, p.proc), p);
  const allJobs = [...procByJob.keys()];

  const out = (line: string) => process.stdout.write(line + '\n');
  out(`cluster ${rec.cluster}: ${desc.procs.length} job${desc.procs.length === 1 ? '' : 's'} in ${procsByApp.size} batch${procsByApp.size === 1 ? '' : 'es'} on ${project.url}`);

  if ([...procsByApp.keys()].every((app) => rec.retired.includes(rec.batches[app]!))) {
    out(`cluster ${rec.cluster} is already complete (batches retired); use --new to submit it again`);
    return Object.keys(rec.failed).length ? EXIT_FAILED : EXIT_OK;
  }

  // Bars over hashing and uploads: on a terminal, with the in-process GAHP only (a child
  // GAHP speaks nothing but the protocol). One BOINC_SUBMIT runs at a time here.
  let view: SubmitProgressView | undefined;
  const client = o.spawn
    ? GahpClient.spawn(['--protocol', '--state-dir', stateDir, ...(g.log ? ['--log', g.log] : []), ...(g.debug ? ['--debug'] : []),
      ...(g.rpcTimeout ? ['--rpc-timeout', String(g.rpcTimeout)] : []), ...(g.commandTimeout ? ['--command-timeout', String(g.commandTimeout)] : []), ...(g.concurrency ? ['--concurrency', String(g.concurrency)] : [])],
    { onStderr: (t) => process.stderr.write(t) })
    : GahpClient.inProcess({ ...runOptions({ ...g, stateDir }), progress: (e) => view?.event(e) });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = new ProgressLine(process.stderr, !g.quiet);
  try {
    await client.startup();
    await client.selectProject(project.url, project.authenticator);

    const submitBatch = async (app: string) => {
      const batch = rec.batches[app]!;
      const procs = procsByApp.get(app)!;
      const what = `submitting ${procs.length} job${procs.length === 1 ? '' : 's'} to ${batch}`;
      progress.update(`${what} (hashing and uploading inputs)`);
      view = progress.tty && !o.spawn ? new SubmitProgressView(progress, `${app}: ${procs.length} job${procs.length === 1 ? '' : 's'}`) : undefined;
      try {
        await client.call('BOINC_SUBMIT', submitArgs(batch, app, rec.cluster, procs));
      } finally {
        view = undefined;
      }
      if (!rec.submitted.includes(batch)) rec.submitted.push(batch);
      save();
      progress.log(`submitted ${batch} (${procs.length} job${procs.length === 1 ? '' : 's'})`);
      progress.update('waiting for the first status');
    };
    const setLease = async (batch: string) => {
      const until = Math.floor(Date.now() / 1000) + LEASE_SECONDS;
      await client.call('BOINC_SET_LEASE', [batch, String(until)]);
      rec.leaseUntil[batch] = until;
      save();
    };

    const live = () => [...procsByApp.keys()].map((a) => rec.batches[a]!).filter((b) => !rec.retired.includes(b));
    for (const app of procsByApp.keys()) {
      const batch = rec.batches[app]!;
      if (rec.retired.includes(batch) || rec.submitted.includes(batch)) continue;
      await submitBatch(app);
    }
    for (const batch of live()) {
      if ((rec.leaseUntil[batch] ?? 0) - Date.now() / 1000 < LEASE_RENEW_BELOW) await setLease(batch);
    }

    if (!o.wait) {
      progress.stop();
      for (const b of live()) out(`batch ${b}`);
      out(`submitted; run "boinc-gahp submit ${file}" again to wait for the jobs and fetch their outputs`);
      return EXIT_OK;
    }

    const status = new Map<string, string>();
    const fetchTries = new Map<string, number>();
    let serverTime = '0';
    const started = Date.now();
    const finished = (j: string) => rec.fetched.includes(j) || rec.failed[j] !== undefined;

    const fetchJob = async (job: string) => {
      const p = procByJob.get(job)!;
      const spec = fetchOutputSpec(p);
      try {
        const r = await client.call('BOINC_FETCH_OUTPUT', [job, spec.iwd, spec.stderrPath, spec.mode, String(spec.specs.length), ...spec.specs.flat()]);
        rec.fetched.push(job);
        if (r[0] !== '0') progress.log(`job ${rec.cluster}.${p.proc} finished with exit status ${r[0]}`);
      } catch (err) {
        const n = (fetchTries.get(job) ?? 0) + 1;
        fetchTries.set(job, n);
        if (n >= FETCH_ATTEMPTS) {
          rec.failed[job] = `fetching outputs failed: ${errMessage(err)}`;
          progress.log(`job ${rec.cluster}.${p.proc}: ${rec.failed[job]}`);
        }
      }
      save();
    };

    for (;;) {
      if (stop.signal.aborted) {
        progress.stop();
        out(`interrupted; run "boinc-gahp submit ${file}" again to resume (nothing is submitted twice)`);
        return 130;
      }
      const batches = live();
      if (batches.length === 0) break;
      let result: ReturnType<typeof parseQueryResult> | undefined;
      try {
        const tokens = await client.call('BOINC_QUERY_BATCHES', [serverTime, String(batches.length), ...batches]);
        result = parseQueryResult(tokens, batches.length);
      } catch (err) {
        const msg = errMessage(err);
        const at = msg.indexOf('no batch named ');
        const missing = at >= 0 ? msg.slice(at + 15) : undefined;
        const app = missing ? [...procsByApp.keys()].find((a) => rec.batches[a] === missing) : undefined;
        if (err instanceof GahpResultError && app !== undefined) {
          if (rec.fetched.length === 0 && Object.keys(rec.failed).length === 0) {
            // Recorded as submitted but the server has no such batch (a crash before the
            // submit landed): submit it again, as the gridmanager does.
            rec.submitted = rec.submitted.filter((b) => b !== missing);
            await submitBatch(app);
            await setLease(missing!);
            serverTime = '0';
            continue;
          }
          progress.stop();
          process.stderr.write(`boinc-gahp: batch ${missing} is gone from the server (its lease expired?)\n`);
          return EXIT_FAILED;
        }
        if (err instanceof GahpRequestError) throw err;
        progress.log(`status query failed (will retry): ${msg}`);
        await sleep(o.poll * 1000, stop.signal);
        continue;
      }
      // As the gridmanager does: the next poll asks from this server_time, unchanged (the
      // GAHP itself covers BOINC's whole-second mod_time).
      serverTime = result.serverTime;
      result.batches.forEach((jobs) => {
        for (const [j, s] of jobs) status.set(j, s);
      });
      for (const j of allJobs) {
        if (finished(j)) continue;
        if (status.get(j) === 'ERROR') {
          rec.failed[j] = 'BOINC reports ERROR (reason unknown, check the server)';
          progress.log(`job ${rec.cluster}.${procByJob.get(j)!.proc} failed on BOINC: ${rec.failed[j]}`);
          save();
        }
      }
      const ready = allJobs.filter((j) => !finished(j) && status.get(j) === 'DONE');
      for (let i = 0; i < ready.length; i += 4) {
        if (stop.signal.aborted) break;
        await Promise.all(ready.slice(i, i + 4).map(fetchJob));
        const fetchedNow = allJobs.filter(finished).length;
        progress.update(`fetching outputs: ${fetchedNow}/${allJobs.length} jobs finished`, fetchedNow, allJobs.length);
      }
      // Retire each batch whose jobs are all finished (as the gridmanager does at the last job).
      for (const app of procsByApp.keys()) {
        const batch = rec.batches[app]!;
        if (rec.retired.includes(batch)) continue;
        const jobs = allJobs.filter((j) => procByJob.get(j)!.app === app);
        if (!jobs.every(finished)) continue;
        try {
          await client.call('BOINC_RETIRE_BATCH', [batch]);
        } catch (err) {
          progress.log(`retiring ${batch} failed (ignored, as HTCondor does): ${errMessage(err)}`);
        }
        rec.retired.push(batch);
        save();
      }
      if (live().length === 0) break;
      for (const batch of live()) {
        if ((rec.leaseUntil[batch] ?? 0) - Date.now() / 1000 < LEASE_RENEW_BELOW) {
          try {
            await setLease(batch);
          } catch (err) {
            progress.log(`lease renewal of ${batch} failed (will retry): ${errMessage(err)}`);
          }
        }
      }
      const counts = { done: 0, running: 0, waiting: 0, failed: 0 };
      for (const j of allJobs) {
        if (rec.fetched.includes(j)) counts.done++;
        else if (rec.failed[j] !== undefined) counts.failed++;
        else if (status.get(j) === 'IN_PROGRESS' || status.get(j) === 'DONE') counts.running++;
        else counts.waiting++;
      }
      progress.update(`${allJobs.length} jobs: ${counts.done} done, ${counts.running} running, ${counts.waiting} waiting, ${counts.failed} failed`,
        counts.done + counts.failed, allJobs.length);
      if (o.timeout !== undefined && Date.now() - started > o.timeout * 1000) {
        progress.stop();
        process.stderr.write(`boinc-gahp: gave up waiting after ${o.timeout} s; run again to resume\n`);
        return EXIT_FAILED;
      }
      await sleep(o.poll * 1000, stop.signal);
    }
    progress.stop();
    const failed = Object.entries(rec.failed);
    out(`cluster ${rec.cluster}: ${rec.fetched.length} job${rec.fetched.length === 1 ? '' : 's'} done, outputs fetched; ${failed.length} failed`);
    for (const [j, why] of failed) out(`  ${j}: ${why}`);
    return failed.length ? EXIT_FAILED : EXIT_OK;
  } catch (err) {
    progress.stop();
    if (err instanceof GahpResultError || err instanceof GahpRequestError) {
      process.stderr.write(`boinc-gahp: ${err instanceof GahpResultError ? err.command + ' failed: ' : ''}${err.message}\n`);
      return EXIT_FAILED;
    }
    throw err;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await client.close().catch(() => undefined);
  }
}

// Exposed for tests.
export { readAuthenticator };
