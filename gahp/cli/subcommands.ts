/**
 * Subcommands for people: ping, status, query, fetch, abort, retire, lease. Each one starts an
 * in-process GAHP and drives it through the protocol (GahpClient), exactly as HTCondor
 * would, so a command that works here works for the gridmanager too.
 *
 * Exit codes: 0 success; 1 the GAHP or the BOINC project reported a failure; 2 usage or
 * configuration error (bad arguments, no project URL or authenticator).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GahpClient, GahpRequestError, GahpResultError } from './gahp-client.js';
import { authenticatorExposure, checkProjectUrl, CLI_SETTING, defaultStateDir, noAuthenticatorFile, readAuthenticatorFile, UsageError } from '../settings.js';
import { cliRpcClient, commandToRun, EXIT_FAILED, EXIT_OK, networkSettings, runOptions, type GlobalOptions } from './options.js';
import { describeNetwork } from '../../boinc-rpc/network.js';
import { JournalLedger } from '../ledger/journal-ledger.js';
import type { LedgerBatch } from '../ledger/types.js';
import { ProgressLine } from './progress.js';
import { asLines } from '../protocol/messages.js';
import { SubmitStore, unfinished, type SubmitRecord } from './submit-state.js';
import { errorMessage } from '../util.js';
import { describeFailedJobs } from '../failed-job.js';

export interface Project {
  url: string;
  authenticator: string;
}

/**
 * The project and account of the options; a ConfigError (exit 2, doctor's words) when
 * either is missing or unusable. `where` names the settings in the fixes.
 */
export function projectFrom(g: GlobalOptions, where: { url: string; authenticatorFile: string } = CLI_SETTING): Project {
  const url = checkProjectUrl(g.projectUrl, where.url);
  if (!g.authenticatorFile) throw noAuthenticatorFile(where.authenticatorFile);
  const file = readAuthenticatorFile(g.authenticatorFile);
  warnIfReadableByOthers(g.authenticatorFile, file.mode, file.gid);
  return { url, authenticator: file.authenticator };
}

/** Files whose readability by others was warned of in this process (once each). */
const warnedReadable = new Set<string>();

/**
 * The authenticator is a password: a file readable by more than the README's set-up gives
 * (a 0640 file of the job owners' group) is said, with its fix (as doctor says it).
 */
function warnIfReadableByOthers(file: string, mode: number, gid: number): void {
  const abs = path.resolve(file);
  const exposure = authenticatorExposure(abs, mode, gid);
  if (!exposure || warnedReadable.has(abs)) return;
  warnedReadable.add(abs);
  process.stderr.write(`boinc-gahp: warning: the authenticator file ${abs} (mode ${(mode & 0o777).toString(8).padStart(4, '0')}) is ${exposure.found}: ${exposure.fix}\n`);
}

/** Starts an in-process GAHP, runs HTCondor's start-up sequence and selects the project. */
export async function openGahp(g: GlobalOptions, project: Project): Promise<GahpClient> {
  const client = GahpClient.inProcess(runOptions(g));
  try {
    await client.startup();
    await client.selectProject(project.url, project.authenticator);
  } catch (err) {
    await client.close().catch(() => undefined);
    throw err;
  }
  return client;
}

/**
 * The project of the options; without --project-url, that of the batches (or jobs) named
 * when the ledger recorded them, the account from the options or else from the record of
 * the `submit` cluster they belong to (its authenticator file's path: submit-state.ts).
 */
function projectOfNames(g: GlobalOptions, names: { batches?: string[]; jobs?: string[] }): Project {
  if (g.projectUrl !== undefined) return projectFrom(g);
  const stateDir = g.stateDir ?? defaultStateDir();
  if (!fs.existsSync(stateDir)) return projectFrom(g);
  const recorded = JournalLedger.readOnly(stateDir).list().find((b) =>
    (names.batches ?? []).includes(b.name) || (names.jobs ?? []).some((j) => b.jobs[j] !== undefined));
  if (!recorded) return projectFrom(g);
  const cluster = new SubmitStore(stateDir).all().find((r) => Object.values(r.batches).includes(recorded.name));
  return projectFrom({ ...g, projectUrl: recorded.projectUrl, authenticatorFile: g.authenticatorFile ?? cluster?.authenticatorFile });
}

