/**
 * query_100k_s, query_100k_rss_mb: one BOINC_QUERY_BATCHES over 100 batches of 1,000 jobs,
 * from writing the request to reading its result line (S, R, RESULTS, as the gridmanager
 * does), on a fresh GAHP; RSS is that GAHP's peak over the query.
 *
 * The batches are created once per server through a separate setup GAHP (BOINC_SUBMIT of
 * 1,000 jobs sharing one tiny input), then half of them are moved to DONE and a quarter to
 * IN_PROGRESS so statuses vary.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { escapeToken } from '../../../gahp/protocol/escape.js';
import { GahpDriver } from '../lib/driver.js';
import { cpuTicks, RssSampler } from '../lib/proc.js';
import { BenchServer } from '../lib/server.js';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { secondsSince } from '../lib/stats.js';
import { batchName, jobsOver, submitLine } from './submit.js';

/** Test-server latency per request for the query world: the real server's 20-50 ms, low end. */
export const QUERY_WORLD_LATENCY_MS = 20;

export interface QueryWorld {
  server: BenchServer;
  batches: string[];
  jobsPerBatch: number;
  close(): Promise<void>;
}

/** A test server holding `nbatches` batches of `jobsPerBatch` jobs. */
export async function makeQueryWorld(nbatches: number, jobsPerBatch: number, serverOpts = {}): Promise<QueryWorld> {
  const dir = benchTempDir('query-in');
  const server = await BenchServer.start(serverOpts);
  const setup = await GahpDriver.start();
  const batches: string[] = [];
  try {
    const input = path.join(dir, 'tiny.txt');
    fs.writeFileSync(input, 'tiny shared input\n');
    await setup.startup();
    await setup.selectProject(server.url, server.authenticator);
    const lines: string[] = [];
    const ids: string[] = [];
    for (let b = 0; b < nbatches; b++) {
      const name = batchName('q');
      batches.push(name);
      const id = setup.reqId();
      ids.push(id);
      lines.push(`BOINC_SUBMIT ${id} ${submitLine(name, jobsOver(name, [input], jobsPerBatch))}`);
    }
    await setup.sendMany(lines);
    for (let i = 0; i < lines.length; i++) {
      const r = await setup.readReply();
      if (r !== 'S') throw new Error(`setup BOINC_SUBMIT answered ${r}`);
    }
    const results = await setup.waitFor(ids, 1_800_000, 50);
    for (const [id, line] of results) if (line !== `${id} NULL`) throw new Error(`setup submit failed: ${line.slice(0, 300)}`);
    for (let b = 0; b < nbatches; b++) {
      if (b % 2 === 0) await server.advanceAll(batches[b], 'DONE');
      else if (b % 4 === 1) await server.advanceAll(batches[b], 'IN_PROGRESS');
    }
  } catch (err) {
    await server.close();
    throw err;
  } finally {
    await setup.close();
    removeTempDir(dir);
  }
  return { server, batches, jobsPerBatch, close: () => server.close() };
}

export function queryLine(batches: readonly string[]): string {
  return `0 ${batches.length} ${batches.map(escapeToken).join(' ')}`;
}

/** One query of `batches` by a fresh GAHP (`bin`: another build's bin/boinc-gahp, for pairs.ts). */
export async function queryOnce(world: QueryWorld, batches: readonly string[], bin?: string): Promise<{ seconds: number; rss_mb: number; cpu_s: number }> {
  const gahp = await GahpDriver.start(bin ? { bin } : {});
  try {
    await gahp.startup();
    await gahp.selectProject(world.server.url, world.server.authenticator);
    const rss = new RssSampler(gahp.pid);
    const ticks0 = cpuTicks(gahp.pid) ?? 0;
    const t0 = process.hrtime.bigint();
    const result = await gahp.callNotified('BOINC_QUERY_BATCHES', queryLine(batches));
    const seconds = secondsSince(t0);
    // The GAHP's CPU over the query (clock ticks of 10 ms): less moved by other load than the wall clock.
    const cpu_s = ((cpuTicks(gahp.pid) ?? 0) - ticks0) / 100;
    const rss_mb = rss.stop();
    // NULL <server_time> then per batch <n> (<job> <status>){n}
    const tokens = result.split(' ');
    const want = 2 + batches.length + 2 * batches.length * world.jobsPerBatch;
    if (tokens[0] !== 'NULL' || tokens.length !== want) {
      throw new Error(`BOINC_QUERY_BATCHES gave ${tokens.length} tokens (want ${want}): ${result.slice(0, 300)}`);
    }
    return { seconds, rss_mb, cpu_s };
  } finally {
    await gahp.close();
  }
}
