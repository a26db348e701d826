/**
 * BOINC_FETCH_OUTPUT <reqid> <job_name> <iwd> <stderr_path> <ALL|SOME> <nspecs> (<src_name> <dst>)...
 *
 * Gets the job's output template and its completed instance, then:
 * - ALL: every output file into iwd under its open_name, except that a file named by a
 *   spec goes to the spec's dst instead (the specs act as renames);
 * - SOME: only the files named by the specs, each to its dst;
 * - a single `.zip` output is downloaded and unpacked into iwd (ALL: every entry; SOME:
 *   the named entries), entries that would land outside iwd refused; a spec naming the
 *   zip itself gets the archive.
 * A relative dst is under iwd; an absolute one is used as is. The instance's stderr is
 * appended to stderr_path (relative = under iwd; `/dev/null` or empty = nowhere).
 *
 * With transfer_output_files, a job whose ad has `output` set gets two more specs from the
 * gridmanager (BoincJob::BuildOutputInfo, docs/gahp-protocol.md): (basename(Out), Out) and,
 * when Err differs, (basename(Err), Err), Err being `/dev/null` when the job has none. A
 * BOINC job has no stdout, and its stderr goes to stderr_path already: so the last spec,
 * when it is (basename(stderr_path), stderr_path), is the stderr pair and is skipped, and
 * the spec before it, when it is (basename(d), d), is the stdout pair: fetched when the app
 * has an output of that name, skipped otherwise. Any other spec naming a file the job does
 * not have fails the fetch.
 *
 * After a job both of HTCondor's files exist: the stdout pair's file, when the app has no
 * such output, and the stderr file, when BOINC's stderr is empty, are created empty (unless
 * there already).
 *
 * Where the files come from (gahp/output/job-outputs.ts; docs/boinc-server.md,
 * "Batch-collect projects: get_output3.php"): get_output.php, and where that answers `ERROR:
 * no such file`, the batch-collect location through get_output3.php with the authenticator
 * as cookie: get_file where BOINC's name check takes the job's name, else the batch's zip,
 * fetched once per batch and kept in the state directory until its jobs are placed
 * (docs/storage.md, "Batch-collect zips"). Which of the two an app uses is learnt and
 * remembered per project and app, so later fetches go to the right page first. A
 * `<gzip_when_done/>` output is unpacked: the file is the one the job wrote.
 *
 * Everything is downloaded to hidden temp files beside the destinations first and renamed
 * into place only when all are complete: an error (an `ERROR: ` body, a refused zip, a
 * missing file, a full disk) writes nothing, and a kill -9 never leaves a partial file
 * under a destination name. A file that cannot be written (ENOSPC, EDQUOT, EROFS...) is
 * named in the error by its destination, with the errno. No shell: names land literally
 * whatever they contain.
 *
 * The template: for a job of a batch the ledger recorded, the app's answer kept from an
 * earlier fetch when it fits (gahp/app-templates.ts); a fetch that fails with it for a reason
 * other than the network, the disk or a cancel asks again once and, when the outputs
 * differ, starts over with the new answer. For any other job, get_templates by job name.
 * So a fetch makes one query_completed_job and one download per output file (a batch-collect
 * app's: get_file each, or its share of one zip per batch), and
 * get_templates about once per app and batch (docs/boinc-server.md, "Templates kept between
 * fetches").
 *
 * A job the ledger records as refused by its BOINC_SUBMIT (never sent to BOINC) fails at
 * once with the reason, without asking the server.
 *
 * Success: `NULL <exit_status> <wallclock> <cpu>` (exactly 4 tokens after the reqid).
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { AsyncCommand, HandlerContext } from '../protocol/commands.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import type { AppTemplates, BoincRpc, CompletedJob } from '../../boinc-rpc/types.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import { errorMessage } from '../util.js';
import { makeDirsInside } from '../dirs.js';
import { isSafeRelativePath, resolveUnder, Staging, sweepStaleTemps } from '../output/staging.js';
import { stageStderrAppend, withPathLock } from '../output/stderr.js';
import { appStderr } from '../output/stderr-text.js';
import { StderrAppendOnce } from '../output/stderr-once.js';
import { SafeZip } from '../output/unzip.js';
import { JobOutputs } from '../output/job-outputs.js';
import { FETCH_OUTPUT_SYNOPSIS, parseFetchOutput, type FetchOutputRequest } from './fetch-output-args.js';

export type { FetchOutputRequest };

/** `%f` as C prints it: six decimals. */
function fixed6(x: number): string {
  return Number.isFinite(x) ? x.toFixed(6) : '0.000000';
}

