/**
 * session_submit_overhead_ms of two commits, measured in pairs:
 *
 *   node dist/test/bench/pairs.js <revA> <revB> [pairs]     ("." is this checkout's build)
 *
 * This machine's speed drifts by several ms within minutes, more than most single changes
 * are worth, so whole runs of one commit after the other (at-commit.ts) compare only
 * roughly. Here each pair is one session submit of A and one of B (fresh GAHP, BOINC_PING,
 * then a cold small submit of new files, as small.ts measures it), back to back against one
 * warmed test server, the order alternating from pair to pair; the medians of A and B and
 * the median of the differences B - A are printed (default 30 pairs).
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

async function main(): Promise<number> {
  const [revA, revB, pairsText = '30'] = process.argv.slice(2);
  const pairs = Number(pairsText);
  if (!revA || !revB || ![revA, revB].every((r) => r === '.' || REV_PATTERN.test(r)) || !Number.isInteger(pairs) || pairs < 1) {
    console.error('usage: node dist/test/bench/pairs.js <revA> <revB> [pairs]   ("." is this checkout)');
    return 2;
  }
  const bins = [];
  for (const rev of [revA, revB]) bins.push(path.join(rev === '.' ? REPO_ROOT : await buildAt(rev), 'bin', 'boinc-gahp'));
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
