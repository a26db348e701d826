/**
 * `boinc-gahp cancel <submit file | cluster id>`: gives up a cluster `boinc-gahp submit`
 * made. Its batches' jobs that are not finished are aborted (BOINC_ABORT_JOBS), its batches
 * retired (BOINC_RETIRE_BATCH), and the cluster recorded as cancelled (submit-state.ts), so
 * `status` says so and running the file again does not resume it. It says what it gave up:
 * the jobs aborted and the finished jobs whose outputs were never fetched.
 *
 * The project and account are the cluster's own, from its record (the options when the
 * record is of an earlier version that kept none).
 */
import * as path from 'node:path';
import { GahpResultError } from './gahp-client.js';
import { EXIT_FAILED, EXIT_OK, type GlobalOptions } from './options.js';
import { openGahp, projectFrom } from './subcommands.js';
import { open, SubmitStore, type SubmitRecord } from './submit-state.js';
import { defaultStateDir, UsageError } from '../settings.js';
import { asLines } from '../protocol/messages.js';

/** The cluster named by its id or by its submit file (that file's newest cluster). */
export function findCluster(store: SubmitStore, which: string, stateDir: string): SubmitRecord {
  const rec = /^[0-9]+$/.test(which) ? store.byCluster(Number(which)) : store.latestFor(path.resolve(which));
  if (!rec) throw new UsageError(`no cluster ${/^[0-9]+$/.test(which) ? which : `submitted from ${which}`} in the state directory ${stateDir}`);
  return rec;
}

/** The project and account a cluster was submitted to. */
export function projectOfCluster(g: GlobalOptions, rec: SubmitRecord): { url: string; authenticator: string } {
  return projectFrom({ ...g, projectUrl: g.projectUrl ?? rec.projectUrl, authenticatorFile: g.authenticatorFile ?? rec.authenticatorFile });
}

export async function cancelCmd(g: GlobalOptions, which: string): Promise<number> {
  const stateDir = g.stateDir ?? defaultStateDir();
  const store = new SubmitStore(stateDir);
  const rec = findCluster(store, which, stateDir);
  const name = `cluster ${rec.cluster} (${rec.submitFile})`;
  const live = rec.submitted.filter((b) => !rec.retired.includes(b));
  if (rec.cancelled && live.length === 0) {
    process.stdout.write(`${name} was cancelled already\n`);
    return EXIT_OK;
  }
  if (!rec.cancelled && rec.submitted.length > 0 && !open(rec)) {
    // Every batch retired, every output fetched or its job failed: nothing left to give up.
    process.stdout.write(`${name} is complete (its batches are retired): nothing to cancel\n`);
    return EXIT_OK;
  }
  const client = await openGahp({ ...g, stateDir }, projectOfCluster(g, rec));
  try {
    let aborted = 0;
    let unfetched = 0;
    // Recorded first: a submit waiting on the cluster sees its jobs aborted as cancelled, not as failed.
    rec.cancelled = true;
    await store.save(rec);
    for (const batch of live) {
      const jobs: Array<[string, string]> = [];
      try {
        const r = await client.call('BOINC_QUERY_BATCHES', ['0', '1', batch]);
        for (let i = 2; i + 1 < r.length; i += 2) jobs.push([r[i]!, r[i + 1]!]);
      } catch (err) {
        // A batch the server no longer has needs nothing more.
        if (err instanceof GahpResultError && err.missingBatch === batch) {
          rec.retired.push(batch);
          continue;
        }
        throw err;
      }
      const running = jobs.filter(([, s]) => s !== 'DONE' && s !== 'ERROR').map(([j]) => j);
      if (running.length) await client.call('BOINC_ABORT_JOBS', running);
      aborted += running.length;
      unfetched += jobs.filter(([j, s]) => s === 'DONE' && !rec.fetched.includes(j)).length;
      await client.call('BOINC_RETIRE_BATCH', [batch]);
      rec.retired.push(batch);
    }
    await store.save(rec);
    const lost = unfetched ? `; the outputs of ${unfetched} finished job${unfetched === 1 ? '' : 's'}, never fetched, are given up` : '';
    process.stdout.write(`cancelled ${name}: ${aborted} unfinished job${aborted === 1 ? '' : 's'} aborted, ` +
      `${live.length} batch${live.length === 1 ? '' : 'es'} retired${lost}\n`);
    return EXIT_OK;
  } catch (err) {
    if (err instanceof GahpResultError) {
      await store.save(rec);
      process.stderr.write(`boinc-gahp: cancelling ${name}: ${err.command} failed: ${asLines(err.message)}; run the same command again to finish\n`);
      return EXIT_FAILED;
    }
    throw err;
  } finally {
    await client.close();
  }
}
