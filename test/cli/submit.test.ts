/**
 * `boinc-gahp submit job.sub` against the bundled test server: a submit file using every
 * supported command, outputs checked against the apps' formulas, re-runs that submit
 * nothing twice, --no-wait then resume, and errors that name the line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, stderrFilePattern, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { upperAscii } from '../../fixtures/apps.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';
import { runCli, startCli } from './cli-support.js';

let server: TestBoincServer;
let dir: string;

beforeAll(async () => {
  server = await startTestServer({ autoCompleteSeconds: 0.2 });
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  dir = makeTempDir('boinc-gahp-submit-');
  fs.writeFileSync(path.join(dir, 'auth.txt'), server.authenticator + '\n', { mode: 0o600 });
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const state = () => path.join(dir, 'state');
const submit = (file: string, ...extra: string[]) =>
  runCli(['--state-dir', state(), 'submit', file, '--poll', '0.3', ...extra], { cwd: dir });

/** Writes dir/<name>: a submit file for `executable` on the project at url (auth.txt), then `lines`. */
function writeSubmitFile(name: string, executable: string, lines: string[], url = server.url): void {
  const head = [`executable = ${executable}`, `grid_resource = boinc ${url}`, 'boinc_authenticator_file = auth.txt'];
  fs.writeFileSync(path.join(dir, name), [...head, ...lines].join('\n'));
}

function everyCommandSubmitFile(): string {
  fs.writeFileSync(path.join(dir, 'a.txt'), 'AAA-');
  for (const item of ['x', 'y', 'z']) fs.writeFileSync(path.join(dir, `b_${item}.txt`), `bee ${item}\n`);
  fs.writeFileSync(path.join(dir, 'items.txt'), 'y\nz\n');
  for (const p of [0, 1, 2]) fs.mkdirSync(path.join(dir, 'jobs', String(p)), { recursive: true });
  fs.mkdirSync(path.join(dir, 'up'));
  fs.writeFileSync(path.join(dir, 'up', 'in.txt'), 'make me loud\n');
  fs.mkdirSync(path.join(dir, 'all'));
  fs.writeFileSync(path.join(dir, 'all', 'in.txt'), 'everything\n');
  const text = [
    '# A submit description using every command boinc-gahp submit supports.',
    'universe = grid',
    `grid_resource = boinc ${server.url}`,
    'boinc_authenticator_file = auth.txt',
    '',
    '# concat: two inputs (transfer_input_files + input), output named by `output`',
    'executable = concat',
    'tag = t$(Cluster)',
    'initialdir = jobs/$(Process)',
    'arguments = "$(tag) p$(Process) $(Item)"',
    'transfer_input_files = ../../a.txt',
    'input = ../../b_$(Item).txt',
    'transfer_output_files = joined',
    'transfer_output_remaps = "joined = joined.$(Cluster).$(Process)"',
    'output = info',
    'queue 1 Item in (x)',
    'queue Item from items.txt',
    '',
    '# uppercase: SOME with a remap, stderr to a per-job file',
    'executable = uppercase',
    'initialdir = up',
    'input =',
    'output =',
    'transfer_input_files = in.txt',
    'transfer_output_files = out',
    'transfer_output_remaps = "out = up.$(Process)"',
    'error = err.$(Process)',
    'arguments = -v $(Process)',
    'queue 2',
    '',
    '# uppercase again: no transfer_output_files, so ALL outputs come back',
    'initialdir = all',
    'transfer_output_files =',
    'error =',
    'arguments =',
    'queue',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'job.sub'), text);
  return 'job.sub';
}

function checkEveryCommandOutputs(cluster: number): void {
  const a = Buffer.from('AAA-');
  ['x', 'y', 'z'].forEach((item, proc) => {
    const iwd = path.join(dir, 'jobs', String(proc));
    const b = Buffer.from(`bee ${item}\n`);
    expect(fs.readFileSync(path.join(iwd, `joined.${cluster}.${proc}`))).toEqual(Buffer.concat([a, b]));
    expect(fs.readFileSync(path.join(iwd, 'info'), 'latin1')).toBe(`${a.length}\n${b.length}\nt${cluster} p${proc} ${item}\n`);
  });
  for (const proc of [3, 4]) {
    expect(fs.readFileSync(path.join(dir, 'up', `up.${proc}`), 'latin1')).toBe(`MAKE ME LOUD\n\nargs: -v ${proc}\n`);
    expect(fs.readFileSync(path.join(dir, 'up', `err.${proc}`), 'latin1')).toMatch(stderrFilePattern('uppercase: 13 bytes\n'));
  }
  expect(fs.readFileSync(path.join(dir, 'all', 'out'))).toEqual(upperAscii(Buffer.from('everything\n')));
}