async function withProject(g: GlobalOptions, fn: (client: GahpClient, project: Project) => Promise<number>, names: { batches?: string[]; jobs?: string[] } = {}): Promise<number> {
  const project = projectOfNames(g, names);
  const client = await openGahp(g, project);
  try {
    return await fn(client, project);
  } finally {
    await client.close();
  }
}

/** Runs an async command with a spinner on a terminal; prints failures readably. */
async function callReporting(client: GahpClient, g: GlobalOptions, label: string, command: string, args: string[]): Promise<string[] | undefined> {
  const progress = new ProgressLine(process.stderr, !g.quiet);
  if (progress.tty) progress.update(label);
  try {
    const tokens = await client.call(command, args);
    progress.stop();
    return tokens;
  } catch (err) {
    progress.stop();
    if (err instanceof GahpResultError || err instanceof GahpRequestError) {
      process.stderr.write(`boinc-gahp: ${command} failed: ${asLines(err.message)}\n`);
      return undefined;
    }
    throw err;
  }
}

/**
 * `ping`: BOINC_PING (BOINC's ping RPC does not look at the account), then a status query
 * for a batch that cannot exist: "no batch named ..." proves the server accepted the
 * authenticator; anything else (bad authenticator, no submit access) is reported.
 */
export async function pingCmd(g: GlobalOptions): Promise<number> {
  const project = projectFrom(g);
  // Which way the RPCs go, printed first: a failure below is read against it.
  for (const line of networkLines(project.url, g)) process.stdout.write(`${line}\n`);
  return withProject(g, async (client) => {
    const started = Date.now();
    const r = await callReporting(client, g, 'pinging the project', 'BOINC_PING', []);
    if (!r) return EXIT_FAILED;
    const ms = Date.now() - started;
    const probe = `boinc-gahp-account-check#${process.pid}#${Date.now()}`;
    try {
      await client.call('BOINC_QUERY_BATCHES', ['0', '1', probe]);
    } catch (err) {
      if (!(err instanceof GahpResultError)) throw err;
      if (err.missingBatch === undefined) {
        process.stderr.write(`boinc-gahp: the project answers, but refuses the account: ${asLines(err.message)}\n`);
        return EXIT_FAILED;
      }
    }
    process.stdout.write(`ok: ${project.url} answered in ${ms} ms and accepts the account\n`);
    return EXIT_OK;
  });
}

/** The proxy (without credentials) and the trust sources of requests to url, for people. */
export function networkLines(url: string, g: GlobalOptions): string[] {
  const net = describeNetwork(url, networkSettings(g));
  const proxy = net.proxy ?? `none (direct${net.bypassedBy ? `: bypassed by ${net.bypassedBy}` : ''})`;
  return [`proxy: ${proxy}`, `trust: ${net.trustSources.join('; ')}`];
}

export interface FetchOptions {
  dir?: string;
  stderr?: string;
  file?: string[];
}

export async function fetchCmd(g: GlobalOptions, jobName: string, o: FetchOptions): Promise<number> {
  const iwd = path.resolve(o.dir ?? '.');
  const specs: string[] = [];
  for (const f of o.file ?? []) {
    const eq = f.indexOf('=');
    const src = eq < 0 ? f : f.slice(0, eq);
    const dst = eq < 0 ? path.basename(f) : f.slice(eq + 1);
    if (!src || !dst) throw new UsageError(`--file "${f}": expected <name> or <name>=<destination>`);
    specs.push(src, dst);
  }
  const mode = specs.length ? 'SOME' : 'ALL';
  return withProject(g, async (client) => {
    const r = await callReporting(client, g, `fetching outputs of ${jobName}`, 'BOINC_FETCH_OUTPUT',
      [jobName, iwd, o.stderr ?? '/dev/null', mode, String(specs.length / 2), ...specs]);
    if (!r) return EXIT_FAILED;
    process.stdout.write(`ok: outputs of ${jobName} are in ${iwd} (exit status ${r[0]}, wall clock ${r[1]} s, cpu ${r[2]} s)\n`);
    return EXIT_OK;
  }, { jobs: [jobName] });
}

