/**
 * Appending a job instance's stderr to the file HTCondor names. For a regular file (or
 * one not there yet) the old content plus the new text is written to a temp file beside
 * it and renamed into place with the job's outputs, so a crash never leaves half an
 * append. For a device or FIFO the text is appended directly after the commit.
 */
import * as fsp from 'node:fs/promises';
import type { Staging } from './staging.js';
import { KeyedLock } from '../util.js';

/** Stages the append; returns work to run after the staging commit (or undefined). */
export async function stageStderrAppend(staging: Staging, dest: string, text: string | Buffer): Promise<(() => Promise<void>) | undefined> {
  if (text.length === 0 || dest === '/dev/null') return undefined;
  let target = dest;
  let st: import('node:fs').Stats | undefined;
  try {
    st = await fsp.stat(dest);
    // Through a symlink, replace the file it points to, not the link.
    target = await fsp.realpath(dest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (st && !st.isFile()) {
    if (st.isDirectory()) throw new Error(`stderr path ${dest} is a directory`);
    return () => fsp.appendFile(dest, text);
  }
  const tmp = staging.reserve(target);
  if (st) {
    await fsp.copyFile(target, tmp);
    await fsp.chmod(tmp, st.mode & 0o7777);
  }
  const fh = await fsp.open(tmp, st ? 'a' : 'wx', 0o644);
  try {
    await fh.appendFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  staging.stage(tmp, target);
  return undefined;
}

const appending = new KeyedLock();

/**
 * Runs fn while holding an in-process lock on a path: two fetches appending to the same
 * stderr file must not interleave, or one append would be lost.
 */
export function withPathLock<T>(p: string, fn: () => Promise<T>): Promise<T> {
  return appending.run(p, fn);
}
