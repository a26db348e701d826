/**
 * BOINC_FETCH_OUTPUT end to end: the real GAHP process, the test BOINC server, real files.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sampleApps, stderrFilePattern, type TestApp } from '../../fixtures/test-server/index.js';
import { upperAscii, lowerAscii } from '../../fixtures/apps.js';
import { batchName, esc, jobName, listTree, sleep, startEnv, submitBatch, type Env } from './helpers.js';
import { makeZip } from '../support/hostile-zip.js';

/** Rewrites every central-directory entry's uncompressed size to about 4 GiB. */
function declareHuge(zip: Buffer): Buffer {
  const out = Buffer.from(zip);
  for (let at = out.indexOf(CENTRAL_SIG); at >= 0; at = out.indexOf(CENTRAL_SIG, at + 4)) out.writeUInt32LE(0xfffffff0, at + 24);
  return out;
}
const CENTRAL_SIG = Buffer.from([0x50, 0x4b, 0x01, 0x02]);

/** An app whose single .zip output is chosen by the job's input text (a hostile archive). */
const badZipApp: TestApp = {
  name: 'badzip',
  inputs: [{ openName: 'in' }],
  outputs: [{ openName: 'out.zip' }],
  async run(ctx) {
    const kind = ctx.inputs[0]!.toString('latin1').trim();
    let zip: Buffer;
    if (kind === 'dotdot') {
      zip = await makeZip([{ name: 'good.txt', data: 'fine\n' }, { name: 'zz/escaped.txt', data: 'evil\n' }], [['zz/escaped.txt', '../escaped.txt']]);
    } else if (kind === 'absolute') {
      zip = await makeZip([{ name: 'good.txt', data: 'fine\n' }, { name: 'xtmp/abs-escaped.txt', data: 'evil\n' }], [['xtmp/abs-escaped.txt', '/tmp/abs-escaped.txt']]);
    } else if (kind === 'bomb') {
      // 1,000 tiny deflated entries, each declaring 4 GiB in the central directory.
      const small = await makeZip(
        Array.from({ length: 1000 }, (_, i) => ({ name: `part${i}.bin`, data: 'x' })),
        [],
        true,
      );
      zip = declareHuge(small);
    } else if (kind === 'symlink') {
      zip = await makeZip([{ name: 'good.txt', data: 'fine\n' }, { name: 'link', data: '/etc/passwd', mode: 0o120777 }]);
    } else {
      zip = await makeZip([{ name: 'good.txt', data: 'fine\n' }, { name: 'sub/dir/deep.txt', data: 'deep\n' }]);
    }
    return { kind: 'success', outputs: [zip], stderr: `badzip: ${kind}\n`, elapsedTime: 1, cpuTime: 1 };
  },
};

const apps = [...sampleApps, badZipApp];