test('a submit file using every supported command runs, outputs land where HTCondor would put them; a re-run submits nothing twice', async () => {
  const file = everyCommandSubmitFile();
  const r = await submit(file);
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}${r.stdout}`);
  expect(r.stdout).toMatch(/^cluster 1: 6 jobs in 2 batches on /m);
  expect(r.stdout).toMatch(/cluster 1: 6 jobs done, outputs fetched; 0 failed/);
  checkEveryCommandOutputs(1);

  // Batch names boinc-gahp-<dir>-<host>-<app>-<time>; job names end with _<cluster>.<proc>;
  // every name one BOINC's pages take (is_valid_filename: get_output3.php's check).
  const batches = server.batches().filter((b) => b.owner !== undefined);
  const ours = batches.filter((b) => /^boinc-gahp-[0-9a-f]{8}-[A-Za-z0-9.-]+-(concat|uppercase)-[0-9]+$/.test(b.name));
  expect(ours.map((b) => b.app).sort()).toEqual(['concat', 'uppercase']);
  expect(ours.flatMap((b) => b.jobNames.map((j) => j.slice(j.lastIndexOf('_') + 1))).sort()).toEqual(['1.0', '1.1', '1.2', '1.3', '1.4', '1.5']);
  for (const j of ours.flatMap((b) => b.jobNames)) expect([j, /^[\w\-. ]+$/.test(j) && j.length <= 255]).toEqual([j, true]);
  expect(ours.every((b) => b.state === 4)).toBe(true); // retired

  // Same file again: resumes (already complete), nothing new on the server.
  const rpcs = server.rpcLog().length;
  const again = await submit(file);
  expect(again.code).toBe(0);
  expect(again.stdout).toMatch(/already complete/);
  expect(server.batches().length).toBe(batches.length);
  expect(server.rpcLog().length).toBe(rpcs);

  // `status` shows the retired batches with --all, none without.
  const st = await runCli(['--state-dir', state(), 'status', '--all', '--json']);
  expect(st.code).toBe(0);
  const rows = (JSON.parse(st.stdout) as { batches: Array<{ batch: string; state: string; jobs: number }> }).batches;
  expect(rows.map((x) => x.batch).sort()).toEqual(ours.map((b) => b.name).sort());
  expect(rows.every((x) => x.state === 'retired')).toBe(true);
});

test('--no-wait submits and returns; running the file again waits and fetches without resubmitting; --new is a new cluster', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'abc\n');
  writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Cluster).$(Process)"', 'queue 3']);
  const before = server.batches().length;
  const first = await submit('job.sub', '--no-wait');
  expect(first.code).toBe(0);
  expect(first.stdout).toMatch(/submitted; to wait for the jobs and fetch their outputs, run: \S+boinc-gahp --state-dir \S+ submit job\.sub$/m);
  expect(server.batches().length).toBe(before + 1);
  expect(fs.existsSync(path.join(dir, 'out.1.0'))).toBe(false);

  // The same again through a GAHP child process (bin/boinc-gahp) instead of in-process.
  const second = await submit('job.sub', '--spawn');
  expect(second.code).toBe(0);
  expect(server.batches().length).toBe(before + 1);
  const batch = server.batches()[server.batches().length - 1]!;
  expect(batch.jobNames).toHaveLength(3);
  for (let p = 0; p < 3; p++) expect(fs.readFileSync(path.join(dir, `out.1.${p}`), 'latin1')).toBe('ABC\n');

  const third = await submit('job.sub', '--new');
  expect(third.code).toBe(0);
  expect(third.stdout).toMatch(/^cluster 2: 3 jobs/m);
  expect(server.batches().length).toBe(before + 2);
  expect(fs.readFileSync(path.join(dir, 'out.2.2'), 'latin1')).toBe('ABC\n');
});

test('the resume hint after Ctrl-C, typed as printed, resumes the cluster: nothing is submitted twice', async () => {
  // Jobs finish only when the test says so: the submit is still waiting at Ctrl-C.
  const own = await startTestServer();
  try {
    await resumeHintResumes(own);
  } finally {
    await own.close();
  }
});

async function resumeHintResumes(own: TestBoincServer): Promise<void> {
  // Paths a shell would mangle unquoted; the project and account only from options.
  const stateDir = path.join(dir, `state "1" it's $HOME`);
  const authFile = path.join(dir, 'my auth.txt');
  fs.writeFileSync(authFile, own.authenticator + '\n', { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'in.txt'), 'again\n');
  fs.writeFileSync(path.join(dir, 'job90.sub'), 'executable = uppercase\ntransfer_input_files = in.txt\ntransfer_output_files = out\ntransfer_output_remaps = "out = out.$(Process)"\nqueue 3\n');
  // boinc-gahp on PATH, as after an install; XDG_STATE_HOME away from the real one: a
  // hint without --state-dir would submit a second batch from there.
  const env = { PATH: `${path.dirname(GAHP_BIN)}${path.delimiter}${process.env.PATH}`, XDG_STATE_HOME: path.join(dir, 'xdg') };
  const first = startCli(['--state-dir', stateDir, '--project-url', own.url, '--authenticator-file', authFile, 'submit', 'job90.sub', '--poll', '0.2'], { cwd: dir, env });
  await first.waitFor(/^submitted boinc-gahp-/m);
  first.child.kill('SIGINT');
  const interrupted = await first.exited;
  expect(interrupted.code).toBe(130);
  expect(interrupted.stdout).toMatch(/^interrupted; to resume \(nothing is submitted twice\), run: boinc-gahp /m);
  expect(interrupted.stdout).toMatch(/^the server keeps a batch no run waits for until \S+Z \(its lease, renewed by each run\); after that its jobs and results are gone: resume before then$/m);
  // (Read loosely: the hint of earlier versions, `run "..." again`, is run too, and fails below.)
  const hint = /^interrupted; .*run:? "?(.+?)"?(?: again .*)?$/m.exec(interrupted.stdout)![1]!;
  expect(own.batches().map((b) => b.jobNames.length)).toEqual([3]);

  own.advanceAll();
  const resumed = await startCli(['-c', hint], { command: 'sh', cwd: dir, env }).exited;
  expect(own.batches().map((b) => b.jobNames.length)).toEqual([3]);
  if (resumed.code !== 0) throw new Error(`the hint ${hint} exited ${resumed.code}: ${resumed.stderr}${resumed.stdout}`);
  expect(resumed.stdout).toMatch(/^cluster 1: 3 jobs done, outputs fetched; 0 failed$/m);
  for (const p of [0, 1, 2]) expect(fs.readFileSync(path.join(dir, `out.${p}`), 'latin1')).toBe('AGAIN\n');
  expect(fs.existsSync(path.join(dir, 'xdg'))).toBe(false);
}

