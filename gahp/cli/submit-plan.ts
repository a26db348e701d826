/**
 * The first step of `boinc-gahp submit` (submit.ts): everything decided before a GAHP is
 * started. The submit file is read and checked, its project picked, its cluster id taken
 * (or found from an earlier run, submit-state.ts) and its jobs named: one batch per app
 * `boinc-gahp-<state dir id>-<host>-<app>-<time>`, jobs `<batch>_<cluster>.<proc>`, names
 * BOINC's own pages take (is_valid_filename: `^[\w\-. ]+$`, at most 255; get_output3.php
 * refuses any other, docs/boinc-server.md). Batches recorded before under HTCondor's shape
 * (`condor#<schedd>#<app>#<time>`, jobs `<batch>#<cluster>.<proc>`) keep it: their jobs
 * are on BOINC under those names. Nothing is sent anywhere.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fetchOutputSpec, parseSubmitDescription, SubmitFileError, type SubmitDescription, type SubmitProc } from './submit-file.js';
import { commandToRun, type GlobalOptions } from './options.js';
import { CLI_SETTING, defaultStateDir, UsageError } from '../settings.js';
import { unusableStateDir } from '../state-dir.js';
import { projectFrom } from './subcommands.js';
import { open, SubmitStore, unfinished, type SubmitRecord } from './submit-state.js';
import { argumentProblem } from '../staging/validate.js';
import { uploadLimitProblem } from '../staging/upload.js';
import { PHP_DEFAULT_UPLOAD_LIMITS } from '../../boinc-rpc/upload-limits.js';

/**
 * The schedd part of batch names: stable per machine and state directory. The state
 * directory plays the schedd: it hands out cluster ids and creation times (one second apart
 * at least, submit-state.ts), so its names never repeat. Two state directories (two users on
 * one host, or one user's two) could make the same `<app>#<time>` in the same second, and
 * BOINC would take the second create_batch for a batch of the first's name: so the
 * directory is in the name too, as a short hash of its absolute path.
 */
function scheddName(stateDir: string): string {
  const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '-') || 'localhost';
  const dirId = createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 8);
  return `boinc-gahp-${dirId}@${host}`;
}

/** The app as part of a name BOINC's check takes: other characters become `-`, and then (or when long) a hash keeps it distinct. */
function appPart(app: string): string {
  const safe = app.replace(/[^\w.-]/g, '-');
  if (safe === app && app.length <= 64) return app;
  return `${safe.slice(0, 64)}-${createHash('sha256').update(app).digest('hex').slice(0, 8)}`;
}

function batchName(stateDir: string, app: string, createdAt: number): string {
  return `${scheddName(stateDir).replace('@', '-').slice(0, 84)}-${appPart(app)}-${createdAt}`;
}

