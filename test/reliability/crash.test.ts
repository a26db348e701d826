/**
 * kill -9 at seeded random moments while the real GAHP submits batches and fetches outputs,
 * then a new GAHP on the same state directory repeats the same commands. Checked after each
 * kill: no file under a destination name is partial, the ledger replays (a torn last line at
 * most), the hash cache answers only true MD5s. Checked after each repeat: one batch per
 * name on the server holding exactly its jobs with their inputs stored, outputs complete and
 * correct, the ledger agrees with the server, and no temporary file is left behind in the
 * output directories or the state directory.
 *
 * CI: 10 trials (seed 8); SOAK=1: 40 trials.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { batchName, esc, jobName, sleep, startEnv, submitBatch, type Env } from '../commands/helpers.js';
import { makeTempDir } from '../support/gahp-process.js';
import { submitLine, writeInput, expectOneCompleteBatch, type LineJob } from '../submit/support.js';
import { upperAscii } from '../../fixtures/apps.js';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import { SOAK, expectHashCacheSound, expectLedgerMatchesServer, rng, tempFiles, walk } from './support.js';

const TRIALS = SOAK ? 40 : 10;
const SEED = Number(process.env.RELIABILITY_SEED ?? 8);

let env: Env;
let stateDir: string;
const inputFiles: string[] = [];
const fetchJobs: Array<{ name: string; zip: boolean }> = [];
let kills = 0;

beforeAll(async () => {
  stateDir = makeTempDir('boinc-gahp-crash-state-');
  // A little latency per request, as on a real server, so kills land inside RPCs.
  env = await startEnv({ latencyMs: 30 }, { stateDir, args: ['--rpc-timeout', '5'] });
  // Finished jobs to fetch: big uppercase outputs (downloads take a while) and zip outputs.
  const big = batchName('uppercase');
  const bigJobs = Array.from({ length: 4 }, (_, i) => ({ name: jobName(big, 1, i), inputs: [Buffer.alloc(400_000 + i, 97 + i)] }));
  await submitBatch(env, big, 'uppercase', bigJobs);
  const zb = batchName('zipper');
  const zipJobs = Array.from({ length: 2 }, (_, i) => ({ name: jobName(zb, 2, i), inputs: [`zip input ${i}\nMixed Case\n`] }));
  await submitBatch(env, zb, 'zipper', zipJobs);
  env.server.advanceAll();
  await env.server.settled();
  for (const j of bigJobs) fetchJobs.push({ name: j.name, zip: false });
  for (const j of zipJobs) fetchJobs.push({ name: j.name, zip: true });
}, 120_000);

afterAll(async () => {
  await env?.close();
  if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
});

interface Planned {
  line: string;
  verify: () => void;
  /** Immediately after the kill: nothing partial under a destination name. */
  afterKill?: () => void;
  outDir?: string;
}

function planSubmit(trial: number, k: number, random: () => number): Planned {
  const batch = batchName('uppercase');
  const jobs: LineJob[] = [];
  const nfiles = 10 + Math.floor(random() * 30);
  for (let i = 0; i < nfiles + 5; i++) {
    // Some files shared with the previous trial (already on the server), most new.
    const shared = i % 4 === 0 && trial > 0;
    const tag = shared ? `t${trial - 1}` : `t${trial}k${k}`;
    const p = writeInput(env.dir, `crash/${tag}/f${i % nfiles}.txt`, `crash trial ${shared ? trial - 1 : trial} file ${i % nfiles} ${shared ? '' : k}\n`.repeat(1 + (i % 50)));
    if (!inputFiles.includes(p)) inputFiles.push(p);
    jobs.push({ name: jobName(batch, 1000 + trial, k * 100 + i), args: [`-k${k}`], inputs: [[p, 'in']] });
  }
  return {
    line: `BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`,
    verify: () => expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name)),
  };
}

function planFetch(trial: number, k: number, random: () => number): Planned {
  const job = fetchJobs[Math.floor(random() * fetchJobs.length)]!;
  const iwd = path.join(env.dir, `iwd-${trial}-${k}`);
  fs.mkdirSync(iwd, { recursive: true });
  const stderrText = job.zip ? 'zipper: 3 entries\n' : `uppercase: ${env.server.outputOf(job.name, 0)!.length} bytes\n`;
  const expected = (): Map<string, Buffer> => {
    if (!job.zip) return new Map([['result.txt', env.server.outputOf(job.name, 0)!]]);
    return new Map([['upper.txt', upperAscii(Buffer.from(`zip input ${job.name.slice(-1)}\nMixed Case\n`))]]);
  };
  const line = job.zip
    ? `BOINC_FETCH_OUTPUT ${esc(job.name)} ${esc(iwd)} job.err SOME 1 upper.txt upper.txt`
    : `BOINC_FETCH_OUTPUT ${esc(job.name)} ${esc(iwd)} job.err SOME 1 out result.txt`;
  const checkWhole = (final: boolean) => {
    for (const [name, bytes] of expected()) {
      const p = path.join(iwd, name);
      if (fs.existsSync(p)) expect(fs.readFileSync(p).equals(bytes)).toBe(true);
      else if (final) throw new Error(`${p} missing after the repeat`);
    }
    const err = path.join(iwd, 'job.err');
    if (fs.existsSync(err)) {
      // Whole appends only (a repeat after a fetch that completed appends once more only if
      // the kill came between the append and its record, docs/storage.md "Output files").
      // (each copy is the app's stderr and the BOINC runtime's line, the same for every fetch)
      const text = fs.readFileSync(err, 'latin1');
      const once = stderrFilePattern(stderrText).exec(text.slice(0, text.indexOf('boinc_finish(0)\n') + 16))?.[0];
      expect(once).toBeDefined();
      expect(text.length % once!.length).toBe(0);
      expect(text).toBe(once!.repeat(text.length / once!.length));
    } else if (final) throw new Error(`${err} missing after the repeat`);
    // Outputs and stderr land together.
    expect(fs.existsSync(err)).toBe(fs.existsSync(path.join(iwd, [...expected().keys()][0]!)));
  };
  return { line, verify: () => checkWhole(true), afterKill: () => checkWhole(false), outDir: iwd };
}

