/**
 * version_latency_p99_ms: VERSION round trips, one after another (5 ms apart), while 200
 * BOINC_SUBMITs and BOINC_QUERY_BATCHES are in flight: 100 submits of 20 jobs over 5 fresh
 * 256 KiB files each (so hashing and uploads happen), 100 queries of 10 batches of 1,000
 * jobs each. Only round trips started while results are still outstanding count.
 */
import * as fs from 'node:fs';
import { GahpDriver } from '../lib/driver.js';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { writeMany } from '../lib/files.js';
import { percentile, sleep } from '../lib/stats.js';
import { batchName, jobsOver, submitLine } from './submit.js';
import { queryLine, type QueryWorld } from './query.js';

export interface LatencySizes {
  submits: number;
  jobsPerSubmit: number;
  filesPerSubmit: number;
  fileBytes: number;
  queries: number;
  batchesPerQuery: number;
}
export const FULL_LATENCY: LatencySizes = { submits: 100, jobsPerSubmit: 20, filesPerSubmit: 5, fileBytes: 256 << 10, queries: 100, batchesPerQuery: 10 };
export const QUICK_LATENCY: LatencySizes = { submits: 100, jobsPerSubmit: 10, filesPerSubmit: 2, fileBytes: 64 << 10, queries: 100, batchesPerQuery: 4 };

let seed = 90000;

/** `n` sequential VERSION round trips, `gapMs` apart; returns their times in ms. */
async function versionRtts(gahp: GahpDriver, n: number, gapMs: number): Promise<number[]> {
  const rtts: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = process.hrtime.bigint();
    gahp.send('VERSION');
    const v = await gahp.readReply();
    rtts.push(Number(process.hrtime.bigint() - a) / 1e6);
    if (!v.startsWith('S $GahpVersion')) throw new Error(`VERSION answered ${v.slice(0, 200)}`);
    await sleep(gapMs);
  }
  return rtts;
}

export async function versionLatencyOnce(
  world: QueryWorld,
  sizes: LatencySizes,
): Promise<{ p99: number; max: number; samples: number; seconds: number; idleP99: number }> {
  const dir = benchTempDir('lat-in');
  const gahp = await GahpDriver.start();
  try {
    await gahp.startup();
    await gahp.selectProject(world.server.url, world.server.authenticator);
    // The same measurement with nothing in flight: what the machine alone costs.
    const idle = await versionRtts(gahp, 200, 5);
    const lines: string[] = [];
    const ids = new Set<string>();
    let s = 0;
    let q = 0;
    while (s < sizes.submits || q < sizes.queries) {
      const id = gahp.reqId();
      ids.add(id);
      if (s < sizes.submits && (s <= q || q >= sizes.queries)) {
        const sub = `${dir}/s${s}`;
        fs.mkdirSync(sub);
        const files = writeMany(sub, sizes.filesPerSubmit, sizes.fileBytes, seed);
        seed += sizes.filesPerSubmit;
        const b = batchName('l');
        lines.push(`BOINC_SUBMIT ${id} ${submitLine(b, jobsOver(b, files, sizes.jobsPerSubmit))}`);
        s++;
      } else {
        const start = (q * sizes.batchesPerQuery) % Math.max(1, world.batches.length - sizes.batchesPerQuery);
        lines.push(`BOINC_QUERY_BATCHES ${id} ${queryLine(world.batches.slice(start, start + sizes.batchesPerQuery))}`);
        q++;
      }
    }
    const t0 = Date.now();
    await gahp.sendMany(lines);
    for (let i = 0; i < lines.length; i++) {
      const r = await gahp.readReply();
      if (r !== 'S') throw new Error(`in-flight command answered ${r.slice(0, 200)}`);
    }
    const rtts: number[] = [];
    let iter = 0;
    while (ids.size > 0) {
      if (Date.now() - t0 > 900_000) throw new Error(`${ids.size} commands still in flight after 900 s`);
      const a = process.hrtime.bigint();
      gahp.send('VERSION');
      const v = await gahp.readReply();
      rtts.push(Number(process.hrtime.bigint() - a) / 1e6);
      if (!v.startsWith('S $GahpVersion')) throw new Error(`VERSION answered ${v.slice(0, 200)}`);
      if (++iter % 10 === 0) {
        for (const line of await gahp.results()) {
          const id = line.slice(0, line.indexOf(' '));
          if (!line.startsWith(id + ' NULL')) throw new Error(`in-flight command failed: ${line.slice(0, 300)}`);
          ids.delete(id);
        }
      }
      await sleep(5);
    }
    return { p99: percentile(rtts, 99), max: Math.max(...rtts), samples: rtts.length, seconds: (Date.now() - t0) / 1000, idleP99: percentile(idle, 99) };
  } finally {
    await gahp.close();
    removeTempDir(dir);
  }
}
