/**
 * BoincClient: the typed BOINC remote-submission RPC client (docs/boinc-server.md).
 * Requests are XML documents (every value escaped) POSTed as multipart/form-data; replies
 * are read leniently (xml.ts, replies.ts); HTTP, retries and redaction live in transport.ts.
 */
import { BoincRpcError } from './errors.js';
import { Transport } from './transport.js';
import { checkReply, XmlRequest, xmlElement } from './xml.js';
import {
  parseAbsentFiles,
  parseBatchId,
  parseCompletedJob,
  parseQueryBatch,
  parseQueryBatch2,
  parseQueryBatches,
  parseQueryJob,
  parseResultPageStderr,
  parseSuccess,
  parseTemplates,
} from './replies.js';
import type {
  AppTemplates,
  BatchListing,
  BatchZipRequest,
  BoincClientOptions,
  CollectedFileRequest,
  CallOptions,
  BoincRpc,
  CompletedJob,
  CreateBatchRequest,
  FetchOutputRequest,
  JobInstance,
  QueryBatch2Reply,
  QueryBatchReply,
  QueryBatchRequest,
  QueryFilesRequest,
  SubmitBatchRequest,
  TemplatesRequest,
  UploadFilesRequest,
  UploadBodySize,
  UploadSizeRequest,
} from './types.js';
import { filePartSizer, multipartLength } from './multipart.js';

const SUBMIT = 'submit_rpc_handler.php';

/**
 * The longest reply read by default. The largest legitimate one measured, query_batch2 of
 * 100 batches x 1,000 jobs (test/commands/query-big.test.ts), is 14.7 MB; a query_batch with
 * job details of a 100,000-job batch is of the same order. 256 MiB leaves ample room and stays
 * well below what node can decode into one string (about 512 MiB).
 */
export const DEFAULT_MAX_REPLY_BYTES = 256 * 1024 * 1024;
const JOB_FILE = 'job_file.php';
/** result.php's page: BOINC keeps at most 64 KiB of an instance's stderr, escaped it grows up to 6 times. */
const RESULT_PAGE_MAX_BYTES = 1024 * 1024;

export class BoincClient implements BoincRpc {
  private readonly transport: Transport;
  private readonly projectUrl: string;
  private readonly authenticator: string;

  constructor(opts: BoincClientOptions) {
    this.projectUrl = opts.projectUrl.endsWith('/') ? opts.projectUrl : opts.projectUrl + '/';
    this.authenticator = opts.authenticator;
    this.transport = new Transport({
      timeoutMs: opts.timeoutMs ?? 60_000,
      retries: opts.retries ?? 4,
      retryBaseMs: opts.retryBaseMs ?? 250,
      concurrency: opts.concurrency ?? 8,
      maxReplyBytes: opts.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES,
      ...(opts.network ? { network: opts.network } : {}),
      authenticator: opts.authenticator,
      log: opts.log,
    });
  }

  /** Removes the authenticator from a text (for callers that build their own messages). */
  redact(text: string): string {
    return this.transport.redact(text);
  }

  private req(root: string): XmlRequest {
    return new XmlRequest(root).el('authenticator', this.authenticator);
  }

  /**
   * One RPC: POST, check the reply (errors, fatal, cut short), read it with `read`.
   * Whatever goes wrong comes out as a redacted BoincRpcError.
   */
  private async call<T>(
    rpc: string,
    script: string,
    build: () => string,
    idempotent: boolean,
    read: (text: string) => T,
    signal: AbortSignal | undefined,
    files?: Array<{ path: string; name: string }>,
    replyOptions: { jobErrorFlags?: boolean } = {},
  ): Promise<T> {
    let result: T | undefined;
    try {
      const request = build();
      await this.transport.post(rpc, this.projectUrl + script, request, {
        idempotent,
        files,
        signal,
        parse: (body) => {
          try {
            const { text } = checkReply(rpc, body, rpc, replyOptions);
            result = read(text);
          } catch (err) {
            // An unreadable answer to a request that reached the server: it may have acted.
            if (err instanceof BoincRpcError && err.kind === 'protocol' && !err.uncertain) {
              throw new BoincRpcError(err.rpc, err.kind, err.serverMessage, { ...err.options, uncertain: true });
            }
            throw err;
          }
        },
      });
      return result as T;
    } catch (err) {
      throw this.wrap(rpc, err);
    }
  }

  private wrap(rpc: string, err: unknown): BoincRpcError {
    if (err instanceof BoincRpcError) return this.transport.redactError(err);
    const message = err instanceof Error ? err.message : String(err);
    return new BoincRpcError(rpc, 'protocol', this.transport.redact(`internal error: ${message}`), { uncertain: true });
  }

