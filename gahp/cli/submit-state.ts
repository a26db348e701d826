/**
 * What `boinc-gahp submit` remembers per cluster, in <state-dir>/submit/clusters.json
 * (docs/storage.md): the submit file, the cluster id, the batch names, which jobs were
 * submitted, fetched or failed, which batches retired, whether it was cancelled; so running
 * the same file again resumes its newest cluster.
 *
 * Several `submit` runs may share the state directory. Taking a cluster id happens under
 * <state-dir>/submit/lock (two runs never take the same one); every save re-reads the file
 * and merges: a run replaces only its own records and the counters only grow. The file is
 * replaced atomically (state-files.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { makeDirs } from '../dirs.js';
import { LockHeldError, replaceFile, withLockFile } from '../state-files.js';

export interface SubmitRecord {
  /** A hash of the submit file's path and text. */
  key: string;
  /**
   * A hash of the jobs the file makes (submit-plan.ts), not of its text: an edit that
   * changes no job (a comment) keeps the cluster. Absent in records of earlier versions.
   */
  jobsDigest?: string;
  /** Absolute path of the submit file. */
  submitFile: string;
  /** The project and the authenticator file's absolute path (never the authenticator): for cancel and status. */
  projectUrl?: string;
  authenticatorFile?: string;
  cluster: number;
  /** Unix time in the batch names. */
  createdAt: number;
  /** app -> batch name */
  batches: Record<string, string>;
  submitted: string[];
  retired: string[];
  fetched: string[];
  failed: Record<string, string>;
  leaseUntil: Record<string, number>;
  /** batch -> why its last BOINC_SUBMIT failed (removed when one succeeds): for status. */
  submitErrors?: Record<string, string>;
  /** Set by `boinc-gahp cancel`: its jobs aborted, its batches retired. */
  cancelled?: boolean;
}

/** Whether a cluster still has batches on the server that nobody gave up: submitted, not retired, not cancelled. */
export function unfinished(rec: SubmitRecord): boolean {
  return !rec.cancelled && rec.submitted.some((b) => !rec.retired.includes(b));
}

interface SubmitState {
  nextCluster: number;
  lastCreatedAt: number;
  entries: Record<string, SubmitRecord>;
}

export class SubmitStore {
  private state: SubmitState;
  /** Saves of this process, one after the other (the last one asked writes last). */
  private saving: Promise<void> = Promise.resolve();

  constructor(private readonly stateDir: string) {
    this.state = this.load();
  }

  /** Where this store's files are: `<state dir>/submit`. */
  get dir(): string {
    return path.join(this.stateDir, 'submit');
  }

  private get file(): string {
    return path.join(this.dir, 'clusters.json');
  }

  private get lockFile(): string {
    return path.join(this.dir, 'lock');
  }

  /** The newest cluster submitted from this file (absolute path), as last loaded. */
  latestFor(submitFile: string): SubmitRecord | undefined {
    return latestOf(this.state, submitFile);
  }

  /** The record of a cluster id, as last loaded. */
  byCluster(cluster: number): SubmitRecord | undefined {
    return Object.values(this.state.entries).find((r) => r.cluster === cluster);
  }

  /** Every record, as last loaded. */
  all(): SubmitRecord[] {
    return Object.values(this.state.entries).sort((a, b) => a.cluster - b.cluster);
  }

  /** The cluster id the next new record would get (for a tentative parse). */
  get nextCluster(): number {
    return this.state.nextCluster;
  }

  /**
   * The newest record of `submitFile` when `resumes` says it is this submission (another run
   * may have taken it meanwhile), else one created under the lock (always, when `fresh`): a
   * new cluster id, and a batch-name time after every earlier one (batch names stay unique).
   */
  async take(submitFile: string, fresh: boolean, resumes: (rec: SubmitRecord) => boolean,
    make: (cluster: number, createdAt: number) => SubmitRecord): Promise<SubmitRecord> {
    try {
      return await withLockFile(this.lockFile, async () => {
        this.state = this.load();
        const existing = fresh ? undefined : latestOf(this.state, submitFile);
        if (existing && resumes(existing)) return existing;
        const cluster = this.state.nextCluster;
        const createdAt = Math.max(Math.floor(Date.now() / 1000), this.state.lastCreatedAt + 1);
        const record = make(cluster, createdAt);
        this.state.entries[String(cluster)] = record;
        this.state.nextCluster = cluster + 1;
        this.state.lastCreatedAt = createdAt;
        await this.write(record);
        return record;
      });
    } catch (err) {
      if (err instanceof LockHeldError) {
        throw new Error(`${err.lockFile} is held by process ${err.holder}; remove it if no boinc-gahp submit is running`, { cause: err });
      }
      throw err;
    }
  }

  /** Writes this record, merged with what is on disk now. */
  save(record: SubmitRecord): Promise<void> {
    const run = this.saving.then(() => this.write(record));
    this.saving = run.catch(() => undefined);
    return run;
  }

  private async write(record: SubmitRecord): Promise<void> {
    const onDisk = this.load();
    // Entries are kept by cluster id (earlier versions kept them by key: that entry goes).
    for (const [id, r] of Object.entries(onDisk.entries)) if (r.cluster === record.cluster) delete onDisk.entries[id];
    onDisk.entries[String(record.cluster)] = record;
    onDisk.nextCluster = Math.max(onDisk.nextCluster, this.state.nextCluster);
    onDisk.lastCreatedAt = Math.max(onDisk.lastCreatedAt, this.state.lastCreatedAt);
    this.state = onDisk;
    makeDirs(this.dir, 'the submit state directory');
    await replaceFile(this.file, JSON.stringify(onDisk, null, 1));
  }

  private load(): SubmitState {
    try {
      const s = JSON.parse(fs.readFileSync(this.file, 'utf8')) as Partial<SubmitState>;
      if (typeof s.nextCluster === 'number' && s.entries) {
        return { nextCluster: s.nextCluster, lastCreatedAt: s.lastCreatedAt ?? 0, entries: s.entries };
      }
    } catch {
      /* first use */
    }
    return { nextCluster: 1, lastCreatedAt: 0, entries: {} };
  }
}

function latestOf(state: SubmitState, submitFile: string): SubmitRecord | undefined {
  let latest: SubmitRecord | undefined;
  for (const r of Object.values(state.entries)) if (r.submitFile === submitFile && (!latest || r.cluster > latest.cluster)) latest = r;
  return latest;
}