function jobName(batch: string, cluster: number, proc: number): string {
  return batch.startsWith('condor#') ? `${batch}#${cluster}.${proc}` : `${batch}_${cluster}.${proc}`;
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

/** Everything decided before a GAHP is started. */
export interface SubmitPlan {
  /** The submit file as named on the command line (for messages). */
  file: string;
  stateDir: string;
  project: { url: string; authenticator: string; authenticatorFile: string };
  store: SubmitStore;
  rec: SubmitRecord;
  procsByApp: Map<string, SubmitProc[]>;
  /** Job name -> its proc, every job of the file. */
  procByJob: Map<string, SubmitProc>;
  /** Named by its id (`submit --cluster N`), not by its file. */
  byId: boolean;
  /** The file's other clusters not finished: said with the command that finishes each. */
  others: SubmitRecord[];
}

/** Checks of the caller's, made before a cluster id is taken for jobs still to submit. */
export interface PlanChecks {
  /** E.g. whether the options suit this project (the poll interval, submit.ts). */
  project?: (url: string) => void;
  /** E.g. asking the project whether the apps make the outputs named (submit.ts). */
  beforeSubmitting?: (desc: SubmitDescription, project: { url: string; authenticator: string }, file: string) => Promise<void>;
}

/** What `submit` is asked to run: a submit file, or a cluster by its id (`--cluster N`). */
export interface SubmitTarget {
  file?: string;
  cluster?: number;
  /** `--new`: a new cluster even when one of the file's matches. */
  fresh: boolean;
  /** `--rerun-failed`: a new cluster of the failed jobs of the (finished) cluster named. */
  rerunFailed?: boolean;
  /** Only an existing cluster of the file: none matching is an error, not a new cluster. */
  existing?: boolean;
}

/**
 * What `$(Cluster)` expands to for the jobs digest: the digest must not depend on the
 * cluster's own id, or a file using `$(Cluster)` would never match the cluster it made.
 */
const CLUSTER_PLACEHOLDER = '\u0000Cluster\u0000';

/**
 * Reads and checks the submit file (or the jobs kept for the cluster named), picks its
 * project, and takes its cluster id (or finds the one an earlier run took). Nothing is sent
 * anywhere but by `checks`.
 */
export async function planSubmit(g: GlobalOptions, target: SubmitTarget, checks: PlanChecks = {}): Promise<SubmitPlan> {
  const stateDir = g.stateDir ?? defaultStateDir();
  const store = new SubmitStore(stateDir);
  // submit's own records have no fallback (docs/storage.md, "Making directories"): they are
  // what makes a re-run resume, so an unusable state directory is a configuration error.
  const why = unusableStateDir(store.dir);
  if (why !== undefined) {
    throw new UsageError(`the state directory ${stateDir} cannot be used: ${why}; give --state-dir (or BOINC_GAHP_STATE_DIR) a directory this user can create and write`);
  }
  if (target.rerunFailed) return planRerun(g, stateDir, store, target, checks);
  if (target.cluster !== undefined) return planCluster(g, stateDir, store, target.cluster, checks);
  const file = target.file!;
  const fresh = target.fresh;
  const abs = path.resolve(file);
  const text = readSubmitFile(abs, file);
  const key = createHash('sha256').update(abs).update('\0').update(text).digest('hex').slice(0, 32);
  const here = process.cwd();
  const matches = jobsMatcher(text, file, key, here);
  /** The cluster of the file this run resumes: its newest unfinished one whose jobs the file makes, else its newest when that one matches (complete or cancelled: said so). */
  const resumed = (all: SubmitRecord[]): SubmitRecord | undefined => {
    // (A rerun of failed jobs is the file's too, but of only some of its jobs: found by its id.)
    const recs = all.filter((r) => r.rerunOf === undefined);
    return recs.find((r) => open(r) && matches(r)) ?? (recs[0] !== undefined && matches(recs[0]) ? recs[0] : undefined);
  };
  const ofFile = store.forFile(abs);
  const known = fresh ? undefined : resumed(ofFile);
  const cwd = known?.cwd ?? here;
  // Parse with the cluster id this file has (or would get) before taking one for good:
  // a broken file must not use up cluster ids.
  const tentativeCluster = known?.cluster ?? store.nextCluster;
  let desc = parseSubmitDescription(text, { file, cwd, cluster: tentativeCluster });
  for (const note of desc.notes) process.stderr.write(`note: ${note}\n`);
  if (desc.procs.length === 0) throw new SubmitFileError(file, 1, 'the queue statements make no jobs');
  checkArguments(file, desc);
  const pending = ofFile.filter((r) => r !== known && r.rerunOf === undefined && unfinished(r));
  if (!known && !fresh && pending.length > 0) {
    const latest = pending[0]!;
    throw new UsageError(`${file} changed since cluster ${latest.cluster} was submitted from it, and its jobs are not finished: ` +
      `to finish cluster ${latest.cluster} first, run: ${commandToRun(g, ['submit', '--cluster', String(latest.cluster)])}; ` +
      `to submit the changed file as a new cluster beside it, run: ${commandToRun(g, ['submit', file, '--new'])}; ` +
      `or cancel cluster ${latest.cluster} (its jobs aborted, its results given up): ${commandToRun(g, ['cancel', String(latest.cluster)])}`);
  }
  if (target.existing && !known) throw new UsageError(`no cluster submitted from ${file} makes the jobs it makes now (boinc-gahp status lists the clusters)`);
  const project = projectOfFile(g, file, desc);
  checks.project?.(project.url);
  checkFilesOf(file, desc, g, known);

  const toSubmit = !known || Object.values(known.batches).some((b) => !known.submitted.includes(b) && !known.retired.includes(b));
  if (toSubmit) await checks.beforeSubmitting?.(desc, project, file);

  let made = false;
  const rec = await store.take(abs, (recs) => (fresh ? undefined : resumed(recs)), (cluster, createdAt) => {
    made = true;
    const batches: Record<string, string> = {};
    for (const p of desc.procs) batches[p.app] ??= batchName(stateDir, p.app, createdAt);
    return {
      key, jobsDigest: matches.digestAt(here) ?? jobsDigest(desc), submitFile: abs, cwd: here,
      projectUrl: project.url, authenticatorFile: project.authenticatorFile,
      cluster, createdAt, batches, submitted: [], retired: [], fetched: [], failed: {}, leaseUntil: {},
    };
  });
  if (rec.cluster !== tentativeCluster || (rec.cwd ?? here) !== cwd) {
    // Another submit took the cluster id we parsed with: expand $(Cluster) again.
    desc = parseSubmitDescription(text, { file, cwd: rec.cwd ?? here, cluster: rec.cluster });
  }
  if (rec.cwd === undefined) {
    // A record of an earlier version, matched as it matched then: kept from now on as this version keeps its own.
    rec.cwd = here;
    rec.jobsDigest = matches.digestAt(here) ?? rec.jobsDigest;
  }
  rec.projectUrl ??= project.url;
  rec.authenticatorFile ??= project.authenticatorFile;
  if (made || store.loadJobs(rec.cluster) === undefined) await store.saveJobs(rec.cluster, { cwd: rec.cwd, procs: desc.procs });
  if (made) startErrorFiles(file, desc.procs);
  if (rec.cwd !== here) {
    process.stderr.write(`note: relative paths in ${file} are read from ${rec.cwd}, where cluster ${rec.cluster} was submitted\n`);
  }
  return finishPlan({ file, stateDir, project, store, rec, procs: desc.procs, byId: false, others: store.forFile(abs).filter((r) => r.cluster !== rec.cluster && unfinished(r)) });
}

/** `submit --cluster N`: the cluster's jobs as kept when it was made, whatever became of its file since. */
async function planCluster(g: GlobalOptions, stateDir: string, store: SubmitStore, cluster: number, checks: PlanChecks): Promise<SubmitPlan> {
  const rec = store.byCluster(cluster);
  if (!rec) throw new UsageError(`no cluster ${cluster} in the state directory ${stateDir} (boinc-gahp status lists the clusters there)`);
  const file = rec.submitFile;
  let procs = store.loadJobs(cluster)?.procs;
  if (procs === undefined) {
    // Made by an earlier version, which kept no jobs: the file, if it still makes them.
    const text = readSubmitFile(file, file);
    const here = process.cwd();
    const matches = jobsMatcher(text, file, createHash('sha256').update(file).update('\0').update(text).digest('hex').slice(0, 32), here);
    if (!matches(rec)) {
      throw new UsageError(`cluster ${cluster}'s jobs were not kept (it was made by an earlier version) and ${file} no longer makes them: ` +
        `restore the file as it was and run this again, or give the cluster up: ${commandToRun(g, ['cancel', String(cluster)])}`);
    }
    procs = parseSubmitDescription(text, { file, cwd: rec.cwd ?? here, cluster }).procs;
    await store.saveJobs(cluster, { cwd: rec.cwd ?? here, procs });
  }
  const desc: SubmitDescription = { procs, notes: [] };
  const project = projectOfFile({ ...g, projectUrl: g.projectUrl ?? rec.projectUrl, authenticatorFile: g.authenticatorFile ?? rec.authenticatorFile }, file, desc);
  checks.project?.(project.url);
  checkFilesOf(file, desc, g, rec);
  if (Object.values(rec.batches).some((b) => !rec.submitted.includes(b) && !rec.retired.includes(b))) await checks.beforeSubmitting?.(desc, project, file);
  rec.projectUrl ??= project.url;
  rec.authenticatorFile ??= project.authenticatorFile;
  const others = store.forFile(file).filter((r) => r !== rec && unfinished(r));
  return finishPlan({ file, stateDir, project, store, rec, procs, byId: true, others });
}

/**
 * `submit --rerun-failed`: the failed jobs of a finished cluster (named by id, or the
 * file's), run again as a new cluster of their own, each job as it was (its outputs go where
 * the first run's would have). A rerun already made is resumed while it is not finished.
 */
async function planRerun(g: GlobalOptions, stateDir: string, store: SubmitStore, target: SubmitTarget, checks: PlanChecks): Promise<SubmitPlan> {
  const first = target.cluster !== undefined
    ? await planCluster(g, stateDir, store, target.cluster, {})
    : await planSubmit(g, { file: target.file, fresh: false, existing: true }, {});
  const of = first.rec;
  const again = (extra: string[]) => commandToRun(g, ['submit', '--cluster', String(of.cluster), ...extra]);
  if (of.cancelled) throw new UsageError(`cluster ${of.cluster} was cancelled: it has no failed jobs to run again`);
  if (open(of)) throw new UsageError(`cluster ${of.cluster} is not finished: finish it first (${again([])}), then run its failed jobs again`);
  const failed = [...first.procByJob].filter(([job]) => of.failed[job] !== undefined).map(([, p]) => p);
  if (failed.length === 0) throw new UsageError(`cluster ${of.cluster} has no failed jobs to run again`);
  const earlier = store.all().filter((r) => r.rerunOf === of.cluster).sort((a, b) => b.cluster - a.cluster)[0];
  if (earlier && open(earlier)) return planCluster(g, stateDir, store, earlier.cluster, checks);
  if (earlier) {
    throw new UsageError(`cluster ${of.cluster}'s failed jobs were run again as cluster ${earlier.cluster}; ` +
      `to run the jobs that failed there again, run: ${commandToRun(g, ['submit', '--cluster', String(earlier.cluster), '--rerun-failed'])}`);
  }
  const desc: SubmitDescription = { procs: failed, notes: [] };
  checks.project?.(first.project.url);
  checkFilesOf(first.file, desc, g, undefined);
  await checks.beforeSubmitting?.(desc, first.project, first.file);
  const rec = await store.take(of.submitFile, () => undefined, (cluster, createdAt) => {
    const batches: Record<string, string> = {};
    for (const p of failed) batches[p.app] ??= batchName(stateDir, p.app, createdAt);
    return {
      key: '', submitFile: of.submitFile, cwd: of.cwd ?? process.cwd(), rerunOf: of.cluster,
      projectUrl: first.project.url, authenticatorFile: first.project.authenticatorFile,
      cluster, createdAt, batches, submitted: [], retired: [], fetched: [], failed: {}, leaseUntil: {},
    };
  });
  await store.saveJobs(rec.cluster, { cwd: rec.cwd!, procs: failed });
  startErrorFiles(first.file, failed);
  return finishPlan({ file: first.file, stateDir, project: first.project, store, rec, procs: failed, byId: true, others: [] });
}

/**
 * A new cluster's error files start empty, as condor_submit opens them (O_TRUNC) when it
 * queues a job: the stderr a fetch appends is then this cluster's alone, not added to an
 * earlier cluster's file of the same name.
 */
function startErrorFiles(file: string, procs: SubmitProc[]): void {
  const started = new Set<string>();
  for (const p of procs) {
    const { stderrPath } = fetchOutputSpec(p);
    if (stderrPath === '/dev/null') continue;
    const dest = path.isAbsolute(stderrPath) ? stderrPath : path.join(p.iwd, stderrPath);
    if (started.has(dest)) continue;
    started.add(dest);
    try {
      fs.writeFileSync(dest, '');
    } catch (err) {
      throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: its error file ${dest} could not be started: ${(err as Error).message}`);
    }
  }
}

/** The plan of a cluster chosen: failed batches renamed, its jobs named. */
async function finishPlan(p: Omit<SubmitPlan, 'procsByApp' | 'procByJob'> & { procs: SubmitProc[] }): Promise<SubmitPlan> {
  const { procs: all, ...plan } = p;
  await renameFailedBatches(plan.rec, plan.stateDir, plan.store);
  const procsByApp = new Map<string, SubmitProc[]>();
  const procByJob = new Map<string, SubmitProc>();
  for (const proc of all) {
    let procs = procsByApp.get(proc.app);
    if (!procs) procsByApp.set(proc.app, (procs = []));
    procs.push(proc);
    const batch = (plan.rec.batches[proc.app] ??= batchName(plan.stateDir, proc.app, plan.rec.createdAt));
    procByJob.set(jobName(batch, plan.rec.cluster, proc.proc), proc);
  }
  return { ...plan, procsByApp, procByJob };
}

function readSubmitFile(abs: string, file: string): string {
  try {
    return fs.readFileSync(abs, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/**
 * Whether a record is of the jobs this text makes: relative paths read from the directory
 * the record was submitted from, `$(Cluster)` a placeholder. Records of earlier versions (no
 * directory kept) are matched as those versions matched them. The digests are memoized per
 * directory.
 */
function jobsMatcher(text: string, file: string, key: string, here: string): ((rec: SubmitRecord) => boolean) & { digestAt: (cwd: string) => string | undefined } {
  const digests = new Map<string, string | undefined>();
  const digestAt = (cwd: string): string | undefined => {
    if (!digests.has(cwd)) {
      let d: string | undefined;
      try {
        d = jobsDigest(parseSubmitDescription(text, { file, cwd, cluster: CLUSTER_PLACEHOLDER }));
      } catch {
        // (From another directory the file may not read: a `queue from` file missing there.)
        d = undefined;
      }
      digests.set(cwd, d);
    }
    return digests.get(cwd);
  };
  const legacy = (rec: SubmitRecord): boolean => {
    if (rec.key === key) return true;
    try {
      return rec.jobsDigest === jobsDigest(parseSubmitDescription(text, { file, cwd: here, cluster: rec.cluster }));
    } catch {
      return false;
    }
  };
  const matches = (rec: SubmitRecord): boolean =>
    rec.rerunOf === undefined && (rec.cwd === undefined ? legacy(rec) : rec.jobsDigest !== undefined && rec.jobsDigest === digestAt(rec.cwd));
  return Object.assign(matches, { digestAt });
}

/**
 * The job files checked (checkJobFiles); for a cluster resumed, a failure says that its
 * results wait on the server, or a person may give them up.
 */
function checkFilesOf(file: string, desc: SubmitDescription, g: GlobalOptions, known: SubmitRecord | undefined): void {
  try {
    checkJobFiles(file, desc, g.uploadMaxFilesize ?? PHP_DEFAULT_UPLOAD_LIMITS.uploadMaxFilesize);
  } catch (err) {
    if (!(err instanceof SubmitFileError) || !known?.submitted.length) throw err;
    throw new SubmitFileError(file, err.line, `${err.detail}; the cluster's results stay on the server until fetched: fix this and run the same command again`);
  }
}

/**
 * A batch whose BOINC_SUBMIT failed was withdrawn on the server (retired, it takes no more
 * jobs: gahp/commands/submit.ts), as the gridmanager's batch is after an error: this run
 * puts its jobs into a new batch, its name recorded before anything is submitted under it.
 */
async function renameFailedBatches(rec: SubmitRecord, stateDir: string, store: SubmitStore): Promise<void> {
  let renamed = false;
  for (const [app, old] of Object.entries(rec.batches)) {
    if (rec.submitErrors?.[old] === undefined || rec.submitted.includes(old)) continue;
    let t = Math.floor(Date.now() / 1000);
    let name = batchName(stateDir, app, t);
    while (Object.values(rec.batches).includes(name) || rec.submitErrors[name] !== undefined) name = batchName(stateDir, app, ++t);
    rec.batches[app] = name;
    renamed = true;
  }
  if (renamed) await store.save(rec);
}

/**
 * What the file asks BOINC to do, job by job, without where in the file it is said: equal
 * for two texts that differ only in comments or blank lines.
 */
function jobsDigest(desc: SubmitDescription): string {
  const jobs = desc.procs.map((p) => ({ ...p, queueLine: 0 }));
  return createHash('sha256').update(JSON.stringify(jobs)).digest('hex').slice(0, 32);
}

/** One project and account for the whole file: from the file, else from the options. */
function projectOfFile(g: GlobalOptions, file: string, desc: SubmitDescription): { url: string; authenticator: string; authenticatorFile: string } {
  const urls = new Set(desc.procs.map((p) => p.projectUrl).filter((u): u is string => !!u));
  const auths = new Set(desc.procs.map((p) => p.authenticatorFile).filter((u): u is string => !!u));
  if (urls.size > 1) throw new UsageError(`${file}: jobs name different grid_resource URLs; submit one project per file`);
  if (auths.size > 1) throw new UsageError(`${file}: jobs name different boinc_authenticator_file values; use one per file`);
  const authenticatorFile = [...auths][0] ?? g.authenticatorFile;
  const project = projectFrom({ ...g, projectUrl: g.projectUrl ?? [...urls][0], authenticatorFile }, {
    // (A URL in the file was checked when the file was read.)
    url: g.projectUrl !== undefined ? CLI_SETTING.url : `grid_resource in ${file} ("boinc <url>") or ${CLI_SETTING.url}`,
    authenticatorFile: `boinc_authenticator_file in ${file} or ${CLI_SETTING.authenticatorFile}`,
  });
  return { ...project, authenticatorFile: path.resolve(authenticatorFile!) };
}

/**
 * Arguments BOINC's create_work cannot carry (a blank, a quote: gahp/staging/validate.ts)
 * are refused here, before a cluster id is taken, with what to do instead.
 */
function checkArguments(file: string, desc: SubmitDescription): void {
  for (const p of desc.procs) {
    p.args.forEach((arg, i) => {
      const problem = argumentProblem(arg);
      if (problem === undefined) return;
      const shown = JSON.stringify(arg.length > 60 ? `${arg.slice(0, 60)}...` : arg);
      throw new SubmitFileError(file, p.queueLine,
        `job ${p.proc}: argument ${i + 1} ${shown} ${problem}; put the value in an input file (transfer_input_files) and pass the file's name instead`);
    });
  }
}

/**
 * Like condor_submit: every job's directory and input file must exist now. An input over
 * the project's upload_max_filesize (as the GAHP is told it) is refused here too: the GAHP
 * would leave its job out of the batch, and that job's fetch would fail (it is meant for
 * HTCondor's hold; docs/gahp-protocol.md, "A job refused alone"), so this run would end
 * with a job it can neither fetch nor ever finish.
 */
function checkJobFiles(file: string, desc: SubmitDescription, uploadMaxFilesize: number): void {
  for (const p of desc.procs) {
    if (!fs.statSync(p.iwd, { throwIfNoEntry: false })?.isDirectory()) {
      throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: initialdir ${p.iwd} is not an existing directory`);
    }
    for (const i of p.inputs) {
      const st = fs.statSync(i.src, { throwIfNoEntry: false });
      if (!st) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: input file ${i.src} does not exist`);
      if (!st.isFile()) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: input ${i.src} is not a regular file`);
      // Without post_max_size, the size of an upload request is not asked for.
      const tooBig = uploadLimitProblem({ path: i.src, size: st.size, physName: '' }, { uploadMaxFilesize }, { with: () => 0 });
      if (tooBig !== undefined) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: ${tooBig}`);
    }
    for (const dest of outputFiles(p)) {
      const why = unwritableDir(path.dirname(dest)) ?? (fs.statSync(dest, { throwIfNoEntry: false })?.isDirectory() ? 'it is a directory' : undefined);
      if (why !== undefined) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: its output ${dest} could not be written: ${why}`);
    }
    // ALL: the outputs go into the iwd under the app's names.
    const why = fetchOutputSpec(p).mode === 'ALL' ? unwritableDir(p.iwd) : undefined;
    if (why !== undefined) throw new SubmitFileError(file, p.queueLine, `job ${p.proc}: its outputs could not be written: ${why}`);
  }
}

/**
 * The files a job's fetch writes (fetchOutputSpec's destinations and its stderr, under the
 * iwd), so that one that cannot be written is refused before the job runs instead of
 * failing its fetch after.
 */
function outputFiles(p: SubmitProc): string[] {
  const spec = fetchOutputSpec(p);
  const under = (d: string) => (path.isAbsolute(d) ? d : path.join(p.iwd, d));
  const files = spec.specs.map(([, dst]) => under(dst));
  if (spec.stderrPath !== '/dev/null') files.push(under(spec.stderrPath));
  return files;
}

/** Why files cannot be written into `dir` (missing, not a directory, not writable), or undefined. */
function unwritableDir(dir: string): string | undefined {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  if (!st) return `the directory ${dir} does not exist`;
  if (!st.isDirectory()) return `${dir} is not a directory`;
  try {
    fs.accessSync(dir, fs.constants.W_OK);
  } catch {
    return `the directory ${dir} is not writable by this user`;
  }
  return undefined;
}
