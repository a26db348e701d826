/**
 * The file RPCs of staging (upload.ts), each safe against the real server's
 * non-idempotent behaviour (docs/boinc-server.md, "Input files in practice"): what is
 * present (query_files without batch_id), linking present files to the batch (one
 * batch-linked query for a fresh batch, one name per call when some may be linked
 * already), and uploading a group of absent files, recovering after any failed or
 * uncertain call. The retry rules are in upload.ts's header.
 */
import * as fs from 'node:fs';
import PQueue from 'p-queue';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { MAX_TIMED_OUT_ATTEMPTS, Retries, type RetryPolicy } from '../../boinc-rpc/retry.js';
import type { BoincRpc } from '../../boinc-rpc/types.js';
import { sleep } from '../util.js';
import type { FileKey } from './hash-types.js';
import { fileKey, sameFileKey } from './hash-key.js';
import { chunks } from './plan.js';

export interface StageFile {
  physName: string;
  path: string;
  size: number;
  key: FileKey;
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
export const QUERY_CHUNK = 1000;

const isDuplicate = (err: unknown) => err instanceof BoincRpcError && err.code === 'duplicate-entry';

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

export interface FileCallsOptions {
  rpc: BoincRpc;
  batchId: number;
  /** Unix time until which the server must keep uploaded files even without a live batch. */
  deleteTime: number;
  /** Parallel one-name links during a recovery. */
  concurrency: number;
  /** Attempts per call before giving up (fewer when attempts time out). */
  maxAttempts: number;
  /** First backoff delay in ms. */
  retryBaseMs: number;
  log: (line: string) => void;
  signal: AbortSignal | undefined;
  /** Called with files found on the server or uploaded (progress display). */
  onSettled: ((list: readonly StageFile[]) => void) | undefined;
}

export class FileCalls {
  readonly report: StageReport = { present: 0, uploaded: 0, uploadedBytes: 0, uploadRequests: 0, recoveries: 0 };

  constructor(private readonly o: FileCallsOptions) {}

  /** Throws once the command is cancelled (QUIT, EOF, its timeout). */
  checkAborted(): void {
    const { signal } = this.o;
    if (signal?.aborted) {
      const r: unknown = signal.reason;
      throw new StagingError(r instanceof Error && r.name !== 'AbortError' && r.message ? r.message : 'the GAHP is shutting down');
    }
  }

  /** Backoff of every loop here; each sets its own number of attempts. */
  private retries(maxAttempts: number): Retries {
    const policy: RetryPolicy = { baseMs: this.o.retryBaseMs, capMs: 5000, jitter: true, maxAttempts, maxTimeouts: MAX_TIMED_OUT_ATTEMPTS };
    return new Retries(policy);
  }

  /** Cut short when the signal fires (the next checkAborted() then throws). */
  private backoff(ms: number): Promise<void> {
    return sleep(ms, this.o.signal);
  }

  private settled(list: readonly StageFile[]): void {
    if (list.length > 0) this.o.onSettled?.(list);
  }

  /**
   * Repeats an idempotent call once on errors that are neither permanent nor already
   * retried by the RPC client (transport failures, cut-short replies: those it repeats
   * itself, within its time budget).
   */
  private async retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const retries = this.retries(2);
    for (;;) {
      this.checkAborted();
      try {
        return await fn();
      } catch (err) {
        const delay = retries.next();
        if (isPermanent(err) || clientRetried(err) || delay === undefined) throw err;
        this.o.log(`staging: ${what}: ${(err as Error).message}; retrying`);
        await this.backoff(delay);
      }
    }
  }

  /** What the server has, without linking anything (idempotent). */
  private async probe(list: readonly StageFile[]): Promise<{ present: StageFile[]; absent: StageFile[] }> {
    const present: StageFile[] = [];
    const absent: StageFile[] = [];
    for (const part of chunks(list, QUERY_CHUNK)) {
      const idx = await this.retrying('query_files', () => this.o.rpc.queryFiles({ physNames: part.map((f) => f.physName), signal: this.o.signal }));
      const missing = new Set(idx);
      part.forEach((f, i) => (missing.has(i) ? absent : present).push(f));
    }
    return { present, absent };
  }

