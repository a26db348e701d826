/**
 * Load through the real GAHP: 50 batches of 200 jobs submitted at once (small shared input
 * files) while 1,000 status queries are pending, against a server with 20 ms latency per
 * request. Every request id gets exactly one result, every batch lands once with its 200
 * jobs, every query sees its 400 jobs; the GAHP's peak RSS stays bounded and VERSION keeps
 * answering quickly all along (figures printed).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { splitTokens } from '../../gahp/protocol/escape.js';
import { batchName, esc, jobName, sleep, startEnv, submitBatch, type Env } from '../commands/helpers.js';
import { makeTempDir } from '../support/gahp-process.js';
import { submitLine, writeInput, type LineJob } from '../submit/support.js';
import { SOAK, expectLedgerMatchesServer, peakRssMiB, percentile } from './support.js';

const BATCHES = 50;
const JOBS = 200;
const QUERIES = 1000;
const QUERY_BATCHES = 5;

let env: Env;
let stateDir: string;

beforeAll(async () => {
  stateDir = makeTempDir('boinc-gahp-load-state-');
  env = await startEnv({ latencyMs: 20 }, { stateDir });
});

afterAll(async () => {
  await env?.close();
  if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
});

test(`${BATCHES} x ${JOBS}-job submits while ${QUERIES} queries are pending: every result once, bounded memory, VERSION answered`, async () => {
  const g = env.gahp;
  // Batches the queries ask about (put on the server directly).
  const queried: string[] = [];
  for (let b = 0; b < QUERY_BATCHES; b++) {
    const name = batchName('uppercase');
    queried.push(name);
    await submitBatch(env, name, 'uppercase', Array.from({ length: JOBS }, (_, j) => ({ name: jobName(name, 9000 + b, j), inputs: [`query batch ${b}`] })));
  }
  env.server.advanceAll(queried[0]);

  // Ten small input files shared by all jobs.
  const inputs = Array.from({ length: 10 }, (_, i) => writeInput(env.dir, `load/in${i}.txt`, `shared input ${i}\n`));
  const submits = Array.from({ length: BATCHES }, (_, b) => {
    const name = batchName('uppercase');
    const jobs: LineJob[] = Array.from({ length: JOBS }, (_, j) => ({ name: jobName(name, 100 + b, j), args: [`-j${j}`], inputs: [[inputs[(b + j) % inputs.length]!, 'in']] }));
    return { name, jobs, line: submitLine(name, 'uppercase', jobs) };
  });

  const kind = new Map<string, { what: 'submit'; b: number } | { what: 'query'; pair: [string, string] }>();
  const sLatency: number[] = [];
  const versionLatency: number[] = [];
  const results = new Map<string, string[]>();
  let duplicates = 0;
  let unknown = 0;
  let peak = 0;

  const send = async (line: string) => {
    const t = performance.now();
    const reply = await g.request(line, 30_000);
    sLatency.push(performance.now() - t);
    expect(reply).toBe('S');
  };
  const sendQuery = async (i: number) => {
    const id = g.reqId();
    const pair: [string, string] = [queried[i % QUERY_BATCHES]!, queried[(i + 1) % QUERY_BATCHES]!];
    kind.set(id, { what: 'query', pair });
    await send(`BOINC_QUERY_BATCHES ${id} 0 2 ${esc(pair[0])} ${esc(pair[1])}`);
  };
  const version = async () => {
    const t = performance.now();
    const reply = await g.request('VERSION', 30_000);
    versionLatency.push(performance.now() - t);
    expect(reply.startsWith('S $GahpVersion')).toBe(true);
  };
  const drain = async () => {
    const head = await g.request('RESULTS', 30_000);
    const n = Number(/^S (\d+)$/.exec(head)![1]);
    for (let i = 0; i < n; i++) {
      const tokens = splitTokens(await g.readReply(30_000));
      const id = tokens.shift()!;
      if (!kind.has(id)) unknown++;
      else if (results.has(id)) duplicates++;
      else results.set(id, tokens);
    }
  };
  const sample = () => {
    const rss = peakRssMiB(g.child.pid!);
    if (rss !== undefined) peak = Math.max(peak, rss);
  };

  const t0 = Date.now();
  // Half the queries, then the submits, then the rest of the queries: all pending at once.
  for (let i = 0; i < QUERIES / 2; i++) await sendQuery(i);
  for (let b = 0; b < BATCHES; b++) {
    const id = g.reqId();
    kind.set(id, { what: 'submit', b });
    await send(`BOINC_SUBMIT ${id} ${submits[b]!.line}`);
    if (b % 10 === 0) await version();
  }
  for (let i = QUERIES / 2; i < QUERIES; i++) await sendQuery(i);
  const sentMs = Date.now() - t0;

  // VERSION every 20 ms; RESULTS every fifth round, until every result is in.
  const deadline = Date.now() + (SOAK ? 600_000 : 240_000);
  for (let round = 0; results.size < kind.size && Date.now() < deadline; round++) {
    await version();
    if (round % 5 === 0) {
      await drain();
      sample();
    }
    await sleep(20);
  }
  const allMs = Date.now() - t0;
  await sleep(200);
  await drain();
  sample();

  // Exactly once each.
  expect(unknown).toBe(0);
  expect(duplicates).toBe(0);
  expect(results.size).toBe(kind.size);
  for (const [id, k] of kind) {
    const r = results.get(id)!;
    if (r[0] !== 'NULL') throw new Error(`${k.what} ${id} failed: ${r.join(' ').slice(0, 300)}`);
    if (k.what === 'query') {
      // NULL <server_time> 200 (job status){200} 200 (job status){200}
      expect(r).toHaveLength(2 + 2 * (1 + 2 * JOBS));
      expect(r[2]).toBe(String(JOBS));
      expect(r[3 + 2 * JOBS]).toBe(String(JOBS));
      expect(r[3]!.startsWith(k.pair[0] + '#')).toBe(true);
    }
  }
  // Each batch once on the server, with exactly its jobs.
  const names = env.server.batches().map((b) => b.name);
  expect(new Set(names).size).toBe(names.length);
  for (const s of submits) {
    expect(names.filter((n) => n === s.name)).toHaveLength(1);
    expect(env.server.jobs(s.name)).toHaveLength(JOBS);
  }
  // Ten files stored, each once.
  expect(env.server.files().filter((f) => f.name.startsWith('condorv_')).length).toBeGreaterThanOrEqual(10);
  expect(expectLedgerMatchesServer(stateDir, env.server, { statuses: true })).toBe(BATCHES);

  const rssNow = peakRssMiB(g.child.pid!);
  if (rssNow !== undefined) peak = Math.max(peak, rssNow);
  const vMax = Math.max(...versionLatency);
  const vP99 = percentile(versionLatency, 99);
  const sMax = Math.max(...sLatency);
  process.stdout.write(
    `[reliability] load: ${BATCHES}x${JOBS} submits + ${QUERIES} queries: sent in ${sentMs} ms, all results in ${allMs} ms; ` +
      `GAHP peak RSS ${peak.toFixed(0)} MiB; VERSION n=${versionLatency.length} p50 ${percentile(versionLatency, 50).toFixed(1)} ms, ` +
      `p99 ${vP99.toFixed(1)} ms, max ${vMax.toFixed(1)} ms; S reply max ${sMax.toFixed(1)} ms (p99 ${percentile(sLatency, 99).toFixed(1)} ms)\n`,
  );
  // Measured (Linux /proc): a missing figure is a failure, not a skipped check.
  expect(peak).toBeGreaterThan(0);
  expect(peak).toBeLessThan(600);
  expect(vP99).toBeLessThan(500);
  expect(vMax).toBeLessThan(2000);
  expect(fs.existsSync(path.join(stateDir, 'ledger.jsonl'))).toBe(true);
}, 600_000);