describe('BOINC_FETCH_OUTPUT', () => {
  let env: Env;
  let batch: string;
  const J = (n: number) => jobName(batch, n);
  let iwdCount = 0;
  const newIwd = () => {
    const d = path.join(env.dir, `iwd${iwdCount++}`);
    fs.mkdirSync(d);
    return d;
  };

  /**
   * n BOINC_FETCH_OUTPUTs in flight at once (jobs 1 and 2 in turn, each into its own iwd),
   * all appending to one stderr file: its text once every one succeeded.
   */
  /**
   * Fetches n jobs at once, all appending to one stderr file: distinct jobs (a job fetched
   * again into the same file appends once, test/commands/stderr-once.test.ts), half of
   * them like J(1), half like J(2).
   */
  async function fetchAllInto(stderrPath: string, n: number): Promise<string> {
    const b = batchName('uppercase');
    const jobs = Array.from({ length: n }, (_, i) =>
      i % 2 ? { name: jobName(b, i), inputs: ['second\n'], commandLine: '-n 5' } : { name: jobName(b, i), inputs: ['hello world\n'] });
    await submitBatch(env, b, 'uppercase', jobs);
    env.server.advanceAll(b);
    await env.server.settled();
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = env.gahp.reqId();
      ids.push(id);
      const job = jobs[i]!.name;
      expect(await env.gahp.request(`BOINC_FETCH_OUTPUT ${id} ${esc(job)} ${esc(newIwd())} ${esc(stderrPath)} ALL 0`)).toBe('S');
    }
    for (const id of ids) expect((await env.gahp.waitResult(id))[0]).toBe('NULL');
    return fs.readFileSync(stderrPath, 'latin1');
  }

  beforeAll(async () => {
    env = await startEnv({ apps });
    batch = batchName('mixed');
    // One batch per app (BOINC batches hold one app's jobs).
    await submitBatch(env, batch, 'uppercase', [
      { name: J(1), inputs: ['hello world\n'] },
      { name: J(2), inputs: ['second\n'], commandLine: '-n 5' },
      { name: J(3), inputs: ['never finished\n'] },
    ]);
    await submitBatch(env, batch + 'c', 'concat', [{ name: jobName(batch + 'c', 1), inputs: ['aaa', 'bb'] }]);
    await submitBatch(env, batch + 'z', 'zipper', [{ name: jobName(batch + 'z', 1), inputs: ['MiXeD\n'], commandLine: 'x y' }]);
    await submitBatch(env, batch + 'f', 'failing', [{ name: jobName(batch + 'f', 1), inputs: ['bad input & <stuff>\nmore\n'] }]);
    await submitBatch(env, batch + 'b', 'badzip', [
      { name: jobName(batch + 'b', 1), inputs: ['dotdot\n'] },
      { name: jobName(batch + 'b', 2), inputs: ['symlink\n'] },
      { name: jobName(batch + 'b', 3), inputs: ['absolute\n'] },
      { name: jobName(batch + 'b', 4), inputs: ['nested\n'] },
      { name: jobName(batch + 'b', 5), inputs: ['bomb\n'] },
    ]);
    for (const b of [batch + 'c', batch + 'z', batch + 'f', batch + 'b']) env.server.advanceAll(b);
    env.server.advanceJob(J(1), 'DONE');
    env.server.advanceJob(J(2), 'DONE');
    await env.server.settled();
  });

  afterAll(async () => {
    await env?.close();
  });

  test('ALL: every output into iwd, stderr appended to a relative path, 5-token result', async () => {
    const iwd = newIwd();
    fs.writeFileSync(path.join(iwd, 'job.err'), 'earlier line\n');
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(1))} ${esc(iwd)} job.err ALL 0`);
    expect(r).toEqual(['NULL', '0', '12.500000', '10.250000']);
    expect(fs.readFileSync(path.join(iwd, 'out'), 'latin1')).toBe('HELLO WORLD\n');
    expect(fs.readFileSync(path.join(iwd, 'job.err'), 'latin1')).toMatch(stderrFilePattern('earlier line\nuppercase: 12 bytes\n'));
    expect(listTree(iwd)).toEqual(['job.err', 'out']);
  });

  test('the raw result line has exactly 5 tokens', async () => {
    const iwd = newIwd();
    const id = env.gahp.reqId();
    expect(await env.gahp.request(`BOINC_FETCH_OUTPUT ${id} ${esc(J(1))} ${esc(iwd)} /dev/null ALL 0`)).toBe('S');
    let line: string | undefined;
    for (let i = 0; i < 200 && !line; i++) {
      const head = await env.gahp.request('RESULTS');
      const n = Number(head.split(' ')[1]);
      for (let k = 0; k < n; k++) {
        const l = await env.gahp.readReply();
        if (l.startsWith(`${id} `)) line = l;
      }
      if (!line) await sleep(20);
    }
    expect(line).toBe(`${id} NULL 0 12.500000 10.250000`);
  });

  test('SOME: only the named file, to a destination whose name has spaces, quotes, ; and $( )', async () => {
    const iwd = newIwd();
    const weird = `out put 'q' "dq" ; $(touch pwned) \`id\` & | > x.txt`;
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(2))} ${esc(iwd)} ${esc('std err.txt')} SOME 1 out ${esc(weird)}`);
    expect(r).toEqual(['NULL', '0', '12.500000', '10.250000']);
    expect(listTree(iwd)).toEqual(['std err.txt', weird].sort());
    expect(fs.readFileSync(path.join(iwd, weird), 'latin1')).toBe('SECOND\n\nargs: -n 5\n');
    expect(fs.readFileSync(path.join(iwd, 'std err.txt'), 'latin1')).toMatch(stderrFilePattern('uppercase: 7 bytes\n'));
    expect(fs.existsSync(path.join(process.cwd(), 'pwned'))).toBe(false);
  });

  test('concurrent fetches appending to one stderr file lose no append', async () => {
    const shared = path.join(newIwd(), 'all.err');
    // Each append is the app's line and the BOINC runtime's line after it.
    const text = await fetchAllInto(shared, 6);
    const appends = text.split(/(?<=called boinc_finish\(0\)\n)/).sort();
    expect(appends).toHaveLength(6);
    appends.forEach((a, i) => expect(a).toMatch(stderrFilePattern(i < 3 ? 'uppercase: 12 bytes\n' : 'uppercase: 7 bytes\n')));
  });

  test('many jobs sharing one stderr file: each append whole, in place (the file is never copied), no side file left', async () => {
    const iwd = newIwd();
    const shared = path.join(iwd, 'all.err');
    fs.writeFileSync(shared, 'earlier\n');
    const ino = fs.statSync(shared).ino;
    const text = await fetchAllInto(shared, 40);
    expect(text.startsWith('earlier\n')).toBe(true);
    const appends = text.slice('earlier\n'.length).split(/(?<=called boinc_finish\(0\)\n)/).sort();
    expect(appends).toHaveLength(40);
    appends.forEach((a, i) => expect(a).toMatch(stderrFilePattern(i < 20 ? 'uppercase: 12 bytes\n' : 'uppercase: 7 bytes\n')));
    // Appended where it is: a copy renamed over it would be another inode.
    expect(fs.statSync(shared).ino).toBe(ino);
    expect(listTree(iwd)).toEqual(['all.err']);
  });

  test('absolute destination used as is; ALL with a spec acts as a rename; two outputs', async () => {
    const iwd = newIwd();
    const elsewhere = newIwd();
    const abs = path.join(elsewhere, 'info copy');
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'c', 1))} ${esc(iwd)} /dev/null ALL 1 info ${esc(abs)}`);
    expect(r).toEqual(['NULL', '0', '3.000000', '2.000000']);
    expect(listTree(iwd)).toEqual(['joined']);
    expect(fs.readFileSync(path.join(iwd, 'joined'), 'latin1')).toBe('aaabb');
    expect(fs.readFileSync(abs, 'latin1')).toBe('3\n2\n\n');
  });

  test('a spec naming a file that is not an output: error result, nothing written', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(1))} ${esc(iwd)} err SOME 1 nosuch dst`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/nosuch is not an output/);
    expect(listTree(iwd)).toEqual([]);
  });

  test('an iwd that is missing or a file: error result naming it, nothing written', async () => {
    const missing = path.join(newIwd(), 'not here');
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(1))} ${esc(missing)} err ALL 0`);
    expect(r).toEqual([`iwd ${missing} is not a directory`]);
    expect(fs.existsSync(missing)).toBe(false);
    const file = path.join(newIwd(), 'a file');
    fs.writeFileSync(file, 'kept');
    const r2 = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(1))} ${esc(file)} err ALL 0`);
    expect(r2).toEqual([`iwd ${file} is not a directory`]);
    expect(fs.readFileSync(file, 'utf8')).toBe('kept');
  });

  test('zip output: unpacked into iwd with a zip library (ALL), specs as renames', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'z', 1))} ${esc(iwd)} err ALL 1 args.txt ${esc('the args')}`);
    expect(r).toEqual(['NULL', '0', '5.000000', '4.000000']);
    expect(listTree(iwd)).toEqual(['err', 'lower.txt', 'the args', 'upper.txt']);
    expect(fs.readFileSync(path.join(iwd, 'upper.txt'))).toEqual(upperAscii(Buffer.from('MiXeD\n')));
    expect(fs.readFileSync(path.join(iwd, 'lower.txt'))).toEqual(lowerAscii(Buffer.from('MiXeD\n')));
    expect(fs.readFileSync(path.join(iwd, 'the args'), 'latin1')).toBe('x\ny\n');
    expect(fs.readFileSync(path.join(iwd, 'err'), 'latin1')).toMatch(stderrFilePattern('zipper: 3 entries\n'));
  });

  test('zip output, SOME: only the named entries', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'z', 1))} ${esc(iwd)} /dev/null SOME 1 upper.txt U`);
    expect(r[0]).toBe('NULL');
    expect(listTree(iwd)).toEqual(['U']);
    expect(fs.readFileSync(path.join(iwd, 'U'), 'latin1')).toBe('MIXED\n');
  });

  test('zip with nested directories lands inside iwd', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'b', 4))} ${esc(iwd)} /dev/null ALL 0`);
    expect(r[0]).toBe('NULL');
    expect(listTree(iwd)).toEqual(['good.txt', 'sub/', 'sub/dir/', 'sub/dir/deep.txt']);
  });

  test.each([
    ['a symbolic link to a directory outside', (iwd: string, outside: string) => fs.symlinkSync(outside, path.join(iwd, 'sub')), 'a symbolic link: refusing to write through it'],
    ['a regular file', (iwd: string) => fs.writeFileSync(path.join(iwd, 'sub'), ''), 'ENOTDIR (not a directory)'],
  ])("zip with nested directories, the iwd's sub being %s: one error naming that level, nothing written", async (_what, plant, found) => {
    const parent = newIwd();
    const iwd = path.join(parent, 'iwd');
    const outside = path.join(parent, 'outside');
    fs.mkdirSync(iwd);
    fs.mkdirSync(outside);
    plant(iwd, outside);
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'b', 4))} ${esc(iwd)} /dev/null ALL 0`);
    expect(r).toEqual([`cannot create the output directory ${iwd}/sub/dir: ${iwd}/sub: ${found}`]);
    expect(listTree(outside)).toEqual([]);
    expect(listTree(iwd)).toEqual(['sub']);
  });

  test.each([
    ['a ../ entry', 1, /outside|relative path/],
    ['a symlink entry', 2, /symbolic link/],
    ['an absolute entry', 3, /outside|absolute/],
  ])('zip with %s is refused as a whole: error result, nothing written', async (_what, n, pattern) => {
    const parent = newIwd();
    const iwd = path.join(parent, 'iwd');
    fs.mkdirSync(iwd);
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'b', n))} ${esc(iwd)} err ALL 0`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(pattern);
    expect(listTree(parent)).toEqual(['iwd/']);
    expect(fs.existsSync('/tmp/abs-escaped.txt')).toBe(false);
  });

  test('a zip declaring more than the free space is refused before writing', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'b', 5))} ${esc(iwd)} err ALL 0`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/unpacks to \d+ bytes; only \d+ bytes are free/);
    expect(listTree(iwd)).toEqual([]);
  });

  test('an `ERROR: ` download body is an error result and nothing is written', async () => {
    const iwd = newIwd();
    env.server.injectFault({ script: 'get_output.php', kind: 'error-body' });
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(1))} ${esc(iwd)} err ALL 0`);
    env.server.clearFaults();
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/ERROR: injected fault/);
    expect(listTree(iwd)).toEqual([]);
  });

  test('a failed job on the real server (no canonical instance): a clear error, nothing written', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch + 'f', 1))} ${esc(iwd)} err ALL 0`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/no successful instance: BOINC cannot report the exit status or stderr/);
    expect(listTree(iwd)).toEqual([]);
  });

  test('a job still running: error result, nothing written', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(3))} ${esc(iwd)} err ALL 0`);
    expect(r).toHaveLength(1);
    expect(listTree(iwd)).toEqual([]);
  });

  test('an unknown job: error result', async () => {
    const iwd = newIwd();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(J(99))} ${esc(iwd)} err ALL 0`);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatch(/no (such )?job|job not found/);
  });

  test('malformed requests get E', async () => {
    for (const line of [
      'BOINC_FETCH_OUTPUT 9001 job /tmp err ALL',
      'BOINC_FETCH_OUTPUT 9002 job /tmp err MOST 0',
      'BOINC_FETCH_OUTPUT 9003 job /tmp err SOME 2 a b',
      'BOINC_FETCH_OUTPUT 9004 job relative/iwd err ALL 0',
    ]) {
      expect(await env.gahp.request(line)).toMatch(/^E /);
    }
  });
});

describe('BOINC_FETCH_OUTPUT against a server that reports error instances', () => {
  let env: Env;
  const batch = batchName('failing');
  beforeAll(async () => {
    env = await startEnv({ reportFailedJobs: true });
    await submitBatch(env, batch, 'failing', [{ name: jobName(batch, 1), inputs: ['bad input & <stuff> "q"\nmore\n'] }]);
    env.server.advanceAll(batch);
  });
  afterAll(async () => {
    await env?.close();
  });

  test('exit status 7 and the decoded stderr are passed on', async () => {
    const iwd = path.join(env.dir, 'iwd');
    fs.mkdirSync(iwd);
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch, 1))} ${esc(iwd)} job.err ALL 0`);
    expect(r).toEqual(['NULL', '7', '1.500000', '0.500000']);
    expect(fs.readFileSync(path.join(iwd, 'job.err'), 'latin1')).toMatch(stderrFilePattern('failing: fatal error <&> in "bad input & <stuff> "q""\nexit 7\n', 7));
    expect(listTree(iwd)).toEqual(['job.err']);
  });
});

