/**
 * The one retry policy (boinc-rpc/retry.ts): delays, cap, jitter bounds, attempts, timed-out
 * attempts, the time budget, and the abortable sleep.
 */
import { backoffDelay, Retries, sleep, type RetryPolicy } from '../../boinc-rpc/retry.js';

const plain: RetryPolicy = { baseMs: 300, capMs: 30_000, jitter: false, maxAttempts: 10 };

describe('backoffDelay', () => {
  test('doubles from baseMs without jitter', () => {
    expect([0, 1, 2, 3].map((a) => backoffDelay(plain, a))).toEqual([300, 600, 1200, 2400]);
  });

  test('never exceeds capMs', () => {
    const p = { ...plain, capMs: 1000 };
    expect([0, 1, 2, 10, 60].map((a) => backoffDelay(p, a))).toEqual([300, 600, 1000, 1000, 1000]);
    expect(backoffDelay({ ...p, jitter: true }, 20, () => 0.999)).toBe(1000);
  });

  test('jitter stays within [0.5, 1.5) of the nominal delay', () => {
    const p = { ...plain, baseMs: 250, jitter: true };
    expect(backoffDelay(p, 2, () => 0)).toBe(500);
    expect(backoffDelay(p, 2, () => 0.5)).toBe(1000);
    expect(backoffDelay(p, 2, () => 0.9999)).toBe(1500);
    for (let i = 0; i < 1000; i++) {
      const d = backoffDelay(p, 1);
      expect(d).toBeGreaterThanOrEqual(250);
      expect(d).toBeLessThanOrEqual(750);
    }
  });
});

describe('Retries', () => {
  test('allows maxAttempts in all', () => {
    const r = new Retries({ ...plain, maxAttempts: 4 });
    expect([r.next(), r.next(), r.next(), r.next()]).toEqual([300, 600, 1200, undefined]);
    expect(r.failed).toBe(4);
  });

  test('a single attempt is never repeated', () => {
    expect(new Retries({ ...plain, maxAttempts: 1 }).next()).toBeUndefined();
  });

  test('stops at maxTimeouts timed-out attempts; other failures do not count', () => {
    const r = new Retries({ ...plain, maxTimeouts: 2 });
    expect(r.next({ timedOut: true })).toBe(300);
    expect(r.next({ timedOut: false })).toBe(600);
    expect(r.next({ timedOut: true })).toBeUndefined();
  });

  test('no attempt that would start at or past the budget; restart() starts the clock and the timeouts again', () => {
    let now = 1000;
    const r = new Retries({ ...plain, budgetMs: 2000, maxTimeouts: 2 }, () => now);
    r.started();
    now += 1000;
    expect(r.next()).toBe(300); // 1000 + 300 < 2000
    now += 300;
    r.started(); // later attempts do not move the clock
    expect(r.next({ timedOut: true })).toBe(600); // 1300 + 600 < 2000
    now += 600;
    expect(r.next()).toBeUndefined(); // 1900 + 1200 >= 2000
    const again = new Retries({ ...plain, budgetMs: 2000, maxTimeouts: 2 }, () => now);
    again.started();
    expect(again.next({ timedOut: true })).toBe(300);
    now += 1900;
    again.restart();
    expect(again.next({ timedOut: true })).toBe(600); // a fresh clock; the timed-out count restarted too
  });

  test('without started(), the budget counts from the failure', () => {
    const r = new Retries({ ...plain, budgetMs: 301 });
    expect(r.next()).toBe(300);
    expect(new Retries({ ...plain, budgetMs: 300 }).next()).toBeUndefined();
  });
});

describe('sleep', () => {
  test('waits about ms', async () => {
    const t0 = Date.now();
    await sleep(50);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
  });

  test('returns at once when the signal fires, and never rejects', async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    const waiting = sleep(60_000, ac.signal);
    setTimeout(() => ac.abort(new Error('stop')), 20);
    await expect(waiting).resolves.toBeUndefined();
    expect(Date.now() - t0).toBeLessThan(30_000);
    await expect(sleep(60_000, ac.signal)).resolves.toBeUndefined();
  });
});