  async ping(opts: CallOptions = {}): Promise<void> {
    // BOINC's own client sends `<ping> </ping>` ("the space is needed"); no authenticator.
    await this.call('ping', SUBMIT, () => '<ping> </ping>\n', true, (t) => parseSuccess('ping', t), opts.signal);
  }

  async createBatch(req: CreateBatchRequest): Promise<number> {
    return this.call(
      'create_batch',
      SUBMIT,
      () =>
        // Current handlers read the names and expire_time at the top level, where BOINC's
        // C++ client (remote_submit.cpp) sends them (docs/boinc-server.md); older handlers
        // read the names inside <batch>. Sending both works with either.
        this.req('create_batch')
          .el('batch_name', req.batchName)
          .el('app_name', req.appName)
          .el('expire_time', req.expireTime)
          .open('batch')
          .el('batch_name', req.batchName)
          .el('app_name', req.appName)
          .el('expire_time', req.expireTime)
          .close('batch')
          .toString(),
      false,
      (t) => parseBatchId('create_batch', t),
      req.signal,
    );
  }

  async submitBatch(req: SubmitBatchRequest): Promise<number> {
    return this.call('submit_batch', SUBMIT, () => this.submitRequest(req), false, (t) => parseBatchId('submit_batch', t), req.signal);
  }

  submitBatchBodyBytes(req: Omit<SubmitBatchRequest, 'signal'>): number {
    return multipartLength(this.submitRequest(req), []);
  }

  private submitRequest(req: Omit<SubmitBatchRequest, 'signal'>): string {
    const x = this.req('submit_batch')
      .open('batch')
      .el('batch_id', req.batchId)
      .el('batch_name', req.batchName)
      .el('app_name', req.appName)
      .opt('app_version_num', req.appVersionNum);
    const p = req.jobParams;
    if (p && Object.values(p).some((v) => v !== undefined)) {
      x.open('job_params')
        .opt('rsc_disk_bound', p.rscDiskBound)
        .opt('rsc_fpops_est', p.rscFpopsEst)
        .opt('rsc_fpops_bound', p.rscFpopsBound)
        .opt('rsc_memory_bound', p.rscMemoryBound)
        .opt('delay_bound', p.delayBound)
        .close('job_params');
    }
    for (const job of req.jobs) {
      x.open('job').el('name', job.name);
      if (job.commandLine) x.el('command_line', job.commandLine);
      for (const f of job.inputFiles) {
        x.open('input_file').el('mode', 'local_staged').el('source', f).close('input_file');
      }
      if (job.inputTemplate) x.markup(job.inputTemplate);
      if (job.outputTemplate) x.markup(job.outputTemplate);
      x.close('job');
    }
    return x.close('batch').toString();
  }

  async queryBatch2(minModTime: string, batchNames: string[], opts: CallOptions = {}): Promise<QueryBatch2Reply> {
    return this.call(
      'query_batch2',
      SUBMIT,
      () => {
        const x = this.req('query_batch2').el('min_mod_time', minModTime === '' ? '0' : minModTime);
        for (const name of batchNames) x.el('batch_name', name);
        return x.toString();
      },
      true,
      (t) => parseQueryBatch2('query_batch2', t, batchNames.length),
      opts.signal,
    );
  }

  private batchRef(x: XmlRequest, rpc: string, req: QueryBatchRequest): XmlRequest {
    if (req.batchId !== undefined && req.batchId !== 0) return x.el('batch_id', req.batchId);
    if (req.batchName !== undefined && req.batchName !== '') return x.el('batch_name', req.batchName);
    throw new BoincRpcError(rpc, 'local', 'neither batch id nor batch name given');
  }

  async queryBatch(req: QueryBatchRequest): Promise<QueryBatchReply> {
    return this.call(
      'query_batch',
      SUBMIT,
      () => {
        const x = this.batchRef(this.req('query_batch'), 'query_batch', req);
        if (req.jobDetails) x.el('get_job_details', 1);
        return x.toString();
      },
      true,
      (t) => parseQueryBatch('query_batch', t),
      req.signal,
      undefined,
      { jobErrorFlags: req.jobDetails === true },
    );
  }

  /** query_batches: every batch of the account that is not retired. */
  async queryBatches(opts: CallOptions = {}): Promise<BatchListing[]> {
    return this.call(
      'query_batches',
      SUBMIT,
      () => this.req('query_batches').toString(),
      true,
      (t) => parseQueryBatches('query_batches', t),
      opts.signal,
    );
  }

  async queryJob(jobId: number, opts: CallOptions = {}): Promise<JobInstance[]> {
    return this.call(
      'query_job',
      SUBMIT,
      () => this.req('query_job').el('job_id', jobId).toString(),
      true,
      (t) => parseQueryJob('query_job', t),
      opts.signal,
    );
  }

