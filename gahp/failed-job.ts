/**
 * What a BOINC server reports of the jobs it gave up on (status ERROR), in a short text for a
 * hold reason or a failure line: the BLAHP's background worker (gahp/blahp/fetch.ts),
 * `boinc-gahp submit` (gahp/cli/submit.ts) and any other front end use it.
 *
 * query_completed_job cannot tell: on the real server it dies with a PHP fatal error for a
 * job without a canonical instance (docs/boinc-server.md, "Querying"). What the server does
 * report, and what is asked here:
 * - `query_batch` with `get_job_details`, ONE call for every failed job of a batch: per job
 *   why BOINC gave up (`too_many_error_results`, `cancelled` when it was aborted on the
 *   server, ...) and the exit status of each instance that failed on its host (139 for a
 *   crash on Linux);
 * - `query_job`, one call per job, only for a failed job whose details hold no exit status
 *   and that was not aborted (its instances timed out, could not be sent, failed
 *   validation): the state of each instance in words (`Timed out - no response`).
 * So a batch where 100 jobs crashed costs one call, however large the batch.
 *
 * An instance that ended with exit status -186 (ERR_RESULT_DOWNLOAD) never ran: the
 * volunteer's client could not download the job's input, typically a shared `condorv_`
 * file the project's file_deleter removed when another job using it was done
 * (docs/boinc-server.md, "The project's daemons"). The client's message names the file in
 * the instance's stderr, which the real server shows only on its web page result.php
 * (logged in by the authenticator; query_job gives the instance's id), so two more requests
 * are made for these jobs alone (docs/boinc-server.md, "A failed instance's stderr"); where
 * that page does not answer, query_completed_job (a server whose handler reports failed
 * instances); without either the text says the inputs could not be downloaded, without the
 * name.
 */
import type { BoincRpc, CallOptions, QueryBatchJob } from '../boinc-rpc/types.js';

export interface FailedJobReport {
  /**
   * What the server reports, as a clause that reads after "job X failed: ", e.g.
   * `its instance failed with exit status 139 (too many error results)`,
   * `aborted on the server`, `its instance: Timed out - no response (too many total results)`.
   * One line, server words included as the server wrote them (quote or escape it where needed).
   */
  text: string;
  /** The exit status of its failed instance (of the last one listed when several failed); absent when the server reports none. */
  exitStatus?: number;
  /** It was aborted on the server (BOINC's `cancelled` flag: abort_jobs, or its batch aborted or retired before it ended). */
  aborted: boolean;
}

/** query_job calls at once, for jobs without an exit status. */
const INSTANCE_QUERIES_AT_ONCE = 4;

/** BOINC's ERR_RESULT_DOWNLOAD: the client could not get the job's input files. */
export const ERR_RESULT_DOWNLOAD = -186;

/**
 * What the server reports of each of `jobNames`, jobs of the batch `batchName` that BOINC
 * reports as ERROR: one query_batch with job details, plus one query_job per job that has
 * neither an exit status nor the aborted flag. Pass every failed job of a batch in one call.
 *
 * Rejects with the BoincRpcError of query_batch when that fails (a transport error: try
 * again later; code `no-such-batch`: the batch is gone). A query_job that fails only leaves
 * its job's text without the instances' states. A job the reply does not list gets a text
 * saying so.
 */
export async function describeFailedJobs(
  rpc: BoincRpc,
  batchName: string,
  jobNames: readonly string[],
  opts: CallOptions = {},
): Promise<Map<string, FailedJobReport>> {
  const reports = new Map<string, FailedJobReport>();
  if (jobNames.length === 0) return reports;
  const reply = await rpc.queryBatch({ batchName, jobDetails: true, ...(opts.signal ? { signal: opts.signal } : {}) });
  const byName = new Map(reply.jobs.map((j) => [j.name, j]));
  const needInstances: QueryBatchJob[] = [];
  for (const name of new Set(jobNames)) {
    const job = byName.get(name);
    if (!job) {
      reports.set(name, { text: `the server does not list it in batch ${batchName}`, aborted: false });
      continue;
    }
    if (!isAborted(job) && !job.exitStatuses?.length) needInstances.push(job);
    else reports.set(name, reportOf(job));
  }
  const downloads = [...new Set(jobNames)].filter((n) => byName.get(n)?.exitStatuses?.includes(ERR_RESULT_DOWNLOAD));
  await Promise.all(
    downloads.slice(0, INSTANCE_QUERIES_AT_ONCE * 4).map(async (name) => {
      const file = await undownloadedInput(rpc, byName.get(name)!, opts);
      if (file !== undefined) reports.set(name, reportOf(byName.get(name)!, undefined, file));
    }),
  );
  let next = 0;
  const worker = async () => {
    while (next < needInstances.length) {
      const job = needInstances[next++]!;
      let states: string[] | undefined;
      try {
        states = (await rpc.queryJob(job.id, opts)).map((i) => i.state);
      } catch (err) {
        if (opts.signal?.aborted) throw err;
      }
      reports.set(job.name, reportOf(job, states));
    }
  };
  await Promise.all(Array.from({ length: Math.min(INSTANCE_QUERIES_AT_ONCE, needInstances.length) }, worker));
  // In the order asked.
  return new Map([...new Set(jobNames)].map((n) => [n, reports.get(n)!]));
}

