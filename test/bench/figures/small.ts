/**
 * Small-submit and idle figures (issue 12): what the GAHP itself costs on top of a real
 * PHP server, which charges every call 5-25 ms.
 *
 * - small_submit_overhead_ms: a cold BOINC_SUBMIT (fresh GAHP, state dir and server, the
 *   server warmed by another GAHP: warmServer; the first command after
 *   BOINC_SELECT_PROJECT) of 40 jobs over 10 new 64 KiB files, from
 *   writing the request to reading its result (S, R, RESULTS), minus the time in which at
 *   least one call was inside the server (until its reply was complete: BOINC's replies end
 *   with the connection, so until the server's FIN; lib/server-child.ts). The server adds
 *   SERVER_DELAY_MS to every call, so round trips cost what they cost on a real server;
 *   the remainder is the GAHP's own time on the critical path (start-up work, hashing,
 *   ledger syncs, building requests, the protocol).
 * - small_submit_round_trips: the most calls of that submit that ran one after another
 *   (each starting after the previous one's reply was complete): the sequential calls on
 *   its critical path.
 * - warm_submit_round_trips, warm_submit_overhead_ms: the same for a second BOINC_SUBMIT
 *   of the same files from the same GAHP (new batch and job names): files on the server,
 *   hashes cached.
 * - session_submit_overhead_ms: the same cold submit in another fresh GAHP, state dir and
 *   server, sent after BOINC_PING as HTCondor's gridmanager sends it (its session goes
 *   BOINC_SELECT_PROJECT, BOINC_PING, then the first BOINC_SUBMIT: docs/gahp-protocol.md): the
 *   RPC code has run once then, the submit's own code not.
 * - rpc_call_floor_ms: what one call costs a minimal client on top of the server's time,
 *   measured the same way (its wall time minus the server's): the bench process itself,
 *   its code long warm, POSTing a small get_templates with node's http to the same server
 *   (warmed by that submit) one call after another. Connecting, the server reading the
 *   request before its timing starts and closing the connection after it ends, and waking
 *   two processes on this machine: a floor that small_submit_overhead_ms pays once per
 *   sequential call whatever the GAHP does.
 * - idle_rss_mb, idle_threads: a fresh GAHP after the start-up sequence and
 *   BOINC_SELECT_PROJECT, once it has gone CPU-idle.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { GahpDriver } from '../lib/driver.js';
import { cpuTicks, currentRss } from '../lib/proc.js';
import { BenchServer, type CallTime } from '../lib/server.js';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { writeMany } from '../lib/files.js';
import { median, sleep } from '../lib/stats.js';
import { APP, batchName, jobsOver, submitLine } from './submit.js';

/** Added by the test server to every call (the low end of a real server on loopback). */
export const SERVER_DELAY_MS = 20;
export const SMALL = { njobs: 40, nfiles: 10, fileBytes: 64 << 10 };

/** Total length of the union of the intervals, clipped to [from, to]. */
export function busyMs(calls: readonly CallTime[], from: number, to: number): number {
  const xs = calls
    .map((c) => ({ start: Math.max(from, c.start), end: Math.min(to, c.end) }))
    .filter((c) => c.end > c.start)
    .sort((a, b) => a.start - b.start);
  let total = 0;
  let curStart = -Infinity;
  let curEnd = -Infinity;
  for (const c of xs) {
    if (c.start > curEnd) {
      if (curEnd > curStart) total += curEnd - curStart;
      curStart = c.start;
      curEnd = c.end;
    } else if (c.end > curEnd) curEnd = c.end;
  }
  if (curEnd > curStart) total += curEnd - curStart;
  return total;
}

/** The longest chain of calls each starting after the previous one ended (greedy by end time). */
export function sequentialCalls(calls: readonly CallTime[]): number {
  const xs = [...calls].sort((a, b) => a.end - b.end);
  let n = 0;
  let last = -Infinity;
  for (const c of xs) {
    if (c.start >= last) {
      n++;
      last = c.end;
    }
  }
  return n;
}