/** Asks for the completed instance; turns the real server's fatal error into a clear message. */
async function completedJob(rpc: BoincRpc, jobName: string, signal: AbortSignal): Promise<CompletedJob> {
  try {
    return await rpc.queryCompletedJob(jobName, { signal });
  } catch (err) {
    if (err instanceof BoincRpcError && err.kind === 'fatal') {
      throw new Error(
        `job ${jobName} has no successful instance: BOINC cannot report the exit status or stderr of a job ` +
          `that failed or has not finished (${err.message})`,
        { cause: err },
      );
    }
    throw err;
  }
}

export function fetchOutputCommand(services: GahpServices): AsyncCommand<BoundRequest<FetchOutputRequest>> {
  return {
    kind: 'async',
    ...FETCH_OUTPUT_SYNOPSIS,
    parse: parseBound(services, parseFetchOutput),
    async run(bound, ctx) {
      const req = bound.request;
      const binding = projectOf(bound);
      const refusal = services.ledger.refusal(binding.project.url, req.jobName);
      if (refusal !== undefined) throw new Error(refusedJobError(refusal));
      const { rpc } = binding;
      const source = templateSource(services, binding, req.jobName, ctx.signal);
      const [templates, job] = await Promise.all([source.first(), completedJob(rpc, req.jobName, ctx.signal)]);
      const hasCanonical = (job.canonicalResultId ?? 0) > 0;
      const hasError = (job.errorResultId ?? 0) > 0;
      if (!hasCanonical && !hasError) {
        throw new Error(`job ${req.jobName} has no completed instance (error mask ${job.errorMask})`);
      }
      const empty = req.specs.findIndex((sp) => sp.src.length === 0 || sp.dst.length === 0);
      if (empty >= 0) throw new Error(`file spec ${empty + 1} of job ${req.jobName} has an empty name`);
      // The iwd is looked at only when a write failed (one file-system call less a fetch).
      const deliver = (t: AppTemplates) => deliverJob(services, rpc, binding.project.url, req, job, hasCanonical, t, ctx).catch(async (err: unknown) => {
        const iwd = err instanceof WriteError ? await fsp.stat(req.iwd).catch(() => undefined) : undefined;
        if (err instanceof WriteError && !iwd?.isDirectory()) throw new WriteError(`iwd ${req.iwd} is not a directory`, { cause: err });
        throw err;
      });
      try {
        await deliver(templates);
      } catch (err) {
        if (!hasCanonical || !mayMisfit(err, ctx.signal)) throw err;
        const fresh = await source.again();
        if (!fresh) throw err;
        ctx.log.info(`fetch of ${req.jobName} failed with the kept template (${errorMessage(err)}); the app's outputs are now ${fresh.outputOpenNames.join(', ')}: fetching again`);
        await deliver(fresh);
      }
      ctx.log.debug(`fetched output of ${req.jobName} into ${req.iwd}`);
      const exit = Number.isFinite(job.exitStatus) ? Math.trunc(job.exitStatus) : 0;
      return ['NULL', String(exit), fixed6(job.elapsedTime), fixed6(job.cpuTime)];
    },
  };
}

/**
 * The fetch error of a job BOINC_SUBMIT left out of its batch (its status was DONE so that
 * the gridmanager would come here): the gridmanager holds the job with "BOINC error: " and
 * this text (docs/gahp-protocol.md, "A job refused alone"), so it says what to do, in
 * words a user can act on. A release would only fetch again (and hold the job again): the
 * job must be submitted anew.
 */
function refusedJobError(reason: string): string {
  return `job not sent to BOINC: ${reason}; fix that, then remove the job with condor_rm and submit it again (a release holds it again)`;
}

/** Where a fetch gets the job's templates, and asks again when the job did not fit them. */
interface TemplateSource {
  first(): Promise<AppTemplates>;
  /** A newer answer whose outputs differ from the first; undefined when there is none. */
  again(): Promise<AppTemplates | undefined>;
}

