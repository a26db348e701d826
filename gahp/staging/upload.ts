/**
 * Puts a batch's input files on the server and links every one of them to the batch, so
 * BOINC's file deleter keeps them while the batch lives. Safe against the real server's
 * non-idempotent file RPCs (docs/boinc-server.md, "Input files in practice"):
 *
 * - `query_files` never carries a delete_time. The real handler raises a registered file's
 *   delete_time when the request's is later, and then reports its own successful update as
 *   the error `job_file->update() failed: `, stopping at that file (earlier files linked,
 *   the rest not): with a delete_time that grows with the clock, every reuse of a file
 *   uploaded in an earlier second would fail, and a repeat dies on the files it already
 *   linked. Without one (0, as BOINC's own Python client sends) nothing is updated. What
 *   protects a reused file is its link to this batch: the job file deleter keeps files that
 *   are linked to a batch that is not yet complete (job_file.php's design; the page above
 *   also says what BOINC's delete_job_files script really checks).
 * - `query_files` WITH batch_id links present files; repeating it for a file already linked
 *   fails (`Duplicate entry`, a PHP fatal in the project's log). Several names in one call
 *   only for a batch we just created; on a reused batch, none for the files the ledger
 *   recorded as linked, and one name per call for the rest (docs/boinc-server.md, "Crash
 *   recovery and the fatal it may cost").
 * - `upload_files` of a registered name fails; it is sent only for names a query reported
 *   absent, with batch_id and delete_time (the lease's end) so the uploaded files are linked
 *   and protected; a new row takes that delete_time as it is inserted (no update involved).
 *   One registered meanwhile by someone else makes the upload fail with `Duplicate entry`,
 *   which the recovery below turns into a link.
 * - Every upload_files request fits the project's PHP limits (max_file_uploads,
 *   post_max_size counting the multipart framing, upload_max_filesize); a file that cannot
 *   fit fails staging at once, naming the php.ini settings to raise.
 * - After anything failed or uncertain, what is present is learnt with `query_files` WITHOUT
 *   batch_id (idempotent); present files are then linked one name per call, where a
 *   `Duplicate entry` answer proves the file was already linked. Only absent files are
 *   uploaded again. Bounded retries with backoff.
 * - Retry layers do not multiply: a call the RPC client already retried (transport
 *   failures of idempotent calls) is not repeated here, and every loop that repeats a
 *   non-idempotent call gives up after its second attempt that timed out. So a server that
 *   stops answering fails staging within about three RPC timeouts.
 * - The signal (QUIT, EOF, the command timeout) cancels every call in flight, uploads
 *   included; an aborted upload is uncertain, which a repeated BOINC_SUBMIT recovers from.
 * - Before a file is uploaded its identity (dev, ino, size, mtime, ctime) is checked against the
 *   one that was hashed: a file changed since is never uploaded under a stale name.
 *
 * The calls themselves are in file-calls.ts; this module runs the pipeline: names are
 * queried as they are added (each once), absent files are grouped to fit the project's PHP
 * limits, and the groups upload with bounded concurrency.
 */
import PQueue from 'p-queue';
import type { BoincRpc, UploadBodySize } from '../../boinc-rpc/types.js';
import { formatPhpSize } from '../../boinc-rpc/upload-limits.js';
import { FileCalls, QUERY_CHUNK, StagingError, type StageFile, type StageReport } from './file-calls.js';

export type { StageFile, StageReport };

export interface StageOptions {
  rpc: BoincRpc;
  batchId: number;
  /** Unix time until which the server must keep the files even without a live batch. */
  deleteTime: number;
  /**
   * The batch existed before this command (crash recovery): some files may already be
   * linked to it, so no multi-name batch-linked query is sent.
   */
  reused: boolean;
  /** Files known to be linked to the batch (the ledger's record): no call for them. */
  linked: ReadonlySet<string>;
  uploadConcurrency: number;
  uploadBatchBytes: number;
  /** Most files per upload_files (the project's PHP max_file_uploads). */
  uploadBatchFiles: number;
  /** The project's PHP post_max_size: largest upload_files body, framing included (0: none). */
  postMaxSize?: number;
  /** The project's PHP upload_max_filesize: largest single file (0: none). */
  uploadMaxFilesize?: number;
  /** Attempts per upload group before giving up (default 5; fewer when attempts time out). */
  maxAttempts?: number;
  /** First backoff delay in ms (default 250). */
  retryBaseMs?: number;
  log?: (line: string) => void;
  signal?: AbortSignal;
  /** Called with files (and their bytes) found on the server or uploaded, as that becomes known (progress display). */
  onSettled?: (files: number, bytes: number) => void;
}

/**
 * Stages files as they become known (their hashes arrive while earlier files upload):
 * add() them in any number of calls, then finish(). Each physical name is handled once.
 */
export interface Stager {
  add(files: readonly StageFile[]): void;
  /** Waits for every added file to be on the server and linked; throws the first failure. */
  finish(): Promise<StageReport>;
  /** Stops starting new work (in-flight calls complete); finish() then throws. */
  abort(reason: unknown): void;
}

const RAISE_LIMITS = 'the project must raise it in php.ini, and the GAHP be told the new limits (--upload-max-filesize, --post-max-size)';

/**
 * Why no upload_files request can carry the file under the project's PHP limits
 * (upload_max_filesize; post_max_size for a request of it alone, `alone` sizing that
 * request), or undefined when one can.
 */
