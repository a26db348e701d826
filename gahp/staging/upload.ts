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
 *   fails (`Duplicate entry`). It is sent once per name, and only for a batch we just created.
 * - `upload_files` of a registered name fails; it is sent only for names a query reported
 *   absent, with batch_id and delete_time (the lease's end) so the uploaded files are linked
 *   and protected; a new row takes that delete_time as it is inserted (no update involved).
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
 */
import * as fs from 'node:fs';
import PQueue from 'p-queue';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { Retries, sleep, type RetryPolicy } from '../../boinc-rpc/retry.js';
import type { BoincRpc } from '../../boinc-rpc/types.js';
import { formatPhpSize } from '../../boinc-rpc/upload-limits.js';
import type { FileKey } from './hash-types.js';
import { fileKey, sameFileKey } from './hash-key.js';
import { chunks } from './plan.js';

export interface StageFile {
  physName: string;
  path: string;
  size: number;
  key: FileKey;
}

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

export interface StageReport {
  /** Files that were already on the server (linked by query). */
  present: number;
  /** Files uploaded by this command. */
  uploaded: number;
  uploadedBytes: number;
  /** upload_files requests sent (including retries). */
  uploadRequests: number;
  /** Recoveries after failed or uncertain calls. */
  recoveries: number;
}

/** The stage at which staging failed, for the user's message. */
export class StagingError extends Error {
  override name = 'StagingError';
}

/** How many names one query_files carries. */
const QUERY_CHUNK = 1000;

const isDuplicate = (err: unknown) => err instanceof BoincRpcError && err.code === 'duplicate-entry';

/** Attempts that timed out after which a loop repeating a call gives up. */
const MAX_TIMEOUTS = 2;

const timedOut = (err: unknown) => err instanceof BoincRpcError && err.timedOut;

/** Failures the RPC client already retried (idempotent calls): not to be repeated again. */
const clientRetried = (err: unknown) => err instanceof BoincRpcError && (err.kind === 'transport' || err.code === 'cut-short');

/** Errors that repeating cannot fix: give up at once. */
function isPermanent(err: unknown): boolean {
  if (!(err instanceof BoincRpcError)) return true;
  if (err.kind === 'local') return true;
  if (err.kind === 'server' && (err.code === 'refused' || err.code === 'no-such-batch')) return true;
  if (err.kind === 'protocol' && err.options.httpStatus !== undefined && err.options.httpStatus < 500) return true;
  return false;
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

/** Stages a known list of files. */
export function stageFiles(files: readonly StageFile[], opts: StageOptions): Promise<StageReport> {
  const stager = createStager(opts);
  stager.add(files);
  return stager.finish();
}

export function createStager(opts: StageOptions): Stager {
  const { rpc, batchId, deleteTime } = opts;
  const log = opts.log ?? (() => undefined);
  const maxAttempts = opts.maxAttempts ?? 5;
  /** Backoff of every loop here; each sets its own number of attempts. */
  const policy = (maxTries: number): RetryPolicy => ({ baseMs: opts.retryBaseMs ?? 250, capMs: 5000, jitter: true, maxAttempts: maxTries, maxTimeouts: MAX_TIMEOUTS });
  const report: StageReport = { present: 0, uploaded: 0, uploadedBytes: 0, uploadRequests: 0, recoveries: 0 };
  const signal = opts.signal;
  const settled = (list: readonly StageFile[]) => {
    if (!opts.onSettled || list.length === 0) return;
    let bytes = 0;
    for (const f of list) bytes += f.size;
    opts.onSettled(list.length, bytes);
  };
  const aborted = () => {
    if (signal?.aborted) {
      const r: unknown = signal.reason;
      throw new StagingError(r instanceof Error && r.name !== 'AbortError' && r.message ? r.message : 'the GAHP is shutting down');
    }
  };

  /**
   * Repeats an idempotent call once on errors that are neither permanent nor already
   * retried by the RPC client (transport failures, cut-short replies: those it repeats
   * itself, within its time budget).
   */
  async function retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const retries = new Retries(policy(2));
    for (;;) {
      aborted();
      try {
        return await fn();
      } catch (err) {
        const delay = retries.next();
        if (isPermanent(err) || clientRetried(err) || delay === undefined) throw err;
        log(`staging: ${what}: ${(err as Error).message}; retrying`);
        // Cut short when the signal fires (the next aborted() check then throws).
        await sleep(delay, signal);
      }
    }
  }

  /** What the server has, without linking anything (idempotent). Returns the absent ones. */
  async function probe(list: readonly StageFile[]): Promise<{ present: StageFile[]; absent: StageFile[] }> {
    const present: StageFile[] = [];
    const absent: StageFile[] = [];
    for (const part of chunks(list, QUERY_CHUNK)) {
      const idx = await retrying('query_files', () => rpc.queryFiles({ physNames: part.map((f) => f.physName), signal }));
      const missing = new Set(idx);
      part.forEach((f, i) => (missing.has(i) ? absent : present).push(f));
    }
    return { present, absent };
  }

  /**
   * Links one present file to the batch. `Duplicate entry` means it already was. Returns
   * false when the file turned out absent (deleted meanwhile): it must be uploaded.
   */
  async function linkOne(f: StageFile): Promise<boolean> {
    const retries = new Retries(policy(maxAttempts));
    for (;;) {
      aborted();
      try {
        const idx = await rpc.queryFiles({ physNames: [f.physName], batchId, signal });
        return idx.length === 0;
      } catch (err) {
        if (isDuplicate(err) && (err as BoincRpcError).duplicateOf !== 'file') return true;
        const delay = retries.next({ timedOut: timedOut(err) });
        if (isPermanent(err) || delay === undefined) throw err;
        await sleep(delay, signal);
      }
    }
  }

  /** Links present files, one call each (safe whatever is already linked). Returns the absent ones. */
  async function linkEach(list: readonly StageFile[]): Promise<StageFile[]> {
    const absent: StageFile[] = [];
    const q = new PQueue({ concurrency: Math.max(1, opts.uploadConcurrency) });
    try {
      await Promise.all(list.map((f) => q.add(async () => {
        if (!(await linkOne(f))) absent.push(f);
      })));
    } catch (err) {
      // The first failure ends this recovery: start no more links for it.
      q.clear();
      throw err;
    }
    return absent;
  }

  /**
   * First look at a fresh batch: one batch-linked query per chunk, which links what is
   * present. If such a query fails we cannot know what it linked: fall back to probe +
   * one-by-one linking for that chunk.
   */
  async function firstQuery(list: readonly StageFile[]): Promise<StageFile[]> {
    const toUpload: StageFile[] = [];
    for (const part of chunks(list, QUERY_CHUNK)) {
      aborted();
      try {
        const idx = new Set(await rpc.queryFiles({ physNames: part.map((f) => f.physName), batchId, signal }));
        const found: StageFile[] = [];
        part.forEach((f, i) => (idx.has(i) ? toUpload : found).push(f));
        report.present += found.length;
        settled(found);
      } catch (err) {
        if (isPermanent(err) && !isDuplicate(err)) throw err;
        log(`staging: batch-linked query_files failed (${(err as Error).message}); finding out what is present`);
        report.recoveries++;
        toUpload.push(...(await recover(part)));
      }
    }
    return toUpload;
  }

  /**
   * After a failure or on a reused batch: link what is present, return what must be
   * uploaded. On a reused batch (`optimistic`) one batch-linked query for all present files
   * is tried first: it succeeds when none was linked yet (the usual crash: right after
   * create_batch); a `Duplicate entry` sends us to one-by-one linking.
   */
  async function recover(list: readonly StageFile[], optimistic = false): Promise<StageFile[]> {
    const { present, absent } = await probe(list);
    let gone: StageFile[] | undefined;
    if (optimistic && present.length > 0 && present.length <= QUERY_CHUNK) {
      try {
        const idx = new Set(await rpc.queryFiles({ physNames: present.map((f) => f.physName), batchId, signal }));
        gone = present.filter((_, i) => idx.has(i));
      } catch (err) {
        if (isPermanent(err) && !isDuplicate(err)) throw err;
        log(`staging: linking ${present.length} present files at once failed (${(err as Error).message}); linking one by one`);
      }
    }
    gone ??= await linkEach(present);
    report.present += present.length - gone.length;
    if (opts.onSettled) {
      const missing = new Set(gone);
      settled(present.filter((f) => !missing.has(f)));
    }
    return [...absent, ...gone];
  }

  function checkUnchanged(f: StageFile): void {
    let st: fs.BigIntStats;
    try {
      st = fs.statSync(f.path, { bigint: true });
    } catch (err) {
      throw new StagingError(`input file ${f.path} cannot be read any more: ${(err as Error).message}`);
    }
    if (!sameFileKey(fileKey(st), f.key)) {
      throw new StagingError(`input file ${f.path} changed while the batch was being submitted`);
    }
  }

  async function uploadGroup(group: StageFile[]): Promise<void> {
    let todo = group;
    const retries = new Retries(policy(maxAttempts));
    while (todo.length > 0) {
      aborted();
      for (const f of todo) checkUnchanged(f);
      try {
        report.uploadRequests++;
        await rpc.uploadFiles({ files: todo.map((f) => ({ physName: f.physName, path: f.path })), batchId, deleteTime, signal });
        report.uploaded += todo.length;
        for (const f of todo) report.uploadedBytes += f.size;
        settled(todo);
        return;
      } catch (err) {
        const delay = retries.next({ timedOut: timedOut(err) });
        if ((isPermanent(err) && !isDuplicate(err)) || delay === undefined) throw err;
        log(`staging: upload_files of ${todo.length} files failed (${(err as Error).message}); finding out what arrived`);
        report.recoveries++;
        await sleep(delay, signal);
        const before = todo.length;
        todo = await recover(todo);
        report.uploaded += before - todo.length;
        report.present -= before - todo.length;
      }
    }
  }

  // Incremental pipeline: queries (one at a time, each name once) feed upload groups,
  // which run with bounded concurrency as soon as they are full.
  const seen = new Set<string>();
  let pending: StageFile[] = [];
  let querying: Promise<void> | undefined;
  let group: StageFile[] = [];
  let groupBytes = 0;
  const uploads = new PQueue({ concurrency: Math.max(1, opts.uploadConcurrency) });
  const running: Array<Promise<unknown>> = [];
  let failure: { err: unknown } | undefined;

  function fail(err: unknown): void {
    failure ??= { err };
    pending = [];
    uploads.clear();
  }

  function flushGroup(): void {
    const g = group;
    group = [];
    groupBytes = 0;
    if (g.length === 0 || failure) return;
    running.push(uploads.add(async () => {
      if (failure) return;
      try {
        await uploadGroup(g);
      } catch (err) {
        fail(err);
      }
    }));
  }

  const postMax = opts.postMaxSize ?? 0;
  const fileMax = opts.uploadMaxFilesize ?? 0;
  const bodyBytes = (files: readonly StageFile[]) => rpc.uploadBodyBytes({ files, batchId, deleteTime });
  const raise = 'the project must raise it in php.ini, and the GAHP be told the new limits (--upload-max-filesize, --post-max-size)';

  /** Refuses a file no upload_files request can carry under the project's PHP limits. */
  function checkFits(f: StageFile): void {
    if (fileMax > 0 && f.size > fileMax) {
      throw new StagingError(
        `input file ${f.path} (${f.size} bytes) is larger than the project's PHP limit upload_max_filesize (${formatPhpSize(fileMax)}): ` +
          `${raise}; post_max_size must then exceed the file too`,
      );
    }
    const single = postMax > 0 ? bodyBytes([f]) : 0;
    if (postMax > 0 && single > postMax) {
      throw new StagingError(
        `input file ${f.path} (${f.size} bytes) needs an upload request of ${single} bytes, more than the project's PHP limit post_max_size (${formatPhpSize(postMax)}): ${raise}`,
      );
    }
  }

  function enqueueUpload(f: StageFile): void {
    checkFits(f);
    if (
      group.length > 0 &&
      (groupBytes + f.size > opts.uploadBatchBytes || group.length >= opts.uploadBatchFiles || (postMax > 0 && bodyBytes([...group, f]) > postMax))
    ) {
      flushGroup();
    }
    group.push(f);
    groupBytes += f.size;
    if (group.length >= opts.uploadBatchFiles || groupBytes >= opts.uploadBatchBytes) flushGroup();
  }

  function kick(): void {
    if (querying || pending.length === 0 || failure) return;
    querying = (async () => {
      while (pending.length > 0 && !failure) {
        const part = pending.splice(0, QUERY_CHUNK);
        try {
          const toUpload = opts.reused ? await recover(part, true) : await firstQuery(part);
          for (const f of toUpload) enqueueUpload(f);
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
      for (const f of files) {
        if (seen.has(f.physName)) continue;
        seen.add(f.physName);
        pending.push(f);
      }
      kick();
    },
    async finish() {
      while (querying) await querying;
      flushGroup();
      await Promise.all(running);
      if (failure) throw failure.err;
      return report;
    },
    abort(reason) {
      fail(reason);
    },
  };
}