test("the README's grid submit file runs as written: the lines condor_submit needs are accepted, at most with a note", async () => {
  const readme = fs.readFileSync(path.join(path.dirname(GAHP_BIN), '..', 'README.md'), 'utf8');
  const block = /^### 2\. A grid-universe submit file[^\n]*\n+```\n([\s\S]*?)```/m.exec(readme)![1]!;
  expect(block).toMatch(/^transfer_executable += false$/m);
  fs.writeFileSync(path.join(dir, 'data.txt'), 'readme\n');
  fs.writeFileSync(path.join(dir, 'job.sub'), block
    .replace(/https:\/\/boinc\.example\.org\/myproject\//, server.url)
    .replace(/^(boinc_authenticator_file\s*=\s*).*$/m, `$1${path.join(dir, 'auth.txt')}`));
  const r = await submit('job.sub');
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}${r.stdout}`);
  expect(r.stdout).toMatch(/^cluster 1: 20 jobs done, outputs fetched; 0 failed$/m);
  expect(r.stderr).toMatch(/^note: job\.sub:[0-9]+: "log" has no effect with boinc-gahp submit \(ignored\)$/m);
  expect(r.stderr).not.toMatch(/transfer_executable|warning|error/);
  for (const p of [0, 19]) expect(fs.readFileSync(path.join(dir, `out.1.${p}`), 'latin1')).toBe(`README\n\nargs: -n ${p}\n`);
});

test('a job that fails on BOINC makes submit exit 1 naming the job and its exit status', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'boom\n');
  writeSubmitFile('job.sub', 'failing', ['transfer_input_files = in.txt', 'queue']);
  const r = await submit('job.sub');
  expect(r.code).toBe(1);
  expect(r.stdout).toMatch(/0 jobs done, outputs fetched; 1 failed/);
  // The test server answers as the real one: query_completed_job dies for a failed job,
  // query_batch with job details reports the failed instance's exit status.
  expect(r.stdout).toMatch(/^ {2}\S+_1\.0: BOINC reports ERROR: its instance failed with exit status 7 \(too many error results\)$/m);
  expect(r.stderr).toMatch(/^job 1\.0 failed on BOINC: BOINC reports ERROR: its instance failed with exit status 7/m);
});

test('submit-file errors exit 2 and name the line; nothing reaches the server', async () => {
  const rpcs = server.rpcLog().length;
  fs.writeFileSync(path.join(dir, 'bad.sub'), `executable = uppercase\ngrid_resource = boinc ${server.url}\nrequirements = Memory > 1024\nqueue\n`);
  const r = await submit('bad.sub');
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/bad\.sub:3: "requirements" is not supported by boinc-gahp submit/);

  // A typo of a command is named when the file is read, not as a template mismatch at queue.
  fs.writeFileSync(path.join(dir, 'typo.sub'), `executable = uppercase\ngrid_resource = boinc ${server.url}\nboinc_authenticator_file = auth.txt\ntransfer_input_file = in.txt\nqueue\n`);
  const t = await submit('typo.sub');
  expect(t.code).toBe(2);
  expect(t.stderr).toBe('boinc-gahp: typo.sub:4: unknown command "transfer_input_file": did you mean "transfer_input_files"?\n');

  fs.writeFileSync(path.join(dir, 'missing.sub'), `executable = uppercase\ngrid_resource = boinc ${server.url}\nboinc_authenticator_file = auth.txt\ntransfer_input_files = nope.txt\n\nqueue\n`);
  const m = await submit('missing.sub');
  expect(m.code).toBe(2);
  expect(m.stderr).toMatch(/missing\.sub:6: job 0: input file .*nope\.txt does not exist/);

  fs.writeFileSync(path.join(dir, 'nodir.sub'), `executable = uppercase\ngrid_resource = boinc ${server.url}\nboinc_authenticator_file = auth.txt\ninitialdir = nowhere\nqueue 1\n`);
  const d = await submit('nodir.sub');
  expect(d.code).toBe(2);
  expect(d.stderr).toMatch(/nodir\.sub:5: job 0: initialdir .*nowhere is not an existing directory/);

  fs.writeFileSync(path.join(dir, 'noauth.sub'), `executable = uppercase\ngrid_resource = boinc ${server.url}\nqueue\n`);
  const n = await submit('noauth.sub');
  expect(n.code).toBe(2);
  expect(n.stderr).toMatch(/^boinc-gahp: authenticator file: none given {2}-> fix: give boinc_authenticator_file in noauth\.sub or --authenticator-file/);
  expect(server.rpcLog().length).toBe(rpcs);
});

test('two submits started together take different clusters and batches', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
  for (const n of ['one', 'two']) {
    writeSubmitFile(`${n}.sub`, 'uppercase', [`# ${n}`, 'transfer_input_files = in.txt', 'queue']);
  }
  const [a, b] = await Promise.all([submit('one.sub', '--no-wait'), submit('two.sub', '--no-wait')]);
  expect([a.code, b.code]).toEqual([0, 0]);
  const clusters = [a.stdout, b.stdout].map((o) => /^cluster ([0-9]+):/m.exec(o)![1]).sort();
  expect(clusters).toEqual(['1', '2']);
  const batches = [a.stdout, b.stdout].map((o) => /^batch (\S+)$/m.exec(o)![1]);
  expect(new Set(batches).size).toBe(2);
});

test('two state directories submitting the same app in the same second get batches of their own', async () => {
  // Each state directory hands out cluster 1 and a time of this second: without the
  // directory in the batch name both would name the same batch, and BOINC would hold two
  // batches of one name (lookups by name find only the first).
  fs.writeFileSync(path.join(dir, 'in.txt'), 'twin\n');
  writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue']);
  const run = (stateDir: string) =>
    runCli(['--state-dir', path.join(dir, stateDir), 'submit', 'job.sub', '--no-wait'], { cwd: dir });
  const [a, b] = await Promise.all([run('state-a'), run('state-b')]);
  expect([a.code, b.code]).toEqual([0, 0]);
  const names = [a.stdout, b.stdout].map((o) => /^batch (\S+)$/m.exec(o)![1]!);
  expect(names[0]).not.toBe(names[1]);
  for (const name of names) {
    const onServer = server.batches().filter((x) => x.name === name);
    expect(onServer).toHaveLength(1);
    expect(onServer[0]!.jobNames).toHaveLength(1);
  }
});

