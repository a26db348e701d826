/**
 * `boinc-gahp submit job.sub`: submits an HTCondor submit description to BOINC through the
 * GAHP protocol, doing what HTCondor's gridmanager would (boincjob.cpp, boincresource.cpp):
 * one batch per app named `condor#<schedd>#<app>#<time>`, jobs `<batch>#<cluster>.<proc>`,
 * BOINC_SUBMIT, a 6-hour lease renewed while waiting, BOINC_QUERY_BATCHES polling,
 * BOINC_FETCH_OUTPUT with the specs HTCondor sends, BOINC_RETIRE_BATCH when all are done.
 *
 * Re-runnable: the cluster id, batch names and jobs are kept in <state-dir>/submit/
 * (submit-state.ts), so running the same file again resumes the cluster whose jobs it makes
 * (waits, fetches what is missing) instead of submitting twice, and `--cluster N` resumes a
 * cluster by its id. `--new` starts a fresh cluster; the older ones stay reachable.
 *
 * The steps: planSubmit() (submit-plan.ts) reads and checks the file and takes its cluster
 * id (no GAHP yet); then a SubmitRun submits the batches not yet submitted, sets their
 * leases, and (unless --no-wait) polls until every batch is retired: each round marks failed
 * jobs, fetches the outputs of done ones, retires finished batches and renews leases.
 */
import * as path from 'node:path';
import type { BoincClient } from '../../boinc-rpc/client.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { describeFailedJobs, type FailedJobReport } from '../failed-job.js';
import { GahpClient, GahpRequestError, GahpResultError } from './gahp-client.js';
import { fetchOutputSpec, SubmitFileError, type SubmitDescription } from './submit-file.js';
import { cliRpcClient, commandToRun, EXIT_FAILED, EXIT_OK, runOptions, type GlobalOptions } from './options.js';
import { ProgressLine, SubmitProgressView } from './progress.js';
import { planSubmit, submitArgs, type SubmitPlan } from './submit-plan.js';
import { readAuthenticatorFile } from '../settings.js';
import { unfinished, type SubmitRecord } from './submit-state.js';
import { errorMessage, sleep } from '../util.js';
import { UsageError } from '../settings.js';
import { asLines } from '../protocol/messages.js';
import { isOutputGone } from '../output/gone.js';

export interface SubmitOptions {
  wait: boolean;
  new?: boolean;
  /** `--cluster N`: the cluster named by its id instead of by its file. */
  cluster?: number;
  /** Submit again the jobs of batches that vanished from the server (the person's word). */
  resubmitVanished?: boolean;
  /** Run the failed jobs of a finished cluster again, as a new cluster. */
  rerunFailed?: boolean;
  poll: number;
  timeout?: number;
  spawn?: boolean;
}

const LEASE_SECONDS = 6 * 3600;
/** Renew when less than this is left (the gridmanager renews every couple of hours). */
const LEASE_RENEW_BELOW = 4 * 3600;
const FETCH_ATTEMPTS = 3;
/** Outputs fetched at once. */
const FETCH_PARALLEL = 4;
/** The shortest poll interval against a project on another machine (checkPollInterval). */
const MIN_POLL_SECONDS = 5;
/** Exit code after Ctrl-C (128 + SIGINT), as shells report it. */
const EXIT_INTERRUPTED = 130;

