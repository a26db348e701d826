/**
 * session_submit_overhead_ms (or query_100k_s) of two commits, measured in pairs:
 *
 *   node dist/test/bench/pairs.js <revA> <revB> [pairs]           ("." is this checkout's build)
 *   node dist/test/bench/pairs.js --query <revA> <revB> [pairs]   query_100k_s (default 10 pairs)
 *
 * This machine's speed drifts by several ms within minutes, more than most single changes
 * are worth, so whole runs of one commit after the other (at-commit.ts) compare only
 * roughly. Here each pair is one session submit of A and one of B (fresh GAHP, BOINC_PING,
 * then a cold small submit of new files, as small.ts measures it), back to back against one
 * warmed test server, the order alternating from pair to pair; the medians of A and B and
 * the median of the differences B - A are printed (default 30 pairs).
 *
 * With --query each pair is one query_100k_s of A and one of B (figures/query.ts: a fresh
 * GAHP's BOINC_QUERY_BATCHES over 100 batches of 1,000 jobs) against one query world, the
 * order alternating; the medians, the median of the differences and of the ratios B / A.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT } from './lib/driver.js';
import { buildAt, REV_PATTERN } from './lib/export.js';
import { BenchServer } from './lib/server.js';
import { median } from './lib/stats.js';
import { benchTempDir, cleanupAll } from './lib/tmp.js';
import { SERVER_DELAY_MS, SMALL, newSmallFiles, selectedGahp, timedSmallSubmit, warmServer } from './figures/small.js';
import { batchName, jobsOver, submitLine } from './figures/submit.js';
import { makeQueryWorld, QUERY_WORLD_LATENCY_MS, queryOnce } from './figures/query.js';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const query = argv[0] === '--query';
  const [revA, revB, pairsText = query ? '10' : '30'] = query ? argv.slice(1) : argv;
  const pairs = Number(pairsText);
  if (!revA || !revB || ![revA, revB].every((r) => r === '.' || REV_PATTERN.test(r)) || !Number.isInteger(pairs) || pairs < 1) {
    console.error('usage: node dist/test/bench/pairs.js [--query] <revA> <revB> [pairs]   ("." is this checkout)');
    return 2;
  }
  const bins: string[] = [];
  for (const rev of [revA, revB]) bins.push(path.join(rev === '.' ? REPO_ROOT : await buildAt(rev), 'bin', 'boinc-gahp'));
  if (query) return queryPairs(revA, revB, bins, pairs);
  const dir = benchTempDir('pairs');
  const server = await BenchServer.start({ latencyMs: SERVER_DELAY_MS });
  const overhead: [number[], number[]] = [[], []];
  const load = [os.loadavg()[0]!];
  try {
    await warmServer(server, dir);
    for (let i = 0; i < pairs; i++) {
      const pair: number[] = [];
      for (const side of i % 2 === 0 ? [0, 1] : [1, 0]) {
        const filesDir = path.join(dir, `p${i}-${side}`);
        fs.mkdirSync(filesDir);
        const files = newSmallFiles(filesDir);
        const gahp = await selectedGahp(server, bins[side]);
        try {
          const ping = await gahp.callNotified('BOINC_PING', '');
          if (ping !== 'NULL') throw new Error(`BOINC_PING failed: ${ping.slice(0, 300)}`);
          const b = batchName('p');
          pair[side] = (await timedSmallSubmit(gahp, server, submitLine(b, jobsOver(b, files, SMALL.njobs)))).overheadMs;
        } finally {
          await gahp.close();
        }
      }
      overhead[0].push(pair[0]!);
      overhead[1].push(pair[1]!);
    }
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]!);
  const diffs = overhead[1].map((b, i) => b - overhead[0][i]!);
  const f = (x: number) => x.toFixed(2);
  console.log(`session_submit_overhead_ms over ${pairs} pairs (load ${load.map(f).join(' -> ')}):`);
  console.log(`  A ${revA}: median ${f(median(overhead[0]))}`);
  console.log(`  B ${revB}: median ${f(median(overhead[1]))}`);
  console.log(`  B - A: median of the pairs' differences ${f(median(diffs))}`);
  return 0;
}

/** query_100k_s of the two builds in pairs against one query world, the order alternating. */
async function queryPairs(revA: string, revB: string, bins: string[], pairs: number): Promise<number> {
  const load = [os.loadavg()[0]!];
  const world = await makeQueryWorld(100, 1000, { latencyMs: QUERY_WORLD_LATENCY_MS });
  const secs: [number[], number[]] = [[], []];
  const cpu: [number[], number[]] = [[], []];
  try {
    // One query of each first, not counted: the server's own first replies of this size.
    for (const bin of bins) await queryOnce(world, world.batches, bin);
    for (let i = 0; i < pairs; i++) {
      for (const side of i % 2 === 0 ? [0, 1] : [1, 0]) {
        const r = await queryOnce(world, world.batches, bins[side]);
        secs[side]!.push(r.seconds);
        cpu[side]!.push(r.cpu_s);
      }
    }
  } finally {
    await world.close();
  }
  load.push(os.loadavg()[0]!);
  const f = (x: number) => x.toFixed(3);
  console.log(`query_100k_s over ${pairs} pairs (load ${load.map((x) => x.toFixed(2)).join(' -> ')}):`);
  console.log(`  A ${revA}: median ${f(median(secs[0]))} (${secs[0].map(f).join(' ')})`);
  console.log(`  B ${revB}: median ${f(median(secs[1]))} (${secs[1].map(f).join(' ')})`);
  console.log(`  B - A: median of the pairs' differences ${f(median(secs[1].map((b, i) => b - secs[0][i]!)))}`);
  console.log(`  B / A: median of the pairs' ratios ${f(median(secs[1].map((b, i) => b / secs[0][i]!)))}`);
  console.log(`  the GAHP's CPU seconds over the query: A median ${f(median(cpu[0]))}, B median ${f(median(cpu[1]))}, B / A median of the pairs' ratios ${f(median(cpu[1].map((b, i) => b / cpu[0][i]!)))}`);
  return 0;
}

main().then(
  (code) => {
    cleanupAll();
    process.exit(code);
  },
  (err) => {
    console.error(`pairs: ${(err as Error).stack ?? err}`);
    cleanupAll();
    process.exit(2);
  },
);
