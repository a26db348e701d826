/**
 * The BLAHP side's files under `<state dir>/blahp/` (docs/blahp.md, "State directory").
 * Many short-lived processes share them (blahpd runs one script per request, several at
 * once), so every file is written whole to a temp file and renamed into place, and the few
 * exclusive roles (a submit group's leader, the status refresher, the background worker) are
 * lock files that name their holder's pid: a lock whose holder is gone is taken over. Both
 * are the shared primitives of gahp/state-files.ts (docs/storage.md, "Building blocks").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { replaceFileSync } from '../state-files.js';

export interface BlahpPaths {
  root: string;
  pending: string;
  jobs: string;
  batches: string;
  claims: string;
  /** Kept results by job identity (records.ts, keptResultFile). */
  kept: string;
  templates: string;
  statusSnapshot: string;
  /** Names the snapshot whose quick status lines are valid (quick.ts). */
  statusStamp: string;
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
    kept: path.join(root, 'kept'),
    templates: path.join(root, 'templates'),
    statusSnapshot: path.join(root, 'status.json'),
    statusStamp: path.join(root, 'status.stamp'),
    statusLock: path.join(root, 'status.lock'),
    fetchLock: path.join(root, 'fetch.lock'),
  };
}

export function ensureDir(dir: string): void {
  makeDirs(dir, 'the BLAHP state directory');
}

/** Writes data to path complete or not at all (state-files' replaceFileSync). */
export function writeFileAtomic(file: string, data: string, mode = 0o600): void {
  ensureDir(path.dirname(file));
  replaceFileSync(file, data, mode);
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