export async function abortCmd(g: GlobalOptions, jobNames: string[]): Promise<number> {
  return withProject(g, async (client) => {
    const r = await callReporting(client, g, `aborting ${jobNames.length} job(s)`, 'BOINC_ABORT_JOBS', jobNames);
    if (!r) return EXIT_FAILED;
    process.stdout.write(`ok: aborted ${jobNames.length} job${jobNames.length === 1 ? '' : 's'}\n`);
    return EXIT_OK;
  }, { jobs: jobNames });
}

/**
 * `retire`: BOINC_RETIRE_BATCH, saying what it gave up: the batch's jobs are asked first,
 * and the unfinished ones (which will not run) and the finished ones (whose outputs can no
 * longer be fetched) are counted in the answer.
 */
export async function retireCmd(g: GlobalOptions, batchName: string): Promise<number> {
  return withProject(g, async (client) => {
    let abandoned = '';
    try {
      const q = await client.call('BOINC_QUERY_BATCHES', ['0', '1', batchName]);
      const statuses = q.slice(3).filter((_t, i) => i % 2 === 0);
      const unfinished = statuses.filter((st) => st !== 'DONE' && st !== 'ERROR').length;
      const done = statuses.filter((st) => st === 'DONE').length;
      abandoned = `; given up: ${unfinished} unfinished job${unfinished === 1 ? '' : 's'} (they will not run) and the outputs of ${done} finished job${done === 1 ? '' : 's'} (no longer fetchable)`;
    } catch (err) {
      if (!(err instanceof GahpResultError)) throw err;
    }
    const r = await callReporting(client, g, `retiring ${batchName}`, 'BOINC_RETIRE_BATCH', [batchName]);
    if (!r) return EXIT_FAILED;
    process.stdout.write(`ok: retired ${batchName}${abandoned}\n`);
    return EXIT_OK;
  }, { batches: [batchName] });
}

/** `query`: the server's view of batches (BOINC_QUERY_BATCHES with min_mod_time 0). */
export async function queryCmd(g: GlobalOptions, batchNames: string[], o: { json?: boolean }): Promise<number> {
  return withProject(g, async (client, project) => {
    const r = await callReporting(client, g, `querying ${batchNames.length} batch(es)`, 'BOINC_QUERY_BATCHES', ['0', String(batchNames.length), ...batchNames]);
    if (!r) return EXIT_FAILED;
    const result: Array<{ batch: string; jobs: Record<string, string>; byStatus: Record<string, number> }> = [];
    let i = 1;
    for (const batch of batchNames) {
      const n = Number(r[i++]);
      const jobs: Record<string, string> = {};
      const byStatus: Record<string, number> = {};
      for (let k = 0; k < n; k++, i += 2) {
        jobs[r[i]!] = r[i + 1]!;
        byStatus[r[i + 1]!] = (byStatus[r[i + 1]!] ?? 0) + 1;
      }
      result.push({ batch, jobs, byStatus });
    }
    // The protocol carries only ERROR (HTCondor 10.0 holds such a job with "Reason unknown,
    // check the server"): what the server reports of each failed job is asked here.
    const failures = await whyFailed(g, project, result);
    if (o.json) {
      const batches = result.map((b) => ({ ...b, ...(failures.has(b.batch) ? { failures: Object.fromEntries(failures.get(b.batch)!) } : {}) }));
      process.stdout.write(JSON.stringify({ serverTime: r[0], batches }, null, 2) + '\n');
      return EXIT_OK;
    }
    for (const b of result) {
      const counts = Object.entries(b.byStatus).sort().map(([s, n]) => `${s} ${n}`).join(', ') || 'no jobs';
      process.stdout.write(`${b.batch}: ${Object.keys(b.jobs).length} jobs: ${counts}\n`);
      for (const [job, status] of Object.entries(b.jobs)) {
        const why = failures.get(b.batch)?.get(job);
        process.stdout.write(`  ${job}  ${status}${why ? `: ${why}` : ''}\n`);
      }
    }
    return EXIT_OK;
  }, { batches: batchNames });
}

/**
 * Per batch, per job BOINC reports ERROR, what the server says of it (gahp/failed-job.ts:
 * one query per batch); a batch whose question fails gets that failure as each job's text.
 */