/**
 * The app's kept templates when the ledger knows the job's batch (an answer asked after the
 * batch was created); otherwise get_templates by job name, which asks the server for the
 * job's app (its name is known nowhere else).
 */
function templateSource(services: GahpServices, binding: ProjectBinding, jobName: string, signal: AbortSignal): TemplateSource {
  const batch = services.ledger.batchOfJob(binding.project.url, jobName);
  if (!batch) {
    return { first: () => binding.rpc.getTemplates({ jobName, signal }), again: () => Promise.resolve(undefined) };
  }
  let first: { templates: AppTemplates; askedAt: number } | undefined;
  const answer = (notBefore: number) => services.templates.get(binding.rpc, binding.accountKey, batch.app, notBefore, signal);
  return {
    async first() {
      first = await answer(batch.createdAt);
      return first.templates;
    },
    async again() {
      const next = await answer(first!.askedAt + 1);
      const same = next.templates.outputOpenNames.join('\n') === first!.templates.outputOpenNames.join('\n');
      return same ? undefined : next.templates;
    },
  };
}

/**
 * Whether a failed fetch may have failed because the job does not fit its template: not when
 * the network, the disk or a cancel failed it (asking again cannot change those).
 */
function mayMisfit(err: unknown, signal: AbortSignal): boolean {
  if (signal.aborted || err instanceof WriteError) return false;
  return !(err instanceof BoincRpcError && (err.kind === 'transport' || err.kind === 'local' || err.aborted));
}