/** Parses a BOINC_QUERY_BATCHES success (tokens after NULL). */
function parseQueryResult(tokens: string[], nbatches: number): { serverTime: string; batches: Array<Array<[string, string]>> } {
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

const plural = (n: number, word: string, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;

const out = (line: string) => process.stdout.write(line + '\n');

export async function submitCmd(g: GlobalOptions, file: string | undefined, o: SubmitOptions): Promise<number> {
  if ((file === undefined) === (o.cluster === undefined)) {
    throw new UsageError('give the submit file, or --cluster <id> for a cluster by its id (boinc-gahp status lists them), not both');
  }
  if (o.cluster !== undefined && o.new) throw new UsageError('--new submits a file as a new cluster: give the submit file, not --cluster');
  if (o.rerunFailed && o.new) throw new UsageError('--rerun-failed makes a new cluster of the failed jobs already: leave out --new');
  const plan = await planSubmit(g, { file, cluster: o.cluster, fresh: o.new === true, rerunFailed: o.rerunFailed }, {
    project: (url) => checkPollInterval(url, o.poll),
    beforeSubmitting: (desc, project, named) => checkOutputNames(g, named, desc, project),
  });
  const { rec, procsByApp, procByJob } = plan;
  const rerun = rec.rerunOf !== undefined ? ` (the failed jobs of cluster ${rec.rerunOf}, run again)` : '';
  out(`cluster ${rec.cluster}${rerun}: ${plural(procByJob.size, 'job')} in ${plural(procsByApp.size, 'batch', 'batches')} on ${plan.project.url}`);
  // Never stranded: the file's other clusters not finished, each with the command that finishes it.
  for (const other of plan.others) {
    out(`cluster ${other.cluster} (also from ${file ?? plan.file}) is not finished: to finish it, run: ${commandToRun(g, ['submit', '--cluster', String(other.cluster)])}`);
  }
  if (rec.cancelled) {
    out(`cluster ${rec.cluster} was cancelled; ${newClusterHint(g, plan)}`);
    return EXIT_FAILED;
  }
  if ([...procsByApp.keys()].every((app) => rec.retired.includes(rec.batches[app]!))) {
    const rerun = plan.store.all().filter((r) => r.rerunOf === rec.cluster).map((r) => r.cluster).pop();
    const failedHint = !Object.keys(rec.failed).length ? ''
      : rerun !== undefined ? `; its failed jobs were run again as cluster ${rerun}: ${commandToRun(g, ['status', String(rerun)])}`
        : `; to run just its failed jobs again, run: ${commandToRun(g, ['submit', '--cluster', String(rec.cluster), '--rerun-failed'])}`;
    out(`cluster ${rec.cluster} is already complete (batches retired); ${newClusterHint(g, plan)}${failedHint}`);
    return Object.keys(rec.failed).length ? EXIT_FAILED : EXIT_OK;
  }
  return new SubmitRun(plan, g, o).run();
}

/**
 * Each poll asks for the status of every job of the cluster: a project on another machine
 * is asked at most every MIN_POLL_SECONDS. A project on this machine (the test server) may
 * be asked more often.
 */
function checkPollInterval(url: string, poll: number): void {
  if (poll >= MIN_POLL_SECONDS) return;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host === '::1' || /^127\./.test(host)) return;
  throw new UsageError(`--poll ${poll} is too often for ${url}: each poll asks for the status of every job; give --poll ${MIN_POLL_SECONDS} or more`);
}

/**
 * Refuses `transfer_output_files` names the app does not make, before anything is
 * submitted: otherwise every job would run and then fail its fetch. The app's output
 * template is asked with get_templates, read-only, as failed jobs are asked about
 * (docs/architecture.md, "Layers"). An app whose one output is a zip is left alone: the
 * names are its entries, known only when a job has made it.
 */
async function checkOutputNames(g: GlobalOptions, file: string, desc: SubmitDescription, project: { url: string; authenticator: string }): Promise<void> {
  const named = desc.procs.filter((p) => p.transferOutputFiles !== undefined);
  if (named.length === 0) return;
  const rpc = cliRpcClient(g, project);
  try {
    const outputsOf = new Map<string, string[]>();
    for (const p of named) {
      let outputs = outputsOf.get(p.app);
      if (!outputs) {
        try {
          outputs = (await rpc.getTemplates({ appName: p.app })).outputOpenNames;
        } catch (err) {
          throw new Error(`cannot ask ${project.url} for the templates of app ${p.app}: ${errorMessage(err)}`, { cause: err });
        }
        outputsOf.set(p.app, outputs);
      }
      if (outputs.length === 1 && outputs[0]!.toLowerCase().endsWith('.zip')) continue;
      const wrong = p.transferOutputFiles!.find((f) => !outputs.includes(f));
      if (wrong !== undefined) {
        throw new SubmitFileError(file, p.queueLine,
          `job ${p.proc}: transfer_output_files names "${wrong}", which app ${p.app} does not make (its outputs: ${outputs.join(', ') || 'none'}); nothing was submitted`);
      }
    }
  } finally {
    rpc.close();
  }
}

/**
 * The command that runs this submit again: with the options that decide the state directory
 * and the project, or it would not find this cluster and would submit the jobs again. A
 * cluster named by its id is named so again.
 */
function submitCommand(g: GlobalOptions, plan: SubmitPlan, extra: string[] = []): string {
  return commandToRun(g, ['submit', ...(plan.byId ? ['--cluster', String(plan.rec.cluster)] : [plan.file]), ...extra]);
}

/**
 * How to submit the file again as a new cluster: run where the cluster was submitted from
 * (relative paths in the file are read from there).
 */
function newClusterHint(g: GlobalOptions, plan: SubmitPlan): string {
  const cwd = plan.rec.cwd ?? process.cwd();
  if (!plan.byId && cwd === process.cwd()) return `to submit it again as a new cluster, run: ${submitCommand(g, plan, ['--new'])}`;
  return `to submit ${plan.file} again as a new cluster (as it reads now), run: ${commandToRun(g, ['submit', path.resolve(plan.file), '--new'], { cd: cwd })}`;
}

/** What one status poll brought: go on with this round, or ask again after the poll interval. */
type PollOutcome = 'polled' | 'poll-again';

/** One run of a planned submit against a GAHP: submit, then wait, fetch and retire. */
class SubmitRun {
  private readonly client: GahpClient;
  private readonly progress: ProgressLine;
  private readonly stop = new AbortController();
  /** The bars over hashing and uploads of the BOINC_SUBMIT in flight, if shown. */
  private view: SubmitProgressView | undefined;
  /** Last status seen per job. */
  private readonly status = new Map<string, string>();
  private readonly fetchTries = new Map<string, number>();
  /**
   * Done jobs whose fetch failed FETCH_ATTEMPTS times in this run, with the last error: not
   * tried again by this run, and their batches not retired, so the next run fetches them.
   */
  private readonly unfetched = new Map<string, string>();
  private serverTime = '0';
  private readonly rec: SubmitRecord;
  private readonly allJobs: string[];
  /** The batch whose BOINC_SUBMIT is in flight, if one is. */
  private submitting: string | undefined;
  /** When this run began: --timeout counts from here. */
  private readonly started = Date.now();
  /** Made when a job failed (failureRpc). */
  private rpc: BoincClient | undefined;

  constructor(private readonly plan: SubmitPlan, private readonly g: GlobalOptions, private readonly o: SubmitOptions) {
    this.rec = plan.rec;
    this.allJobs = [...plan.procByJob.keys()];
    // Bars over hashing and uploads: on a terminal, with the in-process GAHP only (a child
    // GAHP speaks nothing but the protocol). One BOINC_SUBMIT runs at a time here.
    this.client = o.spawn
      ? GahpClient.spawn(this.childArgs(), { onStderr: (t) => process.stderr.write(t) })
      : GahpClient.inProcess({ ...runOptions({ ...g, stateDir: plan.stateDir }), progress: (e) => this.view?.event(e) });
    this.progress = new ProgressLine(process.stderr, !g.quiet);
  }

  private childArgs(): string[] {
    const g = this.g;
    return [
      '--protocol', '--state-dir', this.plan.stateDir,
      ...(g.log ? ['--log', g.log] : []), ...(g.debug ? ['--debug'] : []),
      ...(g.logLevel ? ['--log-level', g.logLevel] : []),
      ...(g.maxLog !== undefined ? ['--max-log', String(g.maxLog)] : []),
      ...(g.maxNumLog !== undefined ? ['--max-num-log', String(g.maxNumLog)] : []),
      ...(g.proxy !== undefined ? ['--proxy', g.proxy] : []),
      ...(g.noProxy !== undefined ? ['--no-proxy', g.noProxy] : []),
      ...(g.caFile !== undefined ? ['--ca-file', g.caFile] : []),
      ...(g.maxFileUploads !== undefined ? ['--max-file-uploads', String(g.maxFileUploads)] : []),
      ...(g.postMaxSize !== undefined ? ['--post-max-size', String(g.postMaxSize)] : []),
      ...(g.keepFiles !== undefined ? ['--keep-files', g.keepFiles ? 'yes' : 'no'] : []),
      ...(g.uploadMaxFilesize !== undefined ? ['--upload-max-filesize', String(g.uploadMaxFilesize)] : []),
      ...(g.rpcTimeout ? ['--rpc-timeout', String(g.rpcTimeout)] : []),
      // No gridmanager call timeout here: no deadline unless one was asked for.
      '--command-timeout', String(g.commandTimeout ?? 0),
      ...(g.concurrency ? ['--concurrency', String(g.concurrency)] : []),
    ];
  }

  /**
   * Ctrl-C (or SIGTERM): the first stops after the step in flight (a BOINC_SUBMIT goes on to
   * its end, saying so at once); a second stops at once, saying what is left. Either way a
   * resume submits nothing twice (BOINC_SUBMIT is repeat-safe, docs/architecture.md).
   */
  private onSignal = (): void => {
    if (!this.stop.signal.aborted) {
      this.stop.abort();
      if (this.submitting !== undefined) {
        this.progress.log(`stopping once the submit of ${this.submitting} in flight has ended (Ctrl-C again to stop at once)`);
      }
      return;
    }
    this.progress.stop();
    const left = this.submitting !== undefined ? `the submit of ${this.submitting} was cut short (a resume finishes it); ` : '';
    process.stderr.write(`boinc-gahp: stopped at once: ${left}${this.leaseNote()}; to resume (nothing is submitted twice), run: ${submitCommand(this.g, this.plan)}\n`);
    process.exit(EXIT_INTERRUPTED);
  };

  async run(): Promise<number> {
    process.on('SIGINT', this.onSignal);
    process.on('SIGTERM', this.onSignal);
    try {
      await this.client.startup();
      await this.client.selectProject(this.plan.project.url, this.plan.project.authenticator);
      const vanished = this.live().filter((b) => this.rec.vanished?.includes(b));
      if (vanished.length && !this.o.resubmitVanished) return this.reportVanished(vanished[0]!);
      if (vanished.length) {
        // The person's word: the vanished batches' unfinished jobs go to the server again.
        this.rec.submitted = this.rec.submitted.filter((b) => !vanished.includes(b));
        this.rec.vanished = this.rec.vanished!.filter((b) => !vanished.includes(b));
        await this.plan.store.save(this.rec);
      }
      for (const app of this.plan.procsByApp.keys()) {
        const batch = this.rec.batches[app]!;
        if (this.stop.signal.aborted) break;
        if (!this.rec.retired.includes(batch) && !this.rec.submitted.includes(batch)) await this.submitBatch(app);
      }
      for (const batch of this.live()) {
        if (!this.leaseRunsOut(batch)) continue;
        if (this.leaseEnded(batch) && !(await this.onServer(batch))) return this.batchGone(batch);
        await this.setLease(batch);
      }
      await this.renewOtherLeases();
      if (!this.o.wait && !this.stop.signal.aborted) {
        this.progress.stop();
        for (const b of this.live()) out(`batch ${b}`);
        out(this.leaseNote());
        out(`submitted; to wait for the jobs and fetch their outputs, run: ${submitCommand(this.g, this.plan)}`);
        return EXIT_OK;
      }
      return await this.waitForAll();
    } catch (err) {
      this.progress.stop();
      if (err instanceof GahpResultError || err instanceof GahpRequestError) {
        process.stderr.write(`boinc-gahp: ${err instanceof GahpResultError ? err.command + ' failed: ' : ''}${asLines(err.message)}\n`);
        return EXIT_FAILED;
      }
      throw err;
    } finally {
      process.removeListener('SIGINT', this.onSignal);
      process.removeListener('SIGTERM', this.onSignal);
      await this.client.close().catch(() => undefined);
      this.rpc?.close();
    }
  }

  /**
   * What the server keeps of batches no run waits for: each only until its lease runs out
   * (then BOINC deletes it, results and all); every run renews the leases.
   */
  private leaseNote(): string {
    const until = Math.min(...this.live().map((b) => this.rec.leaseUntil[b] ?? Infinity));
    const when = Number.isFinite(until) ? `until ${new Date(until * 1000).toISOString().replace('.000Z', 'Z')}` : 'only for its lease';
    return `the server keeps a batch no run waits for ${when} (its lease, renewed by each run); after that its jobs and results are gone: resume before then`;
  }

  /** Polls until every batch is retired (or interrupted, gone, timed out). */
  private async waitForAll(): Promise<number> {
    const deadline = this.o.timeout !== undefined ? this.started + this.o.timeout * 1000 : Infinity;
    for (;;) {
      if (this.stop.signal.aborted) {
        this.progress.stop();
        out(this.summary());
        out(this.leaseNote());
        out(`interrupted; to resume (nothing is submitted twice), run: ${submitCommand(this.g, this.plan)}`);
        return EXIT_INTERRUPTED;
      }
      if (this.live().length === 0 || this.onlyUnfetchedLeft()) break;
      if (this.cancelledMeanwhile()) return this.report();
      if (Date.now() >= deadline) {
        this.progress.stop();
        process.stderr.write(`boinc-gahp: gave up waiting after ${this.o.timeout} s; ${this.leaseNote()}; to resume, run: ${submitCommand(this.g, this.plan)}\n`);
        return EXIT_FAILED;
      }
      const polled = await this.poll();
      if (typeof polled === 'number') return polled;
      if (polled === 'polled') {
        if (this.cancelledMeanwhile()) return this.report();
        await this.markFailed();
        await this.fetchReady();
        await this.retireFinished();
        if (this.live().length === 0 || this.onlyUnfetchedLeft()) break;
        await this.renewLeases();
        this.showCounts();
      }
      await sleep(Math.max(0, Math.min(this.o.poll * 1000, deadline - Date.now())), this.stop.signal);
    }
    return this.report();
  }

  /** Batches not yet retired. */
  private live(): string[] {
    return [...this.plan.procsByApp.keys()].map((a) => this.rec.batches[a]!).filter((b) => !this.rec.retired.includes(b));
  }

  private jobOf(batch: string, p: { proc: number }): string {
    return `${batch}#${this.rec.cluster}.${p.proc}`;
  }

  private finished(job: string): boolean {
    return this.rec.fetched.includes(job) || this.rec.failed[job] !== undefined;
  }

  /** Whether every job not finished is one whose outputs this run gave up fetching. */
  private onlyUnfetchedLeft(): boolean {
    return this.unfetched.size > 0 && this.allJobs.every((j) => this.finished(j) || this.unfetched.has(j));
  }

  /** Whether the server still has the batch (a status query does not answer "no batch named"). */
  private async onServer(batch: string): Promise<boolean> {
    try {
      await this.client.call('BOINC_QUERY_BATCHES', ['0', '1', batch]);
      return true;
    } catch (err) {
      if (err instanceof GahpResultError && err.missingBatch === batch) return false;
      throw err;
    }
  }

  private leaseEnded(batch: string): boolean {
    return (this.rec.leaseUntil[batch] ?? Infinity) <= Date.now() / 1000;
  }

  /**
   * A batch whose lease ran out is gone from the server, results and all: submitting it
   * again would run every job again behind the person's back. Says so; --new does it when
   * that is wanted.
   */
  private batchGone(batch: string): number {
    this.progress.stop();
    process.stderr.write(`boinc-gahp: batch ${batch} is gone from the server: its lease ran out at ` +
      `${new Date(this.rec.leaseUntil[batch]! * 1000).toISOString().replace('.000Z', 'Z')} with no run to renew it, and its jobs and results went with it; ` +
      `nothing was submitted again. To run the jobs again as a new cluster, run: ${submitCommand(this.g, this.plan, ['--new'])}\n`);
    return EXIT_FAILED;
  }

  private leaseRunsOut(batch: string): boolean {
    return (this.rec.leaseUntil[batch] ?? 0) - Date.now() / 1000 < LEASE_RENEW_BELOW;
  }

  private async submitBatch(app: string): Promise<void> {
    const batch = this.rec.batches[app]!;
    // (Jobs of a vanished batch already fetched or failed are not run again.)
    const procs = this.plan.procsByApp.get(app)!.filter((p) => !this.finished(this.jobOf(batch, p)));
    this.progress.update(`submitting ${plural(procs.length, 'job')} to ${batch} (hashing and uploading inputs)`);
    this.view = this.progress.tty && !this.o.spawn ? new SubmitProgressView(this.progress, `${app}: ${plural(procs.length, 'job')}`) : undefined;
    this.submitting = batch;
    try {
      await this.client.call('BOINC_SUBMIT', submitArgs(batch, app, this.rec.cluster, procs));
    } catch (err) {
      // Kept for `status`, which would otherwise know the batch only as the ledger's 'creating'.
      if (err instanceof GahpResultError) {
        this.rec.submitErrors = { ...this.rec.submitErrors, [batch]: asLines(err.message) };
        await this.plan.store.save(this.rec);
      }
      throw err;
    } finally {
      this.view = undefined;
      this.submitting = undefined;
    }
    if (this.rec.submitErrors) delete this.rec.submitErrors[batch];
    if (!this.rec.submitted.includes(batch)) this.rec.submitted.push(batch);
    await this.plan.store.save(this.rec);
    this.progress.log(`submitted ${batch} (${plural(procs.length, 'job')})`);
    this.progress.update('waiting for the first status');
  }

  private async setLease(batch: string): Promise<void> {
    const until = Math.floor(Date.now() / 1000) + LEASE_SECONDS;
    await this.client.call('BOINC_SET_LEASE', [batch, String(until)]);
    this.rec.leaseUntil[batch] = until;
    await this.plan.store.save(this.rec);
  }

  /** While waiting, a failed renewal is logged and tried again next round. */
  private async renewLeases(): Promise<void> {
    for (const batch of this.live()) {
      if (!this.leaseRunsOut(batch)) continue;
      try {
        await this.setLease(batch);
      } catch (err) {
        this.progress.log(`lease renewal of ${batch} failed (will retry): ${errorMessage(err)}`);
      }
    }
    await this.renewOtherLeases();
  }

  /**
   * The other clusters of this state directory not finished (e.g. one beside which `--new`
   * made this one), on this project and account: their leases are renewed too, so that no
   * cluster's results go while any run is about. A lease that ended is left: that batch is
   * gone, which its own resume says.
   */
  private async renewOtherLeases(): Promise<void> {
    const now = Date.now() / 1000;
    const { url, authenticatorFile } = this.plan.project;
    for (const other of this.plan.store.allNow()) {
      if (other.cluster === this.rec.cluster || !unfinished(other)) continue;
      if (other.projectUrl !== url || other.authenticatorFile !== authenticatorFile) continue;
      for (const batch of other.submitted) {
        const until = other.leaseUntil[batch] ?? 0;
        if (other.retired.includes(batch) || other.vanished?.includes(batch) || until <= now || until - now >= LEASE_RENEW_BELOW) continue;
        const renewed = Math.floor(now) + LEASE_SECONDS;
        try {
          await this.client.call('BOINC_SET_LEASE', [batch, String(renewed)]);
        } catch (err) {
          this.progress.log(`lease renewal of ${batch} (cluster ${other.cluster}) failed (will retry): ${errorMessage(err)}`);
          continue;
        }
        await this.plan.store.update(other.cluster, (r) => {
          if ((r.leaseUntil[batch] ?? 0) >= renewed) return false;
          r.leaseUntil[batch] = renewed;
          return true;
        });
      }
    }
  }

  /**
   * The server refuses the account ("bad authenticator": for good, not a passing failure).
   * The authenticator file is read again, once: a corrected one is used from now on;
   * otherwise the wait ends, saying what to fix.
   */
  private async accountRefused(err: GahpResultError): Promise<PollOutcome | number> {
    const { url, authenticatorFile } = this.plan.project;
    let reread: string | undefined;
    try {
      reread = readAuthenticatorFile(authenticatorFile).authenticator;
    } catch {
      reread = undefined;
    }
    if (reread !== undefined && reread !== this.plan.project.authenticator) {
      this.progress.log(`${url} refused the account: bad authenticator; read ${authenticatorFile} again: a new authenticator, used from now on`);
      this.plan.project.authenticator = reread;
      await this.client.selectProject(url, reread);
      this.rpc?.close();
      this.rpc = undefined;
      return 'poll-again';
    }
    this.progress.stop();
    const why = asLines(err.message).replace(/^.*?(bad authenticator)/s, '$1');
    process.stderr.write(`boinc-gahp: ${url} refuses the account: ${why} (the one in ${authenticatorFile}, read again); ` +
      `put the account's authenticator there and resume: ${submitCommand(this.g, this.plan)}\n`);
    return EXIT_FAILED;
  }

  /**
   * A batch the server no longer has while its lease ran: removed there, or the server
   * restored from a backup. Its jobs are not submitted again without the person's word:
   * the command that does it is named.
   */
  private reportVanished(batch: string): number {
    this.progress.stop();
    const left = this.allJobs.filter((j) => this.rec.batches[this.plan.procByJob.get(j)!.app] === batch && !this.finished(j)).length;
    const them = left === 1 ? 'it' : 'them';
    process.stderr.write(`boinc-gahp: batch ${batch} vanished from the server before its lease ended (removed there, or the server restored from an earlier backup): ` +
      `its ${plural(left, 'unfinished job')} ${left === 1 ? 'is' : 'are'} not on the server; nothing was submitted again. ` +
      `To submit ${them} again, run: ${submitCommand(this.g, this.plan, ['--resubmit-vanished'])}\n`);
    return EXIT_FAILED;
  }

  /** Whether `boinc-gahp cancel` gave this cluster up while this run waited. */
  private cancelledMeanwhile(): boolean {
    if (!this.rec.cancelled && this.plan.store.current(this.rec.cluster)?.cancelled) this.rec.cancelled = true;
    return this.rec.cancelled === true;
  }

  /**
   * One BOINC_QUERY_BATCHES of the live batches, from the last server_time (passed on
   * unchanged, as the gridmanager does: the GAHP covers BOINC's whole-second mod_time).
   * A number is the exit code the run ends with.
   */
  private async poll(): Promise<PollOutcome | number> {
    const batches = this.live();
    let result: ReturnType<typeof parseQueryResult>;
    try {
      const tokens = await this.client.call('BOINC_QUERY_BATCHES', [this.serverTime, String(batches.length), ...batches]);
      result = parseQueryResult(tokens, batches.length);
    } catch (err) {
      if (err instanceof GahpRequestError) throw err;
      if (err instanceof GahpResultError && err.accountRefused) return this.accountRefused(err);
      const missing = err instanceof GahpResultError ? err.missingBatch : undefined;
      if (missing === undefined || !this.live().includes(missing)) {
        this.progress.log(`status query failed (will retry): ${errorMessage(err)}`);
        return 'poll-again';
      }
      if (this.leaseEnded(missing)) return this.batchGone(missing);
      // Recorded as submitted (its BOINC_SUBMIT succeeded), its lease still running: removed
      // on the server, or the server restored from a backup. Said, and kept so.
      this.rec.vanished = [...(this.rec.vanished ?? []).filter((b) => b !== missing), missing];
      await this.plan.store.save(this.rec);
      return this.reportVanished(missing);
    }
    this.serverTime = result.serverTime;
    for (const jobs of result.batches) for (const [j, s] of jobs) this.status.set(j, s);
    return 'polled';
  }

  /**
   * Jobs BOINC reports as ERROR are failed, with what the server reports of them (exit
   * status, or aborted on the server: gahp/failed-job.ts, one query per batch). When the
   * server cannot be reached they wait for the next round.
   */
  private async markFailed(): Promise<void> {
    const byBatch = new Map<string, string[]>();
    for (const j of this.allJobs) {
      if (this.finished(j) || this.status.get(j) !== 'ERROR') continue;
      const batch = this.rec.batches[this.plan.procByJob.get(j)!.app]!;
      byBatch.set(batch, [...(byBatch.get(batch) ?? []), j]);
    }
    let changed = false;
    for (const [batch, jobs] of byBatch) {
      let reports: Map<string, FailedJobReport> | undefined;
      let unknown = 'reason unknown';
      try {
        reports = await describeFailedJobs(this.failureRpc(), batch, jobs, { signal: this.stop.signal });
      } catch (err) {
        if (this.stop.signal.aborted) break;
        if (err instanceof BoincRpcError && err.kind === 'transport') {
          this.progress.log(`asking why jobs of ${batch} failed did not work (will retry): ${errorMessage(err)}`);
          continue;
        }
        unknown = `reason unknown: ${errorMessage(err)}`;
      }
      for (const j of jobs) {
        this.rec.failed[j] = `BOINC reports ERROR: ${reports?.get(j)?.text ?? unknown}`;
        this.progress.log(`job ${this.rec.cluster}.${this.plan.procByJob.get(j)!.proc} failed on BOINC: ${this.rec.failed[j]}`);
        changed = true;
      }
    }
    if (changed) await this.plan.store.save(this.rec);
  }

  /**
   * The RPC client that asks why jobs failed. The protocol has no command for that (the
   * gridmanager learns only ERROR), so this is the one question submit asks the server
   * itself, read-only, with the GAHP's network settings (docs/architecture.md, "Layers").
   */
  private failureRpc(): BoincClient {
    this.rpc ??= cliRpcClient(this.g, this.plan.project);
    return this.rpc;
  }

  private async fetchReady(): Promise<void> {
    const ready = this.allJobs.filter((j) => !this.finished(j) && !this.unfetched.has(j) && this.status.get(j) === 'DONE');
    for (let i = 0; i < ready.length; i += FETCH_PARALLEL) {
      if (this.stop.signal.aborted) break;
      await Promise.all(ready.slice(i, i + FETCH_PARALLEL).map((j) => this.fetchJob(j)));
      const fetchedNow = this.allJobs.filter((j) => this.finished(j)).length;
      this.progress.update(`fetching outputs: ${fetchedNow}/${this.allJobs.length} jobs finished`, fetchedNow, this.allJobs.length);
    }
  }

  /**
   * BOINC_FETCH_OUTPUT with HTCondor's specs. A job whose fetch failed FETCH_ATTEMPTS times
   * (a directory gone, a full disk, the project's download script down) is left for the next
   * run: its results stay on the server, never given up for a failure here.
   */
  private async fetchJob(job: string): Promise<void> {
    const p = this.plan.procByJob.get(job)!;
    const spec = fetchOutputSpec(p);
    try {
      const r = await this.client.call('BOINC_FETCH_OUTPUT', [job, spec.iwd, spec.stderrPath, spec.mode, String(spec.specs.length), ...spec.specs.flat()]);
      this.rec.fetched.push(job);
      if (r[0] !== '0') this.progress.log(`job ${this.rec.cluster}.${p.proc} finished with exit status ${r[0]}`);
    } catch (err) {
      if (isOutputGone(errorMessage(err))) {
        // Deleted or moved by the project: the job failed, no later run can fetch it.
        this.rec.failed[job] = `finished on BOINC, but its outputs are lost: ${errorMessage(err)}`;
        this.progress.log(`job ${this.rec.cluster}.${p.proc} failed: ${this.rec.failed[job]}`);
        await this.plan.store.save(this.rec);
        return;
      }
      const n = (this.fetchTries.get(job) ?? 0) + 1;
      this.fetchTries.set(job, n);
      if (n >= FETCH_ATTEMPTS) {
        this.unfetched.set(job, errorMessage(err));
        this.progress.log(`job ${this.rec.cluster}.${p.proc}: fetching its outputs failed: ${errorMessage(err)}`);
      }
      return;
    }
    await this.plan.store.save(this.rec);
  }

  /** Retires each batch whose jobs are all finished (as the gridmanager does at the last job). */
  private async retireFinished(): Promise<void> {
    for (const app of this.plan.procsByApp.keys()) {
      const batch = this.rec.batches[app]!;
      if (this.rec.retired.includes(batch)) continue;
      const jobs = this.allJobs.filter((j) => this.plan.procByJob.get(j)!.app === app);
      if (!jobs.every((j) => this.finished(j))) continue;
      try {
        await this.client.call('BOINC_RETIRE_BATCH', [batch]);
      } catch (err) {
        this.progress.log(`retiring ${batch} failed (ignored, as HTCondor does): ${errorMessage(err)}`);
      }
      this.rec.retired.push(batch);
      await this.plan.store.save(this.rec);
    }
  }

  /** Jobs by what is known of them: fetched, finished on BOINC (not fetched), running, waiting, failed. */
  private counts(): { done: number; finished: number; running: number; waiting: number; failed: number } {
    const counts = { done: 0, finished: 0, running: 0, waiting: 0, failed: 0 };
    for (const j of this.allJobs) {
      const s = this.status.get(j);
      if (this.rec.fetched.includes(j)) counts.done++;
      else if (this.rec.failed[j] !== undefined) counts.failed++;
      else if (s === 'DONE') counts.finished++;
      else if (s === 'IN_PROGRESS') counts.running++;
      else counts.waiting++;
    }
    return counts;
  }

  private showCounts(): void {
    const c = this.counts();
    const finished = c.finished ? `${c.finished} finished (outputs not fetched yet), ` : '';
    this.progress.update(`${this.allJobs.length} jobs: ${c.done} done, ${finished}${c.running} running, ${c.waiting} waiting, ${c.failed} failed`,
      c.done + c.failed, this.allJobs.length);
  }

  /** Where the cluster stands, for the last lines of a run that stops before its end. */
  private summary(): string {
    const c = this.counts();
    const finished = c.finished ? `; ${c.finished} finished on BOINC, outputs not fetched yet` : '';
    return `cluster ${this.rec.cluster}: ${plural(c.done, 'job')} done, outputs fetched${finished}; ${c.running + c.waiting} not finished; ${c.failed} failed`;
  }

  private report(): number {
    this.progress.stop();
    if (this.cancelledMeanwhile()) {
      const given = this.allJobs.filter((j) => !this.rec.fetched.includes(j)).length;
      out(`cluster ${this.rec.cluster} was cancelled (boinc-gahp cancel) while this run waited: ${plural(this.rec.fetched.length, 'job')} done, outputs fetched; ${given} cancelled`);
      return EXIT_FAILED;
    }
    const failed = Object.entries(this.rec.failed);
    const unfetched = this.unfetched.size ? `; ${this.unfetched.size} done, outputs not fetched yet` : '';
    out(`cluster ${this.rec.cluster}: ${plural(this.rec.fetched.length, 'job')} done, outputs fetched${unfetched}; ${failed.length} failed`);
    for (const [j, why] of failed) out(`  ${j}: ${why}`);
    if (this.unfetched.size) this.reportUnfetched();
    return failed.length || this.unfetched.size ? EXIT_FAILED : EXIT_OK;
  }

  /** What to fix, and that running the same command again fetches the outputs kept on the server. */
  private reportUnfetched(): void {
    const errors = new Map<string, string[]>();
    for (const [j, why] of this.unfetched) errors.set(why, [...(errors.get(why) ?? []), `${this.rec.cluster}.${this.plan.procByJob.get(j)!.proc}`]);
    const warn = (line: string) => process.stderr.write(`boinc-gahp: ${line}\n`);
    warn(`the outputs of ${plural(this.unfetched.size, 'finished job')} could not be fetched:`);
    for (const [why, jobs] of errors) warn(`  ${jobs.length > 3 ? `${jobs.slice(0, 3).join(', ')} and ${jobs.length - 3} more` : jobs.join(', ')}: ${why}`);
    const until = Math.min(...this.live().map((b) => this.rec.leaseUntil[b] ?? Infinity));
    const kept = Number.isFinite(until) ? ` until ${new Date(until * 1000).toISOString().replace('.000Z', 'Z')} (each run renews the lease)` : '';
    // Kept means marked no_delete (--keep-files, the default); without it the project's
    // file_deleter may remove them meanwhile, and a fetch then says they are gone.
    const keeping = this.g.keepFiles !== false;
    warn(`their results ${keeping ? 'are kept' : 'stay unless the project deletes them'} on the server${kept}, their batch not retired; fix what is said above ` +
      `(a missing or unwritable directory, a full disk, the project's download script) and run the same command again: it fetches ${keeping ? 'them' : 'those still there'}: ${submitCommand(this.g, this.plan)}`);
  }
}
