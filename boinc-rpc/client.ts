/**
 * BoincClient: the typed BOINC remote-submission RPC client (see shared/BOINC-RPC.md).
 * Work in progress: ping first; the other RPCs follow.
 */
import got from 'got';
import FormData from 'form-data';
import * as http from 'node:http';
import * as https from 'node:https';
import { BoincRpcError } from './errors.js';
import type {
  AppTemplates, BoincClientOptions, BoincRpc, CompletedJob, CreateBatchRequest, FetchOutputRequest,
  QueryBatch2Reply, QueryBatchReply, QueryBatchRequest, QueryFilesRequest, SubmitBatchRequest,
  TemplatesRequest, UploadFilesRequest,
} from './types.js';

export class BoincClient implements BoincRpc {
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent = new https.Agent({ keepAlive: true });

  constructor(private readonly opts: BoincClientOptions) {}

  async ping(): Promise<void> {
    const form = new FormData();
    form.append('request', '<ping> </ping>\n');
    let body: string;
    try {
      const res = await got.post(this.opts.projectUrl + 'submit_rpc_handler.php', {
        body: form,
        headers: form.getHeaders(),
        timeout: { request: this.opts.timeoutMs ?? 60000 },
        retry: { limit: 0 },
        agent: { http: this.httpAgent, https: this.httpsAgent },
        responseType: 'buffer',
      });
      body = res.body.toString('latin1');
    } catch (e) {
      throw new BoincRpcError('ping', 'transport', String((e as Error).message ?? e));
    }
    if (!body.includes('<success>')) throw new BoincRpcError('ping', 'protocol', 'unexpected reply');
  }

  private notYet(rpc: string): never {
    throw new BoincRpcError(rpc, 'protocol', 'not implemented yet');
  }

  async createBatch(_req: CreateBatchRequest): Promise<number> { this.notYet('create_batch'); }
  async submitBatch(_req: SubmitBatchRequest): Promise<number> { this.notYet('submit_batch'); }
  async queryBatch2(_m: string, _b: string[]): Promise<QueryBatch2Reply> { this.notYet('query_batch2'); }
  async queryBatch(_req: QueryBatchRequest): Promise<QueryBatchReply> { this.notYet('query_batch'); }
  async queryCompletedJob(_j: string): Promise<CompletedJob> { this.notYet('query_completed_job'); }
  async getTemplates(_req: TemplatesRequest): Promise<AppTemplates> { this.notYet('get_templates'); }
  async abortJobs(_j: string[]): Promise<void> { this.notYet('abort_jobs'); }
  async retireBatch(_req: QueryBatchRequest): Promise<void> { this.notYet('retire_batch'); }
  async setExpireTime(_b: string, _t: number): Promise<void> { this.notYet('set_expire_time'); }
  async queryFiles(_req: QueryFilesRequest): Promise<number[]> { this.notYet('query_files'); }
  async uploadFiles(_req: UploadFilesRequest): Promise<void> { this.notYet('upload_files'); }
  async fetchOutputFile(_req: FetchOutputRequest): Promise<{ bytes: number }> { this.notYet('get_output'); }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
