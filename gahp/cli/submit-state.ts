/**
 * What `boinc-gahp submit` remembers per submit file, in <state-dir>/submit/clusters.json
 * (docs/storage.md): the cluster id, the batch names, which jobs were submitted, fetched or
 * failed and which batches retired, so running the same file again resumes.
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
  key: string;
  submitFile: string;
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

  /** The record of a submit file (by key), as last loaded. */
  get(key: string): SubmitRecord | undefined {
    return this.state.entries[key];
  }

  /** The cluster id the next new record would get (for a tentative parse). */
  get nextCluster(): number {
    return this.state.nextCluster;
  }

  /**
   * The record of `key`, created under the lock if there is none (or `fresh`): a new cluster
   * id, and a batch-name time after every earlier one (batch names stay unique).
   */
  async take(key: string, fresh: boolean, make: (cluster: number, createdAt: number) => SubmitRecord): Promise<SubmitRecord> {
    try {
      return await withLockFile(this.lockFile, async () => {
        this.state = this.load();
        const existing = fresh ? undefined : this.state.entries[key];
        if (existing) return existing;
        const cluster = this.state.nextCluster;
        const createdAt = Math.max(Math.floor(Date.now() / 1000), this.state.lastCreatedAt + 1);
        const record = make(cluster, createdAt);
        this.state.entries[key] = record;
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
    onDisk.entries[record.key] = record;
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
