/**
 * The blahpd emulator (test/support/blahpd.ts) against what blahpd and glibc really do:
 * wordexp vectors recorded from glibc 2.36, blahpd's command building, and the process
 * rules (list files deleted, stdin untouched, the silence limit, result parsing) checked
 * with tiny scripts written here.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  Blahpd, blahpdSplitCommand, buildSubmitCommand, convertArgs, escapeWordexpSpecialChars, readArgv, v2Arguments,
  wordexp, WordexpError, parseClassAd, remapOutputs,
} from '../support/blahpd.js';
import { makeTempDir } from '../support/gahp-process.js';

/**
 * Recorded with a small C program calling glibc 2.36's wordexp(input, &w, WRDE_NOCMD), run as
 * argv[0] = "blahpd" in a directory holding a1.txt a2.txt b.log .hidden sub/c.txt, with the
 * environment HOME=/home/tester FOO="a b" EMPTY="" PATHS="  x   y  " COLONS="a:b" (IFS unset).
 */
const GLIBC_VECTORS: Array<[string, string[] | string]> = [
  ["a b  c", ["a", "b", "c"]],
  [" lead trail ", ["lead", "trail"]],
  ["a\tb", ["a", "b"]],
  ["\"a b\" c", ["a b", "c"]],
  ["'a b' c", ["a b", "c"]],
  ["x \"\"y", ["x", "", "y"]],
  ["x ''y", ["x", "", "y"]],
  ["\"\"", [""]],
  ["\"\" \"\"", ["", ""]],
  ["a\"\"", ["a"]],
  ["a\"\" b", ["a", "b"]],
  ["\"\\\"dq\\\"\"", ["\"dq\""]],
  ["\"a\\\\b\"", ["a\\b"]],
  ["\"a\\nb\"", ["a\\nb"]],
  ["\"a\\$b\"", ["a$b"]],
  ["a\\ b", ["a b"]],
  ["a\\\\b", ["a\\b"]],
  ["'it'\\''s'", ["it's"]],
  ["\"it's\"", ["it's"]],
  ["\"\\\"a\\\" \\\"b c\\\" \\\"it's\\\" \\\"\\\\\\\"dq\\\\\\\"\\\"\"", ["\"a\" \"b c\" \"it's\" \"\\\"dq\\\"\""]],
  ["a\\", "WRDE_SYNTAX"],
  ["\"abc", "WRDE_SYNTAX"],
  ["'abc", "WRDE_SYNTAX"],
  ["a;b", "WRDE_BADCHAR"],
  ["a|b", "WRDE_BADCHAR"],
  ["a&b", "WRDE_BADCHAR"],
  ["a>b", "WRDE_BADCHAR"],
  ["a(b", "WRDE_BADCHAR"],
  ["a{b", "WRDE_BADCHAR"],
  ["a\nb", "WRDE_BADCHAR"],
  ["\"a\nb\"", ["a\nb"]],
  ["a\\\nb", ["ab"]],
  ["\"a;b|c&d(e)\"", ["a;b|c&d(e)"]],
  ["a\\;b", ["a;b"]],
  ["$(echo hi)", "WRDE_CMDSUB"],
  ["\"$(echo hi)\"", "WRDE_CMDSUB"],
  ["`echo hi`", "WRDE_CMDSUB"],
  ["\"`echo`\"", "WRDE_CMDSUB"],
  ["$(echo", "WRDE_SYNTAX"],
  ["`echo", "WRDE_SYNTAX"],
  ["$((1+2)\\)", "WRDE_CMDSUB"],
  ["$FOO", ["a", "b"]],
  ["\"$FOO\"", ["a b"]],
  ["x$FOO", ["xa", "b"]],
  ["${FOO}y", ["a", "by"]],
  ["$EMPTY", []],
  ["\"$EMPTY\"", "WRDE_NOSPACE"],
  ["a $EMPTY b", ["a", "b"]],
  ["$UNSET", []],
  ["${#FOO}", ["3"]],
  ["${UNSET:-de fault}", ["de", "fault"]],
  ["\"${UNSET:-de fault}\"", ["de fault"]],
  ["${EMPTY-x}", []],
  ["${EMPTY:-x}", ["x"]],
  ["${FOO:+set}", ["set"]],
  ["${UNSET+set}", []],
  ["${UNSET?msg}z", ["z"]],
  ["$", ["$"]],
  ["a$", ["a$"]],
  ["$-", ["$-"]],
  ["$?", ["$?"]],
  ["$/x", ["$/x"]],
  ["\"$\"", ["$"]],
  ["$'x'", ["$x"]],
  ["$#", ["0"]],
  ["$0", ["blahpd"]],
  ["$1", []],
  ["${1}", []],
  ["$*", []],
  ["\"$@\"", [""]],
  ["${", "WRDE_SYNTAX"],
  ["${}", "WRDE_SYNTAX"],
  ["${FOO", "WRDE_SYNTAX"],
  ["${#}", "WRDE_SYNTAX"],
  ["$PATHS", ["x", "y"]],
  ["\"$PATHS\"", ["  x   y  "]],
  ["$COLONS", ["a:b"]],
  ["~", ["/home/tester"]],
  ["~/x", ["/home/tester/x"]],
  ["a~", ["a~"]],
  ["a=~", ["a=/home/tester"]],
  ["~root", ["/root"]],
  ["~nosuchuser/x", ["~nosuchuser/x"]],
  ["~\\x", ["~x"]],
  ["x ~", ["x", "/home/tester"]],
  ["*.txt", ["a1.txt", "a2.txt"]],
  ["\"*.txt\"", ["*.txt"]],
  ["'*'.txt", ["*.txt"]],
  ["a?.txt", ["a1.txt", "a2.txt"]],
  ["[ab]*", ["a1.txt", "a2.txt", "b.log"]],
  ["nomatch*", ["nomatch*"]],
  ["sub/*", ["sub/c.txt"]],
  ["*", ["a1.txt", "a2.txt", "b.log", "sub"]],
  [".h*", [".hidden"]],
  ["\\*.txt", ["*.txt"]],
  ["a[", ["a["]],
  ["[!a]*", ["b.log", "sub"]],
  ["boinc/abc.1-2_x", ["boinc/abc.1-2_x"]],
  ["/opt/libexec/boinc_status.sh  boinc/condor#x", ["/opt/libexec/boinc_status.sh", "boinc/condor#x"]],
  ["boinc/a#b", ["boinc/a#b"]],
];

