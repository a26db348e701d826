/**
 * Small helpers every part of the GAHP uses, in one place so they behave the same
 * everywhere: waiting (abortable), yielding to the event loop, one-at-a-time work per key,
 * whether a process is alive, the text of whatever was thrown, and words quoted for sh.
 *
 * On abort, `sleep` returns early and never rejects: each caller then reports the abort in
 * its own terms (a BoincRpcError, a staging or submit error); `untilAborted` rejects, for
 * work that cannot be cancelled itself but whose result is no longer wanted.
 */
import { addAbortListener } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** The abortable sleep of the RPC client's retries, the one implementation (boinc-rpc cannot import gahp/). */
export { sleep } from '../boinc-rpc/retry.js';

/**
 * The work's outcome, or a rejection with the signal's reason as soon as the signal fires
 * (the work goes on, its late outcome ignored).
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const listener = addAbortListener(signal, () => reject(abortReason(signal)));
    work.then(resolve, reject).finally(() => listener[Symbol.dispose]());
  });
}

/** The signal's reason as an Error (AbortController.abort() without one gives a DOMException). */
function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new Error(typeof r === 'string' && r ? r : 'aborted');
}

/** An error's message, or whatever was thrown as text (for log lines and error messages). */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A value single-quoted for sh. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** A word for a command line a person types: as it is when sh reads it so, else single-quoted. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_@%+:,./-]+$/.test(s) ? s : shQuote(s);
}

/** Lets the event loop run (I/O, timers, other requests) before long CPU work goes on. */
export function yieldNow(): Promise<void> {
  return nextTurn();
}

/** Whether a process with this pid exists (EPERM: it exists, owned by another user). */
export function pidAlive(pid: number): boolean {
  // (kill() takes 0 and negative numbers as process groups: never a process.)
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs async work one at a time per key, in the order asked (others keys run freely). A
 * failure of one run does not stop the next. Keys with nothing queued are forgotten.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const tail = new Promise<void>((resolve) => { release = resolve; });
    const chained = prev.then(() => tail);
    this.tails.set(key, chained);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === chained) this.tails.delete(key);
    }
  }

  /** Keys with work running or queued (for tests). */
  get size(): number {
    return this.tails.size;
  }
}

/** Whether one insertion, deletion, substitution or swap of neighbours makes a into b. */
export function oneEditApart(a: string, b: string): boolean {
  if (a === b || Math.abs(a.length - b.length) > 1) return false;
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const restA = a.length - head - tail;
  const restB = b.length - head - tail;
  if (restA <= 1 && restB <= 1) return true;
  return restA === 2 && restB === 2 && a[head] === b[head + 1] && a[head + 1] === b[head];
}