async function whyFailed(g: GlobalOptions, project: Project, batches: ReadonlyArray<{ batch: string; jobs: Record<string, string> }>): Promise<Map<string, Map<string, string>>> {
  const out = new Map<string, Map<string, string>>();
  const todo = batches.map((b) => ({ batch: b.batch, failed: Object.keys(b.jobs).filter((j) => b.jobs[j] === 'ERROR') })).filter((b) => b.failed.length > 0);
  if (todo.length === 0) return out;
  const rpc = cliRpcClient(g, project);
  try {
    for (const { batch, failed } of todo) {
      try {
        const reports = await describeFailedJobs(rpc, batch, failed);
        out.set(batch, new Map([...reports].map(([job, r]) => [job, r.text])));
      } catch (err) {
        out.set(batch, new Map(failed.map((job) => [job, `the server could not be asked why: ${asLines(errorMessage(err))}`])));
      }
    }
  } finally {
    rpc.close();
  }
  return out;
}

export interface LeaseOptions {
  hours?: number;
  until?: number;
}

export async function leaseCmd(g: GlobalOptions, batchName: string, o: LeaseOptions): Promise<number> {
  let until: number;
  if (o.until !== undefined) {
    if (!Number.isFinite(o.until) || o.until <= 0) throw new UsageError('--until must be a unix time');
    until = Math.floor(o.until);
    if (until <= Date.now() / 1000) {
      throw new UsageError(`--until ${o.until} is in the past (${new Date(until * 1000).toISOString()}): give a unix time after now (date +%s) or --hours`);
    }
  } else {
    const hours = o.hours ?? 6;
    if (!Number.isFinite(hours) || hours <= 0) throw new UsageError('--hours must be a positive number');
    until = Math.floor(Date.now() / 1000 + hours * 3600);
  }
  return withProject(g, async (client) => {
    const r = await callReporting(client, g, `setting the lease of ${batchName}`, 'BOINC_SET_LEASE', [batchName, String(until)]);
    if (!r) return EXIT_FAILED;
    process.stdout.write(`ok: ${batchName} is leased until ${new Date(until * 1000).toISOString()} (${until})\n`);
    return EXIT_OK;
  }, { batches: [batchName] });
}

export interface StatusOptions {
  json?: boolean;
  all?: boolean;
  /** Ask the server for each batch not retired. */
  server?: boolean;
  /** List every batch the account has on the server instead. */
  account?: boolean;
}

export interface BatchSummary {
  project: string;
  batch: string;
  app: string;
  state: string;
  batchId?: number;
  leaseExpiresAt?: number;
  leaseExpiresIn?: number;
  jobs: number;
  byStatus: Record<string, number>;
  updatedAt: string;
}

export function summarize(batches: LedgerBatch[], now = Date.now() / 1000): BatchSummary[] {
  return batches.map((b) => {
    const byStatus: Record<string, number> = {};
    const jobs = Object.values(b.jobs);
    for (const s of jobs) byStatus[s] = (byStatus[s] ?? 0) + 1;
    const out: BatchSummary = {
      project: b.projectUrl,
      batch: b.name,
      app: b.app,
      state: b.state,
      jobs: jobs.length,
      byStatus,
      updatedAt: new Date(b.updatedAt).toISOString(),
    };
    if (b.batchId !== undefined) out.batchId = b.batchId;
    if (b.leaseExpiresAt !== undefined) {
      out.leaseExpiresAt = b.leaseExpiresAt;
      out.leaseExpiresIn = Math.round(b.leaseExpiresAt - now);
    }
    return out;
  });
}

function describeLease(s: BatchSummary): string {
  if (s.leaseExpiresAt === undefined) return 'no lease recorded';
  const when = new Date(s.leaseExpiresAt * 1000).toISOString().replace('.000Z', 'Z');
  const left = s.leaseExpiresIn!;
  if (left <= 0) return `lease EXPIRED at ${when}`;
  const h = Math.floor(left / 3600);
  const m = Math.floor((left % 3600) / 60);
  return `lease until ${when} (${h}h${String(m).padStart(2, '0')}m left)`;
}

/** What `submit` knows of a cluster, as `status` shows it. */
function clusterState(rec: SubmitRecord): string {
  if (rec.cancelled) return 'cancelled';
  if (vanishedBatches(rec).length) return 'not finished: a batch vanished from the server';
  const failed = Object.keys(rec.failed).length;
  const failures = failed ? `, ${failed} job${failed === 1 ? '' : 's'} failed` : '';
  if (unfinished(rec)) return `not finished${failures}`;
  if (rec.submitted.length) return `finished${failures}`;
  return Object.keys(rec.submitErrors ?? {}).length ? 'submit failed' : 'nothing submitted';
}

