/**
 * What the GAHP's BLAH route keeps on disk, under `<state dir>/blah/` (docs/blah-route.md,
 * "State"): one file per BOINC batch it made, and the jobs' final states.
 *
 * - `batches/<batch>.json`: the batch, its state and its jobs (each with the submission key
 *   the gridmanager's JobDirectory gave it, and what its outputs need), written whole and
 *   synced before the batch's `BOINC_SUBMIT` goes out and again when its state changes: a
 *   few writes per batch, never one per job (a 10,000-job cluster must not cost 10,000
 *   synced files).
 * - `finals/<batch>.jsonl`: one appended line per job that reached a final state (outputs
 *   in place, cancelled, held), not synced: a line lost in a power cut only means the
 *   outputs are fetched again, which is harmless (the stderr append is done once,
 *   docs/storage.md).
 *
 * - `archive/<batch>.json`, `archive/<batch>.jsonl`: the same two files of a batch retired
 *   longer than a day ago, moved there (by the start-up that finds it so, or the running
 *   GAHP's housekeeping) and never read at start-up: a site's history does not slow each
 *   start (issue 44, item 6). A status or cancel of one of its jobs reads them then.
 *
 * Everything else is read back at start-up, so a GAHP killed and started again by the
 * gridmanager answers for every job id it handed out, and a submission repeated after the
 * crash finds its job instead of making another.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { replaceFileSync } from '../state-files.js';
import type { OutputSpec } from '../batch-boinc/job-check.js';

export interface StoredJob {
  /** The submission key (from the gridmanager's JobDirectory, else random). */
  key: string;
  /** The job's identity across submissions (the JobDirectory without its time), when known. */
  identity?: string;
  iwd: string;
  args: string[];
  inputs: Array<{ src: string; dst: string }>;
  outputs: OutputSpec[] | null;
  stdout?: string;
  stderr?: string;
}

export type BatchState = 'claimed' | 'submitted' | 'failed' | 'retired';

export interface StoredBatch {
  v: 1;
  batch: string;
  app: string;
  memoryMb?: number;
  projectUrl: string;
  state: BatchState;
  /** Job n of the batch is jobs[n]; its BOINC name `<batch>_<n>`. */
  jobs: StoredJob[];
  createdAt: number;
  submittedAt?: number;
  leaseExpiresAt?: number;
  /** When it was retired (ms); records of older versions have none (their file's mtime says). */
  retiredAt?: number;
  error?: string;
}

/**
 * A kept result (`resultKept`, `kept`: the job finished on BOINC but its outputs could not
 * be put in place) is kept until `keptUntil` (seconds since the epoch: the end of its
 * batch's lease when it was kept; absent in records of older versions, which read as the
 * batch's lease at start-up), then given up (docs/blah-route.md, "Statuses, outputs, cancels").
 */
export type FinalState =
  | { kind: 'done'; exitCode: number; wallClock: number; cpu: number }
  | { kind: 'cancelled'; kept?: boolean; keptUntil?: number }
  | { kind: 'held'; reason: string; code: number; resultKept?: boolean; keptUntil?: number };

/** A batch retired longer than this is archived (not read at start-up). */
export const ARCHIVE_AFTER_MS = 24 * 3600 * 1000;

export class BlahStore {
  readonly dir: string;
  private readonly batchesDir: string;
  private readonly finalsDir: string;
  private readonly archiveDir: string;

  constructor(stateDir: string) {
    this.dir = path.join(stateDir, 'blah');
    this.batchesDir = path.join(this.dir, 'batches');
    this.finalsDir = path.join(this.dir, 'finals');
    this.archiveDir = path.join(this.dir, 'archive');
  }

  /**
   * The batches not archived, and the final state of each of their jobs that has one. A
   * batch retired longer than ARCHIVE_AFTER_MS ago is archived now instead (counted in
   * `archived`): a file not touched that long is read once more, to see its state.
   */
  load(now = Date.now()): { batches: StoredBatch[]; finals: Map<string, FinalState>; archived: number } {
    const batches: StoredBatch[] = [];
    const finals = new Map<string, FinalState>();
    let archived = 0;
    for (const name of listDir(this.batchesDir)) {
      if (!name.endsWith('.json') || name.startsWith('.')) continue;
      const file = path.join(this.batchesDir, name);
      const b = readJson<StoredBatch>(file);
      if (!b || b.v !== 1 || !Array.isArray(b.jobs)) continue;
      if (b.state === 'retired' && (b.retiredAt ?? mtimeMs(file)) < now - ARCHIVE_AFTER_MS && this.archive(b.batch)) {
        archived++;
        continue;
      }
      batches.push(b);
      readFinals(path.join(this.finalsDir, `${b.batch}.jsonl`), finals);
    }
    return { batches, finals, archived };
  }

  /**
   * Moves a retired batch's two files into archive/ (the batch file first: a crash between
   * the two renames leaves its finals in finals/, where readArchived looks too). False when
   * it could not be moved (it stays where it is, read at start-up as before).
   */
  archive(batch: string): boolean {
    try {
      makeDirs(this.archiveDir, 'the BLAH state directory');
      fs.renameSync(path.join(this.batchesDir, `${batch}.json`), path.join(this.archiveDir, `${batch}.json`));
    } catch {
      return false;
    }
    try {
      fs.renameSync(path.join(this.finalsDir, `${batch}.jsonl`), path.join(this.archiveDir, `${batch}.jsonl`));
    } catch {
      // none written, or left in finals/ (read from there)
    }
    return true;
  }

  /** An archived batch and its jobs' final states, or undefined when none is archived by that name. */
  readArchived(batch: string): { batch: StoredBatch; finals: Map<string, FinalState> } | undefined {
    if (!/^[A-Za-z0-9._-]+$/.test(batch) || batch.startsWith('.')) return undefined;
    const b = readJson<StoredBatch>(path.join(this.archiveDir, `${batch}.json`));
    if (!b || b.v !== 1 || !Array.isArray(b.jobs)) return undefined;
    const finals = new Map<string, FinalState>();
    if (!readFinals(path.join(this.archiveDir, `${batch}.jsonl`), finals)) readFinals(path.join(this.finalsDir, `${batch}.jsonl`), finals);
    return { batch: b, finals };
  }

  saveBatch(b: StoredBatch): void {
    makeDirs(this.batchesDir, 'the BLAH state directory');
    replaceFileSync(path.join(this.batchesDir, `${b.batch}.json`), JSON.stringify(b) + '\n');
  }

  /** Records a job's final state (null: it has none any more, its result is fetched again). */
  appendFinal(batch: string, job: string, state: FinalState | null): void {
    makeDirs(this.finalsDir, 'the BLAH state directory');
    fs.appendFileSync(path.join(this.finalsDir, `${batch}.jsonl`), JSON.stringify({ job, state }) + '\n', { mode: 0o600 });
  }
}

/** Adds a finals file's states to `finals`; false when there is no such file. */
function readFinals(file: string, finals: Map<string, FinalState>): boolean {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      const rec = JSON.parse(line) as { job: string; state: FinalState | null };
      // A torn last line (a crash mid-append) reads as nothing; null clears an earlier state.
      if (rec.state === null) finals.delete(rec.job);
      else finals.set(rec.job, rec.state);
    } catch {
      // ignored: see above
    }
  }
  return true;
}

function mtimeMs(file: string): number {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return Date.now();
  }
}

function listDir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}
