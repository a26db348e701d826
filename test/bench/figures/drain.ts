/**
 * results_drain_s: one RESULTS returning 100,000 queued result lines. 100,000 BOINC_PING
 * commands sent with no project selected each fail at once, queueing 100,000 error
 * results without any server. The clock runs from writing RESULTS to reading its last
 * result line.
 */
import { GahpDriver } from '../lib/driver.js';
import { cpuTicks } from '../lib/proc.js';
import { secondsSince, sleep } from '../lib/stats.js';

/** Waits until the process has used no CPU for `quietMs` (its queue has run dry). */
export async function waitIdle(pid: number, quietMs = 300, maxMs = 120_000): Promise<void> {
  const t0 = Date.now();
  let last = cpuTicks(pid);
  let quietSince = Date.now();
  while (Date.now() - t0 < maxMs) {
    await sleep(50);
    const now = cpuTicks(pid);
    if (now !== last) {
      last = now;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= quietMs) {
      return;
    }
  }
}

export async function resultsDrainOnce(n: number): Promise<number> {
  const gahp = await GahpDriver.start();
  try {
    await gahp.startup();
    const lines = new Array<string>(n);
    for (let i = 0; i < n; i++) lines[i] = `BOINC_PING ${i + 1}`;
    await gahp.sendMany(lines);
    // n immediate `S` replies (plus one `R`).
    for (let i = 0; i < n; i++) {
      const r = await gahp.readReply();
      if (r !== 'S') throw new Error(`BOINC_PING answered ${r}`);
    }
    await waitIdle(gahp.pid);
    const t0 = process.hrtime.bigint();
    const results = await gahp.results();
    const s = secondsSince(t0);
    if (results.length !== n) throw new Error(`RESULTS returned ${results.length} lines, expected ${n}`);
    return s;
  } finally {
    await gahp.close();
  }
}
