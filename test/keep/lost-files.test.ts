/**
 * Issue 42, items 3 and 4, with the GAHP's keeping turned off (`--keep-files no`) on a
 * project whose daemons delete a done job's files (the test server's `daemons: 'static'`):
 * an output deleted before it was fetched is said to be gone, naming the file, that the
 * project deleted or moved it and what can be set against it, never "run again"; the job
 * fails (submit) or is held (BOINC_GAHP route) at once, nothing retries it. A job whose
 * input was deleted before its host downloaded it says so. Through bin/boinc-gahp.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { BlahGridmanager, jobAd } from '../support/blah-gridmanager.js';
import { until } from '../support/poll.js';
import { runCli, startCli, writeSubmitFile } from '../cli/cli-support.js';

let dir: string;
beforeEach(() => {
  dir = makeTempDir('boinc-gahp-lost-');
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function submitFile(s: ExtendedTestBoincServer, name: string, input: string, count: number): string {
  fs.writeFileSync(path.join(dir, 'auth.txt'), `${s.authenticator}\n`, { mode: 0o600 });
  writeSubmitFile(path.join(dir, `${name}.sub`), { url: s.url, authFile: 'auth.txt' }, [`transfer_input_files = ${input}`, `queue ${count}`]);
  return `${name}.sub`;
}

const GONE = /output out of job \S+ is gone from the BOINC server: the project deleted or moved it before it was fetched \(in neither the upload hierarchy nor a batch-collect assimilator's results: get_output failed: ERROR: no such file: \/home\/boincadm\/projects\/test\/upload\/[0-9a-f]+\/\S+_0_r\d+_0; [^)]*\)\. It cannot be fetched any more: the job has to run again\. So that this does not happen again: outputs wait on the server until fetched with this GAHP's --keep-files yes \(the default: each job's files are marked <no_delete\/>\), or the project's file_deleter run with --preserve_result_files, a <delete_delay_hours> in its config.xml longer than the GAHP can be away, or its batch-collect assimilator/;

test('submit, keeping off, outputs deleted before a 2 s poll: each job is reported failed with what happened and what to set, at once, and no "run again"', async () => {
  const s = await startTestServer({ daemons: 'static', deleteAfterDoneSeconds: 0.3, autoCompleteSeconds: 0.2 });
  try {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'lost\n');
    const r = await runCli(['--state-dir', path.join(dir, 'state'), '--keep-files', 'no', 'submit', submitFile(s, 'lost', 'in.txt', 2), '--poll', '2'], { cwd: dir, timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/cluster 1: 0 jobs done, outputs fetched; 2 failed/);
    const lines = r.stdout.split('\n').filter((l) => /^ {2}\S+: /.test(l));
    expect(lines).toHaveLength(2);
    for (const l of lines) expect(l).toMatch(GONE);
    expect(r.stdout + r.stderr).not.toMatch(/run the same command again|fetches them/);
    // One fetch per job: a gone output is not tried again.
    expect(s.rpcLog().filter((e) => e.rpc === 'workunit_file')).toHaveLength(2);
    // Nothing was marked no_delete.
    expect(s.rpcLog().find((e) => e.rpc === 'submit_batch')!.raw).not.toContain('no_delete');
  } finally {
    await s.close();
  }
}, 90_000);

test('BOINC_GAHP route, keeping off: a job whose output is gone is held with that reason', async () => {
  const s = await startTestServer({ daemons: 'static', deleteAfterDoneSeconds: 0.2 });
  const auth = path.join(dir, 'auth');
  fs.writeFileSync(auth, `${s.authenticator}\n`, { mode: 0o600 });
  const g = await BlahGridmanager.start(s.url, auth, { env: { BOINC_GAHP_KEEP_FILES: 'no' } });
  try {
    const iwd = path.join(dir, 'job');
    fs.mkdirSync(iwd);
    fs.writeFileSync(path.join(iwd, 'in'), 'gone soon\n');
    const { jobId } = await g.submit(jobAd({ Iwd: iwd, JobDirectory: 'home_bl_127.0.0.1_19718_alice_vm_7.0_1796300184' }));
    const name = jobId.slice('boinc/'.length);
    await until('the job on the server', () => s.jobs().some((j) => j.name === name));
    // Hold the route's fetch back until the project's daemons have deleted the output.
    s.injectFault({ script: 'get_output.php', kind: 'late', delayMs: 1500 });
    s.advanceJob(name, 'DONE');
    const st = await g.waitStatus(jobId, 5);
    expect(st.jobStatus).toBe(5);
    expect(st.ad).toMatch(/HoldReason = "BOINC finished job \S+ but get_output failed: output out of job \S+ is gone from the BOINC server: the project deleted or moved it/);
    expect(st.ad).toMatch(/--preserve_result_files/);
    expect(st.ad).not.toMatch(/release the job to fetch it/);
  } finally {
    await g.close();
    await s.close();
  }
}, 90_000);

test("a job whose shared input the project deleted before its host downloaded it fails saying which input could not be downloaded", async () => {
  // Quirks 'real': query_completed_job dies for the failed job, as BOINC's handler does; the
  // name comes from the failed instance's page result.php, logged in by the cookie.
  const s = await startTestServer({ daemons: 'static', deleteAfterDoneSeconds: 3600 });
  try {
    fs.writeFileSync(path.join(dir, 'shared.txt'), 'shared\n');
    const b = startCli(['--state-dir', path.join(dir, 'state'), '--keep-files', 'no', 'submit', submitFile(s, 'sh', 'shared.txt', 2), '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
    await until('the jobs on the server', () => s.jobs().length === 2);
    const [first, second] = s.jobs();
    s.advanceJob(first!.name, 'DONE');
    s.runDaemons(); // the first job's input goes with it
    s.advanceJob(second!.name, 'DONE'); // sent now: its host cannot download the input
    const r = await b.exited;
    expect(r.code).toBe(1);
    const file = second!.inputFiles[0]!;
    expect(r.stdout).toContain(`BOINC reports ERROR: input ${file} could not be downloaded by the volunteer's host (permanent HTTP error; exit status -186) (too many total results)`);
    // From the instance's page (query_job gave its id), not from query_completed_job.
    const pages = s.rpcLog().filter((e) => e.rpc === 'result_page').map((e) => e.raw);
    expect(pages.length).toBeGreaterThan(0);
    expect(new Set(pages)).toEqual(new Set([`/boinc_test/result.php?resultid=${second!.id * 10 + 1}`]));
    expect(s.rpcLog().filter((e) => e.rpc === 'query_completed_job' && e.raw.includes(second!.name))).toEqual([]);
    // The authenticator went as the cookie, never in the URL nor the log.
    expect(r.stdout + r.stderr).not.toContain(s.authenticator);
  } finally {
    await s.close();
  }
}, 90_000);