describe('finished results are never given up (issue 37, item 1)', () => {
  const uppercaseTo = (remap: string, jobs = 2) => writeSubmitFile('job.sub', 'uppercase', [
    'transfer_input_files = in.txt', 'transfer_output_files = out', `transfer_output_remaps = "out = ${remap}"`, `queue ${jobs}`,
  ]);

  test('an output directory that is missing or not a directory is refused before anything is submitted', async () => {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    const rpcs = server.rpcLog().length;
    uppercaseTo('nodir/out.$(Process)');
    const missing = await submit('job.sub');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^boinc-gahp: job\.sub:\d+: job 0: its output \S+\/nodir\/out\.0 could not be written: the directory \S+\/nodir does not exist$/m);
    fs.writeFileSync(path.join(dir, 'afile'), '');
    uppercaseTo('afile/out.$(Process)');
    const notDir = await submit('job.sub');
    expect(notDir.code).toBe(2);
    expect(notDir.stderr).toMatch(/job 0: its output \S+\/afile\/out\.0 could not be written: \S+\/afile is not a directory/);
    if (process.getuid?.() !== 0) {
      fs.mkdirSync(path.join(dir, 'ro'), { mode: 0o555 });
      uppercaseTo('ro/out.$(Process)');
      const readOnly = await submit('job.sub');
      expect(readOnly.code).toBe(2);
      expect(readOnly.stderr).toMatch(/the directory \S+\/ro is not writable by this user/);
    }
    expect(server.rpcLog().length).toBe(rpcs);
    expect(fs.existsSync(path.join(state(), 'submit', 'clusters.json'))).toBe(false);
  });

  test('an output directory gone after submitting: nothing retired, the next run after the fix fetches every output, no second batch', async () => {
    // Jobs finish when the test says so: the directory goes while the submit waits.
    const own = await startTestServer();
    try {
      fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
      fs.writeFileSync(path.join(dir, 'in.txt'), 'keep me\n');
      fs.mkdirSync(path.join(dir, 'res'));
      writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = res/out.$(Process)"', 'queue 2'], own.url);
      const waiting = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
      await waiting.waitFor(/^submitted boinc-gahp-/m);
      fs.rmdirSync(path.join(dir, 'res'));
      own.advanceAll();
      const failed = await waiting.exited;
      expect(failed.code).toBe(1);
      expect(failed.stdout).toMatch(/^cluster 1: 0 jobs done, outputs fetched; 2 done, outputs not fetched yet; 0 failed$/m);
      expect(failed.stderr).toMatch(/^boinc-gahp: {3}1\.1: cannot write \S+\/res\/out\.1: ENOENT/m);
      expect(failed.stderr).toMatch(/their results are kept on the server until \S+ \(each run renews the lease\), their batch not retired; fix what is said above .* and run the same command again: it fetches them: \S+ --state-dir \S+ submit job\.sub$/m);
      expect(own.batches().map((b) => b.state)).not.toContain(4);

      // Run again before the fix: refused at once, saying the results wait.
      const early = await submit('job.sub');
      expect(early.code).toBe(2);
      expect(early.stderr).toMatch(/the directory \S+\/res does not exist; the cluster's results stay on the server until fetched: fix this and run the same command again$/m);

      fs.mkdirSync(path.join(dir, 'res'));
      const fixed = await submit('job.sub');
      if (fixed.code !== 0) throw new Error(`exit ${fixed.code}: ${fixed.stderr}${fixed.stdout}`);
      expect(fixed.stdout).toMatch(/^cluster 1: 2 jobs done, outputs fetched; 0 failed$/m);
      for (const p of [0, 1]) expect(fs.readFileSync(path.join(dir, 'res', `out.${p}`), 'latin1')).toBe('KEEP ME\n');
      expect(own.batches().map((b) => b.state)).toEqual([4]);
    } finally {
      await own.close();
    }
  });

  test("the project's download script failing: the batch is kept, the next run after it recovers fetches the outputs", async () => {
    const own = await startTestServer({ autoCompleteSeconds: 0.2 });
    try {
      fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
      fs.writeFileSync(path.join(dir, 'in.txt'), 'later\n');
      writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'queue'], own.url);
      own.injectFault({ script: 'get_output.php', kind: '5xx', status: 503, count: 1_000_000 });
      const down = await runCli(['--state-dir', state(), '--rpc-timeout', '1', 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir, timeoutMs: 60_000 });
      expect(down.code).toBe(1);
      expect(down.stdout).toMatch(/1 done, outputs not fetched yet; 0 failed$/m);
      expect(down.stderr).toMatch(/and run the same command again: it fetches them/);
      expect(own.batches().map((b) => b.state)).not.toContain(4);
      expect(fs.existsSync(path.join(dir, 'out'))).toBe(false);

      own.clearFaults();
      const up = await submit('job.sub');
      if (up.code !== 0) throw new Error(`exit ${up.code}: ${up.stderr}${up.stdout}`);
      expect(fs.readFileSync(path.join(dir, 'out'), 'latin1')).toBe('LATER\n');
      expect(own.batches().map((b) => b.state)).toEqual([4]);
    } finally {
      await own.close();
    }
  });
});