export function uploadLimitProblem(
  f: { path: string; size: number; physName: string },
  limits: { uploadMaxFilesize?: number; postMaxSize?: number },
  alone: Pick<UploadBodySize, 'with'>,
): string | undefined {
  const fileMax = limits.uploadMaxFilesize ?? 0;
  const postMax = limits.postMaxSize ?? 0;
  if (fileMax > 0 && f.size > fileMax) {
    return `input file ${f.path} (${f.size} bytes) is larger than the project's PHP limit upload_max_filesize (${formatPhpSize(fileMax)}): ` +
      `${RAISE_LIMITS}; post_max_size must then exceed the file too`;
  }
  const single = postMax > 0 ? alone.with(f) : 0;
  if (single > postMax) {
    return `input file ${f.path} (${f.size} bytes) needs an upload request of ${single} bytes, more than the project's PHP limit post_max_size (${formatPhpSize(postMax)}): ${RAISE_LIMITS}`;
  }
  return undefined;
}

/**
 * Absent files into upload_files groups that fit the project's PHP limits and the GAHP's
 * group size; a full group is handed to `flush` at once.
 */
class UploadGrouper {
  private group: StageFile[] = [];
  private groupBytes = 0;
  private readonly postMax: number;
  private readonly fileMax: number;
  /** The upload_files body of the group being filled, and of an empty one (a file alone). */
  private readonly body: UploadBodySize;
  private readonly emptyBody: UploadBodySize;

  constructor(
    private readonly opts: StageOptions,
    private readonly flush: (group: StageFile[]) => void,
  ) {
    this.postMax = opts.postMaxSize ?? 0;
    this.fileMax = opts.uploadMaxFilesize ?? 0;
    const request = { batchId: opts.batchId, deleteTime: opts.deleteTime };
    this.body = opts.rpc.uploadBodySize(request);
    this.emptyBody = opts.rpc.uploadBodySize(request);
  }

  /** Refuses a file no upload_files request can carry under the project's PHP limits. */
  private checkFits(f: StageFile): void {
    const problem = uploadLimitProblem(f, { uploadMaxFilesize: this.fileMax, postMaxSize: this.postMax }, this.emptyBody);
    if (problem) throw new StagingError(problem);
  }

  add(f: StageFile): void {
    const { uploadBatchBytes, uploadBatchFiles } = this.opts;
    const { group, postMax } = this;
    this.checkFits(f);
    const withGroup = postMax > 0 ? this.body.with(f) : 0;
    if (group.length > 0 && (this.groupBytes + f.size > uploadBatchBytes || group.length >= uploadBatchFiles || withGroup > postMax)) {
      this.end();
    }
    this.group.push(f);
    this.groupBytes += f.size;
    this.body.add(f);
    if (this.group.length >= uploadBatchFiles || this.groupBytes >= uploadBatchBytes) this.end();
  }

  /** Hands on the group being filled, if any. */
  end(): void {
    const g = this.group;
    this.group = [];
    this.groupBytes = 0;
    this.body.clear();
    if (g.length > 0) this.flush(g);
  }
}

export function createStager(opts: StageOptions): Stager {
  const onSettled = opts.onSettled;
  const calls = new FileCalls({
    rpc: opts.rpc,
    batchId: opts.batchId,
    deleteTime: opts.deleteTime,
    concurrency: opts.uploadConcurrency,
    maxAttempts: opts.maxAttempts ?? 5,
    retryBaseMs: opts.retryBaseMs ?? 250,
    log: opts.log ?? (() => undefined),
    signal: opts.signal,
    onSettled: onSettled && ((list) => onSettled(list.length, list.reduce((n, f) => n + f.size, 0))),
  });

  // Incremental pipeline: queries (one at a time, each name once) feed upload groups,
  // which run with bounded concurrency as soon as they are full.
  const seen = new Set<string>();
  let pending: StageFile[] = [];
  let querying: Promise<void> | undefined;
  const uploads = new PQueue({ concurrency: Math.max(1, opts.uploadConcurrency) });
  const running: Array<Promise<unknown>> = [];
  let failure: { err: unknown } | undefined;

  function fail(err: unknown): void {
    failure ??= { err };
    pending = [];
    // Groups still queued are not cleared from the queue: p-queue never settles the promise
    // of a task it drops, and finish() waits for every group's (a QUIT then waited out the
    // shutdown grace). They start and return at once (`failure` is set).
  }

  const groups = new UploadGrouper(opts, (g) => {
    if (failure) return;
    running.push(uploads.add(async () => {
      if (failure) return;
      try {
        await calls.uploadGroup(g);
      } catch (err) {
        fail(err);
      }
    }));
  });

  function kick(): void {
    if (querying || pending.length === 0 || failure) return;
    querying = (async () => {
      while (pending.length > 0 && !failure) {
        const part = pending.splice(0, QUERY_CHUNK);
        try {
          const toUpload = opts.reused ? await calls.recover(part) : await calls.firstQuery(part);
          for (const f of toUpload) groups.add(f);
        } catch (err) {
          fail(err);
        }
      }
    })().finally(() => {
      querying = undefined;
      kick();
    });
  }

  return {
    add(files) {
      const linked: StageFile[] = [];
      for (const f of files) {
        if (seen.has(f.physName)) continue;
        seen.add(f.physName);
        (opts.linked.has(f.physName) ? linked : pending).push(f);
      }
      calls.linkedBefore(linked);
      kick();
    },
    async finish() {
      while (querying) await querying;
      groups.end();
      await Promise.all(running);
      if (failure) throw failure.err;
      return calls.report;
    },
    abort(reason) {
      fail(reason);
    },
  };
}
