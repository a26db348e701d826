/**
 * What `boinc-gahp submit` remembers per cluster, in <state-dir>/submit/clusters.json
 * (docs/storage.md): the submit file and the directory it was submitted from, the cluster
 * id, the batch names, which jobs were submitted, fetched or failed, which batches retired
 * or vanished, whether it was cancelled; so running the same file again resumes the cluster
 * its jobs match. Each cluster's jobs, as they were submitted, are kept beside it in
 * <state-dir>/submit/jobs/<cluster>.json: `submit --cluster N` finishes a cluster whatever
 * became of its file since.
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
import type { SubmitProc } from './submit-file.js';

export interface SubmitRecord {
  /** A hash of the submit file's path and text. */
  key: string;
  /**
   * A hash of the jobs the file makes (submit-plan.ts), not of its text: an edit that
   * changes no job (a comment) keeps the cluster. `$(Cluster)` counts as a placeholder, so
   * the hash does not depend on the cluster's own id. In records without `cwd` (earlier
   * versions), `$(Cluster)` was expanded to the id, and relative paths resolved from the
   * directory of the run.
   */
  jobsDigest?: string;
  /** Absolute path of the submit file. */
  submitFile: string;
  /** The working directory it was submitted from: relative paths in the file are under it. */
  cwd?: string;
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
  /**
   * Batches the server no longer had while their lease ran (removed there, a server restored
   * from a backup): never submitted again but at the person's word (`--resubmit-vanished`).
   */
  vanished?: string[];
  /** The cluster whose failed jobs this one runs again (`--rerun-failed`). */
  rerunOf?: number;
}

/** Whether a cluster still has batches on the server that nobody gave up: submitted, not retired, not cancelled. */
export function unfinished(rec: SubmitRecord): boolean {
  return !rec.cancelled && rec.submitted.some((b) => !rec.retired.includes(b));
}

/** Whether a cluster has batches not yet retired that nobody gave up (submitted or still to submit). */
export function open(rec: SubmitRecord): boolean {
  return !rec.cancelled && Object.values(rec.batches).some((b) => !rec.retired.includes(b));
}

/** A cluster's jobs as submitted: what `submit --cluster N` runs, whatever became of the file. */
export interface ClusterJobs {
  cwd: string;
  procs: SubmitProc[];
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
    return this.forFile(submitFile)[0];
  }

  /** Every cluster submitted from this file (absolute path), newest first, as last loaded. */
  forFile(submitFile: string): SubmitRecord[] {
    return forFileOf(this.state, submitFile);
  }

  /** The record of a cluster id as it is on disk now (another run may have changed it, e.g. cancelled it). */
  current(cluster: number): SubmitRecord | undefined {
    return Object.values(this.load().entries).find((r) => r.cluster === cluster);
  }

  /**
   * Changes the record of another run's cluster as it is on disk now (not this process's
   * copy, which may be stale): `change` returns false to write nothing.
   */
  update(cluster: number, change: (rec: SubmitRecord) => boolean): Promise<void> {
    const run = this.saving.then(async () => {
      const rec = this.current(cluster);
      if (rec && change(rec)) await this.write(rec);
    });
    this.saving = run.catch(() => undefined);
    return run;
  }

  private jobsFile(cluster: number): string {
    return path.join(this.dir, 'jobs', `${cluster}.json`);
  }

  /** Keeps a new cluster's jobs, before anything of it is submitted. */
  async saveJobs(cluster: number, jobs: ClusterJobs): Promise<void> {
    makeDirs(path.dirname(this.jobsFile(cluster)), 'the submit state directory');
    await replaceFile(this.jobsFile(cluster), JSON.stringify(jobs));
  }

  /** A cluster's jobs as kept by saveJobs; undefined for clusters of earlier versions. */
  loadJobs(cluster: number): ClusterJobs | undefined {
    try {
      return JSON.parse(fs.readFileSync(this.jobsFile(cluster), 'utf8')) as ClusterJobs;
    } catch {
      return undefined;
    }
  }

  /** The record of a cluster id, as last loaded. */
  byCluster(cluster: number): SubmitRecord | undefined {
    return Object.values(this.state.entries).find((r) => r.cluster === cluster);
  }

  /** Every record, as last loaded. */
  all(): SubmitRecord[] {
    return Object.values(this.state.entries).sort((a, b) => a.cluster - b.cluster);
  }

  /** Every record as it is on disk now. */
  allNow(): SubmitRecord[] {
    return Object.values(this.load().entries).sort((a, b) => a.cluster - b.cluster);
  }

  /** The cluster id the next new record would get (for a tentative parse). */
  get nextCluster(): number {
    return this.state.nextCluster;
  }

  /**
   * The record `resumed` picks among the clusters of `submitFile` as they are now (another
   * run may have taken one meanwhile), else one created under the lock: a new cluster id,
   * and a batch-name time after every earlier one (batch names stay unique).
   */
  async take(submitFile: string, resumed: (recs: SubmitRecord[]) => SubmitRecord | undefined,
    make: (cluster: number, createdAt: number) => SubmitRecord): Promise<SubmitRecord> {
    try {
      return await withLockFile(this.lockFile, async () => {
        this.state = this.load();
        const existing = resumed(forFileOf(this.state, submitFile));
        if (existing) return existing;
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
    for (const [id, r] of Object.entries(onDisk.entries)) {
      if (r.cluster !== record.cluster) continue;
      // A cancel by another process while this one waited stands: its batches stay retired.
      if (r.cancelled && !record.cancelled) {
        record.cancelled = true;
        for (const b of r.retired) if (!record.retired.includes(b)) record.retired.push(b);
      }
      delete onDisk.entries[id];
    }
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

function forFileOf(state: SubmitState, submitFile: string): SubmitRecord[] {
  return Object.values(state.entries).filter((r) => r.submitFile === submitFile).sort((a, b) => b.cluster - a.cluster);
}
