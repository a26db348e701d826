/**
 * The typed surface of the BOINC remote-submission web RPCs (see docs/boinc-server.md).
 * No GAHP knowledge here: these are BOINC's own concepts.
 */
import type { NetworkSettings } from './network.js';

export interface BoincClientOptions {
  /** Project URL, ending with `/`; script names are appended to it. */
  projectUrl: string;
  /** The user's authenticator: a secret, never logged nor put in error messages. */
  authenticator: string;
  /**
   * Timeout of one HTTP attempt in milliseconds (default 60000): for the whole exchange, or
   * for uploads and downloads, for inactivity and for the answer after the body was sent.
   */
  timeoutMs?: number;
  /**
   * Retries for calls that are safe to repeat (default 4), with backoff and jitter. Bounded
   * in time too: no new attempt once 2 x timeoutMs have passed since the first began, and
   * none after a second attempt that timed out. A hanging server fails a call after two
   * timeouts; fast failures (5xx, connection refused) use the retries within that budget.
   */
  retries?: number;
  /** First backoff delay in milliseconds (default 250), doubled each retry. */
  retryBaseMs?: number;
  /** How many HTTP calls may be in flight at once to this project (default 8). */
  concurrency?: number;
  /**
   * Longest RPC reply read into memory, in bytes (default DEFAULT_MAX_REPLY_BYTES, 256 MiB);
   * a longer one fails the call with a 'protocol' BoincRpcError, code 'reply-too-large', and
   * its connection is discarded. Output files (get_output) are streamed to disk, not limited.
   */
  maxReplyBytes?: number;
  /**
   * Proxy and trust settings (boinc-rpc/network.ts): `--proxy`, `--no-proxy`, `--ca-file`,
   * and where the proxy and trust variables are read (default: process.env, as curl reads them).
   */
  network?: NetworkSettings;
  /** Optional debug sink for one line per call (already redacted). */
  log?: (line: string) => void;
}

/**
 * Options every RPC takes (as a field of its request object, or as its last argument).
 * `signal` stops the call wherever it is (queued, in flight, backing off): it fails with a
 * 'local' BoincRpcError whose `aborted` is true, `uncertain` when the request may have
 * reached the server (an aborted non-idempotent call may have taken effect).
 */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Optional per-job resource parameters; undefined means unset (sent as omitted/0). */
export interface JobParams {
  rscFpopsEst?: number;
  rscFpopsBound?: number;
  rscMemoryBound?: number;
  rscDiskBound?: number;
  delayBound?: number;
}

export interface CreateBatchRequest extends CallOptions {
  batchName: string;
  appName: string;
  /** Unix time after which the server may delete the batch (the lease). */
  expireTime: number;
}

export interface SubmitJob {
  name: string;
  /** Already validated to be carried intact by BOINC (no whitespace, quotes, etc. inside arguments). */
  commandLine: string;
  /** Physical names of the staged input files, in input-template order. */
  inputFiles: string[];
  /**
   * The job's own input template, in place of the app's (submit_rpc_handler.php passes it
   * to create_work as `--wu_template`): a whole `<input_template>...</input_template>`
   * element, sent as markup as it is. The caller builds it from the project's own template.
   */
  inputTemplate?: string;
  /** The job's own output template (`<output_template>...</output_template>`, create_work's `--result_template`), as markup. */
  outputTemplate?: string;
}

export interface SubmitBatchRequest extends CallOptions {
  /** 0 asks the server to create the batch (avoid: a failure leaves an orphan). */
  batchId: number;
  batchName: string;
  appName: string;
  appVersionNum?: number;
  jobParams?: JobParams;
  jobs: SubmitJob[];
}

/** BOINC job status words as query_batch2 reports them. */
// The four words are the known ones (and document them); any other word passes through as is.
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents
export type BoincJobStatus = 'UNSENT' | 'IN_PROGRESS' | 'DONE' | 'ERROR' | string;

