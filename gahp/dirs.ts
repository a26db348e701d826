/**
 * Making directories, one rule everywhere (docs/storage.md, "Making directories"): level by
 * level from the nearest existing ancestor, never node's recursive mkdir.
 * Node 20's recursive mkdir loops forever, at full CPU, where a directory cannot be made in
 * a parent that exists (under `/proc`: mkdir says ENOENT, its parent EEXIST, again). Here each
 * level is one mkdir, so a failure is one errno naming one path, said with what the
 * directory is for: `cannot create the state directory /proc/nope/state: mkdir /proc/nope:
 * ENOENT (no such file or directory)`.
 *
 * Synchronous, like the lock files' syscalls (gahp/state-files.ts): a directory that exists,
 * the usual case, costs one stat.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * A directory could not be made. `detail` is the one step that failed and its errno
 * (`mkdir /proc/nope: ENOENT (no such file or directory)`), `code` that errno.
 */
export class DirError extends Error {
  override name = 'DirError';
  constructor(what: string, dir: string, readonly detail: string, readonly code: string | undefined) {
    super(`cannot create ${what} ${dir}: ${detail}`);
  }
}

/** `ENOENT (no such file or directory)`: the errno and its text, without node's syscall and path. */
export function errnoText(err: unknown): string {
  const e = err as { code?: string; message?: string } | undefined;
  const message = e?.message ?? String(err);
  const text = /^[A-Z0-9]+: ([^,]+)/.exec(message)?.[1] ?? message;
  return e?.code ? `${e.code} (${text})` : text;
}

/**
 * Makes `dir` and any missing parents (new levels get `mode`); nothing when it exists.
 * `what` says what the directory is for, e.g. `the state directory`. Throws a DirError.
 */
export function makeDirs(dir: string, what: string, mode = 0o700): void {
  const target = path.resolve(dir);
  const fail = failure(what, target);
  const near = nearestExisting(target);
  if ('error' in near) throw fail(near.at, near.error);
  if (!near.stat.isDirectory()) throw fail(near.existing, NOT_A_DIRECTORY);
  for (const level of near.missing) makeLevel(level, mode, false, fail);
}

/**
 * The nearest existing path at or above `dir` (absolute), its stat (links followed) and the
 * levels missing below it, outermost first; or the error of a look that failed otherwise
 * (EACCES, ELOOP...) and where.
 */
export function nearestExisting(dir: string): { existing: string; stat: fs.Stats; missing: string[] } | { at: string; error: NodeJS.ErrnoException } {
  const missing: string[] = [];
  for (let at = dir; ; at = path.dirname(at)) {
    try {
      return { existing: at, stat: fs.statSync(at), missing };
    } catch (err) {
      const error = err as NodeJS.ErrnoException;
      // ENOTDIR: a level above is not a directory; going up finds which.
      if ((error.code !== 'ENOENT' && error.code !== 'ENOTDIR') || path.dirname(at) === at) return { at, error };
      missing.unshift(at);
    }
  }
}

/**
 * Makes `rel` (a relative path already checked to stay inside) under the existing directory
 * `root`, refusing to pass through a symbolic link or a non-directory at any level below
 * root: a name taken from a server cannot lead a write outside root. Returns the directory.
 */
export function makeDirsInside(root: string, rel: string, what: string, mode = 0o755): string {
  let dir = root;
  const fail = failure(what, path.join(root, rel));
  for (const part of rel.split('/')) {
    if (part === '' || part === '.') continue;
    dir = path.join(dir, part);
    makeLevel(dir, mode, true, fail);
  }
  return dir;
}

/**
 * One level: mkdir, or, when something is there already (made meanwhile by another process,
 * or there all along), a check that it is a directory (and, `noLinks`, not a symbolic link).
 */
function makeLevel(dir: string, mode: number, noLinks: boolean, fail: Failure): void {
  try {
    fs.mkdirSync(dir, { mode });
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw fail(`mkdir ${dir}`, err);
  }
  let st: fs.Stats;
  try {
    st = noLinks ? fs.lstatSync(dir) : fs.statSync(dir);
  } catch (err) {
    throw fail(dir, err);
  }
  if (st.isSymbolicLink()) throw fail(dir, { message: 'a symbolic link: refusing to write through it' });
  if (!st.isDirectory()) throw fail(dir, NOT_A_DIRECTORY);
}

/** What a level found there instead of a directory: ENOTDIR, as mkdir below it would say. */
const NOT_A_DIRECTORY = { code: 'ENOTDIR', message: 'ENOTDIR: not a directory' };

type Failure = (step: string, err: unknown) => DirError;

/** The error of one failed step (`mkdir <level>`, or the level looked at), for `what` at `target`. */
function failure(what: string, target: string): Failure {
  return (step, err) => new DirError(what, target, `${step}: ${errnoText(err)}`, (err as { code?: string }).code);
}