/**
 * `status`: what the ledger in the state directory knows, each batch with its `submit`
 * cluster and file; with `--server`, each batch not retired is asked of the server too
 * (BOINC_QUERY_BATCHES, per project: its URL from the ledger, the account from the options
 * or the cluster's record).
 */
/** The batches of a cluster that vanished from the server and were not submitted again. */
function vanishedBatches(rec: SubmitRecord): string[] {
  return (rec.vanished ?? []).filter((b) => !rec.retired.includes(b));
}

/** The command that takes a cluster further (finishes it, or submits its vanished jobs again), if any. */
function clusterNext(g: GlobalOptions, rec: SubmitRecord): string | undefined {
  if (rec.cancelled) return undefined;
  const cmd = (extra: string[]) => commandToRun(g, ['submit', '--cluster', String(rec.cluster), ...extra]);
  if (vanishedBatches(rec).length) return `to submit its vanished jobs again, run: ${cmd(['--resubmit-vanished'])}; or give them up: ${commandToRun(g, ['cancel', String(rec.cluster)])}`;
  if (unfinished(rec)) return `to finish it, run: ${cmd([])}`;
  return undefined;
}

/** A cluster as `status --json` gives it. */
function clusterJson(g: GlobalOptions, rec: SubmitRecord, store: SubmitStore): Record<string, unknown> {
  const jobs = store.loadJobs(rec.cluster)?.procs.length;
  return {
    cluster: rec.cluster,
    ...(rec.rerunOf !== undefined ? { rerunOf: rec.rerunOf } : {}),
    submitFile: rec.submitFile,
    ...(rec.cwd !== undefined ? { cwd: rec.cwd } : {}),
    project: rec.projectUrl,
    state: clusterState(rec),
    batches: Object.values(rec.batches),
    fetched: rec.fetched.length,
    failed: Object.keys(rec.failed).length,
    ...(jobs !== undefined ? { jobs } : {}),
    ...(vanishedBatches(rec).length ? { vanished: vanishedBatches(rec) } : {}),
    ...(clusterNext(g, rec) !== undefined ? { next: clusterNext(g, rec) } : {}),
  };
}

