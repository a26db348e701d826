/**
 * BOINC_SUBMIT's step 5 (gahp/commands/submit.ts): the input files of the jobs still to
 * submit go to the stager (upload.ts) as their hashes arrive, so uploads overlap the
 * hashing of the remaining files; then the jobs are built as submit_batch sends them.
 */
import type { BigIntStats } from 'node:fs';
import type { BoincRpc, SubmitJob } from '../../boinc-rpc/types.js';
import type { HashedFile, HashSourcesResult } from './hashing.js';
import type { SubmitJobSpec } from './parse.js';
import { physName } from './plan.js';
import { PhaseProgress, type ProgressSink } from './progress.js';
import { step } from './steps.js';
import { createStager, type StageFile, type StageOptions, type StageReport, type Stager } from './upload.js';
import { commandLine } from './validate.js';

/**
 * Hash results as they arrive (hashing starts before the batch exists): held until the
 * stager is there, then handed on one by one.
 */
export class HashFeed {
  private held: Array<[string, HashedFile]> = [];
  private sink: ((path: string, file: HashedFile) => void) | undefined;

  readonly push = (path: string, file: HashedFile): void => {
    if (this.sink) this.sink(path, file);
    else this.held.push([path, file]);
  };

  /** Everything held so far goes in one piece (one query_files); later results one by one. */
  connect(take: (list: ReadonlyArray<readonly [string, HashedFile]>) => void): void {
    take(this.held);
    this.held = [];
    this.sink = (p, h) => take([[p, h]]);
  }
}

/** What the stager needs besides the batch: the project's limits and the GAHP's settings. */
export type UploadSettings = Omit<StageOptions, 'rpc' | 'batchId' | 'deleteTime' | 'reused' | 'linked' | 'log' | 'signal' | 'onSettled'>;

export interface StageInputsOptions {
  rpc: BoincRpc;
  batchId: number;
  /** The batch was left by an earlier attempt (some files may be linked to it already). */
  reused: boolean;
  /** Files the ledger recorded as linked to it: no call is made for them. */
  linked: ReadonlySet<string>;
  /** The jobs still to submit (in template order). */
  toSubmit: readonly SubmitJobSpec[];
  stats: ReadonlyMap<string, BigIntStats>;
  feed: HashFeed;
  hashing: Promise<HashSourcesResult>;
  upload: UploadSettings;
  leaseSeconds: number;
  progress: ProgressSink | undefined;
  reqId: string;
  log: (line: string) => void;
  signal: AbortSignal;
}

export interface StagedInputs {
  hashed: HashSourcesResult;
  /** The jobs submit_batch sends, their inputs as physical names. */
  boincJobs: SubmitJob[];
  report: StageReport;
  distinctFiles: number;
  /** Every file now linked to the batch: those staged and those the ledger knew. */
  linked: string[];
}

export async function stageInputs(o: StageInputsOptions): Promise<StagedInputs> {
  const needed = new Set<string>();
  for (const job of o.toSubmit) for (const input of job.inputs) needed.add(input.src);
  let neededBytes = 0;
  if (o.progress) for (const p of needed) neededBytes += Number(o.stats.get(p)!.size);
  // Upload progress counts paths: one whose content another path already brings is done at once.
  const uploadProgress = new PhaseProgress(o.progress, o.reqId, 'upload', needed.size, neededBytes);
  const stager = createStager({
    ...o.upload,
    rpc: o.rpc,
    batchId: o.batchId,
    deleteTime: Math.floor(Date.now() / 1000) + o.leaseSeconds,
    reused: o.reused,
    linked: o.linked,
    log: o.log,
    signal: o.signal,
    ...(o.progress ? { onSettled: (n: number, b: number) => uploadProgress.add(n, b) } : {}),
  });
  const distinct = new Set<string>();
  o.feed.connect((list) => {
    const out: StageFile[] = [];
    for (const [p, h] of list) {
      if (!needed.has(p)) continue;
      const name = physName(h.md5);
      if (distinct.has(name)) {
        uploadProgress.add(1, Number(h.key.size));
        continue;
      }
      distinct.add(name);
      out.push({ physName: name, path: p, size: Number(h.key.size), key: h.key });
    }
    stager.add(out);
  });
  let hashed: HashSourcesResult;
  try {
    hashed = await o.hashing;
  } catch (err) {
    await stopStaging(stager, uploadProgress, err);
    throw err;
  }
  // The jobs as BOINC gets them, built while the last files are staged.
  const boincJobs: SubmitJob[] = o.toSubmit.map((job) => ({
    name: job.name,
    commandLine: commandLine(job),
    inputFiles: job.inputs.map((i) => physName(hashed.files.get(i.src)!.md5)),
  }));
  const report = await step('staging input files', () => stager.finish()).catch((err: unknown) => {
    uploadProgress.stop();
    throw err;
  });
  uploadProgress.finish();
  return { hashed, boincJobs, report, distinctFiles: distinct.size, linked: [...new Set([...o.linked, ...distinct])] };
}

/** Starts no more staging work and waits for what is in flight. */
async function stopStaging(stager: Stager, progress: PhaseProgress, err: unknown): Promise<void> {
  progress.stop();
  stager.abort(err);
  await stager.finish().catch(() => undefined);
}