/** Places the job's outputs and stderr with these templates (nothing under a real name on failure). */
async function deliverJob(
  services: GahpServices, rpc: BoincRpc, projectUrl: string, req: FetchOutputRequest, job: CompletedJob, hasCanonical: boolean, templates: AppTemplates, ctx: HandlerContext,
): Promise<void> {
  const staging = new Staging();
  const stderrPath = resolveUnder(req.iwd, req.stderrPath.length > 0 ? req.stderrPath : '/dev/null');
  const outputs = new JobOutputs({ rpc, projectUrl, stateDir: services.config.stateDir, ledger: services.ledger, jobName: req.jobName, job, templates });
  try {
    // A failed job (error instance) has no output files to fetch: only its stderr.
    if (hasCanonical) await stageOutputs(outputs, req, templates, staging, ctx.signal);
    const stdoutPath = req.stdoutSpec && resolveUnder(req.iwd, req.stdoutSpec.dst);
    if (stdoutPath && !staging.destinations.includes(stdoutPath)) await writing(stdoutPath, () => staging.stageEmptyUnlessPresent(stdoutPath));
    await withPathLock(stderrPath, async () => {
      // A repeated fetch (its first result was lost) does not append the same text again.
      const once = new StderrAppendOnce(services.config.stateDir, req.jobName, stderrPath, (msg) => ctx.log.warn(msg));
      const after = await writing(stderrPath, () => stageStderrAppend(staging, stderrPath, appStderr(job.stderrOut ?? ''), once));
      if (ctx.signal.aborted) throw new Error('GAHP shutting down: fetch abandoned');
      await staging.commit();
      if (after) await writing(stderrPath, after);
    });
  } finally {
    await staging.cleanup();
  }
  await outputs.placed();
  // Leftovers of a GAHP killed while fetching to the same places (the downloaded zip
  // archive's temp files too: the archive itself is no destination).
  const outs = templates.outputOpenNames;
  const zipTemp = outs.length === 1 && outs[0]!.toLowerCase().endsWith('.zip') ? [path.join(req.iwd, outs[0]!.replace(/\//g, '_'))] : [];
  await sweepStaleTemps([...staging.destinations, ...zipTemp]);
}

/** A file system failure writing a destination (the disk, not the job, is at fault). */
class WriteError extends Error {}

/**
 * Runs work that writes `dest` (through a temp file of ours or the RPC client's): a file
 * system failure is reported as `cannot write <dest>: <errno>: <text>`, naming the file the
 * user will look for rather than a temp name.
 */
async function writing<T>(dest: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const text = err instanceof BoincRpcError ? (err.kind === 'local' ? err.options.fileError : undefined)
      : typeof e?.code === 'string' && typeof e.syscall === 'string' ? e.message.split(',')[0] : undefined;
    if (text === undefined) throw err;
    throw new WriteError(`cannot write ${dest}: ${text}`, { cause: err });
  }
}

/** Destinations for each source name: ALL = every source (default iwd/<name>), SOME = named ones. */
function plan(req: FetchOutputRequest, available: string[], isAvailable: (name: string) => boolean): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  const specs = req.stdoutSpec && isAvailable(req.stdoutSpec.src) ? [...req.specs, req.stdoutSpec] : req.specs;
  for (const spec of specs) {
    if (!isAvailable(spec.src)) {
      throw new Error(`requested output file ${spec.src} is not an output of job ${req.jobName} (outputs: ${available.slice(0, 20).join(', ')})`);
    }
    const dests = byName.get(spec.src) ?? [];
    dests.push(resolveUnder(req.iwd, spec.dst));
    byName.set(spec.src, dests);
  }
  if (req.mode === 'ALL') {
    for (const name of available) if (!byName.has(name)) byName.set(name, [path.join(req.iwd, name)]);
  }
  return byName;
}

/** Default destinations (iwd/<server-given name>) must stay inside iwd; makes their directories. */
async function checkDefaultDest(req: FetchOutputRequest, name: string, dest: string): Promise<void> {
  if (dest !== path.join(req.iwd, name)) return;
  if (!isSafeRelativePath(name)) throw new Error(`the server names an output file ${JSON.stringify(name)} that would land outside the job's directory`);
  const dir = path.posix.dirname(name);
  if (dir !== '.') makeDirsInside(req.iwd, dir, 'the output directory');
}

async function stageOutputs(source: JobOutputs, req: FetchOutputRequest, templates: AppTemplates, staging: Staging, signal: AbortSignal): Promise<void> {
  const outputs = templates.outputOpenNames;
  const zipped = outputs.length === 1 && outputs[0]!.toLowerCase().endsWith('.zip');

  if (!zipped) {
    const wanted = plan(req, outputs, (n) => outputs.includes(n));
    for (const [name, dests] of wanted) {
      for (const d of dests) await checkDefaultDest(req, name, d);
      const first = staging.reserve(dests[0]!);
      await writing(dests[0]!, () => source.fetch(outputs.indexOf(name), first, signal));
      staging.stage(first, dests[0]!);
      for (const d of dests.slice(1)) await writing(d, () => staging.stageCopy(first, d));
    }
    return;
  }

  // A zip archive: download it beside the iwd's files, check it whole, unpack what is wanted.
  const zipName = outputs[0]!;
  const zipDest = path.join(req.iwd, zipName.replace(/\//g, '_'));
  const zipTmp = staging.reserve(zipDest);
  await writing(zipDest, () => source.fetch(0, zipTmp, signal));
  const zip = await SafeZip.open(zipTmp);
  try {
    const isAvailable = (n: string) => n === zipName || zip.has(n);
    const wanted = plan(req, zip.files, isAvailable);
    // A small archive can declare huge entries: refuse one that cannot fit before writing.
    let need = 0;
    for (const [name, dests] of wanted) need += (name === zipName && !zip.has(name) ? 0 : zip.size(name)) * dests.length;
    const fsInfo = await fsp.statfs(req.iwd).catch(() => undefined);
    if (fsInfo && need > fsInfo.bavail * fsInfo.bsize) {
      throw new Error(`the zip output of job ${req.jobName} unpacks to ${need} bytes; only ${fsInfo.bavail * fsInfo.bsize} bytes are free under ${req.iwd}`);
    }
    if (req.mode === 'ALL') for (const d of zip.dirs) makeDirsInside(req.iwd, d, 'the output directory');
    for (const [name, dests] of wanted) {
      let first: string;
      if (name === zipName && !zip.has(name)) {
        // A spec naming the archive itself gets the archive as downloaded.
        first = staging.reserve(dests[0]!);
        await writing(dests[0]!, () => fsp.copyFile(zipTmp, first));
      } else {
        for (const d of dests) await checkDefaultDest(req, name, d);
        first = staging.reserve(dests[0]!);
        await writing(dests[0]!, () => zip.extract(name, first, signal));
      }
      staging.stage(first, dests[0]!);
      for (const d of dests.slice(1)) await writing(d, () => staging.stageCopy(first, d));
    }
  } finally {
    zip.close();
  }
}