test("an output name the app does not make is refused before anything is submitted (issue 37, item 2); a zip app's entries are not checked", async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
  writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'transfer_output_files = result', '', 'queue 3']);
  const batches = server.batches().length;
  const r = await submit('job.sub');
  expect(r.code).toBe(2);
  expect(r.stderr).toBe('boinc-gahp: job.sub:7: job 0: transfer_output_files names "result", which app uppercase does not make (its outputs: out); nothing was submitted\n');
  expect(server.batches().length).toBe(batches);
  expect(server.rpcLog().slice(-1).map((e) => e.rpc)).toEqual(['get_templates']);
  expect(fs.existsSync(path.join(state(), 'submit', 'clusters.json'))).toBe(false);

  // The zipper app's one output is a zip: names are its entries, fetched from the archive.
  writeSubmitFile('zip.sub', 'zipper', ['transfer_input_files = in.txt', 'transfer_output_files = upper.txt', 'queue']);
  const z = await submit('zip.sub');
  if (z.code !== 0) throw new Error(`exit ${z.code}: ${z.stderr}${z.stdout}`);
  expect(fs.readFileSync(path.join(dir, 'upper.txt'), 'latin1')).toBe('X\n');
});

describe('limits met before anything is submitted (issue 37, item 5)', () => {
  test('an argument BOINC cannot carry is refused before a cluster or a batch exists, saying to put the value in an input file', async () => {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', `arguments = "-n 'two words'"`, 'queue']);
    const rpcs = server.rpcLog().length;
    const r = await submit('job.sub');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`boinc-gahp: job.sub:6: job 0: argument 2 "two words" holds character U+0020 (whitespace or control), which BOINC's create_work cannot carry intact; put the value in an input file (transfer_input_files) and pass the file's name instead\n`);
    expect(server.rpcLog().length).toBe(rpcs);
    expect(fs.existsSync(path.join(state(), 'submit', 'clusters.json'))).toBe(false);
  });

  test("an input over the project's upload_max_filesize is refused before a cluster or a batch exists (the GAHP would leave the job out, and this run could never finish it)", async () => {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    fs.writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(2 * 1024 * 1024 + 1));
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = $(f)', 'queue f in (in.txt, big.bin)']);
    const rpcs = server.rpcLog().length;
    const r = await submit('job.sub');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`boinc-gahp: job.sub:5: job 1: input file ${path.join(dir, 'big.bin')} (2097153 bytes) is larger than the project's PHP limit upload_max_filesize (2M): ` +
      "the project must raise it in php.ini, and the GAHP be told the new limits (--upload-max-filesize, --post-max-size); post_max_size must then exceed the file too\n");
    expect(server.rpcLog().length).toBe(rpcs);
    expect(fs.existsSync(path.join(state(), 'submit', 'clusters.json'))).toBe(false);
  });

  test('--timeout 2 --poll 30 ends within 3 s of submitting; --no-wait says how long the server keeps the batch', async () => {
    const own = await startTestServer();
    try {
      fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
      fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
      writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue'], own.url);
      const run = startCli(['--state-dir', state(), 'submit', 'job.sub', '--timeout', '2', '--poll', '30'], { cwd: dir });
      await run.waitFor(/^submitted boinc-gahp-/m);
      const submitted = Date.now();
      const r = await run.exited;
      expect(Date.now() - submitted).toBeLessThan(3000);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^boinc-gahp: gave up waiting after 2 s; the server keeps a batch no run waits for until \S+Z .*; to resume, run: \S+ --state-dir \S+ submit job\.sub$/m);

      writeSubmitFile('other.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 2'], own.url);
      const n = await runCli(['--state-dir', state(), 'submit', 'other.sub', '--no-wait'], { cwd: dir });
      expect(n.code).toBe(0);
      expect(n.stdout).toMatch(/^the server keeps a batch no run waits for until \S+Z \(its lease, renewed by each run\); after that its jobs and results are gone: resume before then$/m);
    } finally {
      await own.close();
    }
  });

  test('lease --until a time in the past and --poll below 5 s against a project on another machine are refused', async () => {
    const l = await runCli(['--state-dir', state(), 'lease', 'some-batch', '--until', '5']);
    expect(l.code).toBe(2);
    expect(l.stderr).toBe('boinc-gahp: --until 5 is in the past (1970-01-01T00:00:05.000Z): give a unix time after now (date +%s) or --hours\n');

    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('far.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue'], 'http://192.0.2.1/project/');
    const p = await runCli(['--state-dir', state(), 'submit', 'far.sub', '--poll', '0.1'], { cwd: dir });
    expect(p.code).toBe(2);
    expect(p.stderr).toBe('boinc-gahp: --poll 0.1 is too often for http://192.0.2.1/project/: each poll asks for the status of every job; give --poll 5 or more\n');
    expect(fs.existsSync(path.join(state(), 'submit', 'clusters.json'))).toBe(false);
  });

  test("a resume after the batch's lease ran out does not submit it again: it says so and names --new", async () => {
    const own = await startTestServer();
    try {
      fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
      fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
      writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue'], own.url);
      const first = await submit('job.sub', '--no-wait');
      expect(first.code).toBe(0);
      const submitted = /^batch (\S+)$/m.exec(first.stdout)![1]!;
      // As after BOINC deleted the batch when its lease passed: the record names a batch
      // the server does not have, its recorded lease past.
      const gone = `${submitted}0`;
      const clusters = path.join(state(), 'submit', 'clusters.json');
      const past = Math.floor(Date.now() / 1000) - 60;
      fs.writeFileSync(clusters, fs.readFileSync(clusters, 'utf8').split(submitted).join(gone).replace(/("leaseUntil": \{\s*"[^"]+": )\d+/, `$1${past}`));
      const before = own.batches().length;
      const r = await submit('job.sub');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^boinc-gahp: batch \S+ is gone from the server: its lease ran out at \S+Z with no run to renew it, and its jobs and results went with it; nothing was submitted again\. To run the jobs again as a new cluster, run: \S+ --state-dir \S+ submit job\.sub --new$/m);
      expect(own.batches().length).toBe(before);
    } finally {
      await own.close();
    }
  });
});

