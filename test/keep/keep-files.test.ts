/**
 * Issue 42, items 2 and 3: on a project whose daemons delete a done job's files (the test
 * server's `daemons: 'static'`), `boinc-gahp submit` sends each job the app's templates with
 * `<no_delete/>` on every file, so no output depends on being fetched within seconds and no
 * shared input is deleted under a job that has yet to download it. Through bin/boinc-gahp.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { upperAscii } from '../../fixtures/apps.js';
import { makeTempDir } from '../support/gahp-process.js';
import { until } from '../support/poll.js';
import { runCli, startCli, writeSubmitFile } from '../cli/cli-support.js';

let dir: string;
beforeEach(() => {
  dir = makeTempDir('boinc-gahp-keep-');
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Writes dir/<name>.sub: `count` uppercase jobs reading `input`, outputs to out.<name>.<proc>. */
function submitFile(s: ExtendedTestBoincServer, name: string, input: string, count: number): string {
  fs.writeFileSync(path.join(dir, 'auth.txt'), `${s.authenticator}\n`, { mode: 0o600 });
  writeSubmitFile(path.join(dir, `${name}.sub`), { url: s.url, authFile: 'auth.txt' }, [
    `transfer_input_files = ${input}`,
    'transfer_output_files = out',
    `transfer_output_remaps = "out = out.${name}.$(Process)"`,
    `queue ${count}`,
  ]);
  return `${name}.sub`;
}

const state = () => path.join(dir, 'state');

test("outputs deleted 0.3 s after a job is done are still fetched by a submit polling every 2 s (each job's output template says no_delete)", async () => {
  const s = await startTestServer({ daemons: 'static', deleteAfterDoneSeconds: 0.3, autoCompleteSeconds: 0.2 });
  try {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'keep me\n');
    const r = await runCli(['--state-dir', state(), 'submit', submitFile(s, 'slow', 'in.txt', 3), '--poll', '2'], { cwd: dir, timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stdout}${r.stderr}`);
    expect(r.stdout).toMatch(/cluster 1: 3 jobs done, outputs fetched; 0 failed/);
    for (const p of [0, 1, 2]) expect(fs.readFileSync(path.join(dir, `out.slow.${p}`))).toEqual(upperAscii(Buffer.from('keep me\n')));
    // The server did act: the jobs were over long before the fetch, and only no_delete kept their outputs.
    const sent = s.rpcLog().find((e) => e.rpc === 'submit_batch')!.raw;
    expect(sent).toMatch(/<output_template>\s*<file_info>\s*<name><OUTFILE_0\/><\/name>[\s\S]*<no_delete\/>\s*<\/file_info>\s*<result>/);
  } finally {
    await s.close();
  }
}, 90_000);

test("a second cluster reusing the first's input after the first's jobs were assimilated: every job finishes (the input was kept no_delete)", async () => {
  // The daemons act only when the test says so (runDaemons): between cluster B's query_files
  // (the input is there) and its jobs being sent to volunteers.
  const s = await startTestServer({ daemons: 'static', deleteAfterDoneSeconds: 3600 });
  try {
    fs.writeFileSync(path.join(dir, 'shared.txt'), 'shared input\n');
    const a = startCli(['--state-dir', state(), 'submit', submitFile(s, 'a', 'shared.txt', 1), '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
    await until("cluster a's job on the server", () => s.jobs().length === 1);
    s.advanceAll();
    const ra = await a.exited;
    if (ra.code !== 0) throw new Error(`exit ${ra.code}: ${ra.stdout}${ra.stderr}`);

    const b = startCli(['--state-dir', state(), 'submit', submitFile(s, 'b', 'shared.txt', 2), '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
    await until("cluster b's jobs on the server", () => s.jobs().length === 3);
    s.runDaemons(); // cluster a's job is assimilated and its files deleted, but for no_delete
    expect(s.files().filter((f) => f.deleted)).toEqual([]);
    s.advanceAll();
    const rb = await b.exited;
    if (rb.code !== 0) throw new Error(`exit ${rb.code}: ${rb.stdout}${rb.stderr}`);
    expect(rb.stdout).toMatch(/cluster 2: 2 jobs done, outputs fetched; 0 failed/);
    for (const p of [0, 1]) expect(fs.readFileSync(path.join(dir, `out.b.${p}`))).toEqual(upperAscii(Buffer.from('shared input\n')));
  } finally {
    await s.close();
  }
}, 90_000);
