/**
 * The RPCs per job of a cluster's life, and the fetch drain (issue 31).
 *
 * A GAHP submits one batch of FETCH.jobs jobs over one input file (submit_rpcs_per_job),
 * the server completes them, one BOINC_QUERY_BATCHES polls the batch (poll_rpcs: calls per
 * poll, whatever the batch's size); then a fresh GAHP on the same state directory (its
 * ledger knows the batch, as the gridmanager's GAHP after a restart) pings and fetches every
 * job's output, FETCH.inFlight commands outstanding, as the gridmanager sends them for
 * `transfer_output_files = out` and `transfer_output_remaps = "out = out.$(Process)"` (SOME,
the pair (out, out.<n>), all in the cluster's one directory, stderr to err.<n>):
 * fetch_rpcs_per_job, fetch_jobs_per_s, fetch_cpu_ms_per_job (the GAHP's user and system CPU
 * over the drain per job: its own cost, steadier than the time on a shared machine) and
 * fetch_drain_rss_mb, the GAHP's peak RSS over the
 * drain (its plateau: it rises over the first fetches and stays). Calls are counted by the
 * test server (each download is one get_output.php call).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { escapeToken } from '../../../gahp/protocol/escape.js';
import { GahpDriver, pumpFetches } from '../lib/driver.js';
import { cpuTicks, RssSampler } from '../lib/proc.js';
import { BenchServer } from '../lib/server.js';
import { benchTempDir, removeTempDir } from '../lib/tmp.js';
import { secondsSince } from '../lib/stats.js';
import { queryLine } from './query.js';
import { batchName, jobsOver, submitLine, timedSubmit } from './submit.js';

export const FETCH = { jobs: 5000, inFlight: 50 };
export const QUICK_FETCH = { jobs: 2000, inFlight: 50 };

export interface FetchFigures {
  submit_rpcs_per_job: number;
  poll_rpcs: number;
  fetch_rpcs_per_job: number;
  fetch_jobs_per_s: number;
  fetch_cpu_ms_per_job: number;
  fetch_drain_rss_mb: number;
}

/** Calls the server received since the last count, in all and by kind. */
async function countCalls(server: BenchServer): Promise<{ total: number; byKind: Record<string, number> }> {
  const { rpcs } = await server.summary();
  await server.clearRpcLog();
  return { total: Object.values(rpcs).reduce((a, b) => a + b, 0), byKind: rpcs };
}

export async function fetchDrainOnce(sizes: { jobs: number; inFlight: number }, note: (line: string) => void): Promise<FetchFigures> {
  const dir = benchTempDir('fetch');
  const stateDir = path.join(dir, 'state');
  fs.mkdirSync(stateDir);
  const server = await BenchServer.start();
  try {
    const input = path.join(dir, 'in.txt');
    fs.writeFileSync(input, 'fetch drain input\n');
    const batch = batchName('f');
    const jobs = jobsOver(batch, [input], sizes.jobs).map((j) => j.name);

    const setup = await GahpDriver.start({ stateDir });
    let submit: Awaited<ReturnType<typeof countCalls>>;
    let poll: Awaited<ReturnType<typeof countCalls>>;
    try {
      await setup.startup();
      await setup.selectProject(server.url, server.authenticator);
      await server.clearRpcLog();
      await timedSubmit(setup, submitLine(batch, jobsOver(batch, [input], sizes.jobs)));
      submit = await countCalls(server);
      await server.advanceAll(batch, 'DONE');
      const answer = await setup.callNotified('BOINC_QUERY_BATCHES', queryLine([batch]));
      if (!answer.startsWith('NULL ')) throw new Error(`BOINC_QUERY_BATCHES failed: ${answer.slice(0, 300)}`);
      poll = await countCalls(server);
    } finally {
      await setup.close();
    }

    // One directory for the cluster, as HTCondor's jobs share their initialdir: each job's
    // output remapped to out.<n>, its stderr in err.<n>.
    const iwd = path.join(dir, 'out');
    fs.mkdirSync(iwd);
    const lines = jobs.map((job, i) => `${escapeToken(job)} ${escapeToken(iwd)} err.${i} SOME 1 out out.${i}`);
    const gahp = await GahpDriver.start({ stateDir });
    try {
      await gahp.startup();
      await gahp.selectProject(server.url, server.authenticator);
      const ping = await gahp.callNotified('BOINC_PING', '');
      if (ping !== 'NULL') throw new Error(`BOINC_PING failed: ${ping}`);
      await server.clearRpcLog();
      const rss = new RssSampler(gahp.pid);
      const cpu0 = cpuTicks(gahp.pid) ?? NaN;
      const t0 = process.hrtime.bigint();
      const results = await pumpFetches(gahp, lines, sizes.inFlight);
      const seconds = secondsSince(t0);
      const peak = rss.stop();
      // Clock ticks of 10 ms (USER_HZ 100).
      const cpuMs = ((cpuTicks(gahp.pid) ?? NaN) - cpu0) * 10;
      const failed = results.filter((r) => !r.startsWith('NULL'));
      if (failed.length > 0) throw new Error(`${failed.length} fetches failed, the first: ${failed[0]!.slice(0, 300)}`);
      const fetch = await countCalls(server);
      const perJob = (n: number) => n / sizes.jobs;
      note(
        `fetch drain (${sizes.jobs} jobs, ${sizes.inFlight} in flight): ${seconds.toFixed(1)} s, GAHP CPU ${(cpuMs / 1000).toFixed(1)} s, peak RSS ${peak.toFixed(1)} MiB; ` +
          `calls: submit ${JSON.stringify(submit.byKind)}, poll ${JSON.stringify(poll.byKind)}, fetch ${JSON.stringify(fetch.byKind)}`,
      );
      return {
        submit_rpcs_per_job: perJob(submit.total),
        poll_rpcs: poll.total,
        fetch_rpcs_per_job: perJob(fetch.total),
        fetch_jobs_per_s: sizes.jobs / seconds,
        fetch_cpu_ms_per_job: cpuMs / sizes.jobs,
        fetch_drain_rss_mb: peak,
      };
    } finally {
      await gahp.close();
    }
  } finally {
    await server.close();
    removeTempDir(dir);
  }
}
