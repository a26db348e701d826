/**
 * Appending a job instance's stderr to the file HTCondor names (docs/storage.md, "Output
 * files"). Many jobs often share one stderr file, so an append never copies what is there:
 *
 * - A file not there yet: the text goes to a temp file beside it, renamed into place with
 *   the job's outputs (Staging): it appears whole, or not at all.
 * - A regular file: the text is appended in place after the outputs are committed, as one
 *   O_APPEND write followed by fdatasync, under a lock file beside it
 *   (`.<name>.boinc-gahp-stderr.lock`, state-files' withLockFile), so appends of several
 *   fetches, in this GAHP or in others, take turns and none is lost. Before writing, an
 *   undo record (`.<name>.boinc-gahp-stderr.undo`: the file's inode and size, the text's
 *   length) is made durable. A process killed mid-append leaves it behind, and the next
 *   append to the file (the gridmanager repeats an unfinished fetch) first cuts the file
 *   back to its size before the torn append: a half append is never kept, though it can be
 *   seen until that next append. A failed write is cut back at once.
 * - A device or FIFO (`/dev/null` for one): appended directly after the commit.
 *
 * A fetch that completed but whose result was lost is repeated (by the gridmanager, or the
 * BLAHP): given the job's StderrAppendOnce, an append that already happened, to a file
 * nobody touched since, is not made again (stderr-once.ts).
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { syncDir, withLockFile, writeAll } from '../state-files.js';
import { KeyedLock } from '../util.js';
import type { Staging } from './staging.js';
import type { StderrAppendOnce } from './stderr-once.js';

/** How long an append waits for another process's append to the same file. */
const APPEND_LOCK_WAIT_MS = 60_000;

/**
 * Stages the append; returns work to run after the staging commit (or undefined). With no
 * text, a missing file is still created (empty): users expect their `error` file after a job.
 */
export async function stageStderrAppend(
  staging: Staging,
  dest: string,
  text: string | Buffer,
  once?: StderrAppendOnce,
): Promise<(() => Promise<void>) | undefined> {
  if (dest === '/dev/null') return undefined;
  if (text.length === 0) {
    await staging.stageEmptyUnlessPresent(dest);
    return undefined;
  }
  let st: import('node:fs').Stats | undefined;
  try {
    st = await fsp.stat(dest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (st && !st.isFile()) {
    if (st.isDirectory()) throw new Error(`stderr path ${dest} is a directory`);
    return () => fsp.appendFile(dest, text);
  }
  if (st) {
    // Through a symlink, the file it points to (its lock and undo record sit beside it).
    const target = await fsp.realpath(dest);
    return () => appendInPlace(target, typeof text === 'string' ? Buffer.from(text, 'utf8') : text, once);
  }
  // Like the outputs beside it (not synced: renamed into place, it is whole after a kill).
  const tmp = staging.reserve(dest);
  await fsp.writeFile(tmp, text, { flag: 'wx', mode: 0o644 });
  staging.stage(tmp, dest);
  if (!once) return undefined;
  const length = typeof text === 'string' ? Buffer.byteLength(text, 'utf8') : text.length;
  // Once renamed into place, the new file is as this append left it.
  return async () => {
    const after = await fsp.stat(dest, { bigint: true }).catch(() => undefined);
    if (after) await once.appended(after, length);
  };
}

interface UndoRecord {
  ino: string;
  size: number;
  length: number;
}

function sideFiles(target: string): { lock: string; undo: string } {
  const base = path.join(path.dirname(target), `.${path.basename(target).slice(0, 100)}.boinc-gahp-stderr`);
  return { lock: `${base}.lock`, undo: `${base}.undo` };
}

/** Appends buf to the regular file `target` in place, crash-safe as the header says. */
export async function appendInPlace(target: string, buf: Buffer, once?: StderrAppendOnce): Promise<void> {
  const { lock, undo } = sideFiles(target);
  await withLockFile(lock, async () => {
    await undoTornAppend(target, undo);
    const fh = await fsp.open(target, 'a');
    try {
      const st = await fh.stat({ bigint: true });
      if (once && (await once.alreadyAppended(st))) return;
      const size = Number(st.size);
      await writeUndo(undo, { ino: String(st.ino), size, length: buf.length });
      try {
        await writeAll(fh, buf);
        await fh.datasync();
      } catch (err) {
        // The undo record stays: if this cut fails too, the next append makes it.
        await fh.truncate(size).catch(() => undefined);
        throw err;
      }
      await fsp.rm(undo, { force: true });
      await once?.appended(await fh.stat({ bigint: true }), buf.length);
    } finally {
      await fh.close();
    }
  }, { timeoutMs: APPEND_LOCK_WAIT_MS });
}

async function writeUndo(undo: string, rec: UndoRecord): Promise<void> {
  const fh = await fsp.open(undo, 'w', 0o600);
  try {
    // One small write: a kill leaves it whole or not written (then no append had begun).
    await writeAll(fh, Buffer.from(JSON.stringify(rec)));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await syncDir(path.dirname(undo));
}

/** Cuts off an append a killed process left half done (its undo record says where it began). */
async function undoTornAppend(target: string, undo: string): Promise<void> {
  let rec: Partial<UndoRecord> | undefined;
  try {
    rec = JSON.parse(await fsp.readFile(undo, 'utf8')) as Partial<UndoRecord>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    // Unreadable: killed while writing it, before the append began.
  }
  if (rec && typeof rec.size === 'number' && typeof rec.length === 'number') {
    const st = await fsp.stat(target, { bigint: true }).catch(() => undefined);
    const size = st === undefined ? -1 : Number(st.size);
    // Not the same file any more (rotated away), nothing written, or all of it: nothing to cut.
    if (st && String(st.ino) === rec.ino && size > rec.size && size < rec.size + rec.length) await fsp.truncate(target, rec.size);
  }
  await fsp.rm(undo, { force: true });
}

const appending = new KeyedLock();

/**
 * Runs fn while holding an in-process lock on a path: two fetches of this GAHP staging,
 * committing and appending to the same stderr file take turns (the first one creates it,
 * the next ones append).
 */
export function withPathLock<T>(p: string, fn: () => Promise<T>): Promise<T> {
  return appending.run(p, fn);
}
