/**
 * Submit figures.
 * - warm_over_cold, submit_s, submit_rss_mb: 2,000 jobs over 500 distinct 1 MiB input files.
 *   Cold = a fresh GAHP (empty hash cache) and a fresh test server (no files). Warm = a second
 *   BOINC_SUBMIT from the same GAHP with the same jobs and inputs (new batch and job names:
 *   BOINC job names are unique server-wide), so hashes are cached and the files already on
 *   the server. RSS is the GAHP's peak over the cold submit.
 * - big_upload_rss_mb: the GAHP's peak RSS while submitting one job with a 2 GiB input.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { escapeToken } from '../../../gahp/protocol/escape.js';
import { GahpDriver } from '../lib/driver.js';
import { RssSampler } from '../lib/proc.js';
import { BenchServer } from '../lib/server.js';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { GiB, MiB, readThrough, writeMany, writeSparse } from '../lib/files.js';
import { secondsSince } from '../lib/stats.js';

export const APP = 'uppercase';
export const APP_INPUT = 'in';

/** A BOINC_SUBMIT line (after the reqid) as HTCondor builds it. */
export function submitLine(batch: string, jobs: Array<{ name: string; args?: string[]; inputs: string[] }>, app = APP, input = APP_INPUT): string {
  const parts: string[] = [escapeToken(batch), app, String(jobs.length)];
  for (const j of jobs) {
    parts.push(escapeToken(j.name), String(j.args?.length ?? 0), ...(j.args ?? []).map(escapeToken), String(j.inputs.length));
    for (const src of j.inputs) parts.push(escapeToken(src), input);
  }
  parts.push('NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL');
  return parts.join(' ');
}

let batchSeq = 0;
export function batchName(tag: string): string {
  return `condor#bench@localhost#${APP}#${Math.floor(Date.now() / 1000)}${tag}${++batchSeq}`;
}

export function jobsOver(batch: string, files: readonly string[], njobs: number): Array<{ name: string; inputs: string[] }> {
  const jobs = [];
  for (let i = 0; i < njobs; i++) jobs.push({ name: `${batch}#${1000 + Math.floor(i / 1000)}.${i % 1000}`, inputs: [files[i % files.length]!] });
  return jobs;
}

/**
 * Runs a BOINC_SUBMIT to completion (S, then the R notification, then RESULTS, as the
 * gridmanager does: no polling delay in the figure); throws unless it succeeded. Returns
 * seconds from writing the request to reading the result.
 */
export async function timedSubmit(gahp: GahpDriver, line: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const result = await gahp.callNotified('BOINC_SUBMIT', line);
  const s = secondsSince(t0);
  if (result !== 'NULL') throw new Error(`BOINC_SUBMIT failed: ${result.slice(0, 500)}`);
  return s;
}

export interface SubmitSizes {
  njobs: number;
  nfiles: number;
  fileBytes: number;
}
export const FULL_SUBMIT: SubmitSizes = { njobs: 2000, nfiles: 500, fileBytes: MiB };
export const QUICK_SUBMIT: SubmitSizes = { njobs: 500, nfiles: 125, fileBytes: MiB };

export interface SubmitRun {
  cold_s: number;
  warm_s: number;
  cold_rss_mb: number;
  warmRpcs: Record<string, number>;
}

/** Input files for the submit figures; reused across runs (page cache warm for both). */
export function makeSubmitInputs(sizes: SubmitSizes): { dir: string; files: string[] } {
  const dir = benchTempDir('submit-in');
  const files = writeMany(dir, sizes.nfiles, sizes.fileBytes, 5000);
  return { dir, files };
}

export async function submitOnce(sizes: SubmitSizes, files: string[], serverOpts = {}): Promise<SubmitRun> {
  await readThrough(files);
  const server = await BenchServer.start(serverOpts);
  const gahp = await GahpDriver.start();
  try {
    await gahp.startup();
    await gahp.selectProject(server.url, server.authenticator);
    const b1 = batchName('c');
    const rss = new RssSampler(gahp.pid);
    const cold = await timedSubmit(gahp, submitLine(b1, jobsOver(b1, files, sizes.njobs)));
    const coldRss = rss.stop();
    const s1 = await server.summary();
    if (s1.jobs !== sizes.njobs || s1.files !== sizes.nfiles) throw new Error(`server holds ${s1.jobs} jobs and ${s1.files} files after the cold submit`);
    await server.clearRpcLog();
    const b2 = batchName('w');
    const warm = await timedSubmit(gahp, submitLine(b2, jobsOver(b2, files, sizes.njobs)));
    const s2 = await server.summary();
    return { cold_s: cold, warm_s: warm, cold_rss_mb: coldRss, warmRpcs: s2.rpcs };
  } finally {
    await gahp.close();
    await server.close();
  }
}

/** Peak GAHP RSS while submitting one job whose input is a `bytes`-long sparse file. */
export async function bigUploadOnce(bytes: number): Promise<{ rss_mb: number; seconds: number }> {
  const dir = benchTempDir('big');
  // One file of gigabytes: a project that raised PHP's upload limits for it, and a GAHP told
  // so (docs/boinc-server.md, "PHP's limits on uploads"); through the environment, which
  // the GAHPs of older commits ignore.
  const server = await BenchServer.start({ php: { uploadMaxFilesize: 4 * GiB, postMaxSize: 4 * GiB } });
  const gahp = await GahpDriver.start({ env: { BOINC_GAHP_UPLOAD_MAX_FILESIZE: '4G', BOINC_GAHP_POST_MAX_SIZE: '4G' } });
  try {
    const file = path.join(dir, 'big-input.dat');
    writeSparse(file, bytes);
    await gahp.startup();
    await gahp.selectProject(server.url, server.authenticator);
    const b = batchName('b');
    const rss = new RssSampler(gahp.pid);
    const seconds = await timedSubmit(gahp, submitLine(b, [{ name: `${b}#1.0`, inputs: [file] }]));
    const rss_mb = rss.stop();
    const s = await server.summary();
    if (s.fileBytes !== bytes) throw new Error(`server stored ${s.fileBytes} bytes, expected ${bytes}`);
    return { rss_mb, seconds };
  } finally {
    await gahp.close();
    await server.close();
    removeTempDir(dir);
  }
}

export const FULL_BIG = 2 * GiB;
export const QUICK_BIG = 512 * MiB;

export function removeInputs(dir: string): void {
  if (fs.existsSync(dir)) removeTempDir(dir);
}
