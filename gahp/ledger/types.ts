/**
 * The batch ledger: the GAHP's crash-safe local record of what it submitted, per project
 * and batch. Used by BOINC_SUBMIT's repeat safety, by status queries, and by the CLI's
 * `status` view. Implementations must survive kill -9 at any moment and be readable by a
 * second process while the GAHP runs.
 */

export type LedgerBatchState =
  /** create_batch may have been sent; batchId may be unknown. */
  | 'creating'
  /** The batch exists on the server; files are being staged (physFiles: those linked). */
  | 'staging'
  /** submit_batch succeeded: the batch holds its jobs. */
  | 'submitted'
  | 'retired';

export interface LedgerBatch {
  projectUrl: string;
  name: string;
  app: string;
  state: LedgerBatchState;
  /** The server's batch id, once known. */
  batchId?: number;
  /** Unix time of the lease (expire_time) last set on the server. */
  leaseExpiresAt?: number;
  /**
   * Physical file names (condorv_<md5>) linked to the batch: in 'staging', those known
   * linked (a repeat after a crash links only the others); once 'submitted', its jobs' files.
   */
  physFiles: string[];
  /** Job name -> last known status (NOT_STARTED, IN_PROGRESS, DONE, ERROR, or SUBMITTED). */
  jobs: Record<string, string>;
  /**
   * Job name -> why the job was left out of the batch (never sent to BOINC) by the submit
   * that completed the batch; absent when none was. A patch carrying it replaces the whole
   * map: each completed submit of a batch checks all of its jobs again.
   */
  refused?: Record<string, string>;
  /** server_time of the last query_batch2 that covered this batch. */
  lastServerTime?: string;
  createdAt: number;
  updatedAt: number;
}

export type LedgerBatchPatch = Partial<Omit<LedgerBatch, 'projectUrl' | 'name' | 'createdAt' | 'updatedAt'>>;

/** What the ledger tells of a job's batch (Ledger.batchOfJob). */
export interface JobBatch {
  name: string;
  app: string;
  createdAt: number;
}

/**
 * One batch's part of a status query: each job's name and status (the gridmanager's word),
 * as the server listed them. Objects of the reply's own shape, so the query hands the
 * reply's jobs over as they are instead of a new pair for each of 100,000 jobs.
 */
export interface LedgerQueryBatch {
  name: string;
  jobs: ReadonlyArray<{ readonly name: string; readonly status: string }>;
}

export interface Ledger {
  /**
   * A snapshot of one batch record (later changes do not show in it). Cheap even for huge
   * batches: `jobs` is built on first access.
   */
  get(projectUrl: string, batchName: string): LedgerBatch | undefined;
  /**
   * The jobs of a batch submitted again (same submitter and cluster.proc) in a batch the
   * ledger recorded later; undefined when there are none (docs/storage.md, "Superseded jobs").
   */
  superseded(projectUrl: string, batchName: string): ReadonlySet<string> | undefined;
  /**
   * The batch holding a job, when this ledger recorded the job in it: its name, app and
   * creation time. The batch is the one named by the job's name up to its last `#` (the
   * gridmanager's and the CLI's job names) or its last `_` (the BLAHP's). Cheap: no view
   * of the batch is made.
   */
  batchOfJob(projectUrl: string, jobName: string): JobBatch | undefined;
  /**
   * The jobs the submit of a batch left out, with why (the batch's `refused`, without a
   * view of the batch: asked per batch by every status query); undefined when none.
   */
  refused(projectUrl: string, batchName: string): ReadonlyMap<string, string> | undefined;
  /**
   * Why a job was left out of its batch, when the ledger recorded it as refused: its batch
   * found by the job's name, as batchOfJob does. Undefined for any other job.
   */
  refusal(projectUrl: string, jobName: string): string | undefined;
  /** All batches, optionally of one project, most recently updated first. */
  list(projectUrl?: string): LedgerBatch[];
  /** Creates or updates a batch record; durable when the promise resolves. */
  upsert(projectUrl: string, batchName: string, patch: LedgerBatchPatch): Promise<LedgerBatch>;
  /** Records job statuses seen by a status query (merged into `jobs`). */
  recordStatuses(projectUrl: string, batchName: string, statuses: Record<string, string>, serverTime?: string): Promise<void>;
  /**
   * Records what one status query (query_batch2 over several batches) saw, as ONE journal
   * entry: only statuses that differ from the record are written. Batches the ledger does
   * not know are ignored (it records what this GAHP submitted). Yields to the event loop
   * while encoding big updates.
   */
  recordQuery(projectUrl: string, serverTime: string, batches: ReadonlyArray<LedgerQueryBatch>): Promise<void>;
  /** Flushes and releases files. */
  close(): Promise<void>;
}