  async queryCompletedJob(jobName: string, opts: CallOptions = {}): Promise<CompletedJob> {
    return this.call(
      'query_completed_job',
      SUBMIT,
      () => this.req('query_completed_job').el('job_name', jobName).toString(),
      true,
      (t) => parseCompletedJob('query_completed_job', t),
      opts.signal,
    );
  }

  async getTemplates(req: TemplatesRequest): Promise<AppTemplates> {
    return this.call(
      'get_templates',
      SUBMIT,
      () => {
        const x = this.req('get_templates');
        if (req.appName) x.el('app_name', req.appName);
        else if (req.jobName) x.el('job_name', req.jobName);
        else throw new BoincRpcError('get_templates', 'local', 'neither app name nor job name given');
        return x.toString();
      },
      true,
      (t) => parseTemplates('get_templates', t),
      req.signal,
    );
  }

  async abortJobs(jobNames: string[], opts: CallOptions = {}): Promise<void> {
    if (jobNames.length === 0) return;
    await this.call(
      'abort_jobs',
      SUBMIT,
      () => {
        const x = this.req('abort_jobs');
        for (const name of jobNames) x.el('job_name', name);
        return x.toString();
      },
      false,
      (t) => parseSuccess('abort_jobs', t),
      opts.signal,
    );
  }

  async retireBatch(req: QueryBatchRequest): Promise<void> {
    await this.call(
      'retire_batch',
      SUBMIT,
      () => this.batchRef(this.req('retire_batch'), 'retire_batch', req).toString(),
      false,
      (t) => parseSuccess('retire_batch', t),
      req.signal,
    );
  }

  async setExpireTime(batchName: string, expireTime: number, opts: CallOptions = {}): Promise<void> {
    await this.call(
      'set_expire_time',
      SUBMIT,
      () => this.req('set_expire_time').el('batch_name', batchName).el('expire_time', expireTime).toString(),
      true,
      (t) => parseSuccess('set_expire_time', t),
      opts.signal,
    );
  }

  async queryFiles(req: QueryFilesRequest): Promise<number[]> {
    if (req.physNames.length === 0) return [];
    const linking = req.batchId !== undefined && req.batchId !== 0;
    return this.call(
      'query_files',
      JOB_FILE,
      () => {
        const x = this.req('query_files');
        if (linking) x.el('batch_id', req.batchId!);
        x.opt('delete_time', req.deleteTime);
        for (const name of req.physNames) x.el('phys_name', name);
        return x.toString();
      },
      // With a batch_id the real server links files to the batch, and a repeat fails.
      !linking,
      (t) => parseAbsentFiles('query_files', t, req.physNames.length),
      req.signal,
    );
  }

  async uploadFiles(req: UploadFilesRequest): Promise<void> {
    if (req.files.length === 0) return;
    const seen = new Set<string>();
    for (const f of req.files) {
      if (seen.has(f.physName)) throw new BoincRpcError('upload_files', 'local', `physical name ${f.physName} given twice`);
      seen.add(f.physName);
    }
    await this.call(
      'upload_files',
      JOB_FILE,
      () => this.uploadRequest(req),
      false,
      (t) => parseSuccess('upload_files', t),
      req.signal,
      req.files.map((f) => ({ path: f.path, name: f.physName })),
    );
  }

  private uploadRequest(req: { files: ReadonlyArray<{ physName: string }>; batchId?: number; deleteTime?: number }): string {
    const x = this.req('upload_files');
    if (req.batchId !== undefined && req.batchId !== 0) x.el('batch_id', req.batchId);
    x.opt('delete_time', req.deleteTime);
    for (const f of req.files) x.el('phys_name', f.physName);
    return x.toString();
  }

  uploadBodyBytes(req: UploadSizeRequest): number {
    return multipartLength(
      this.uploadRequest(req),
      req.files.map((f) => ({ name: f.physName, size: f.size })),
    );
  }

  uploadBodySize(req: Omit<UploadSizeRequest, 'files'>): UploadBodySize {
    // The body grows by each file's line in the request field and its part: sizing a
    // group file by file costs the same for every file, not the whole group again.
    const empty = this.uploadBodyBytes({ ...req, files: [] });
    const partLength = filePartSizer();
    const grows = (f: { physName: string; size: number }, index: number) =>
      Buffer.byteLength(xmlElement('upload_files', 'phys_name', f.physName), 'utf8') + partLength(index, f.physName, f.size);
    let bytes = empty;
    let files = 0;
    // with(f) and then add(f) is the usual pair: the growth is computed once for both.
    let asked: { file: object; index: number; grows: number } | undefined;
    const growth = (f: { physName: string; size: number }) => {
      if (asked?.file !== f || asked.index !== files) asked = { file: f, index: files, grows: grows(f, files) };
      return asked.grows;
    };
    return {
      get bytes() {
        return bytes;
      },
      with: (f) => bytes + growth(f),
      add(f) {
        bytes += growth(f);
        files++;
      },
      clear() {
        bytes = empty;
        files = 0;
      },
    };
  }

