/**
 * Start-up of the BOINC_GAHP route with a site's history in its state directory (issue 44,
 * item 6):
 *
 *   node dist/test/bench/startup-history.js [--jobs 10000] [--rounds 7] [--bin path/to/boinc-gahp]
 *
 * Writes a state directory holding `--jobs` finished jobs in retired batches of 1,000, as the
 * route and BOINC_SUBMIT leave them (blah/batches/<batch>.json with each job's spec,
 * blah/finals/<batch>.jsonl with each job's final state, and the batch in the ledger,
 * ledger.jsonl, as compaction writes it), retired two days ago. Then, in turns, a GAHP on an
 * empty state directory and one on that directory: each is started as the gridmanager
 * starts BOINC_GAHP (the project in its environment; nothing listens there, and nothing
 * here asks it) and timed from its spawn to the answer of its first BLAH_JOB_STATUS (of a
 * job no batch has: the route reads its state before it answers). The first start on the
 * history is printed apart: it is the one that finds the old batches (and, since item 6,
 * archives them). Medians of the rest, and of the ratios pair by pair.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GahpDriver } from './lib/driver.js';
import { median } from './lib/stats.js';
import { benchTempDir, cleanupAll } from './lib/tmp.js';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const PROJECT = 'http://127.0.0.1:1/nothing/';

/** The files the route and the ledger keep of `njobs` finished jobs in retired batches. */
function writeHistory(stateDir: string, njobs: number): void {
  const blah = path.join(stateDir, 'blah');
  fs.mkdirSync(path.join(blah, 'batches'), { recursive: true });
  fs.mkdirSync(path.join(blah, 'finals'), { recursive: true });
  const retiredAt = Date.now() - 2 * 24 * 3600 * 1000;
  const ledger: string[] = [];
  for (let b = 0; b * 1000 < njobs; b++) {
    const batch = `blahp-uppercase-old${String(b).padStart(4, '0')}-a1b2c3`;
    const n = Math.min(1000, njobs - b * 1000);
    const jobs = [];
    const finals: string[] = [];
    const statuses: Record<string, string> = {};
    for (let k = 0; k < n; k++) {
      const iwd = `/home/alice/runs/cluster${b}`;
      jobs.push({
        key: `gm-${(b * 1000 + k).toString(16).padStart(32, '0')}`,
        identity: `home_bl_127.0.0.1_19718_alice_vm_${100 + b}.${k}`,
        iwd,
        args: ['-n', String(k)],
        inputs: [{ src: `${iwd}/data.txt`, dst: 'in' }],
        outputs: [{ src: 'out', dst: `out.${100 + b}.${k}` }],
        stdout: `job.${k}.out`,
        stderr: `job.${k}.err`,
      });
      finals.push(JSON.stringify({ job: `${batch}_${k}`, state: { kind: 'done', exitCode: 0, wallClock: 12.5, cpu: 10.25 } }));
      statuses[`${batch}_${k}`] = 'DONE';
    }
    const createdAt = retiredAt - 3600 * 1000;
    fs.writeFileSync(
      path.join(blah, 'batches', `${batch}.json`),
      JSON.stringify({ v: 1, batch, app: 'uppercase', projectUrl: PROJECT, state: 'retired', jobs, createdAt, submittedAt: createdAt, leaseExpiresAt: Math.floor(createdAt / 1000) + 6 * 3600, retiredAt }) + '\n',
    );
    fs.writeFileSync(path.join(blah, 'finals', `${batch}.jsonl`), finals.join('\n') + '\n');
    ledger.push(JSON.stringify({ op: 'snapshot', batch: { projectUrl: PROJECT, name: batch, app: 'uppercase', state: 'retired', batchId: 1000 + b, physFiles: ['condorv_0123456789abcdef0123456789abcdef'], jobs: statuses, createdAt, updatedAt: retiredAt } }));
  }
  fs.writeFileSync(path.join(stateDir, 'ledger.jsonl'), ledger.join('\n') + '\n', { mode: 0o600 });
}

/** Seconds from the GAHP's spawn to the answer of its first BLAH_JOB_STATUS. */
async function startOnce(stateDir: string, env: NodeJS.ProcessEnv, bin: string | undefined): Promise<number> {
  const t0 = process.hrtime.bigint();
  const gahp = await GahpDriver.start({ stateDir, env, ...(bin ? { bin } : {}) });
  try {
    await gahp.startup();
    const answer = await gahp.call('BLAH_JOB_STATUS', 'boinc/blahp-uppercase-none-000000_0');
    if (!answer.startsWith('1 ')) throw new Error(`BLAH_JOB_STATUS answered ${answer.slice(0, 200)}`);
    return Number(process.hrtime.bigint() - t0) / 1e9;
  } finally {
    await gahp.close();
  }
}

async function main(): Promise<number> {
  const njobs = Number(option('--jobs', '10000'));
  const rounds = Number(option('--rounds', '7'));
  const bin = process.argv.includes('--bin') ? option('--bin', '') : undefined;
  const dir = benchTempDir('startup-history');
  const authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, 'x'.repeat(32) + '\n', { mode: 0o600 });
  const env = { BOINC_GAHP_PROJECT_URL: PROJECT, BOINC_GAHP_AUTHENTICATOR_FILE: authFile };
  const history = path.join(dir, 'history');
  fs.mkdirSync(history);
  writeHistory(history, njobs);
  const load = [os.loadavg()[0]!];
  const first = await startOnce(history, env, bin);
  const none: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const empty = path.join(dir, `empty${i}`);
    fs.mkdirSync(empty);
    for (const side of i % 2 === 0 ? [0, 1] : [1, 0]) {
      if (side === 0) none.push(await startOnce(empty, env, bin));
      else full.push(await startOnce(history, env, bin));
    }
  }
  load.push(os.loadavg()[0]!);
  const f = (x: number) => x.toFixed(3);
  console.log(`startup_history: ${njobs} finished jobs of retired batches, ${rounds} rounds, load ${load.map((x) => x.toFixed(1)).join(' -> ')}${bin ? `, GAHP ${bin}` : ''}`);
  console.log(`  first start on the history: ${f(first)} s`);
  console.log(`  later starts: history median ${f(median(full))} s (${full.map(f).join(' ')}), none median ${f(median(none))} s (${none.map(f).join(' ')})`);
  console.log(`  history / none, median of the pairs' ratios: ${f(median(full.map((x, i) => x / none[i]!)))}`);
  return 0;
}

main().then(
  (code) => {
    cleanupAll();
    process.exit(code);
  },
  (err) => {
    console.error(`startup-history: ${(err as Error).stack ?? err}`);
    cleanupAll();
    process.exit(2);
  },
);
