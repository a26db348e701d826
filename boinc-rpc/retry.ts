/**
 * The one retry policy and the one abortable sleep of every loop that repeats a call: the
 * RPC client's (transport.ts), staging's (gahp/staging/file-calls.ts) and BOINC_SUBMIT's
 * batch calls (gahp/staging/batch-calls.ts); gahp/util.ts re-exports `sleep` for the rest of
 * the GAHP. It lives here because boinc-rpc imports nothing from gahp/.
 *
 * A loop keeps its own idea of what is worth repeating; the policy says how long to wait and
 * when to stop: exponential backoff (optionally jittered, so many callers do not retry in
 * step), a cap on each delay, a number of attempts, a number of attempts that may time out
 * (a server that hangs is not waited for again and again), and a time budget after which no
 * new attempt starts.
 */
import { setTimeout as delay } from 'node:timers/promises';

export interface RetryPolicy {
  /** Delay after the first failure, ms; doubled after each further one. */
  baseMs: number;
  /** Longest delay, ms. */
  capMs: number;
  /** Each delay is multiplied by a random factor in [0.5, 1.5) (before the cap). */
  jitter: boolean;
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** No new attempt after this many attempts that timed out. */
  maxTimeouts?: number;
  /** No new attempt that would start this long (ms) or later after the first attempt began. */
  budgetMs?: number;
}

/**
 * Attempts that got no answer within their timeout after which a loop makes no other: the
 * rule of every loop, the RPC client's and those above it that repeat a call, so that retry
 * layers do not multiply waits on a server that hangs (README, "Retries and time to error").
 */
export const MAX_TIMED_OUT_ATTEMPTS = 2;

/** The delay after failure number `attempt + 1` (attempt 0: the first failure), in whole ms. */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const base = policy.baseMs * 2 ** attempt;
  return Math.min(policy.capMs, Math.round(policy.jitter ? base * (0.5 + random()) : base));
}

/** One call's course through a RetryPolicy: attempts made, those that timed out, the budget's clock. */
export class Retries {
  private failures = 0;
  private timeouts = 0;
  private since: number | undefined;

  constructor(
    readonly policy: RetryPolicy,
    private readonly clock: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  /** An attempt begins: the budget's clock starts with the first (later calls do nothing). */
  started(): void {
    this.since ??= this.clock();
  }

  /**
   * The budget's clock and the count of timed-out attempts start again: the last attempt
   * made progress (a download received data), so it was no hang. Attempts still count.
   */
  restart(): void {
    this.since = this.clock();
    this.timeouts = 0;
  }

  /** Failed attempts so far. */
  get failed(): number {
    return this.failures;
  }

  /**
   * After a failed attempt: the delay before the next one, or undefined when the policy
   * allows none (attempts used up, too many timed out, or the next would start past the budget).
   */
  next(failure: { timedOut?: boolean } = {}): number | undefined {
    const attempt = this.failures++;
    if (failure.timedOut) this.timeouts++;
    const p = this.policy;
    if (this.failures >= p.maxAttempts) return undefined;
    if (p.maxTimeouts !== undefined && this.timeouts >= p.maxTimeouts) return undefined;
    const ms = backoffDelay(p, attempt, this.random);
    if (p.budgetMs !== undefined) {
      const now = this.clock();
      if (now - (this.since ?? now) + ms >= p.budgetMs) return undefined;
    }
    return ms;
  }
}

/** Waits ms milliseconds, or less if the signal fires first (then it returns at once). Never rejects. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return;
  try {
    await delay(ms, undefined, { signal });
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
}
