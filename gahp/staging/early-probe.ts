/**
 * Which freshly hashed input files the server lacks, asked while the batch is being
 * created (docs/architecture.md, "Round trips"). Files whose hash was not in the cache are
 * most likely new to the server; knowing that before the batch exists lets their upload
 * start as soon as it does, instead of after a batch-linked query_files: the first submit
 * of new files waits for three calls one after another (create_batch, upload_files,
 * submit_batch) instead of four.
 *
 * The question is query_files WITHOUT batch_id and without delete_time: read-only and safe
 * to repeat (docs/boinc-server.md, "Input files in practice"). Its answers are hints for a
 * new batch's stager (upload.ts), never the last word:
 * - absent: uploaded with batch_id, which links it. If another client uploaded it
 *   meanwhile, upload_files fails with `Duplicate entry` and the stager's recovery learns
 *   what is present and links it;
 * - present: linked by the stager's batch-linked query_files as usual, which also catches a
 *   file deleted meanwhile (reported absent: uploaded);
 * - no answer (the call failed, or the batch existed before the file was asked about):
 *   the usual batch-linked query_files.
 * Probing stops when the stager starts (the batch exists): from then on a batch-linked
 * query is as quick, and an answer still missing is waited for only briefly.
 */
import type { BoincRpc } from '../../boinc-rpc/types.js';
import { QUERY_CHUNK } from './file-calls.js';

/** How long the stager waits for a probe still in flight once the batch exists. */
export const ANSWER_GRACE_MS = 500;

/** What the stager asks of the early probe: whether a file was found absent (undefined: unknown). */
export interface EarlyAnswers {
  answer(physName: string): Promise<boolean | undefined> | undefined;
}

export class EarlyProbe implements EarlyAnswers {
  private readonly answers = new Map<string, Promise<boolean | undefined>>();
  private readonly settle = new Map<string, (absent: boolean | undefined) => void>();
  private queue: string[] = [];
  private sending = false;
  private kickQueued = false;
  private closed = false;
  /** Cancels a call still in flight once its answer is no longer waited for. */
  private readonly stop = new AbortController();
  private readonly signal: AbortSignal;

  constructor(
    private readonly rpc: BoincRpc,
    signal: AbortSignal,
    private readonly log: (line: string) => void,
  ) {
    this.signal = AbortSignal.any([signal, this.stop.signal]);
  }

  /**
   * The physical name of a file just hashed. Names added together (one piece of hash
   * results) go in one call; at most one call is in flight, the next takes all queued.
   */
  add(physName: string): void {
    if (this.closed || this.answers.has(physName)) return;
    this.answers.set(physName, new Promise((resolve) => this.settle.set(physName, resolve)));
    this.queue.push(physName);
    if (this.kickQueued) return;
    this.kickQueued = true;
    queueMicrotask(() => {
      this.kickQueued = false;
      this.kick();
    });
  }

  answer(physName: string): Promise<boolean | undefined> | undefined {
    return this.answers.get(physName);
  }

  /**
   * Starts no more calls: names not yet sent get no answer at once; a call in flight has
   * ANSWER_GRACE_MS more to answer, then is cancelled (it would hold one of the client's
   * concurrent slots through its retries). Its answer usually comes right after
   * create_batch's (both were sent together), but a hint is not worth waiting a server's
   * timeout for.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const name of this.queue) this.resolve(name, undefined);
    this.queue = [];
    if (this.settle.size === 0) return;
    setTimeout(() => {
      for (const name of [...this.settle.keys()]) this.resolve(name, undefined);
      this.stop.abort();
    }, ANSWER_GRACE_MS).unref();
  }

  private resolve(name: string, absent: boolean | undefined): void {
    this.settle.get(name)?.(absent);
    this.settle.delete(name);
  }

  private kick(): void {
    if (this.sending || this.closed || this.queue.length === 0) return;
    const names = this.queue.splice(0, QUERY_CHUNK);
    this.sending = true;
    void this.rpc.queryFiles({ physNames: names, signal: this.signal }).then(
      (absentIdx) => {
        const absent = new Set(absentIdx);
        names.forEach((n, i) => this.resolve(n, absent.has(i)));
      },
      (err: unknown) => {
        this.log(`query_files for ${names.length} freshly hashed files failed (${(err as Error).message}): they are asked about once the batch exists`);
        for (const n of names) this.resolve(n, undefined);
      },
    ).finally(() => {
      this.sending = false;
      this.kick();
    });
  }
}