export interface QueryBatch2Reply {
  /** The server's time, passed back verbatim as the next min_mod_time. */
  serverTime: string;
  /** One entry per batch name asked, in the order asked. */
  batches: Array<{ jobs: Array<{ name: string; status: BoincJobStatus }> }>;
}

export interface QueryBatchRequest extends CallOptions {
  batchId?: number;
  batchName?: string;
  /**
   * query_batch only: ask for each job's details (`get_job_details`): the flags of a job
   * BOINC gave up on and the exit status of each instance that failed on its host.
   */
  jobDetails?: boolean;
}

/** A job of a query_batch reply. */
export interface QueryBatchJob {
  id: number;
  name: string;
  canonicalInstanceId?: number;
  /** With jobDetails, lower case: done, in_progress, queued, error. */
  status?: BoincJobStatus;
  /**
   * With jobDetails, for a job with an error mask: why BOINC gave up on it, BOINC's words
   * (too_many_error_results, too_many_total_results, cancelled, ...).
   */
  errors?: string[];
  /** With jobDetails, for a job with an error mask: the exit status of each instance that failed on its host. */
  exitStatuses?: number[];
}

/** One instance (BOINC "result") of a job, as query_job reports it. */
export interface JobInstance {
  name: string;
  id: number;
  /** In words, as BOINC's web pages say it: `Error while computing`, `Timed out - no response`, ... */
  state: string;
}

export interface QueryBatchReply {
  id: number;
  name: string;
  /** BOINC batch state number: 0 init, 1 in progress, 2 completed, 3 aborted, 4 retired. */
  state: number;
  appName?: string;
  njobs: number;
  expireTime?: number;
  jobs: QueryBatchJob[];
}

/** One batch of a query_batches reply (docs/boinc-server.md): the account's batches not retired. */
export interface BatchListing {
  id: number;
  name: string;
  /** BOINC batch state number: 0 init, 1 in progress, 2 completed, 3 aborted. */
  state: number;
  appName?: string;
  njobs: number;
  nerrorJobs: number;
  fractionDone: number;
  createTime?: number;
  expireTime?: number;
}

export interface CompletedJob {
  errorMask: number;
  canonicalResultId?: number;
  errorResultId?: number;
  exitStatus: number;
  elapsedTime: number;
  cpuTime: number;
  /** The instance's stderr, HTML entities already decoded. */
  stderrOut: string;
}

export interface TemplatesRequest extends CallOptions {
  appName?: string;
  jobName?: string;
}

export interface AppTemplates {
  /** open_name of each input file_ref, in template order. */
  inputOpenNames: string[];
  /** open_name of each output file_ref, in template order. */
  outputOpenNames: string[];
  /**
   * Per output, in the same order: its file_info says `<gzip_when_done/>` (the volunteer's
   * client gzips it before upload); absent when none does.
   */
  outputGzip?: boolean[];
  /** The input template's `<rsc_memory_bound>` (bytes), when it sets one. */
  rscMemoryBound?: number;
  /** The whole `<input_template>` element as the server sent it (comments removed), when the reply has one. */
  inputTemplate?: string;
  /** The whole `<output_template>` element likewise. */
  outputTemplate?: string;
}

export interface QueryFilesRequest extends CallOptions {
  physNames: string[];
  /** Links present files to this batch. On the real server NOT idempotent. */
  batchId?: number;
  deleteTime?: number;
}

export interface UploadFile {
  physName: string;
  /** Local path streamed from disk. */
  path: string;
}

export interface UploadFilesRequest extends CallOptions {
  files: UploadFile[];
  batchId?: number;
  deleteTime?: number;
}

/** An upload_files request to be sized (uploadBodyBytes): names, sizes, batch_id, delete_time. */
export interface UploadSizeRequest {
  files: ReadonlyArray<{ physName: string; size: number }>;
  batchId?: number;
  deleteTime?: number;
}

/**
 * The size of an upload_files body as files are added one by one (uploadBodySize): at every
 * step what uploadBodyBytes says of the files added so far, in the same order.
 */
