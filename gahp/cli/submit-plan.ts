/**
 * The first step of `boinc-gahp submit` (submit.ts): everything decided before a GAHP is
 * started. The submit file is read and checked, its project picked, its cluster id taken
 * (or found from an earlier run, submit-state.ts) and its jobs named as HTCondor's
 * gridmanager names them (boincjob.cpp): one batch per app `condor#<schedd>#<app>#<time>`,
 * jobs `<batch>#<cluster>.<proc>`. Nothing is sent anywhere.
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
import { SubmitStore, unfinished, type SubmitRecord } from './submit-state.js';
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

function batchName(stateDir: string, app: string, createdAt: number): string {
  return `condor#${scheddName(stateDir)}#${app}#${createdAt}`;
}

function jobName(batch: string, cluster: number, proc: number): string {
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

/** Everything decided before a GAHP is started. */
export interface SubmitPlan {
  /** The submit file as named on the command line (for messages). */
  file: string;
  stateDir: string;
  project: { url: string; authenticator: string };
  store: SubmitStore;
  rec: SubmitRecord;
  procsByApp: Map<string, SubmitProc[]>;
  /** Job name -> its proc, every job of the file. */
  procByJob: Map<string, SubmitProc>;
}

/** Checks of the caller's, made before a cluster id is taken for jobs still to submit. */
export interface PlanChecks {
  /** E.g. whether the options suit this project (the poll interval, submit.ts). */
  project?: (url: string) => void;
  /** E.g. asking the project whether the apps make the outputs named (submit.ts). */
  beforeSubmitting?: (desc: SubmitDescription, project: { url: string; authenticator: string }) => Promise<void>;
}

/**
 * Reads and checks the submit file, picks its project, and takes its cluster id (or finds
 * the one an earlier run took). Nothing is sent anywhere but by `checks`.
 */
export async function planSubmit(g: GlobalOptions, file: string, fresh: boolean, checks: PlanChecks = {}): Promise<SubmitPlan> {
  const stateDir = g.stateDir ?? defaultStateDir();
  const abs = path.resolve(file);
  let text: string;
  try {
    text = fs.readFileSync(abs, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const key = createHash('sha256').update(abs).update('\0').update(text).digest('hex').slice(0, 32);
  const store = new SubmitStore(stateDir);
  // submit's own records have no fallback (docs/storage.md, "Making directories"): they are
  // what makes a re-run resume, so an unusable state directory is a configuration error.
  const why = unusableStateDir(store.dir);
  if (why !== undefined) {
    throw new UsageError(`the state directory ${stateDir} cannot be used: ${why}; give --state-dir (or BOINC_GAHP_STATE_DIR) a directory this user can create and write`);
  }
  const latest = fresh ? undefined : store.latestFor(abs);
  // Parse with the cluster id this file has (or would get) before taking one for good:
  // a broken file must not use up cluster ids.
  const tentativeCluster = latest?.cluster ?? store.nextCluster;
  let desc = parseSubmitDescription(text, { file, cwd: process.cwd(), cluster: tentativeCluster });
  for (const note of desc.notes) process.stderr.write(`note: ${note}\n`);
  if (desc.procs.length === 0) throw new SubmitFileError(file, 1, 'the queue statements make no jobs');
  checkArguments(file, desc);
  // The same text, or an edit that changes no job (a comment, a blank line): the same cluster.
  const digest = jobsDigest(desc);
  const resumes = (r: SubmitRecord) => r.jobsDigest === digest || (r.jobsDigest === undefined && r.key === key);
  const known = latest && resumes(latest) ? latest : undefined;
  if (latest && !known && unfinished(latest)) {
    throw new UsageError(`${file} changed since cluster ${latest.cluster} was submitted from it, and its jobs are not finished: ` +
      `to submit the changed file as a new cluster beside it, run: ${commandToRun(g, ['submit', file, '--new'])}; ` +
      `or cancel cluster ${latest.cluster} first (its jobs aborted, its results given up): ${commandToRun(g, ['cancel', String(latest.cluster)])}`);
  }
  const project = projectOfFile(g, file, desc);
  checks.project?.(project.url);
  try {
    checkJobFiles(file, desc, g.uploadMaxFilesize ?? PHP_DEFAULT_UPLOAD_LIMITS.uploadMaxFilesize);
  } catch (err) {
    // A resumed cluster's results wait on the server: say so, or a person may give them up.
    if (!(err instanceof SubmitFileError) || !known?.submitted.length) throw err;
    throw new SubmitFileError(file, err.line, `${err.detail}; the cluster's results stay on the server until fetched: fix this and run the same command again`);
  }

  const toSubmit = !known || Object.values(known.batches).some((b) => !known.submitted.includes(b) && !known.retired.includes(b));
  if (toSubmit) await checks.beforeSubmitting?.(desc, project);

  const rec = known ?? (await store.take(abs, fresh, resumes, (cluster, createdAt) => {
    const batches: Record<string, string> = {};
    for (const p of desc.procs) batches[p.app] ??= batchName(stateDir, p.app, createdAt);
    return {
      key, jobsDigest: digest, submitFile: abs, projectUrl: project.url, authenticatorFile: project.authenticatorFile,
      cluster, createdAt, batches, submitted: [], retired: [], fetched: [], failed: {}, leaseUntil: {},
    };
  }));
  rec.jobsDigest ??= digest;
  rec.projectUrl ??= project.url;
  rec.authenticatorFile ??= project.authenticatorFile;
  if (rec.cluster !== tentativeCluster) {
    // Another submit took the cluster id we parsed with: expand $(Cluster) again.
    desc = parseSubmitDescription(text, { file, cwd: process.cwd(), cluster: rec.cluster });
  }

  await renameFailedBatches(rec, stateDir, store);
  const procsByApp = new Map<string, SubmitProc[]>();
  const procByJob = new Map<string, SubmitProc>();
  for (const p of desc.procs) {
    let procs = procsByApp.get(p.app);
    if (!procs) procsByApp.set(p.app, (procs = []));
    procs.push(p);
    const batch = (rec.batches[p.app] ??= batchName(stateDir, p.app, rec.createdAt));
    procByJob.set(jobName(batch, rec.cluster, p.proc), p);
  }
  return { file, stateDir, project, store, rec, procsByApp, procByJob };
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