describe('wordexp (WRDE_NOCMD) as glibc does it', () => {
  let dir: string;
  beforeAll(() => {
    dir = makeTempDir('wordexp-');
    for (const f of ['a1.txt', 'a2.txt', 'b.log', '.hidden']) fs.writeFileSync(path.join(dir, f), '');
    fs.mkdirSync(path.join(dir, 'sub'));
    fs.writeFileSync(path.join(dir, 'sub', 'c.txt'), '');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const env = { HOME: '/home/tester', FOO: 'a b', EMPTY: '', PATHS: '  x   y  ', COLONS: 'a:b' };
  test.each(GLIBC_VECTORS)('%j', (input, expected) => {
    const run = () => wordexp(input, { env: { ...env }, argv: ['blahpd'], cwd: dir });
    if (typeof expected === 'string') {
      expect(run).toThrow(WordexpError);
      try {
        run();
      } catch (err) {
        expect((err as WordexpError).code).toBe(expected);
      }
    } else {
      expect(run()).toEqual(expected);
    }
  });

  test('blahpd escapes | & ; < > ( ) { } outside quotes before splitting', () => {
    expect(escapeWordexpSpecialChars('a;b "c;d" \'e|f\' g(h)')).toBe('a\\;b "c;d" \'e|f\' g\\(h\\)');
    expect(escapeWordexpSpecialChars('$(x;y)')).toBe('$(x;y)');
    expect(blahpdSplitCommand('/x/boinc_status.sh  boinc/a;b&c')).toEqual(['/x/boinc_status.sh', 'boinc/a;b&c']);
    // A command substitution is still refused, never run.
    expect(() => blahpdSplitCommand('/x/s.sh $(touch /tmp/should-not-exist)')).toThrow(WordexpError);
  });

  test('arithmetic expansion is reported as not emulated, not answered wrongly', () => {
    expect(() => wordexp('"$((1+2))"', { env: {} })).toThrow(/not emulated/);
  });
});

describe('the submit command line, as blahpd builds it', () => {
  test('the arguments travel as ONE word of double-quoted shell words', () => {
    const v2 = v2Arguments(['a', 'b c', "it's", '"dq"', '']);
    expect(v2).toBe(`a 'b c' 'it''s' "dq" ''`);
    const word = convertArgs(v2)!;
    const argv = blahpdSplitCommand(`/l/boinc_submit.sh -- ${word}`, { env: {} });
    expect(argv).toEqual(['/l/boinc_submit.sh', '--', '"a" "b c" "it\'s" "\\"dq\\"" ""']);
    expect(convertArgs('')).toBeNull();
  });

  test('argument order, list files and their content', () => {
    const tmp = makeTempDir('blahpd-build-');
    try {
      const built = buildSubmitCommand(
        {
          Cmd: '/bin/uppercase', Iwd: '/home/u/job', In: '/dev/null', Out: 'job.out', Err: 'job.err',
          TransferInput: 'in.txt,/abs/data,,x', TransferOutput: 'out,log/out2,keep', TransferOutputRemaps: 'out=out.1.0;log/out2=/abs/o2',
          Queue: 'uppercase', GPUNumber: 1, JobDirectory: '/var/lib/condor/jd', BatchProject: 'p', BatchRuntime: 600,
          BatchExtraSubmitArgs: '--x y', RequestMemory: 512, StageCmd: false, Environment: 'A=1 B=2', Arguments: "a 'b c'",
          x509UserProxy: '/tmp/proxy', x509UserProxySubject: '/DC=org/CN=Alice Smith', ceRequirements: ["Foo='bar'"],
        },
        { libexecDir: '/usr/libexec/blahp', tmpDir: tmp, reqId: '7' },
      );
      const argv = blahpdSplitCommand(built.command!, { env: {} });
      const f = built.listFiles;
      expect(argv).toEqual([
        '/usr/libexec/blahp/boinc_submit.sh', '-x', '/tmp/proxy', '-u', '/DC=org/CN=Alice Smith', '-r', 'no',
        '-c', '/bin/uppercase', '-T', tmp, '-I', f.input!.path, '-O', f.output!.path, '-R', f.remaps!.path,
        '-C', f.ceRequirements!.path, '-i', '/dev/null', '-o', 'job.out', '-e', 'job.err', '-w', '/home/u/job',
        '-q', 'uppercase', '-g', '1', '-s', 'no', '-D', '/var/lib/condor/jd', '-A', 'p', '-t', '600', '-a', '--x y',
        '-m', '512', '-V', '"A=1" "B=2"', '--', '"a" "b c"',
      ]);
      expect(f.input!.content).toBe('/home/u/job/in.txt\n/abs/data\n/home/u/job/x\n');
      expect(f.output!.content).toBe('out\nlog/out2\nkeep\n');
      // blahpd writes the destination, or the name itself when it is not remapped, each
      // followed by a comma turned newline: the file ends in an empty line.
      expect(f.remaps!.content).toBe('out.1.0\n/abs/o2\nkeep\n\n');
      expect(fs.readFileSync(f.input!.path, 'utf8')).toBe(f.input!.content);
      expect(path.basename(f.input!.path)).toMatch(/^InputFileList_7_[0-9]+$/);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  test('remaps as server.c reads them: `name=dest` only, at the start or right after `;`; blanks around `=` drop the remap silently', () => {
    // What the real blahpd wrote for the README's old `out = out.$(Process)` (issue 24):
    // not remapped, so every job wrote one `out`.
    expect(remapOutputs('out', 'out = out.0')).toBe('out,');
    expect(remapOutputs('out', 'out=out.0')).toBe('out.0,');
    // The destination is taken to the next `;`, blanks and all; a blank after `;` hides the next name.
    expect(remapOutputs('out', 'out= out.0')).toBe(' out.0,');
    expect(remapOutputs('a,b', 'a=x; b=y')).toBe('x,b,');
    expect(remapOutputs('a,b', 'a=x;b=y')).toBe('x,y,');
    // A name is matched whole: `out` is not remapped by `xout=` or `out2=`.
    expect(remapOutputs('out', 'xout=1;out2=2')).toBe('out,');
    // A TransferOutput ending in a comma: its last name keeps the comma and matches nothing.
    expect(remapOutputs('a,out,', 'out=o')).toBe('a,out,,');
    expect(remapOutputs('', 'out=o')).toBeNull();
    const tmp = makeTempDir('blahpd-remaps-');
    try {
      const built = buildSubmitCommand({ Cmd: '/bin/u', Iwd: '/w', TransferOutput: 'out', TransferOutputRemaps: 'out = out.0' }, { libexecDir: '/l', tmpDir: tmp, reqId: '9' });
      expect(built.listFiles.remaps!.content).toBe('out\n\n');
      const refused = buildSubmitCommand({ Cmd: '/bin/u', Iwd: '/w', TransferOutput: '', TransferOutputRemaps: 'out=o' }, { libexecDir: '/l', tmpDir: tmp, reqId: '10' });
      expect(refused.command).toBeNull();
      expect(refused.refusal).toBe('10 1 Out\\ of\\ memory\\ computing\\ file\\ remaps N/A');
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  test('a job without Cmd is refused before anything runs', () => {
    const built = buildSubmitCommand({ Iwd: '/x' }, { libexecDir: '/l', reqId: '3' });
    expect(built.command).toBeNull();
    expect(readArgv(built.refusal!)).toEqual(['3', '7', 'Cannot parse Cmd attribute in classad', 'N/A']);
  });
});

describe('running scripts as blahpd does', () => {
  let libexec: string;
  let work: string;
  const script = (name: string, body: string) => {
    const p = path.join(libexec, name);
    fs.writeFileSync(p, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  };
  const blahpd = (extra: Partial<ConstructorParameters<typeof Blahpd>[0]> = {}) =>
    new Blahpd({ libexecDir: libexec, lrms: 'emutest', tmpDir: work, cwd: work, resultsCacheFile: null, ...extra });

  beforeAll(() => {
    libexec = makeTempDir('blahpd-libexec-');
    work = makeTempDir('blahpd-work-');
  });
  afterAll(() => {
    fs.rmSync(libexec, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  test('submit: argv, list files readable while the script runs and deleted when it returns', async () => {
    const record = path.join(work, 'submit-record');
    script('emutest_submit.sh', `
for a in "$@"; do printf '%s\\n' "$a"; done > "${record}.argv"
while getopts "r:c:T:I:O:R:i:o:e:w:q:D:" o; do case $o in I|O|R) cat "$OPTARG" >> "${record}.lists";; esac; done
pwd > "${record}.cwd"
echo "noise before"
echo BLAHP_JOBID_PREFIXemutest/job.1-a_b
echo "noise after"`);
    const sub = await blahpd().submit({
      Cmd: '/bin/uppercase', Iwd: work, TransferInput: 'in.txt', TransferOutput: 'out', TransferOutputRemaps: 'out=o.1',
      Arguments: v2Arguments(['x', 'y z']), JobDirectory: work,
    });
    expect(sub.problem).toBeUndefined();
    expect(sub.jobId).toBe('emutest/job.1-a_b');
    expect(sub.run!.stdinConsumed).toBe('');
    expect(sub.listFilesLeft).toEqual([]);
    for (const f of Object.values(sub.listFiles)) expect(fs.existsSync(f.path)).toBe(false);
    expect(fs.readFileSync(`${record}.lists`, 'utf8')).toBe(`${work}/in.txt\nout\no.1\n\n`); // the -R file ends in an empty line, as blahpd writes it
    const argv = fs.readFileSync(`${record}.argv`, 'utf8').split('\n').slice(0, -1);
    expect(argv.slice(-2)).toEqual(['--', '"x" "y z"']);
    expect(fs.readFileSync(`${record}.cwd`, 'utf8').trim()).toBe(fs.realpathSync(work));
  });

  test('submit failure: exit code and both streams reach the gridmanager in one error string', async () => {
    script('emutest_submit.sh', 'echo "some out"; echo "unknown app: nope" >&2; exit 3');
    const sub = await blahpd().submit({ Cmd: 'nope' });
    expect(sub.jobId).toBeNull();
    expect(sub.rc).toBe(3);
    expect(sub.errorString).toBe('submission command failed (exit code = 3) (stdout:some out) (stderr:unknown app: nope)');
    expect(sub.tokens).toHaveLength(4);
  });

  test('a script that reads stdin steals the gridmanager\'s next command', async () => {
    script('emutest_ping.sh', 'read line; echo "0 got it"');
    const res = await blahpd().ping();
    expect(res.run!.stdinConsumed).toMatch(/^BLAH_JOB_STATUS 4242/);
    script('emutest_ping.sh', 'echo "0 No error"');
    const ok = await blahpd().ping();
    expect(ok.run!.stdinConsumed).toBe('');
    expect(ok.answer).toEqual({ rc: 0, errorString: 'No error' });
  });

  test('a script silent for the poll timeout is killed (its whole process group)', async () => {
    const marker = path.join(work, 'silent-child-alive');
    script('emutest_ping.sh', `(sleep 0.8; touch "${marker}") & sleep 20; echo "0 late"`);
    const res = await blahpd({ silenceTimeoutMs: 300, killTickMs: 30, gracefulKillTicks: 4 }).ping();
    expect(res.run!.silenceTimeout).toBe(true);
    expect(res.run!.killed).toBe(true);
    expect(res.run!.exitCode).toBe(-15);
    expect(res.run!.stderr).toContain('<blah> execute_cmd: 0 seconds timeout expired, killing child process.');
    expect(res.run!.stderr).toContain('<blah> killed by signal Terminated 15.');
    expect(res.answer!.rc).toBe(-15);
    await new Promise((r) => setTimeout(r, 1000));
    expect(fs.existsSync(marker)).toBe(false); // the background child went with the group
  });

  test('background work that keeps stdout/stderr open costs the whole silence limit', async () => {
    script('emutest_ping.sh', 'sleep 1 & echo "0 No error"');
    const held = await blahpd({ silenceTimeoutMs: 400, killTickMs: 30, gracefulKillTicks: 4 }).ping();
    expect(held.run!.silenceTimeout).toBe(true);
    expect(held.run!.exitCode).toBe(0); // the script itself had exited
    script('emutest_ping.sh', 'sleep 1 >/dev/null 2>&1 & echo "0 No error"');
    const detached = await blahpd({ silenceTimeoutMs: 400, killTickMs: 30, gracefulKillTicks: 4 }).ping();
    expect(detached.run!.silenceTimeout).toBe(false);
    expect(detached.run!.ms).toBeLessThan(400);
  });

  test('status: one newline-terminated line is one result; anything else is not', async () => {
    const b = blahpd();
    script('emutest_status.sh', 'echo \'0[BatchjobId="emutest/j1"; JobStatus=4; ExitCode=3; RemoteWallClockTime=12.5]\'');
    const done = await b.status('emutest/j1');
    expect(done.problem).toBeUndefined();
    expect(done.answer!.jobStatus).toBe(4);
    expect(done.answer!.ad!.toObject()).toEqual({ BatchjobId: 'emutest/j1', JobStatus: 4, ExitCode: 3, RemoteWallClockTime: 12.5 });

    script('emutest_status.sh', 'printf \'0[JobStatus=2]\'');
    expect((await b.status('emutest/j1')).problem).toMatch(/no result at all/);

    script('emutest_status.sh', 'echo "0[JobStatus=2]"; echo "0[JobStatus=2]"');
    expect((await b.status('emutest/j1')).problem).toMatch(/2 results/);

    script('emutest_status.sh', 'echo "1Job not found"');
    const nf = await b.status('emutest/j1');
    expect(nf.answer).toMatchObject({ rc: 1, errorString: 'Error parsing classad or job not found', ad: null });

    script('emutest_status.sh', 'echo \'0[JobStatus=5; HoldReason="server said \\"no\\""]\'');
    const quoted = await b.status('emutest/j1');
    expect(quoted.answer!.ad).toBeNull();
    expect(quoted.problem).toMatch(/could not parse/);

    script('emutest_status.sh', 'echo "boom" >&2; exit 1');
    const failed = await b.status('emutest/j1');
    expect(failed.answer).toMatchObject({ rc: 255, errorString: 'status command failed: boom', ad: null });
  });

  test('status: the job id is word-split by wordexp on its way to the script', async () => {
    const record = path.join(work, 'status-argv');
    script('emutest_status.sh', `for a in "$@"; do printf '%s\\n' "$a"; done > "${record}"; echo '0[JobStatus=1]'`);
    await blahpd().status('emutest/a b');
    expect(fs.readFileSync(record, 'utf8')).toBe('emutest/a\nb\n');
    await blahpd().status('emutest/plain.id-1');
    expect(fs.readFileSync(record, 'utf8')).toBe('emutest/plain.id-1\n');
  });

  test('status: a line is cut at 1,023 characters', async () => {
    const long = 'x'.repeat(1100);
    script('emutest_status.sh', `echo '0[JobStatus=4; HoldReason="${long}"]'`);
    const res = await blahpd().status('emutest/j');
    expect(res.answer).toMatchObject({ rc: 1, errorString: 'Error allocating memory' });
  });

  test('cancel: each stdout line is appended verbatim to the request id', async () => {
    const b = blahpd();
    const record = path.join(work, 'cancel-argv');
    script('emutest_cancel.sh', `printf '%s\\n' "$@" > "${record}"; printf ' 0 No\\\\ error\\n'`);
    const ok = await b.cancel('emutest/j9');
    expect(fs.readFileSync(record, 'utf8')).toBe('j9\n');
    expect(ok.problem).toBeUndefined();
    expect(ok.answer).toEqual({ rc: 0, errorString: 'No error' });

    script('emutest_cancel.sh', "printf ' 0 No error\\n'");
    expect((await b.cancel('emutest/j9')).problem).toMatch(/argc == 3 .* got 4/);
    script('emutest_cancel.sh', "printf '0 No\\\\ error\\n'");
    expect((await b.cancel('emutest/j9')).problem).toMatch(/no result for request/);
    script('emutest_cancel.sh', 'true');
    expect((await b.cancel('emutest/j9')).problem).toMatch(/waits for BLAH_JOB_CANCEL forever/);
  });

  test('a missing script fails like execve: errno as exit code, message on stderr', async () => {
    const res = await blahpd().cancel('nosuchlrms/j1');
    expect(res.run!.exitCode).toBe(2);
    expect(res.answer!.rc).toBe(2);
    expect(res.answer!.errorString).toMatch(/Cancellation command failed .*nosuchlrms_cancel.sh/);
  });

  test('status answered from blahpd\'s results cache file when it is fresh', async () => {
    const cache = path.join(work, 'cache');
    fs.writeFileSync(cache, 'j1 x 2\nj2 x 4\n');
    script('emutest_status.sh', 'echo "0[JobStatus=1]"');
    const b = blahpd({ resultsCacheFile: cache });
    const cached = await b.status('emutest/j1');
    expect(cached.fromCache).toBe(true);
    expect(cached.answer!.jobStatus).toBe(2);
    const completed = await b.status('emutest/j2'); // 4 is never answered from the cache
    expect(completed.fromCache).toBe(false);
    expect(completed.answer!.jobStatus).toBe(1);
  });
});

test('parseClassAd reads what status scripts print', () => {
  const ad = parseClassAd('[BatchjobId="boinc/x"; JobStatus=5; HoldReason="a\\\\b"; Flag=true; U=undefined; E=x+1]');
  expect(ad!.toObject()).toEqual({ BatchjobId: 'boinc/x', JobStatus: 5, HoldReason: 'a\\b', Flag: true, U: null, E: undefined });
  expect(ad!.unparse()).toBe('[ BatchjobId = "boinc/x"; JobStatus = 5; HoldReason = "a\\\\b"; Flag = true; U = undefined; E = x+1 ]');
  expect(parseClassAd('[A=1')).toBeNull();
  expect(parseClassAd('[A="x"y"]')).toBeNull();
});
