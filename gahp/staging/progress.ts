/**
 * Progress of BOINC_SUBMIT's hashing and uploads, for people (the CLI's bars): never
 * printed on the protocol. Emitted at a bounded rate (at most one event per phase every
 * `intervalMs`, plus a first one at 0 and a last one at the totals), so the hot paths only
 * add a counter and a clock read per chunk of work (hashing: per worker reply of up to 32
 * files; uploads: per query_files reply and per upload_files request).
 */

export interface SubmitProgressEvent {
  /** The BOINC_SUBMIT's request id. */
  reqId: string;
  /** 'hash': MD5s known (cached ones count at once); 'upload': files present on the server (found there or uploaded). */
  phase: 'hash' | 'upload';
  doneBytes: number;
  totalBytes: number;
  doneFiles: number;
  totalFiles: number;
}

export type ProgressSink = (event: SubmitProgressEvent) => void;

/** Default spacing of the events of one phase. */
export const PROGRESS_INTERVAL_MS = 100;

/** One phase's counters; a no-op without a sink. */
export class PhaseProgress {
  private doneFiles = 0;
  private doneBytes = 0;
  private last = 0;
  private ended = false;

  constructor(
    private readonly sink: ProgressSink | undefined,
    private readonly reqId: string,
    private readonly phase: SubmitProgressEvent['phase'],
    private readonly totalFiles: number,
    private readonly totalBytes: number,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {
    if (sink) this.emit(Date.now());
  }

  /** Counts finished work; emits when the last event is older than the interval. */
  add(files: number, bytes: number): void {
    if (!this.sink || this.ended) return;
    this.doneFiles += files;
    this.doneBytes += bytes;
    const now = Date.now();
    if (now - this.last >= this.intervalMs) this.emit(now);
  }

  /** The phase is complete: a last event at the totals. */
  finish(): void {
    if (!this.sink || this.ended) return;
    this.doneFiles = this.totalFiles;
    this.doneBytes = this.totalBytes;
    this.emit(Date.now());
    this.ended = true;
  }

  /** The phase failed or was cut short: no more events. */
  stop(): void {
    this.ended = true;
  }

  private emit(now: number): void {
    this.last = now;
    try {
      this.sink!({
        reqId: this.reqId,
        phase: this.phase,
        doneBytes: Math.min(this.doneBytes, this.totalBytes),
        totalBytes: this.totalBytes,
        doneFiles: Math.min(this.doneFiles, this.totalFiles),
        totalFiles: this.totalFiles,
      });
    } catch {
      // A display problem must never fail a submit.
    }
  }
}