export interface SubmitTiming {
  ms: number;
  serverMs: number;
  overheadMs: number;
  roundTrips: number;
  calls: number;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

export async function timedSmallSubmit(gahp: GahpDriver, server: BenchServer, line: string): Promise<SubmitTiming> {
  await server.clearRpcLog();
  const t0 = nowMs();
  const result = await gahp.callNotified('BOINC_SUBMIT', line);
  const t1 = nowMs();
  if (result !== 'NULL') throw new Error(`BOINC_SUBMIT failed: ${result.slice(0, 500)}`);
  const calls = (await server.calls()).filter((c) => c.end > t0 && c.start < t1);
  const serverMs = busyMs(calls, t0, t1);
  return { ms: t1 - t0, serverMs, overheadMs: t1 - t0 - serverMs, roundTrips: sequentialCalls(calls), calls: calls.length };
}

let seed = 70000;

/** SMALL.nfiles new files (content never seen before by any server or hash cache). */
export function newSmallFiles(dir: string): string[] {
  return writeMany(dir, SMALL.nfiles, SMALL.fileBytes, (seed += 100));
}

/** A fresh GAHP (this checkout's, or `bin`) through HTCondor's start-up sequence and BOINC_SELECT_PROJECT of `server`. */
export async function selectedGahp(server: BenchServer, bin?: string): Promise<GahpDriver> {
  const gahp = await GahpDriver.start(bin ? { bin } : {});
  try {
    await gahp.startup();
    await gahp.selectProject(server.url, server.authenticator);
    return gahp;
  } catch (err) {
    await gahp.close();
    throw err;
  }
}

/**
 * A fresh test server (SERVER_DELAY_MS per call) and GAHP, through the start-up sequence
 * and BOINC_SELECT_PROJECT, and SMALL.nfiles new files (new content every run: new to the
 * server and to the hash cache); all removed after `fn`.
 */
async function withSmallWorld<T>(tag: string, fn: (gahp: GahpDriver, server: BenchServer, files: string[]) => Promise<T>): Promise<T> {
  const dir = benchTempDir(tag);
  const server = await BenchServer.start({ latencyMs: SERVER_DELAY_MS });
  let gahp: GahpDriver | undefined;
  try {
    await warmServer(server, dir);
    const files = newSmallFiles(dir);
    gahp = await selectedGahp(server);
    return await fn(gahp, server, files);
  } finally {
    await gahp?.close();
    await server.close();
    removeTempDir(dir);
  }
}

/**
 * A fresh test server is slow at its first requests (its HTTP parser, RPC handlers and
 * multipart reader run for the first time in a new process), and what of that comes before
 * a call's timing starts (reading the request head) would count as the measured GAHP's
 * time. A real BOINC server runs for long: this one is warmed with a submit of its own,
 * from another GAHP (one job over one small file: every call the measured submit makes).
 */
export async function warmServer(server: BenchServer, dir: string): Promise<void> {
  const warmDir = path.join(dir, 'warm-up');
  fs.mkdirSync(warmDir);
  const [file] = writeMany(warmDir, 1, 1024, (seed += 100));
  const gahp = await selectedGahp(server);
  try {
    const b = batchName('w');
    const result = await gahp.callNotified('BOINC_SUBMIT', submitLine(b, jobsOver(b, [file!], 1)));
    if (result !== 'NULL') throw new Error(`warm-up BOINC_SUBMIT failed: ${result.slice(0, 300)}`);
  } finally {
    await gahp.close();
  }
}

/** session_submit_overhead_ms: a cold submit after start-up, BOINC_SELECT_PROJECT and BOINC_PING. */
export function sessionSubmitOnce(): Promise<SubmitTiming> {
  return withSmallWorld('session', async (gahp, server, files) => {
    const ping = await gahp.callNotified('BOINC_PING', '');
    if (ping !== 'NULL') throw new Error(`BOINC_PING failed: ${ping.slice(0, 300)}`);
    const b = batchName('p');
    return timedSmallSubmit(gahp, server, submitLine(b, jobsOver(b, files, SMALL.njobs)));
  });
}

/** One minimal get_templates POST, its reply read whole (the server closes the connection). */
function minimalCall(server: BenchServer): Promise<void> {
  const body = `--b\r\nContent-Disposition: form-data; name="request"\r\n\r\n<get_templates>\n<authenticator>${server.authenticator}</authenticator>\n<app_name>${APP}</app_name>\n</get_templates>\r\n--b--\r\n`;
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}submit_rpc_handler.php`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=b', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** rpc_call_floor_ms: per call, the median over `n` calls one after another (after two unmeasured ones). */
async function callFloor(server: BenchServer, n = 8): Promise<number> {
  const perCall: number[] = [];
  for (let i = 0; i < n + 2; i++) {
    await server.clearRpcLog();
    const t0 = nowMs();
    await minimalCall(server);
    const t1 = nowMs();
    if (i < 2) continue;
    const calls = (await server.calls()).filter((c) => c.end > t0 && c.start < t1);
    perCall.push(t1 - t0 - busyMs(calls, t0, t1));
  }
  return median(perCall);
}

export function smallSubmitOnce(): Promise<{ cold: SubmitTiming; warm: SubmitTiming; floorMs: number }> {
  return withSmallWorld('small', async (gahp, server, files) => {
    const before = (await server.summary()).files;
    const b1 = batchName('s');
    const cold = await timedSmallSubmit(gahp, server, submitLine(b1, jobsOver(b1, files, SMALL.njobs)));
    const s = await server.summary();
    if (s.files - before !== SMALL.nfiles) throw new Error(`the small submit left ${s.files - before} new files on the server, not ${SMALL.nfiles}`);
    const b2 = batchName('t');
    const warm = await timedSmallSubmit(gahp, server, submitLine(b2, jobsOver(b2, files, SMALL.njobs)));
    return { cold, warm, floorMs: await callFloor(server) };
  });
}

function threads(pid: number): number {
  try {
    const m = /^Threads:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** Waits until the GAHP has used no CPU over 300 ms (at most 15 s of waiting). */
async function untilCpuIdle(pid: number): Promise<void> {
  for (let i = 0, last = cpuTicks(pid); i < 50; i++) {
    await sleep(300);
    const now = cpuTicks(pid);
    if (now === last) break;
    last = now;
  }
}

/**
 * RSS (MiB) and threads of a fresh GAHP after start-up and BOINC_SELECT_PROJECT, once
 * CPU-idle; then its RSS after one BOINC_PING, once CPU-idle again: what a GAHP that has
 * loaded its HTTP client (got, issue 21) keeps while it waits for the gridmanager.
 */
export async function idleOnce(): Promise<{ rssMb: number; threads: number; afterPingRssMb: number }> {
  const server = await BenchServer.start();
  let gahp: GahpDriver | undefined;
  try {
    gahp = await selectedGahp(server);
    await untilCpuIdle(gahp.pid);
    const rss = currentRss(gahp.pid);
    if (rss === undefined) throw new Error('cannot read the GAHP\'s RSS (/proc)');
    const idleThreads = threads(gahp.pid);
    const ping = await gahp.callNotified('BOINC_PING', '');
    if (ping !== 'NULL') throw new Error(`BOINC_PING failed: ${ping.slice(0, 300)}`);
    await untilCpuIdle(gahp.pid);
    const afterPing = currentRss(gahp.pid);
    if (afterPing === undefined) throw new Error('cannot read the GAHP\'s RSS (/proc)');
    return { rssMb: rss / (1024 * 1024), threads: idleThreads, afterPingRssMb: afterPing / (1024 * 1024) };
  } finally {
    await gahp?.close();
    await server.close();
  }
}