test('an edited submit file (issue 37, item 3): a comment keeps the cluster; changed jobs while the old cluster runs are refused, naming --new and cancel', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    const lines = ['transfer_input_files = in.txt', 'queue 5'];
    writeSubmitFile('job.sub', 'uppercase', lines, own.url);
    const first = await submit('job.sub', '--no-wait');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^cluster 1: 5 jobs/m);

    // A comment (every line after it moves down one): the same cluster, nothing submitted.
    writeSubmitFile('job.sub', 'uppercase', ['# the same five jobs', ...lines], own.url);
    const commented = await submit('job.sub', '--no-wait');
    expect(commented.code).toBe(0);
    expect(commented.stdout).toMatch(/^cluster 1: 5 jobs/m);
    expect(own.batches().map((b) => b.jobNames.length)).toEqual([5]);

    // Other jobs while cluster 1 is unfinished: refused, both choices typed out.
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 6'], own.url);
    const changed = await submit('job.sub', '--no-wait');
    expect(changed.code).toBe(2);
    expect(changed.stderr).toMatch(/^boinc-gahp: job\.sub changed since cluster 1 was submitted from it, and its jobs are not finished: to finish cluster 1 first, run: \S+ --state-dir \S+ submit --cluster 1; to submit the changed file as a new cluster beside it, run: \S+ --state-dir \S+ submit job\.sub --new; or cancel cluster 1 \(its jobs aborted, its results given up\): \S+ --state-dir \S+ cancel 1$/m);
    expect(own.batches()).toHaveLength(1);

    const fresh = await submit('job.sub', '--no-wait', '--new');
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toMatch(/^cluster 2: 6 jobs/m);
    // The file now resumes cluster 2.
    const again = await submit('job.sub', '--no-wait');
    expect(again.stdout).toMatch(/^cluster 2: 6 jobs/m);
    expect(own.batches().map((b) => b.jobNames.length)).toEqual([5, 6]);
  } finally {
    await own.close();
  }
});

test('cancel a cluster by its file or number (issue 37, item 4): jobs aborted, batches retired, status says cancelled; status --server asks the server', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 3'], own.url);
    writeSubmitFile('two.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 2'], own.url);
    expect((await submit('job.sub', '--no-wait')).code).toBe(0);
    expect((await submit('two.sub', '--no-wait')).code).toBe(0);
    const [one, two] = own.batches();
    own.advanceJob(one!.jobNames[0]!, 'DONE');

    // The server's view, with no --project-url: the project and account from the records.
    const st = await runCli(['--state-dir', state(), 'status', '--server'], { cwd: dir });
    expect(st.code).toBe(0);
    expect(st.stdout).toMatch(new RegExp(`^cluster 1 of ${dir}/job\\.sub: not finished \\(1 batch\\)$`, 'm'));
    expect(st.stdout).toContain(`${one!.name}\n  cluster 1 of ${dir}/job.sub: not finished\n`);
    expect(st.stdout).toMatch(/^ {2}the server says: DONE 1, NOT_STARTED 2$/m);

    const c = await runCli(['--state-dir', state(), 'cancel', 'job.sub'], { cwd: dir });
    expect(c.code).toBe(0);
    expect(c.stdout).toBe(`cancelled cluster 1 (${dir}/job.sub): 2 unfinished jobs aborted, 1 batch retired; the outputs of 1 finished job, never fetched, are given up\n`);
    const byNumber = await runCli(['--state-dir', state(), 'cancel', '2'], { cwd: dir });
    expect(byNumber.stdout).toBe(`cancelled cluster 2 (${dir}/two.sub): 2 unfinished jobs aborted, 1 batch retired\n`);
    expect(own.batches().map((b) => b.state)).toEqual([4, 4]);
    expect(own.jobs(two!.name).every((j) => j.aborted)).toBe(true);

    const after = await runCli(['--state-dir', state(), 'status', '--all'], { cwd: dir });
    expect(after.stdout).toMatch(new RegExp(`^cluster 1 of ${dir}/job\\.sub: cancelled \\(1 batch\\)$`, 'm'));
    expect(after.stdout).toContain(`${two!.name}\n  cluster 2 of ${dir}/two.sub: cancelled\n`);
    const again = await submit('job.sub');
    expect(again.code).toBe(1);
    expect(again.stdout).toMatch(/^cluster 1 was cancelled; to submit it again as a new cluster, run: \S+ --state-dir \S+ submit job\.sub --new$/m);
  } finally {
    await own.close();
  }
});

test('status shows a batch whose BOINC_SUBMIT failed as failed, with the error, not as creating (issue 37, item 4)', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 2'], own.url);
    own.injectFault({ script: 'submit_rpc_handler.php', rpc: 'create_batch', kind: 'error-reply', message: 'batch limit reached', count: 1000 });
    const s = await submit('job.sub', '--no-wait');
    expect(s.code).toBe(1);
    expect(s.stderr).toMatch(/BOINC_SUBMIT failed: .*batch limit reached/);

    const st = await runCli(['--state-dir', state(), 'status'], { cwd: dir });
    expect(st.code).toBe(0);
    expect(st.stdout).toMatch(new RegExp(`^cluster 1 of ${dir}/job\\.sub: submit failed \\(1 batch\\)$`, 'm'));
    expect(st.stdout).toMatch(/ state failed\n {2}BOINC_SUBMIT failed: .*batch limit reached\n/);
    expect(st.stdout).not.toMatch(/creating/);
    const json = (JSON.parse((await runCli(['--state-dir', state(), 'status', '--json'], { cwd: dir })).stdout) as { batches: Array<{ state: string; submitError?: string }> }).batches;
    expect(json.map((b) => b.state)).toEqual(['failed']);
    expect(json[0]!.submitError).toMatch(/batch limit reached/);

    // Once a resume submits it, the error is gone.
    own.clearFaults();
    expect((await submit('job.sub', '--no-wait')).code).toBe(0);
    const ok = await runCli(['--state-dir', state(), 'status'], { cwd: dir });
    expect(ok.stdout).toMatch(/ state submitted\n/);
    expect(ok.stdout).not.toMatch(/failed/);
  } finally {
    await own.close();
  }
});

