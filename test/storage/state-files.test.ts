/**
 * The crash-safe primitives of gahp/state-files.ts: atomic replace and the pid lock file,
 * on real files, with real processes competing for the lock.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LockHeldError, lockFileHeld, replaceFile, replaceFileSync, tryLockFile, unlockFile, withLockFile } from '../../gahp/state-files.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'state-files-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const leftovers = () => fs.readdirSync(dir).filter((n) => n.endsWith('.tmp'));

describe('replaceFile', () => {
  test('puts the whole new content in place, mode 0600, no temp file left', async () => {
    const file = path.join(dir, 'state.json');
    fs.writeFileSync(file, 'old');
    const bytes = await replaceFile(file, 'new content');
    expect(bytes).toBe(11);
    expect(fs.readFileSync(file, 'utf8')).toBe('new content');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(leftovers()).toEqual([]);
  });

  test('writes chunks as a producer yields them', async () => {
    const file = path.join(dir, 'snapshot');
    async function* lines() {
      for (let i = 0; i < 1000; i++) {
        yield `line ${i}\n`;
        if (i % 100 === 0) await new Promise((r) => setImmediate(r));
      }
    }
    await replaceFile(file, lines());
    const text = fs.readFileSync(file, 'utf8').split('\n');
    expect(text).toHaveLength(1001);
    expect(text[999]).toBe('line 999');
  });

  test('a producer that fails leaves the old file as it was and no temp file', async () => {
    const file = path.join(dir, 'state.json');
    fs.writeFileSync(file, 'old');
    function* failing() {
      yield 'half of the';
      throw new Error('disk on fire');
    }
    await expect(replaceFile(file, failing())).rejects.toThrow('disk on fire');
    expect(fs.readFileSync(file, 'utf8')).toBe('old');
    expect(leftovers()).toEqual([]);
  });
});

describe('replaceFileSync', () => {
  test('puts the whole new content in place from chunks, mode 0600, no temp file left', () => {
    const file = path.join(dir, 'state.json');
    fs.writeFileSync(file, 'old');
    expect(replaceFileSync(file, ['new ', Buffer.from('content')])).toBe(11);
    expect(fs.readFileSync(file, 'utf8')).toBe('new content');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(leftovers()).toEqual([]);
  });

  test('a producer that fails leaves the old file as it was and no temp file', () => {
    const file = path.join(dir, 'state.json');
    fs.writeFileSync(file, 'old');
    function* failing() {
      yield 'half of the';
      throw new Error('disk on fire');
    }
    expect(() => replaceFileSync(file, failing())).toThrow('disk on fire');
    expect(fs.readFileSync(file, 'utf8')).toBe('old');
    expect(leftovers()).toEqual([]);
  });
});

describe('withLockFile', () => {
  test('callers in one process take turns; the lock is gone afterwards', async () => {
    const lock = path.join(dir, 'lock');
    const events: string[] = [];
    const holder = (name: string) => withLockFile(lock, async () => {
      events.push(`${name} in`);
      expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.pid));
      await new Promise((r) => setTimeout(r, 30));
      events.push(`${name} out`);
    }, { pollMs: 5 });
    await Promise.all([holder('a'), holder('b'), holder('c')]);
    for (let i = 0; i < events.length; i += 2) expect(events[i + 1]).toBe(events[i]!.replace(' in', ' out'));
    expect(fs.existsSync(lock)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  test('a lock left by a dead process is broken', async () => {
    const lock = path.join(dir, 'lock');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    fs.writeFileSync(lock, dead.stdout.toString());
    await expect(withLockFile(lock, () => 'taken', { timeoutMs: 1000 })).resolves.toBe('taken');
  });

  test('a live holder is waited for without blocking the event loop, then named in the error', async () => {
    const lock = path.join(dir, 'lock');
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      fs.writeFileSync(lock, String(child.pid));
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      const t0 = Date.now();
      const err = await withLockFile(lock, () => 'taken', { timeoutMs: 400, pollMs: 20 }).catch((e: unknown) => e);
      clearInterval(timer);
      expect(err).toBeInstanceOf(LockHeldError);
      expect((err as LockHeldError).holder).toBe(child.pid);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(380);
      // The timer kept running while the lock was awaited (a blocking wait would starve it).
      expect(ticks).toBeGreaterThan(10);
      expect(fs.readFileSync(lock, 'utf8')).toBe(String(child.pid));
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('processes incrementing one counter under the lock lose no update', async () => {
    const lock = path.join(dir, 'lock');
    const counter = path.join(dir, 'counter');
    fs.writeFileSync(counter, '0');
    const module = path.resolve('dist/gahp/state-files.js');
    const script = `
      const fs = require('node:fs');
      import(${JSON.stringify(module)}).then(async ({ withLockFile }) => {
        for (let i = 0; i < 20; i++) {
          await withLockFile(${JSON.stringify(lock)}, async () => {
            const n = Number(fs.readFileSync(${JSON.stringify(counter)}, 'utf8'));
            await new Promise((r) => setTimeout(r, 1));
            fs.writeFileSync(${JSON.stringify(counter)}, String(n + 1));
          }, { pollMs: 2, timeoutMs: 60000 });
        }
      });`;
    const runs = Array.from({ length: 4 }, () => new Promise<number | null>((resolve) => {
      spawn(process.execPath, ['-e', script], { stdio: 'inherit' }).on('exit', resolve);
    }));
    expect(await Promise.all(runs)).toEqual([0, 0, 0, 0]);
    expect(fs.readFileSync(counter, 'utf8')).toBe('80');
  }, 60_000);
});

describe('tryLockFile / unlockFile / lockFileHeld', () => {
  const deadPid = () => spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
  const aged = (file: string) => fs.utimesSync(file, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));

  test('taken once, not again until released; never releases another process\'s lock', () => {
    const lock = path.join(dir, 'sub', 'lock');
    expect(lockFileHeld(lock)).toBe(false);
    expect(tryLockFile(lock)).toBe(true);
    expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.pid));
    expect(lockFileHeld(lock)).toBe(true);
    expect(tryLockFile(lock)).toBe(false);
    unlockFile(lock);
    expect(fs.existsSync(lock)).toBe(false);
    fs.writeFileSync(lock, '1'); // init: alive, not ours
    unlockFile(lock);
    expect(fs.readFileSync(lock, 'utf8')).toBe('1');
    expect(tryLockFile(lock)).toBe(false);
    expect(fs.readdirSync(path.dirname(lock))).toEqual(['lock']);
  });

  test('a dead holder\'s lock is broken, but not while another process is breaking it', () => {
    const lock = path.join(dir, 'lock');
    fs.writeFileSync(lock, deadPid());
    expect(lockFileHeld(lock)).toBe(false);
    // Another breaker at work (its .break is fresh): leave it alone, try again later.
    fs.writeFileSync(`${lock}.break`, '1');
    expect(tryLockFile(lock)).toBe(false);
    expect(fs.existsSync(`${lock}.break`)).toBe(true);
    // A breaker killed mid-break: its file is removed once old, and the lock is then broken.
    aged(`${lock}.break`);
    expect(tryLockFile(lock)).toBe(false);
    expect(fs.existsSync(`${lock}.break`)).toBe(false);
    expect(tryLockFile(lock)).toBe(true);
    expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.pid));
  });

  test('an empty lock (an older version between creating and writing it) counts as held for a grace period', () => {
    const lock = path.join(dir, 'lock');
    fs.writeFileSync(lock, '');
    expect(lockFileHeld(lock)).toBe(true);
    expect(tryLockFile(lock)).toBe(false);
    aged(lock);
    expect(lockFileHeld(lock)).toBe(false);
    expect(tryLockFile(lock)).toBe(true);
  });
});
