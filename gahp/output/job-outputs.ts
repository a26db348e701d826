/**
 * Where BOINC_FETCH_OUTPUT gets a job's output files (docs/boinc-server.md, "Batch-collect
 * projects: get_output3.php"):
 * - get_output.php, from the upload hierarchy, where the volunteer's client put them;
 * - when that answers `ERROR: no such file`, the batch-collect location: get_output3.php's
 *   get_file (by the canonical result and the output's index) where BOINC's name check takes
 *   the job's name, else the batch's zip (get_batch_zip), fetched once for the batch and kept
 *   in the state directory (collected.ts).
 * Which of the two an app's outputs are in is remembered per project and app (OutputWays):
 * once an app is known to be collected, its fetches go to get_output3.php first (get_file, or
 * a kept zip holding the job), then to get_output.php (a job not assimilated yet), and only
 * then fetch the batch's zip. A `<gzip_when_done/>` output is unpacked (the client gzipped it
 * before uploading).
 */
import * as fsp from 'node:fs/promises';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import type { AppTemplates, BoincRpc, CompletedJob } from '../../boinc-rpc/types.js';
import type { Ledger } from '../ledger/types.js';
import { outputGoneMessage } from './gone.js';
import { boincAcceptsName, collectedNames, collectedStores, gunzipInPlace, type OutputWay, type ZipBatch } from './collected.js';

/** The output is not kept by a batch-collect assimilator either (or the job's batch is not known). */
class NotCollected extends Error {}

function noSuchFile(err: unknown): err is BoincRpcError {
  return err instanceof BoincRpcError && err.code === 'no-such-file';
}

export interface JobOutputsOptions {
  rpc: BoincRpc;
  projectUrl: string;
  stateDir: string | undefined;
  ledger: Ledger;
  jobName: string;
  job: CompletedJob;
  templates: AppTemplates;
}

export class JobOutputs {
  private readonly stores;
  /** The job's batch as the ledger knows it (its app names the way remembered). */
  private readonly known: { name: string; app: string } | undefined;
  /** The batch whose kept zip gave outputs of this job (noted as placed after the commit). */
  private zipUsed: { projectUrl: string; name: string } | undefined;

  constructor(private readonly o: JobOutputsOptions) {
    this.stores = collectedStores(o.stateDir);
    this.known = o.ledger.batchOfJob(o.projectUrl, o.jobName);
  }

  private get way(): OutputWay | undefined {
    return this.known ? this.stores.ways.get(this.o.projectUrl, this.known.app) : undefined;
  }

  private async learn(way: OutputWay): Promise<void> {
    if (this.known) await this.stores.ways.learn(this.o.projectUrl, this.known.app, way);
  }

  /** Output `n` (template order) written completely to `dest` (a temp name of the caller's), as the job wrote it. */
  async fetch(n: number, dest: string, signal: AbortSignal): Promise<void> {
    if (this.way === 'collect') {
      // get_file, or a kept zip that holds the job; a batch's zip is not fetched yet: a job
      // not assimilated yet is still in the upload hierarchy, and one file from there costs
      // less than the whole batch.
      try {
        await this.fromCollected(n, dest, signal, false);
        return await this.unpack(n, dest, signal);
      } catch (err) {
        if (!(err instanceof NotCollected) && !noSuchFile(err)) throw err;
      }
    }
    if ((await this.fromUploadsElseCollected(n, dest, signal)) === 'collected') await this.learn('collect');
    await this.unpack(n, dest, signal);
  }

  /** From get_output.php, else from the batch-collect location (its zip fetched if need be); in neither, gone. Which gave it. */
  private async fromUploadsElseCollected(n: number, dest: string, signal: AbortSignal): Promise<'uploads' | 'collected'> {
    let uploadErr: BoincRpcError;
    try {
      await this.fromUploads(n, dest, signal);
      return 'uploads';
    } catch (err) {
      if (!noSuchFile(err)) throw err;
      uploadErr = err;
    }
    try {
      await this.fromCollected(n, dest, signal);
    } catch (err) {
      if (err instanceof NotCollected || noSuchFile(err)) throw this.gone(n, uploadErr, err);
      throw err;
    }
    return 'collected';
  }

  /** After the job's outputs are in place: its batch's kept zip may go. */
  async placed(): Promise<void> {
    if (this.zipUsed) await this.stores.zips.placed(this.zipUsed, this.o.jobName).catch(() => undefined);
  }

  private fromUploads(n: number, dest: string, signal: AbortSignal): Promise<unknown> {
    return this.o.rpc.fetchOutputFile({ jobName: this.o.jobName, fileNum: n, destPath: dest, destIsTemp: true, signal });
  }