describe('kill -9 during submits and fetches, then the same commands again', () => {
  test(`${TRIALS} seeded trials`, async () => {
    const random = rng(SEED);
    const stats = { phases: [] as string[], leftTempsAfterKill: 0, tempsAfterRepeat: [] as string[] };
    for (let trial = 0; trial < TRIALS; trial++) {
      const planned: Planned[] = [];
      const nSubmits = 1 + Math.floor(random() * 2);
      const nFetches = 1 + Math.floor(random() * 3);
      for (let k = 0; k < nSubmits; k++) planned.push(planSubmit(trial, k, random));
      for (let k = 0; k < nFetches; k++) planned.push(planFetch(trial, k, random));
      const delay = Math.floor(random() * 700);
      // Half the trials: downloads crawl, so kills land mid-download too.
      if (random() < 0.5) env.server.injectFault({ script: 'get_output.php', kind: 'slow', delayMs: 1500, count: 100 });

      // Send every command, then kill at the chosen moment.
      const ids: string[] = [];
      for (const p of planned) {
        const id = env.gahp.reqId();
        const sp = p.line.indexOf(' ');
        expect(await env.gahp.request(`${p.line.slice(0, sp)} ${id}${p.line.slice(sp)}`)).toBe('S');
        ids.push(id);
      }
      await sleep(delay);
      await env.gahp.kill('SIGKILL');
      env.server.clearFaults();
      kills++;
      if (planned.some((p) => p.outDir && tempFiles(p.outDir).length > 0)) stats.leftTempsAfterKill++;

      for (const p of planned) p.afterKill?.();
      // Where the kill landed: commands already complete on the server / on disk.
      const done = planned.filter((p) => {
        try {
          p.verify();
          return true;
        } catch {
          return false;
        }
      }).length;
      stats.phases.push(`${delay}ms:${done}/${planned.length}`);
      expectLedgerMatchesServer(stateDir, env.server, { tornAllowed: kills });
      expectHashCacheSound(stateDir, inputFiles, kills);

      // A new GAHP on the same state directory repeats every command.
      await env.restart(undefined, { stateDir, args: ['--rpc-timeout', '5'] });
      const again: string[] = [];
      for (const p of planned) {
        const id = env.gahp.reqId();
        const sp = p.line.indexOf(' ');
        expect(await env.gahp.request(`${p.line.slice(0, sp)} ${id}${p.line.slice(sp)}`)).toBe('S');
        again.push(id);
      }
      const results: Array<readonly [number, string[]]> = [];
      for (let i = 0; i < again.length; i++) results.push([i, await env.gahp.waitResult(again[i]!, 120_000)]);
      for (const [i, r] of results) {
        if (r[0] !== 'NULL') throw new Error(`trial ${trial} (delay ${delay} ms): repeat of command ${i} failed: ${r.join(' ')}`);
        planned[i]!.verify();
      }
      expectLedgerMatchesServer(stateDir, env.server, { tornAllowed: kills });
      expectHashCacheSound(stateDir, inputFiles, kills);
      for (const p of planned) if (p.outDir) stats.tempsAfterRepeat.push(...tempFiles(p.outDir).map((f) => path.join(p.outDir!, f)));
      stats.tempsAfterRepeat.push(...tempFiles(stateDir).map((f) => path.join(stateDir, f)));
      // Writer registrations of killed GAHPs do not pile up: only the live GAHP's remains.
      // (Entries are named <pid>.<random>, one per open ledger.)
      const live = `ledger.writers/${env.gahp.child.pid}.`;
      stats.tempsAfterRepeat.push(...walk(stateDir).filter((f) => f.startsWith('ledger.writers/') && !f.startsWith(live)).map((f) => path.join(stateDir, f)));
    }
    // No duplicates anywhere on the server.
    const names = env.server.batches().map((b) => b.name);
    expect(new Set(names).size).toBe(names.length);
    const jobNames = env.server.jobs().map((j) => j.name);
    expect(new Set(jobNames).size).toBe(jobNames.length);
    process.stdout.write(`[reliability] crash: ${TRIALS} trials (seed ${SEED}), kill delay:commands complete at the kill ${stats.phases.join(' ')}, ` +
      `${stats.leftTempsAfterKill} kills left temp files in an output dir, temp files after the repeats: ${stats.tempsAfterRepeat.length}; ` +
      `state dir: ${walk(stateDir).join(', ')}\n`);
    expect(stats.tempsAfterRepeat.map((f) => path.relative(env.dir, f))).toEqual([]);
  }, 600_000);
});