  /** The get_output.php URL of an output file (holds the authenticator: never log it). */
  outputUrl(jobName: string, fileNum: number): string {
    const q = new URLSearchParams({
      cmd: 'workunit_file',
      auth_str: this.authenticator,
      wu_name: jobName,
      file_num: String(fileNum),
    });
    return `${this.projectUrl}get_output.php?${q.toString()}`;
  }

  async fetchOutputFile(req: FetchOutputRequest): Promise<{ bytes: number }> {
    try {
      if (!Number.isInteger(req.fileNum) || req.fileNum < 0) {
        throw new BoincRpcError('get_output', 'local', `invalid file number ${req.fileNum}`);
      }
      return await this.transport.download('get_output', this.outputUrl(req.jobName, req.fileNum), req.destPath, req.signal, req.destIsTemp === true);
    } catch (err) {
      throw this.wrap('get_output', err);
    }
  }

  /**
   * get_output3.php?action=get_file: output `index` (output-template order) of a canonical
   * result that a batch-collect assimilator moved to `results/<batch>/` (docs/boinc-server.md,
   * "Batch-collect projects: get_output3.php"). Logged in by the authenticator as the `auth`
   * cookie. The page's refusals are errors, never file content: not logged in (code
   * `refused`), a job name BOINC's check refuses (`bad-name`), no such file (`no-such-file`).
   */
  async fetchCollectedFile(req: CollectedFileRequest): Promise<{ bytes: number }> {
    try {
      if (!Number.isInteger(req.resultId) || req.resultId <= 0) throw new BoincRpcError('get_output3', 'local', `invalid result id ${req.resultId}`);
      if (!Number.isInteger(req.index) || req.index < 0) throw new BoincRpcError('get_output3', 'local', `invalid file index ${req.index}`);
      const q = new URLSearchParams({ action: 'get_file', result_id: String(req.resultId), index: String(req.index), download: '1' });
      return await this.transport.download('get_output3', `${this.projectUrl}get_output3.php?${q.toString()}`, req.destPath, req.signal, req.destIsTemp === true, { authenticator: this.authenticator });
    } catch (err) {
      throw this.wrap('get_output3', err);
    }
  }

  /**
   * get_output3.php?action=get_batch_zip: every file a batch-collect assimilator keeps for
   * the batch (`<job>__file_<open name>`, `<job>_error`, `<job>_no_output_files`) as one zip.
   * Logged in as fetchCollectedFile; no batch directory is code `no-such-file`.
   */
  async fetchBatchZip(req: BatchZipRequest): Promise<{ bytes: number }> {
    try {
      if (!Number.isInteger(req.batchId) || req.batchId <= 0) throw new BoincRpcError('get_output3', 'local', `invalid batch id ${req.batchId}`);
      const q = new URLSearchParams({ action: 'get_batch_zip', batch_id: String(req.batchId) });
      return await this.transport.download('get_output3', `${this.projectUrl}get_output3.php?${q.toString()}`, req.destPath, req.signal, req.destIsTemp === true, { authenticator: this.authenticator });
    } catch (err) {
      throw this.wrap('get_output3', err);
    }
  }

  /**
   * The stderr of a job instance (a BOINC result, by the id query_job gives), from the
   * project's web page result.php as its owner sees it (docs/boinc-server.md, "A failed
   * instance's stderr"): the only way to it for an instance that failed, as the real
   * query_completed_job dies for a job without a canonical instance. Logged in by the
   * authenticator as the `auth` cookie, as fetchCollectedFile. Undefined when the page
   * shows no stderr (the instance is not over); not logged in is code `refused`.
   */
  async instanceStderr(resultId: number, opts: CallOptions = {}): Promise<string | undefined> {
    try {
      if (!Number.isInteger(resultId) || resultId <= 0) throw new BoincRpcError('result_page', 'local', `invalid result id ${resultId}`);
      const q = new URLSearchParams({ resultid: String(resultId) });
      const page = await this.transport.page('result_page', `${this.projectUrl}result.php?${q.toString()}`, { authenticator: this.authenticator }, RESULT_PAGE_MAX_BYTES, opts.signal);
      return parseResultPageStderr(page);
    } catch (err) {
      throw this.wrap('result_page', err);
    }
  }

  close(): void {
    this.transport.close();
  }
}