  /** From the batch-collect location; on failure nothing is left at `dest`. */
  private async fromCollected(n: number, dest: string, signal: AbortSignal, fetchZip = true): Promise<void> {
    try {
      await this.fromCollectedOnce(n, dest, signal, fetchZip);
    } catch (err) {
      await fsp.rm(dest, { force: true });
      throw err;
    }
  }

  private async fromCollectedOnce(n: number, dest: string, signal: AbortSignal, fetchZip: boolean): Promise<void> {
    const { rpc, jobName, job } = this.o;
    const resultId = job.canonicalResultId ?? 0;
    if (boincAcceptsName(jobName) && resultId > 0) {
      try {
        const { bytes } = await rpc.fetchCollectedFile({ resultId, index: n, destPath: dest, destIsTemp: true, signal });
        if (bytes > 0) return;
        // Empty: an empty output, or no file on a server that hides PHP's warnings (the
        // size of a missing file is sent as 0). The batch's zip says which.
        await fsp.rm(dest, { force: true });
      } catch (err) {
        // The name check refuses it, or the file is not under this name (an assimilator that
        // does not add the `.gz` get_file looks for): the zip has it under its real name.
        if (!(err instanceof BoincRpcError && (err.code === 'no-such-file' || err.code === 'bad-name'))) throw err;
      }
    }
    const batch = await this.zipBatch(signal);
    const zip = await this.stores.zips.openFor(rpc, batch, jobName, signal, fetchZip);
    if (!zip) throw new NotCollected(`get_output3.php: the zip of batch ${batch.name} holds nothing of job ${jobName}`);
    try {
      const open = this.o.templates.outputOpenNames[n]!;
      const entry = collectedNames(jobName, open).find((e) => zip.has(e));
      if (!entry) throw new NotCollected(`get_output3.php: the zip of batch ${batch.name} holds no ${collectedNames(jobName, open)[0]}`);
      await zip.extract(entry, dest, signal);
    } finally {
      zip.close();
    }
    this.zipUsed = batch;
  }

  /**
   * The job's batch, for its zip: the one the ledger recorded it in, else the batch named by
   * the job's name up to its last `#` (HTCondor's names) or `_` (the BLAHP's) that lists it.
   */
  private async zipBatch(signal: AbortSignal): Promise<ZipBatch> {
    const { rpc, projectUrl, ledger, jobName } = this.o;
    const resolveByName = async (name: string) => {
      const reply = await rpc.queryBatch({ batchName: name, signal });
      return { reply, listed: reply.jobs.some((j) => j.name === jobName) };
    };
    if (this.known) {
      const name = this.known.name;
      const rec = ledger.get(projectUrl, name);
      return {
        projectUrl,
        name,
        resolve: async () => {
          if (rec?.batchId !== undefined && rec.batchId > 0) return { batchId: rec.batchId, jobCount: Object.keys(rec.jobs).length };
          const { reply } = await resolveByName(name);
          return { batchId: reply.id, jobCount: reply.njobs };
        },
      };
    }
    for (const sep of ['#', '_']) {
      const at = jobName.lastIndexOf(sep);
      if (at <= 0) continue;
      const name = jobName.slice(0, at);
      let found: Awaited<ReturnType<typeof resolveByName>>;
      try {
        found = await resolveByName(name);
      } catch (err) {
        if (err instanceof BoincRpcError && err.code === 'no-such-batch') continue;
        throw err;
      }
      if (!found.listed) continue;
      const answer = { batchId: found.reply.id, jobCount: found.reply.njobs };
      return { projectUrl, name, resolve: () => Promise.resolve(answer) };
    }
    throw new NotCollected(`get_output3.php: the batch of job ${jobName} is not known (its zip is fetched by batch)`);
  }

  /** A `<gzip_when_done/>` output arrives gzipped from either page: the file the job wrote is inside. */
  private async unpack(n: number, dest: string, signal: AbortSignal): Promise<void> {
    if (this.o.templates.outputGzip?.[n]) await gunzipInPlace(dest, signal);
  }

  /**
   * Neither page has the output: the project deleted it, or moved it where neither finds it.
   * Its message says so, with what can be set against it (gone.ts); no one fetches it again.
   */
  private gone(n: number, ...errs: Array<Error | undefined>): Error {
    const open = this.o.templates.outputOpenNames[n] ?? `number ${n}`;
    const why = `in neither the upload hierarchy nor a batch-collect assimilator's results: ${errs.filter((e) => e !== undefined).map((e) => e.message).join('; ')}`;
    return new BoincRpcError('get_output', 'protocol', outputGoneMessage(open, this.o.jobName, why), { code: 'no-such-file' });
  }
}