test('a submit that failed once its batch existed withdraws that batch; run again, the jobs go into a new batch', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), `fresh ${Date.now()}\n`);
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 2'], own.url);
    own.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: '5xx', count: 1000 });
    const s = await submit('job.sub', '--no-wait');
    expect(s.code).toBe(1);
    expect(s.stderr).toMatch(/the batch was withdrawn \(0 jobs aborted, batch retired\)/);
    // Not left empty on the server.
    expect(own.batches().map((b) => [b.state, b.jobNames.length])).toEqual([[4, 0]]);
    const failed = own.batches()[0]!.name;

    own.clearFaults();
    expect((await submit('job.sub', '--no-wait')).code).toBe(0);
    const made = own.batches().filter((b) => b.name !== failed);
    expect(made).toHaveLength(1);
    expect(made[0]!.jobNames).toHaveLength(2);
    expect(made[0]!.state).not.toBe(4);
  } finally {
    await own.close();
  }
});

test("status --account lists every batch the account has on the server, with its cluster and submit file when known here (issue 37, item 4)", async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 3'], own.url);
    expect((await submit('job.sub', '--no-wait')).code).toBe(0);
    // The same account from another state directory: a batch this one does not know.
    const other = path.join(dir, 'other-state');
    expect((await runCli(['--state-dir', other, 'submit', 'job.sub', '--no-wait'], { cwd: dir })).code).toBe(0);
    const [mine, theirs] = own.batches();
    own.advanceJob(mine!.jobNames[0]!, 'DONE');

    // No --project-url: the project and account from the cluster's record.
    const st = await runCli(['--state-dir', state(), 'status', '--account'], { cwd: dir });
    expect(st.code).toBe(0);
    expect(st.stdout).toContain(`${mine!.name}\n  project ${own.url}  app uppercase  batch id ${mine!.id}  state in progress  lease until `);
    expect(st.stdout).toContain(`  3 jobs, 0 failed, 33% done\n  cluster 1 of ${dir}/job.sub\n`);
    expect(st.stdout).toContain(`${theirs!.name}\n`);
    expect(st.stdout).toMatch(/ {2}3 jobs, 0 failed, 0% done\n {2}not known here\n/);
    expect(st.stdout).not.toContain(own.authenticator);
    const json = JSON.parse((await runCli(['--state-dir', state(), 'status', '--account', '--json'], { cwd: dir })).stdout) as Array<{ batch: string; knownHere: boolean }>;
    expect(json.map((b) => [b.batch, b.knownHere])).toEqual([[mine!.name, true], [theirs!.name, false]]);
  } finally {
    await own.close();
  }
});

test('query, lease, fetch and retire of a recorded batch take its project from the record; retire says what it gives up (issue 37, item 4)', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 3'], own.url);
    expect((await submit('job.sub', '--no-wait')).code).toBe(0);
    const batch = own.batches()[0]!;
    own.advanceJob(batch.jobNames[0]!, 'DONE');
    // No --project-url, no --authenticator-file: both from the records.
    const cli = (...args: string[]) => runCli(['--state-dir', state(), ...args], { cwd: dir });
    const q = await cli('query', batch.name);
    expect(q.code).toBe(0);
    expect(q.stdout).toMatch(/^\S+: 3 jobs: DONE 1, NOT_STARTED 2$/m);
    expect((await cli('lease', batch.name, '--hours', '2')).code).toBe(0);
    const f = await cli('fetch', batch.jobNames[0]!, '-d', dir);
    expect(f.code).toBe(0);
    expect(fs.readFileSync(path.join(dir, 'out'), 'latin1')).toBe('X\n');
    const r = await cli('retire', batch.name);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ok: retired ${batch.name}; given up: 2 unfinished jobs (they will not run) and the outputs of 1 finished job (no longer fetchable)\n`);
    expect(own.batches()[0]!.state).toBe(4);
  } finally {
    await own.close();
  }
});

test('query ... | head -1 ends quietly when head has read its line (issue 37, item 6)', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
  writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 5']);
  const first = await submit('job.sub', '--no-wait');
  const batch = /^batch (\S+)$/m.exec(first.stdout)![1]!;
  // The batch a thousand times over: far more than a pipe holds, so writes go on after head exits.
  const words = ['--state-dir', state(), 'query', ...Array<string>(1000).fill(batch)].map((w) => `'${w}'`).join(' ');
  const script = `( '${process.execPath}' '${GAHP_BIN}' ${words}; echo $? > code ) 2> err | head -1`;
  const r = await startCli(['-c', script], { command: 'sh', cwd: dir }).exited;
  expect(r.stdout).toMatch(/^\S+: 5 jobs: /);
  expect(fs.readFileSync(path.join(dir, 'err'), 'utf8')).toBe('');
  expect(fs.readFileSync(path.join(dir, 'code'), 'utf8').trim()).toBe('0');
});

describe('messages that say what to fix (issue 37, item 6)', () => {
  const ping = (...args: string[]) => runCli(['--state-dir', state(), ...args, 'ping'], { cwd: dir, timeoutMs: 60_000 });

  test('an https URL on an http port and a URL that is not the master URL (HTTP 404) are named as such', async () => {
    const auth = path.join(dir, 'auth.txt');
    const tls = await ping('--project-url', server.url.replace('http://', 'https://'), '--authenticator-file', auth);
    expect(tls.code).toBe(1);
    expect(tls.stderr).toMatch(/127\.0\.0\.1:\d+ does not speak TLS on this port: should the project URL begin with http:\/\/ instead of https:\/\/\?/);
    const wrong = `${server.url}nothing-here/`;
    const nf = await ping('--project-url', wrong, '--authenticator-file', auth);
    expect(nf.code).toBe(1);
    expect(nf.stderr).toMatch(/HTTP 404 .*for http:\/\/127\.0\.0\.1:\d+\/\S+\/nothing-here\/\S+\.php: is http:\/\/127\.0\.0\.1:\d+\/\S+\/nothing-here\/ the project's master URL/);
  });

  test('an authenticator file that is a directory or whose first line is a comment is a configuration error (exit 2), the line never shown', async () => {
    fs.mkdirSync(path.join(dir, 'keys'));
    const d = await ping('--project-url', server.url, '--authenticator-file', path.join(dir, 'keys'));
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/authenticator file \S+\/keys: is a directory {2}-> fix: name the file that holds the account's authenticator \(in \S+\/keys\?\), not its directory/);
    expect(d.stderr).not.toMatch(/chmod/);
    fs.writeFileSync(path.join(dir, 'commented.txt'), '# my key\n' + server.authenticator + '\n', { mode: 0o600 });
    const c = await ping('--project-url', server.url, '--authenticator-file', path.join(dir, 'commented.txt'));
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/its first line is not an authenticator \(it holds a blank or begins with "#"\) {2}-> fix: put the account's authenticator alone on the first line of /);
    expect(c.stderr).not.toContain('my key');
  });

  test('--spawn passes --log-level to the child GAHP', async () => {
    fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue']);
    const log = path.join(dir, 'gahp.log');
    const r = await runCli(['--state-dir', state(), '--log', log, '--log-level', 'error', 'submit', 'job.sub', '--no-wait', '--spawn'], { cwd: dir });
    expect(r.code).toBe(0);
    // At the default level (info) the child would log its start and its commands.
    expect(fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '').toBe('');
  });
});

test('off a terminal, a many-job run prints a few count lines, not one per step (issue 37, item 6)', async () => {
  fs.writeFileSync(path.join(dir, 'in.txt'), 'x\n');
  writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'transfer_output_files = out', 'transfer_output_remaps = "out = out.$(Process)"', 'queue 40']);
  const r = await submit('job.sub');
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}${r.stdout}`);
  const counts = r.stderr.split('\n').filter((l) => /^(fetching outputs: |\d+ jobs: )/.test(l));
  expect(counts.length).toBeGreaterThan(0);
  expect(counts.length).toBeLessThanOrEqual(4);
}, 60_000);

