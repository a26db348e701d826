/**
 * The BLAHP side's files under `<state dir>/blahp/` (docs/blahp.md, "State directory").
 * Many short-lived processes share them (blahpd runs one script per request, several at
 * once), so every file is written whole to a temp file and renamed into place, and the few
 * exclusive roles (a submit group's leader, the status refresher, the background worker) are
 * lock files created with O_EXCL that name their holder's pid: a lock whose holder is gone
 * is taken over.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface BlahpPaths {
  root: string;
  pending: string;
  jobs: string;
  batches: string;
  claims: string;
  templates: string;
  statusSnapshot: string;
  statusLock: string;
  fetchLock: string;
}

export function blahpPaths(stateDir: string): BlahpPaths {
  const root = path.join(stateDir, 'blahp');
  return {
    root,
    pending: path.join(root, 'pending'),
    jobs: path.join(root, 'jobs'),
    batches: path.join(root, 'batches'),
    claims: path.join(root, 'claims'),
    templates: path.join(root, 'templates'),
    statusSnapshot: path.join(root, 'status.json'),
    statusLock: path.join(root, 'status.lock'),
    fetchLock: path.join(root, 'fetch.lock'),
  };
}

export function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** Writes data to path complete or not at all (temp file beside it, fsync, rename). */
export function writeFileAtomic(file: string, data: string): void {
  ensureDir(path.dirname(file));
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}-${crypto.randomBytes(4).toString('hex')}.tmp`);
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

export function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, JSON.stringify(value) + '\n');
}

/** The parsed JSON of a file, or undefined when it does not exist (or is not JSON: a torn write never happens, but a hand-edited file may). */
export function readJson<T>(file: string): T | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

export function exists(file: string): boolean {
  return fs.existsSync(file);
}

export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function lockHolder(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

function createExclusive(file: string): boolean {
  try {
    const fd = fs.openSync(file, 'wx', 0o600);
    try {
      fs.writeSync(fd, `${process.pid}\n`);
    } finally {
      fs.closeSync(fd);
    }
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/** A lock file just created but not yet written is given this long before it counts as abandoned. */
const UNWRITTEN_GRACE_MS = 5000;

/**
 * Takes the lock at `file` if it is free, or held by a process that no longer exists.
 * Breaking a stale lock is itself guarded by `<file>.break` (so two processes that both
 * see the dead holder cannot both break it, the second removing the first's new lock).
 */
export function tryLock(file: string): boolean {
  ensureDir(path.dirname(file));
  if (createExclusive(file)) return true;
  const holder = lockHolder(file);
  if (holder !== undefined && pidAlive(holder)) return false;
  if (holder === undefined) {
    // Created, not yet written (or emptied by a crash): stale only after a grace period.
    try {
      if (Date.now() - fs.statSync(file).mtimeMs < UNWRITTEN_GRACE_MS) return false;
    } catch {
      return createExclusive(file);
    }
  }
  const breaker = `${file}.break`;
  if (!createExclusive(breaker)) {
    try {
      // A breaker that died mid-break leaves this behind.
      if (Date.now() - fs.statSync(breaker).mtimeMs > UNWRITTEN_GRACE_MS) fs.rmSync(breaker, { force: true });
    } catch {
      // gone meanwhile
    }
    return false;
  }
  try {
    if (lockHolder(file) === holder) fs.rmSync(file, { force: true });
  } finally {
    fs.rmSync(breaker, { force: true });
  }
  return createExclusive(file);
}

/** Releases a lock this process holds (never another's). */
export function unlock(file: string): void {
  if (lockHolder(file) === process.pid) fs.rmSync(file, { force: true });
}

/** Whether someone alive holds the lock. */
export function lockHeld(file: string): boolean {
  if (!fs.existsSync(file)) return false;
  const holder = lockHolder(file);
  if (holder === undefined) return true;
  return pidAlive(holder);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
