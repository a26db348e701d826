/**
 * 1,000 jobs, 1,000 status calls through boinc_status.sh exactly as blahpd runs them
 * (several at once, as blahpd's threads do): the shared snapshot answers them from a
 * handful of query_batch2 calls, and no call comes near blahpd's 30 s limit. Once the
 * snapshot is fresh, the script answers an idle job without starting node (issue 36, item
 * 2): node starts only for the calls that find no fresh snapshot (the first few, side by
 * side). The scripts run a stand-in for node that counts its starts (support.ts).
 *
 * The 1,000 jobs are submitted by ONE node process running the same submit code the
 * script runs (dist/gahp/blahp/submit.js, group commit included) 1,000 times side by side,
 * which takes seconds where 1,000 script processes would take minutes on a shared machine;
 * the status calls, the subject of this test, are all real script runs.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../support/gahp-process.js';
import { jobDir, blahpEnvForFile } from './support.js';

/** Submits `n` jobs through submitJob in one process; prints one job id per line. */
const SUBMIT_MANY = `
const [{ loadConfig }, { openContext }, { blahpJobId }, { submitJob }] = await Promise.all([
  import(process.env.DIST + '/gahp/blahp/config.js'), import(process.env.DIST + '/gahp/blahp/context.js'),
  import(process.env.DIST + '/gahp/batch-boinc/names.js'), import(process.env.DIST + '/gahp/blahp/submit.js'),
]);
const n = Number(process.env.JOBS);
const ctx = openContext(loadConfig(process.env));
const argv = (k) => ['-r', 'no', '-c', '/usr/bin/true', '-T', process.env.TMPDIR_LISTS, '-I', process.env.INPUT_LIST, '-w', process.env.IWD, '-q', 'uppercase', '--', '"k=' + k + '"'];
const ids = [blahpJobId(await submitJob(ctx, argv(0), () => {}))];
const rest = await Promise.all(Array.from({ length: n - 1 }, (_, k) => submitJob(ctx, argv(k + 1), () => {})));
ids.push(...rest.map(blahpJobId));
await ctx.close();
process.stdout.write(ids.join('\\n') + '\\n', () => process.exit(0));
`;

/**
 * CPU seconds used by this process's waited-for children so far (/proc/self/stat cutime +
 * cstime): every script run, with the node it execs, and the emulator's own helpers.
 */
function childCpuSeconds(): number {
  const fields = fs.readFileSync('/proc/self/stat', 'utf8').replace(/^.*\) /, '').split(' ');
  // After "pid (comm) ", field 3 (state) is index 0: cutime and cstime are fields 16 and 17.
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

const JOBS = 1000;
const CONCURRENT_STATUS_CALLS = 8;
const env = blahpEnvForFile({}, { boinc_status_max_age: '60' }, 60_000, { countNodeStarts: true });

test(`${JOBS} jobs' status calls are answered from a handful of server queries`, async () => {
  const iwd = jobDir(env(), 'many', 'shared input\n');
  const inputList = path.join(env().dir, 'tmp', 'inputs');
  fs.writeFileSync(inputList, `${path.join(iwd, 'in')}\n`);
  // A file, not -e: the hashing worker threads inherit the process's exec arguments.
  const script = path.join(env().dir, 'submit-many.mjs');
  fs.writeFileSync(script, SUBMIT_MANY);
  const { stdout } = await promisify(execFile)(process.execPath, [script], {
    env: {
      ...env().env,
      DIST: path.join(REPO_ROOT, 'dist'),
      JOBS: String(JOBS),
      TMPDIR_LISTS: path.join(env().dir, 'tmp'),
      INPUT_LIST: inputList,
      IWD: iwd,
      BOINC_GAHP_PROJECT_URL: env().server.url,
      BOINC_GAHP_AUTHENTICATOR_FILE: path.join(env().dir, 'auth'),
      BOINC_GAHP_STATE_DIR: env().stateDir,
      BOINC_BLAHP_GATHER_MS: '200',
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  const ids = stdout.trim().split('\n');
  expect(new Set(ids).size).toBe(JOBS);
  expect(env().server.jobs()).toHaveLength(JOBS);
  const batches = env().server.rpcLog().filter((e) => e.rpc === 'create_batch').length;
  expect(batches).toBeLessThanOrEqual(5);

  env().server.clearRpcLog();
  const startsBefore = env().nodeStarts();
  const cpu0 = childCpuSeconds();
  const t0 = Date.now();
  let next = 0;
  let slowest = 0;
  const statuses = new Map<number, number>();
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++]!;
      const st = await env().blahpd.status(id);
      expect(st.problem).toBeUndefined();
      expect(st.run!.silenceTimeout).toBe(false);
      slowest = Math.max(slowest, st.run!.ms);
      const s = st.answer!.jobStatus;
      statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_STATUS_CALLS }, worker));
  const queries = env().server.rpcLog().filter((e) => e.rpc === 'query_batch2').length;
  const nodeStarts = env().nodeStarts() - startsBefore;
  const cpu = childCpuSeconds() - cpu0;
  console.log(`${JOBS} status calls in ${Date.now() - t0} ms (slowest ${slowest} ms), ${queries} query_batch2 calls, ${nodeStarts} node starts, ${cpu.toFixed(1)} s of the scripts' CPU`);
  expect(statuses.get(1)).toBe(JOBS);
  expect(queries).toBeGreaterThanOrEqual(1);
  expect(queries).toBeLessThanOrEqual(5);
  expect(slowest).toBeLessThan(20_000);
  // Only the calls that found no fresh snapshot started node: the calls side by side at
  // each refresh (more than one when the run outlasts the max age on a loaded machine).
  expect(nodeStarts).toBeLessThanOrEqual(CONCURRENT_STATUS_CALLS * 2 * queries);
}, 900_000);