/** describeFailedJobs for one job (for several jobs of a batch, ask for them together). */
export async function describeFailedJob(rpc: BoincRpc, batchName: string, jobName: string, opts: CallOptions = {}): Promise<FailedJobReport> {
  return (await describeFailedJobs(rpc, batchName, [jobName], opts)).get(jobName)!;
}

function isAborted(job: QueryBatchJob): boolean {
  return job.errors?.includes('cancelled') === true;
}

/** What the client said of the inputs it could not download: their names, and its error text. */
interface UndownloadedInputs {
  names: string[];
  error?: string;
}

/**
 * The inputs named in the failed instance's stderr by the client's `WU download error`
 * (`<file_xfer_error><file_name>NAME</file_name>...`, one per file): undefined when no
 * stderr naming them can be had. The stderr comes from the project's page result.php of
 * the instances query_job lists (`Error while downloading` ones first), logged in by the
 * authenticator: the real server's query_completed_job dies for a job without a canonical
 * instance (docs/boinc-server.md, "A failed instance's stderr"). Only where that page does
 * not answer is query_completed_job asked, for a server whose handler reports failed
 * instances.
 */
async function undownloadedInput(rpc: BoincRpc, job: QueryBatchJob, opts: CallOptions): Promise<UndownloadedInputs | undefined> {
  try {
    const instances = await rpc.queryJob(job.id, opts);
    const failed = [...instances.filter((i) => i.state === DOWNLOAD_ERROR_STATE), ...instances.filter((i) => i.state !== DOWNLOAD_ERROR_STATE)];
    for (const instance of failed) {
      const named = inputsNamed(await rpc.instanceStderr(instance.id, opts));
      if (named) return named;
    }
  } catch (err) {
    if (opts.signal?.aborted) throw err;
  }
  try {
    return inputsNamed((await rpc.queryCompletedJob(job.name, opts)).stderrOut);
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    return undefined;
  }
}

/** query_job's state of an instance whose host could not download its inputs (BOINC's html/inc/result.inc). */
const DOWNLOAD_ERROR_STATE = 'Error while downloading';

/** The files of each `<file_xfer_error>` after the client's `WU download error` in a stderr, with the first's error text. */
function inputsNamed(stderr: string | undefined): UndownloadedInputs | undefined {
  const at = stderr?.indexOf('WU download error') ?? -1;
  if (!stderr || at < 0) return undefined;
  const names: string[] = [];
  let error: string | undefined;
  for (const xfer of stderr.slice(at).matchAll(/<file_xfer_error>\s*<file_name>([^<]+)<\/file_name>([\s\S]*?)<\/file_xfer_error>/g)) {
    names.push(xfer[1]!.trim());
    error ??= /<error_message>([^<]*)<\/error_message>/.exec(xfer[2]!)?.[1]?.trim() || undefined;
  }
  if (names.length === 0) return undefined;
  return { names: [...new Set(names)], ...(error ? { error } : {}) };
}

/**
 * `states`: the instances' states from query_job (undefined: not asked, or it failed);
 * `input`: the inputs the client could not download, from its stderr.
 */
function reportOf(job: QueryBatchJob, states?: string[], input?: UndownloadedInputs): FailedJobReport {
  const aborted = isAborted(job);
  // BOINC's words for why it gave up, but `cancelled`, which is said as "aborted".
  const why = (job.errors ?? []).filter((e) => e !== 'cancelled' && /^[a-z_]+$/.test(e)).map((e) => e.replace(/_/g, ' '));
  const statuses = job.exitStatuses ?? [];
  const exitStatus = statuses.at(-1);
  const parts: string[] = [];
  if (aborted) parts.push('aborted on the server');
  if (exitStatus === ERR_RESULT_DOWNLOAD) {
    // It never ran: its host could not get an input (the project no longer had it, most often).
    const what = !input ? 'its input files could not be downloaded' : input.names.length === 1 ? `input ${input.names[0]} could not be downloaded` : `inputs ${input.names.join(', ')} could not be downloaded`;
    parts.push(`${what} by the volunteer's host (${input?.error ? `${input.error}; ` : ''}exit status ${ERR_RESULT_DOWNLOAD})`);
  } else if (exitStatus !== undefined) {
    const distinct = [...new Set(statuses)];
    const who = statuses.length === 1 ? 'its instance' : `${statuses.length} instances`;
    parts.push(`${who} failed with exit status ${distinct.join(', ')}`);
  } else if (!aborted) {
    if (states === undefined) parts.push('the server reports no exit status');
    else if (states.length === 0) parts.push('the server reports no instance of it');
    else parts.push(`${states.length === 1 ? 'its instance' : 'its instances'}: ${instanceStates(states)}`);
  }
  let text = parts.join('; ');
  if (why.length) text += ` (${why.join(', ')})`;
  return { text: oneLine(text), aborted, ...(exitStatus !== undefined ? { exitStatus } : {}) };
}

/** `Timed out - no response (2), Error while computing`: each state once, with its count. */
function instanceStates(states: string[]): string {
  const counts = new Map<string, number>();
  for (const s of states) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts].map(([s, n]) => (n > 1 ? `${s} (${n})` : s)).join(', ');
}

function oneLine(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}