  /**
   * Links one present file to the batch. `Duplicate entry` means it already was. Returns
   * false when the file turned out absent (deleted meanwhile): it must be uploaded.
   */
  private async linkOne(f: StageFile): Promise<boolean> {
    const retries = this.retries(this.o.maxAttempts);
    for (;;) {
      this.checkAborted();
      try {
        const idx = await this.o.rpc.queryFiles({ physNames: [f.physName], batchId: this.o.batchId, signal: this.o.signal });
        return idx.length === 0;
      } catch (err) {
        if (isDuplicate(err) && (err as BoincRpcError).duplicateOf !== 'file') return true;
        const delay = retries.next({ timedOut: timedOut(err) });
        if (isPermanent(err) || delay === undefined) throw err;
        await this.backoff(delay);
      }
    }
  }

  /** Links present files, one call each (safe whatever is already linked). Returns the absent ones. */
  private async linkEach(list: readonly StageFile[]): Promise<StageFile[]> {
    const absent: StageFile[] = [];
    const q = new PQueue({ concurrency: Math.max(1, this.o.concurrency) });
    try {
      await Promise.all(list.map((f) => q.add(async () => {
        if (!(await this.linkOne(f))) absent.push(f);
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
   * one-by-one linking for that chunk. Returns the files to upload.
   */
  async firstQuery(list: readonly StageFile[]): Promise<StageFile[]> {
    const toUpload: StageFile[] = [];
    for (const part of chunks(list, QUERY_CHUNK)) {
      this.checkAborted();
      try {
        const idx = new Set(await this.o.rpc.queryFiles({ physNames: part.map((f) => f.physName), batchId: this.o.batchId, signal: this.o.signal }));
        const found: StageFile[] = [];
        part.forEach((f, i) => (idx.has(i) ? toUpload : found).push(f));
        this.report.present += found.length;
        this.settled(found);
      } catch (err) {
        if (isPermanent(err) && !isDuplicate(err)) throw err;
        this.o.log(`staging: batch-linked query_files failed (${(err as Error).message}); finding out what is present`);
        this.report.recoveries++;
        toUpload.push(...(await this.recover(part)));
      }
    }
    return toUpload;
  }

  /** Files the ledger recorded as linked to the batch: nothing to do. */
  linkedBefore(list: readonly StageFile[]): void {
    this.report.present += list.length;
    this.settled(list);
  }

  /**
   * After a failure, or on a reused batch for files the ledger does not know as linked:
   * link what is present, one name per call, and return what must be uploaded.
   */
  async recover(list: readonly StageFile[]): Promise<StageFile[]> {
    const { present, absent } = await this.probe(list);
    const gone = await this.linkEach(present);
    this.report.present += present.length - gone.length;
    if (this.o.onSettled) {
      const missing = new Set(gone);
      this.settled(present.filter((f) => !missing.has(f)));
    }
    return [...absent, ...gone];
  }

  /** Uploads a group of absent files; after a failure, what arrived is learnt and only the rest sent again. */
  async uploadGroup(group: StageFile[]): Promise<void> {
    const { report } = this;
    let todo = group;
    const retries = this.retries(this.o.maxAttempts);
    while (todo.length > 0) {
      this.checkAborted();
      for (const f of todo) checkUnchanged(f);
      try {
        report.uploadRequests++;
        await this.o.rpc.uploadFiles({ files: todo.map((f) => ({ physName: f.physName, path: f.path })), batchId: this.o.batchId, deleteTime: this.o.deleteTime, signal: this.o.signal });
        report.uploaded += todo.length;
        for (const f of todo) report.uploadedBytes += f.size;
        this.settled(todo);
        return;
      } catch (err) {
        const delay = retries.next({ timedOut: timedOut(err) });
        if ((isPermanent(err) && !isDuplicate(err)) || delay === undefined) throw err;
        this.o.log(`staging: upload_files of ${todo.length} files failed (${(err as Error).message}); finding out what arrived`);
        report.recoveries++;
        await this.backoff(delay);
        const before = todo.length;
        todo = await this.recover(todo);
        report.uploaded += before - todo.length;
        report.present -= before - todo.length;
      }
    }
  }
}

/** A file changed since it was hashed is never uploaded under its old name. */
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
