/**
 * Test side: HTCondor's gridmanager speaking the BLAH protocol to bin/boinc-gahp, as it does
 * for `grid_resource = batch boinc` when BOINC_GAHP is defined (HTCondor's
 * `src/condor_gridmanager/infnbatchjob.cpp` and `gahp-client.cpp`; docs/blah-route.md):
 *
 * - the submit ad is INFNBatchJob::buildSubmitAd's, written as ClassAdUnParser writes it
 *   (`[ Name = value; ... ]`, strings with `\"` and `\\`), then escaped for the line with
 *   escapeGahpString (space, backslash, CR, LF);
 * - each result's token count is asserted as gahp-client.cpp does (ping and cancel 3,
 *   submit 4, status 5, reqid included): another count would abort the real gridmanager.
 */
import { GahpProcess, type GahpStartOptions } from './gahp-process.js';
import { escapeGahpString } from './gridmanager.js';

export type AdField = string | number | boolean;

/** A literal as ClassAdUnParser writes it. */
export function unparse(v: AdField): string {
  if (typeof v === 'string') return `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t')}"`;
  return String(v);
}

/** The ad's text, attributes in the given order. */
export function submitAdText(fields: Record<string, AdField>): string {
  return `[ ${Object.entries(fields).map(([k, v]) => `${k} = ${unparse(v)}`).join('; ')} ]`;
}

/** The fields buildSubmitAd writes for a plain job of `batch boinc` (the real session's, docs/blah-route.md). */
export function jobAd<T extends Record<string, AdField> & { Iwd: string }>(over: T): Record<string, AdField> & { Iwd: string } {
  return {
    In: '/dev/null',
    Cmd: `${over.Iwd}/uppercase`,
    Err: 'job.err',
    Out: 'job.out',
    Queue: 'uppercase',
    gridtype: 'boinc',
    StageCmd: false,
    Arguments: '',
    Environment: '',
    GridResource: 'batch boinc',
    JobDirectory: `home_bl_127.0.0.1_19718_alice_vm_1.0_${Math.floor(Date.now() / 1000)}`,
    TransferInput: 'in',
    TransferOutput: 'out',
    ...over,
  };
}

export class GridmanagerError extends Error {
  override name = 'GridmanagerError';
}

export interface StatusResult {
  rc: number;
  message: string;
  jobStatus: number;
  ad: string;
}

/** The GAHP started as the gridmanager starts BOINC_GAHP for batch boinc: no arguments, the project in its environment. */
export class BlahGridmanager {
  private constructor(readonly gahp: GahpProcess) {}

  /** `url` and `authFile` undefined: the GAHP's environment names no project (HTCondor's configuration may). */
  static async start(url: string | undefined, authFile: string | undefined, opts: GahpStartOptions = {}): Promise<BlahGridmanager> {
    const gahp = await GahpProcess.start({
      ...opts,
      env: { ...(url !== undefined ? { BOINC_GAHP_PROJECT_URL: url } : {}), ...(authFile !== undefined ? { BOINC_GAHP_AUTHENTICATOR_FILE: authFile } : {}), ...opts.env },
    });
    const g = new BlahGridmanager(gahp);
    const replies = await gahp.startup();
    if (!replies[0]!.split(' ').includes('BLAH_JOB_SUBMIT')) throw new GridmanagerError(`COMMANDS lacks BLAH_JOB_SUBMIT: ${replies[0]}`);
    return g;
  }

  private async call(words: string, arity: number, timeoutMs = 60_000): Promise<string[]> {
    const r = await this.gahp.call(words, timeoutMs);
    // gahp-client.cpp: ASSERT(result->argc == N), the reqid counted.
    if (r.length + 1 !== arity) throw new GridmanagerError(`${words.split(' ')[0]} result has ${r.length + 1} tokens, the gridmanager asserts ${arity}: ${JSON.stringify(r)}`);
    return r;
  }

  async ping(): Promise<{ rc: number; message: string }> {
    const [rc, message] = await this.call('BLAH_PING boinc', 3);
    return { rc: Number(rc), message: message! };
  }

  async submit(fields: Record<string, AdField>): Promise<{ rc: number; message: string; jobId: string }> {
    const [rc, message, jobId] = await this.call(`BLAH_JOB_SUBMIT ${escapeGahpString(submitAdText(fields))}`, 4);
    return { rc: Number(rc), message: message!, jobId: jobId! };
  }

  /**
   * Submits every ad as the gridmanager does with several jobs ready: all the request lines
   * first (up to its 50 pending requests), then the results as they come.
   */
  async submitMany(ads: ReadonlyArray<Record<string, AdField>>): Promise<Array<{ rc: number; message: string; jobId: string }>> {
    const ids: string[] = [];
    for (const fields of ads) {
      const id = this.gahp.reqId();
      const reply = await this.gahp.request(`BLAH_JOB_SUBMIT ${id} ${escapeGahpString(submitAdText(fields))}`);
      if (reply !== 'S') throw new GridmanagerError(`BLAH_JOB_SUBMIT answered ${reply}`);
      ids.push(id);
    }
    const out = [];
    for (const id of ids) {
      const r = await this.gahp.waitResult(id, 60_000);
      if (r.length !== 3) throw new GridmanagerError(`BLAH_JOB_SUBMIT result has ${r.length + 1} tokens, the gridmanager asserts 4`);
      out.push({ rc: Number(r[0]), message: r[1]!, jobId: r[2]! });
    }
    return out;
  }

  async status(jobId: string): Promise<StatusResult> {
    const [rc, message, jobStatus, ad] = await this.call(`BLAH_JOB_STATUS ${escapeGahpString(jobId)}`, 5);
    return { rc: Number(rc), message: message!, jobStatus: Number(jobStatus), ad: ad! };
  }

  async cancel(jobId: string): Promise<{ rc: number; message: string }> {
    const [rc, message] = await this.call(`BLAH_JOB_CANCEL ${escapeGahpString(jobId)}`, 3);
    return { rc: Number(rc), message: message! };
  }

  /**
   * Polls a job's status until it is `want` (or the time is up); returns the last answer.
   * The default bound is generous: a loaded 2-core machine (CI) runs the GAHP's fetches late.
   */
  async waitStatus(jobId: string, want: number, ms = 60_000): Promise<StatusResult> {
    const until = Date.now() + ms;
    for (;;) {
      const st = await this.status(jobId);
      if (st.jobStatus === want || Date.now() > until) return st;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  close(): Promise<void> {
    return this.gahp.close();
  }
}