export async function statusCmd(g: GlobalOptions, o: StatusOptions, cluster?: number): Promise<number> {
  const stateDir = g.stateDir ?? defaultStateDir();
  if (o.account) return accountBatches(g, stateDir, o);
  if (!fs.existsSync(stateDir)) {
    if (cluster !== undefined) throw new UsageError(`no cluster ${cluster}: no state directory at ${stateDir}`);
    if (o.json) process.stdout.write(JSON.stringify({ clusters: [], batches: [] }) + '\n');
    else process.stdout.write(`no state directory at ${stateDir}: nothing submitted from here yet\n`);
    return EXIT_OK;
  }
  const ledger = JournalLedger.readOnly(stateDir);
  const store = new SubmitStore(stateDir);
  let clusters = store.all();
  if (cluster !== undefined) {
    clusters = clusters.filter((c) => c.cluster === cluster);
    if (clusters.length === 0) throw new UsageError(`no cluster ${cluster} in the state directory ${stateDir}`);
  }
  const clusterOf = new Map<string, SubmitRecord>();
  for (const rec of clusters) for (const b of Object.values(rec.batches)) clusterOf.set(b, rec);
  let batches = ledger.list(g.projectUrl ? (g.projectUrl.endsWith('/') ? g.projectUrl : g.projectUrl + '/') : undefined);
  // A batch whose BOINC_SUBMIT failed was withdrawn (retired): shown while its cluster's record keeps the error.
  const failedSubmit = (batch: string) => clusterOf.get(batch)?.submitErrors?.[batch] !== undefined;
  if (cluster !== undefined) batches = batches.filter((b) => clusterOf.get(b.name)?.cluster === cluster);
  else if (!o.all) batches = batches.filter((b) => b.state !== 'retired' || failedSubmit(b.name));
  const rows: Array<BatchSummary & { cluster?: number; submitFile?: string; clusterState?: string; submitError?: string; server?: Record<string, number> | string }> = summarize(batches);
  for (const r of rows) {
    const rec = clusterOf.get(r.batch);
    if (rec) Object.assign(r, { cluster: rec.cluster, submitFile: rec.submitFile, clusterState: clusterState(rec) });
    // The ledger keeps a batch whose BOINC_SUBMIT failed as 'creating', 'staging' or (withdrawn)
    // 'retired'; the cluster's record says it failed, and why.
    const error = rec?.submitErrors?.[r.batch];
    if (error !== undefined && r.state !== 'submitted') Object.assign(r, { state: 'failed', submitError: error });
  }
  let code = EXIT_OK;
  if (o.server) {
    for (const url of new Set(rows.filter((r) => r.state !== 'retired').map((r) => r.project))) {
      const asked = rows.filter((r) => r.project === url && r.state !== 'retired');
      const rec = asked.map((r) => clusterOf.get(r.batch)).find((c) => c?.authenticatorFile !== undefined);
      const answers = await serverCounts({ ...g, stateDir }, { projectUrl: url, authenticatorFile: g.authenticatorFile ?? rec?.authenticatorFile }, asked.map((r) => r.batch));
      asked.forEach((r, i) => (r.server = answers[i]!));
      if (answers.some((a) => typeof a === 'string')) code = EXIT_FAILED;
    }
  }
  if (o.json) {
    process.stdout.write(JSON.stringify({ clusters: clusters.map((c) => clusterJson(g, c, store)), batches: rows }, null, 2) + '\n');
    return code;
  }
  for (const rec of clusters) {
    const shown = new Set(Object.values(rec.batches)).size;
    const rerun = rec.rerunOf !== undefined ? ` (the failed jobs of cluster ${rec.rerunOf}, run again)` : '';
    process.stdout.write(`cluster ${rec.cluster}${rerun} of ${rec.submitFile}: ${clusterState(rec)} (${shown} batch${shown === 1 ? '' : 'es'})\n`);
    const next = clusterNext(g, rec);
    if (next !== undefined) process.stdout.write(`  ${next}\n`);
  }
  if (rows.length === 0) {
    process.stdout.write(`no ${o.all ? '' : 'active '}batches in ${stateDir}${o.all ? '' : ' (--all shows retired ones too)'}\n`);
    return code;
  }
  const counted = (c: Record<string, number>) => Object.entries(c).sort().map(([s, n]) => `${s} ${n}`).join(', ');
  for (const r of rows) {
    const counts = counted(r.byStatus) || 'no job statuses yet';
    const server = r.server === undefined ? '' : `  the server says: ${typeof r.server === 'string' ? r.server : counted(r.server) || 'no jobs'}\n`;
    process.stdout.write(
      `${r.batch}\n` +
      (r.cluster !== undefined ? `  cluster ${r.cluster} of ${r.submitFile}: ${r.clusterState}\n` : '') +
      `  project ${r.project}  app ${r.app}  batch id ${r.batchId ?? '?'}  state ${r.state}\n` +
      (r.submitError !== undefined ? `  BOINC_SUBMIT failed: ${r.submitError}\n` : '') +
      (r.state === 'retired' || r.state === 'failed' ? '' : `  ${describeLease(r)}\n`) +
      `  ${r.jobs} job${r.jobs === 1 ? '' : 's'}: ${counts}${r.server === undefined ? ' (as last seen here)' : ''}\n` +
      server,
    );
  }
  return code;
}

/** Each batch's job counts by status as the server reports them, or why it could not say. */
async function serverCounts(g: GlobalOptions, where: { projectUrl: string; authenticatorFile?: string }, batches: string[]): Promise<Array<Record<string, number> | string>> {
  let client: GahpClient;
  try {
    client = await openGahp(g, projectFrom({ ...g, ...where }));
  } catch (err) {
    return batches.map(() => `not asked: ${asLines(errorMessage(err))}`);
  }
  try {
    const answers: Array<Record<string, number> | string> = [];
    for (const batch of batches) {
      try {
        const r = await client.call('BOINC_QUERY_BATCHES', ['0', '1', batch]);
        const counts: Record<string, number> = {};
        for (let i = 3; i < r.length; i += 2) counts[r[i]!] = (counts[r[i]!] ?? 0) + 1;
        answers.push(counts);
      } catch (err) {
        if (!(err instanceof GahpResultError)) throw err;
        answers.push(err.missingBatch === batch ? 'no such batch (retired, or its lease ran out)' : `the query failed: ${asLines(err.message)}`);
      }
    }
    return answers;
  } finally {
    await client.close();
  }
}