test('help sumbit and blahp instal name the command meant (issue 37, item 6)', async () => {
  const h = await runCli(['help', 'sumbit']);
  expect(h.code).toBe(2);
  expect(h.stderr).toBe('boinc-gahp: no command "sumbit": did you mean "submit"? (boinc-gahp help submit)\n');
  expect(h.stdout).toBe('');
  const b = await runCli(['blahp', 'instal']);
  expect(b.code).toBe(2);
  expect(b.stderr).toMatch(/^boinc-gahp blahp: unknown action "instal": did you mean "install"\?\n/);
});

test('Ctrl-C while inputs are staged says at once that it stops after the submit; a second stops at once saying what is left; the resume finishes (issue 37, item 6)', async () => {
  const own = await startTestServer();
  try {
    fs.writeFileSync(path.join(dir, 'auth.txt'), own.authenticator + '\n', { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'in.txt'), `staged ${process.pid} ${Date.now()}\n`);
    writeSubmitFile('job.sub', 'uppercase', ['transfer_input_files = in.txt', 'queue 2'], own.url);
    // The upload is held by the server: the submit is in flight when Ctrl-C comes.
    own.injectFault({ script: 'job_file.php', rpc: 'upload_files', kind: 'late', delayMs: 8000 });
    const run = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await run.waitFor(/^submitting 2 jobs to /m);
    await new Promise((resolve) => setTimeout(resolve, 500));
    run.child.kill('SIGINT');
    await run.waitFor(/^stopping once the submit of \S+ in flight has ended \(Ctrl-C again to stop at once\)$/m);
    run.child.kill('SIGINT');
    const r = await run.exited;
    expect(r.code).toBe(130);
    expect(r.stderr).toMatch(/^boinc-gahp: stopped at once: the submit of \S+ was cut short \(a resume finishes it\); the server keeps a batch .*; to resume \(nothing is submitted twice\), run: \S+ --state-dir \S+ submit job\.sub$/m);

    own.clearFaults();
    own.advanceAll();
    const resumed = startCli(['--state-dir', state(), 'submit', 'job.sub', '--poll', '0.3'], { cwd: dir });
    await resumed.waitFor(/^submitted boinc-gahp-/m);
    own.advanceAll();
    const done = await resumed.exited;
    if (done.code !== 0) throw new Error(`exit ${done.code}: ${done.stderr}${done.stdout}`);
    expect(own.batches().map((b) => b.jobNames.length)).toEqual([2]);
  } finally {
    await own.close();
  }
});

test('an authenticator file others can read is warned of by every command, with the fix (issue 37, item 6)', async () => {
  const auth = path.join(dir, 'open auth.txt');
  fs.writeFileSync(auth, server.authenticator + '\n');
  fs.chmodSync(auth, 0o644);
  const r = await runCli(['--state-dir', state(), '--project-url', server.url, '--authenticator-file', auth, 'ping']);
  expect(r.code).toBe(0);
  expect(r.stderr).toBe(`boinc-gahp: warning: the authenticator file ${auth} (mode 0644) is readable by other users, who could submit as this account: chmod o-rwx '${auth}' (its group keeps read, as the README sets it up for the job owners)\n`);
  // The README's shared file (0640, a group this user is in) is no warning (issue 44, item 5).
  fs.chmodSync(auth, 0o640);
  const shared = await runCli(['--state-dir', state(), '--project-url', server.url, '--authenticator-file', auth, 'ping']);
  expect(shared.code).toBe(0);
  expect(shared.stderr).toBe('');
});
