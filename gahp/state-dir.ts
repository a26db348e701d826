/**
 * Where the GAHP keeps its state when the configured directory cannot be used
 * (docs/storage.md, "When the state directory cannot be used"). The gridmanager starts the
 * GAHP as the job's owner with the owner's environment, and service accounts often have a
 * HOME that cannot hold `~/.local/state`; a GAHP that exits there is restarted and exits
 * again, and every BOINC job of that user is held. None of the state is needed for
 * correctness towards BOINC, so the GAHP starts anyway:
 *
 * 1. the configured (or default) directory, if it can be made and a file written in it;
 * 2. else a private per-user directory under the system temp dir, `boinc-gahp-<uid>`:
 *    made 0700, refused if it is a symbolic link, not a directory, or owned by another
 *    user (someone else could read or plant our ledger there); made 0700 again if it is
 *    ours but open to others;
 * 3. else no directory: the ledger and the hash cache live in memory until the GAHP exits.
 *
 * The choice is said once, by the caller, on stderr and in the log. A directory that fails
 * later (disk full, read-only remount) is the ledger's to report: StateDirError.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DirError, errnoText, makeDirs } from './dirs.js';

export interface StateDirChoice {
  /** The directory to use; undefined: keep the state in memory. */
  dir: string | undefined;
  /** What to tell the user (once) when the configured directory was not used. */
  notice?: string;
}

/** The private fallback directory of this user under the system temp dir. */
export function fallbackStateDir(): string {
  return path.join(os.tmpdir(), `boinc-gahp-${process.getuid?.() ?? 'user'}`);
}

/** Picks the state directory (steps 1 to 3 above). Never throws. */
export function chooseStateDir(configured: string): StateDirChoice {
  const why = unusableStateDir(configured);
  if (why === undefined) return { dir: configured };
  const fallback = fallbackStateDir();
  const whyNot = privateDirProblem(fallback);
  if (whyNot === undefined) {
    return {
      dir: fallback,
      notice:
        `state directory ${configured} cannot be used: ${why}; using ${fallback} instead. ` +
        'What is lost: that directory is under the system temp dir, so the record of submitted batches ' +
        'and the hash cache may not survive a reboot or a clean-up of the temp dir',
    };
  }
  return {
    dir: undefined,
    notice:
      `state directory ${configured} cannot be used: ${why}; nor can ${fallback}: ${whyNot}; ` +
      'the state is kept in memory: the record of submitted batches (safe repeats of BOINC_SUBMIT after ' +
      'a crash) and the hash cache last only until this GAHP exits',
  };
}

/**
 * Why a directory cannot hold state (made if missing, level by level: gahp/dirs.ts; a file
 * written in it), or undefined: one step and its errno, e.g. `mkdir /proc/nope: ENOENT (...)`.
 */
export function unusableStateDir(dir: string): string | undefined {
  try {
    makeDirs(dir, 'the state directory');
    probeWrite(dir);
    return undefined;
  } catch (err) {
    return err instanceof DirError ? err.detail : `a file cannot be written in it: ${errnoText(err)}`;
  }
}

/**
 * Why the fallback directory must not be used, or undefined once it is ours, private and
 * writable. It is made without `recursive` (the temp dir exists), so an existing entry of
 * that name is looked at with lstat and never followed.
 */
function privateDirProblem(dir: string): string | undefined {
  try {
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const st = fs.lstatSync(dir);
    if (st.isSymbolicLink()) return 'it is a symbolic link';
    if (!st.isDirectory()) return 'it is not a directory';
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid) return `it is owned by user ${st.uid}, not by this user (${uid})`;
    if ((st.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
    probeWrite(dir);
    return undefined;
  } catch (err) {
    return errnoText(err);
  }
}

/** Creates, writes and removes a small file: what the stores will do, tried once. */
export function probeWrite(dir: string): void {
  const probe = path.join(dir, `.probe.${process.pid}.${randomBytes(4).toString('hex')}`);
  const fd = fs.openSync(probe, 'wx', 0o600);
  try {
    fs.writeSync(fd, 'probe\n');
  } finally {
    fs.closeSync(fd);
    fs.rmSync(probe, { force: true });
  }
}

/**
 * A write into the state directory failed (a command's ledger entry): names the directory
 * and the errno, for the command's error result.
 */
export class StateDirError extends Error {
  override name = 'StateDirError';
  readonly code: string | undefined;
  constructor(readonly dir: string, cause: unknown) {
    const code = (cause as NodeJS.ErrnoException)?.code;
    super(`cannot write the state directory ${dir}${code ? ` (${code})` : ''}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.code = code;
  }
}