/** A batch of the account on the server, as `status --account` shows it. */
interface AccountBatch {
  project: string;
  batch: string;
  batchId: number;
  app: string;
  state: string;
  jobs: number;
  errorJobs: number;
  fractionDone: number;
  leaseExpiresAt?: number;
  /** Whether this machine's ledger or clusters have the batch. */
  knownHere: boolean;
  cluster?: number;
  submitFile?: string;
}

/** BOINC's batch states, by number; query_batches lists no retired ones. */
const BATCH_STATES = ['init', 'in progress', 'completed', 'aborted', 'retired'];

/**
 * `status --account`: every batch the account has on the server (query_batches: all but
 * the retired ones), each with whether this machine knows it: its `submit` cluster and
 * file, or that the ledger has it. The project and account are the options', else those of
 * the clusters recorded here.
 */
async function accountBatches(g: GlobalOptions, stateDir: string, o: StatusOptions): Promise<number> {
  const known = fs.existsSync(stateDir);
  const clusters = known ? new SubmitStore(stateDir).all() : [];
  const where = new Map<string, string | undefined>();
  if (g.projectUrl) where.set(g.projectUrl, g.authenticatorFile);
  else for (const rec of clusters) if (rec.projectUrl && !where.has(rec.projectUrl)) where.set(rec.projectUrl, g.authenticatorFile ?? rec.authenticatorFile);
  if (where.size === 0) where.set('', g.authenticatorFile);
  const clusterOf = new Map<string, SubmitRecord>();
  for (const rec of clusters) for (const b of Object.values(rec.batches)) clusterOf.set(b, rec);
  const ledger = known ? JournalLedger.readOnly(stateDir) : undefined;
  const rows: AccountBatch[] = [];
  let code = EXIT_OK;
  for (const [projectUrl, authenticatorFile] of where) {
    const project = projectFrom({ ...g, projectUrl: projectUrl || g.projectUrl, authenticatorFile });
    const rpc = cliRpcClient(g, project);
    try {
      for (const b of await rpc.queryBatches()) {
        const rec = clusterOf.get(b.name);
        const row: AccountBatch = {
          project: project.url, batch: b.name, batchId: b.id, app: b.appName ?? '?', state: BATCH_STATES[b.state] ?? String(b.state),
          jobs: b.njobs, errorJobs: b.nerrorJobs, fractionDone: b.fractionDone, leaseExpiresAt: b.expireTime,
          knownHere: rec !== undefined || ledger?.get(project.url, b.name) !== undefined,
        };
        if (rec) Object.assign(row, { cluster: rec.cluster, submitFile: rec.submitFile });
        rows.push(row);
      }
    } catch (err) {
      process.stderr.write(`boinc-gahp: query_batches of ${project.url} failed: ${asLines(errorMessage(err))}\n`);
      code = EXIT_FAILED;
    } finally {
      rpc.close();
    }
  }
  if (o.json) {
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
    return code;
  }
  if (rows.length === 0 && code === EXIT_OK) process.stdout.write('the account has no batches on the server (retired ones are not listed)\n');
  for (const r of rows) {
    const lease = r.leaseExpiresAt ? `  lease until ${new Date(r.leaseExpiresAt * 1000).toISOString().replace('.000Z', 'Z')}` : '';
    const here = r.cluster !== undefined ? `cluster ${r.cluster} of ${r.submitFile}` : r.knownHere ? 'in the ledger here (not from submit)' : 'not known here';
    process.stdout.write(
      `${r.batch}\n` +
      `  project ${r.project}  app ${r.app}  batch id ${r.batchId}  state ${r.state}${lease}\n` +
      `  ${r.jobs} job${r.jobs === 1 ? '' : 's'}, ${r.errorJobs} failed, ${Math.round(r.fractionDone * 100)}% done\n` +
      `  ${here}\n`,
    );
  }
  return code;
}
