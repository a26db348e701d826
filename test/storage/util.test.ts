/** gahp/util.ts: abortable waits, the keyed lock, pidAlive. */
import { spawnSync } from 'node:child_process';
import { KeyedLock, pidAlive, sleep, untilAborted } from '../../gahp/util.js';

test('sleep waits its time, returns at once when the signal fires, and never rejects', async () => {
  let t0 = Date.now();
  await sleep(50);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
  const ctl = new AbortController();
  t0 = Date.now();
  setTimeout(() => ctl.abort(new Error('stop')), 20);
  await expect(sleep(10_000, ctl.signal)).resolves.toBeUndefined();
  expect(Date.now() - t0).toBeLessThan(5000);
  await expect(sleep(10_000, ctl.signal)).resolves.toBeUndefined();
});

test('untilAborted gives the work\'s outcome, or the signal\'s reason as soon as it fires', async () => {
  const ctl = new AbortController();
  await expect(untilAborted(Promise.resolve(7), ctl.signal)).resolves.toBe(7);
  await expect(untilAborted(Promise.reject(new Error('failed')), ctl.signal)).rejects.toThrow('failed');
  const never = new Promise<number>(() => undefined);
  setTimeout(() => ctl.abort(new Error('shutting down')), 10);
  await expect(untilAborted(never, ctl.signal)).rejects.toThrow('shutting down');
  await expect(untilAborted(Promise.resolve(1), ctl.signal)).rejects.toThrow('shutting down');
});

test('KeyedLock runs one at a time per key, in order, others freely; a failure does not block the next', async () => {
  const lock = new KeyedLock();
  const log: string[] = [];
  const job = (key: string, name: string, ms: number, fail = false) => lock.run(key, async () => {
    log.push(`${name}+`);
    await sleep(ms);
    log.push(`${name}-`);
    if (fail) throw new Error(name);
    return name;
  });
  const results = await Promise.allSettled([job('a', 'a1', 30, true), job('a', 'a2', 10), job('b', 'b1', 5)]);
  expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
  expect(log.indexOf('a1-')).toBeLessThan(log.indexOf('a2+'));
  // b ran while a1 held key a.
  expect(log.indexOf('b1-')).toBeLessThan(log.indexOf('a1-'));
  expect(lock.size).toBe(0);
});

test('pidAlive: this process yes, a process that has exited no', () => {
  expect(pidAlive(process.pid)).toBe(true);
  const gone = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString());
  expect(pidAlive(gone)).toBe(false);
  // kill(0) and kill(-n) address process groups, which exist: never a live pid.
  for (const notPid of [0, -1, 1.5, NaN]) expect(pidAlive(notPid)).toBe(false);
});