export interface UploadBodySize {
  /** Bytes of the body with the files added so far. */
  readonly bytes: number;
  /** Bytes of the body if `file` were added next. */
  with(file: { physName: string; size: number }): number;
  add(file: { physName: string; size: number }): void;
  /** Back to no files. */
  clear(): void;
}

export interface FetchOutputRequest extends CallOptions {
  jobName: string;
  /** Index of the output file in the app's output template. */
  fileNum: number;
  /** Written complete or not at all (temp file beside it, renamed into place). */
  destPath: string;
  /**
   * destPath is a temp name of the caller's, which renames it into place itself: the file is
   * written there directly (created exclusively, removed on failure), without a temp file
   * and a rename of the client's.
   */
  destIsTemp?: boolean;
}

/** An output kept by a batch-collect assimilator, by canonical result and output index (get_output3.php). */
export interface CollectedFileRequest extends CallOptions {
  /** The job's canonical result (query_completed_job's canonical_resultid, query_batch's canonical_instance_id). */
  resultId: number;
  /** Index of the output file in the app's output template. */
  index: number;
  /** Written complete or not at all, as FetchOutputRequest's. */
  destPath: string;
  destIsTemp?: boolean;
}

/** A batch's kept outputs as one zip (get_output3.php). */
export interface BatchZipRequest extends CallOptions {
  batchId: number;
  destPath: string;
  destIsTemp?: boolean;
}

export interface BoincRpc {
  ping(opts?: CallOptions): Promise<void>;
  createBatch(req: CreateBatchRequest): Promise<number>;
  submitBatch(req: SubmitBatchRequest): Promise<number>;
  queryBatch2(minModTime: string, batchNames: string[], opts?: CallOptions): Promise<QueryBatch2Reply>;
  queryBatch(req: QueryBatchRequest): Promise<QueryBatchReply>;
  queryCompletedJob(jobName: string, opts?: CallOptions): Promise<CompletedJob>;
  /** The instances of a job, by its id (query_batch gives the ids). */
  queryJob(jobId: number, opts?: CallOptions): Promise<JobInstance[]>;
  getTemplates(req: TemplatesRequest): Promise<AppTemplates>;
  abortJobs(jobNames: string[], opts?: CallOptions): Promise<void>;
  retireBatch(req: QueryBatchRequest): Promise<void>;
  setExpireTime(batchName: string, expireTime: number, opts?: CallOptions): Promise<void>;
  /** Returns the indices (into physNames) of files the server lacks. */
  queryFiles(req: QueryFilesRequest): Promise<number[]>;
  uploadFiles(req: UploadFilesRequest): Promise<void>;
  /**
   * The exact size in bytes of the HTTP body uploadFiles would send for this request
   * (multipart framing included), to keep requests within the project's post_max_size.
   */
  uploadBodyBytes(req: UploadSizeRequest): number;
  /** The same, kept as files are added to a request one by one (grouping files under post_max_size). */
  uploadBodySize(req: Omit<UploadSizeRequest, 'files'>): UploadBodySize;
  /** The size in bytes of the HTTP body submitBatch would send for this request (to keep it within post_max_size). */
  submitBatchBodyBytes(req: Omit<SubmitBatchRequest, 'signal'>): number;
  /** Streams output file fileNum of the job's canonical instance to destPath. */
  fetchOutputFile(req: FetchOutputRequest): Promise<{ bytes: number }>;
  /** Streams an output a batch-collect assimilator kept (get_output3.php get_file) to destPath. */
  fetchCollectedFile(req: CollectedFileRequest): Promise<{ bytes: number }>;
  /** Streams the zip of a batch's kept outputs (get_output3.php get_batch_zip) to destPath. */
  fetchBatchZip(req: BatchZipRequest): Promise<{ bytes: number }>;
  /**
   * The stderr of a job instance (result id, as query_job gives it) from the project's web
   * page result.php, logged in by the authenticator as a cookie; undefined when it shows none.
   */
  instanceStderr(resultId: number, opts?: CallOptions): Promise<string | undefined>;
  /** Releases keep-alive connections. */
  close(): void;
}