describe('BOINC_FETCH_OUTPUT and kill -9', () => {
  let env: Env;
  const batch = batchName('uppercase');
  beforeAll(async () => {
    env = await startEnv();
    await submitBatch(env, batch, 'uppercase', [{ name: jobName(batch, 1), inputs: ['x'.repeat(200_000)] }]);
    env.server.advanceAll(batch);
  });
  afterAll(async () => {
    await env?.close();
  });

  test('killed mid-download: no partial file at the destination', async () => {
    const iwd = path.join(env.dir, 'iwd');
    fs.mkdirSync(iwd);
    env.server.injectFault({ script: 'get_output.php', kind: 'slow', delayMs: 4000 });
    const id = env.gahp.reqId();
    expect(await env.gahp.request(`BOINC_FETCH_OUTPUT ${id} ${esc(jobName(batch, 1))} ${esc(iwd)} err SOME 1 out result.txt`)).toBe('S');
    // Wait until bytes are arriving in a temp file, then kill.
    let sawPart = false;
    for (let i = 0; i < 200 && !sawPart; i++) {
      await sleep(20);
      sawPart = listTree(iwd).some((f) => f.startsWith('.') && f.endsWith('.part') && fs.statSync(path.join(iwd, f)).size > 0);
    }
    expect(sawPart).toBe(true);
    await env.gahp.kill('SIGKILL');
    expect(fs.existsSync(path.join(iwd, 'result.txt'))).toBe(false);
    expect(fs.existsSync(path.join(iwd, 'err'))).toBe(false);
    expect(listTree(iwd).every((f) => f.startsWith('.') && f.endsWith('.part'))).toBe(true);
    env.server.clearFaults();

    // A new GAHP fetches it completely.
    await env.restart();
    const r = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(jobName(batch, 1))} ${esc(iwd)} err SOME 1 out result.txt`);
    expect(r).toEqual(['NULL', '0', '12.500000', '10.250000']);
    expect(fs.readFileSync(path.join(iwd, 'result.txt'), 'latin1')).toBe('X'.repeat(200_000));
    // The killed GAHP's temp files were swept up.
    expect(listTree(iwd)).toEqual(['err', 'result.txt']);
  });
});
