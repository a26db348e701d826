/**
 * The submit-file parser: every supported command, macro and queue form; every
 * unsupported command's error names its line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fetchOutputSpec, parseSubmitDescription, SubmitFileError } from '../../gahp/cli/submit-file.js';
import { parseArguments, parseRemaps } from '../../gahp/cli/submit-syntax.js';
import { submitArgs } from '../../gahp/cli/submit-plan.js';
import { makeTempDir } from '../support/gahp-process.js';

const cwd = '/home/alice/run';
const parse = (text: string, cluster = 42, extra: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  parseSubmitDescription(text, { file: 'job.sub', cwd: extra.cwd ?? cwd, cluster, env: extra.env ?? {} });

function errorOf(text: string): SubmitFileError {
  try {
    parse(text);
  } catch (err) {
    if (err instanceof SubmitFileError) return err;
    throw err;
  }
  throw new Error('no error');
}

describe('submit file parser', () => {
  test('every supported command, as the gridmanager would see the job', () => {
    const d = parse([
      '# a BOINC job',
      'universe = grid',
      'grid_resource = boinc https://boinc.example.org/proj/',
      'boinc_authenticator_file = secrets/auth',
      'executable = uppercase',
      'arguments = "-n $(Process) \'two words\' \'it\'\'s\'"',
      'initialdir = run_$(Process)',
      'transfer_input_files = data.txt, /abs/shared.dat',
      'input = stdin.txt',
      'transfer_output_files = out, result.txt',
      'transfer_output_remaps = "out = out.$(Cluster).$(Process); result.txt = /tmp/r.$(Process)"',
      'output = job.out',
      'error = job.err',
      'queue 2',
    ].join('\n'));
    expect(d.procs).toHaveLength(2);
    const p = d.procs[1]!;
    expect(p).toMatchObject({
      proc: 1,
      app: 'uppercase',
      args: ['-n', '1', 'two words', "it's"],
      iwd: '/home/alice/run/run_1',
      inputs: [
        { src: '/home/alice/run/run_1/data.txt', dst: 'data.txt' },
        { src: '/abs/shared.dat', dst: 'shared.dat' },
        { src: '/home/alice/run/run_1/stdin.txt', dst: 'stdin.txt' },
      ],
      output: 'job.out',
      error: 'job.err',
      transferOutputFiles: ['out', 'result.txt'],
      outputRemaps: { out: 'out.42.1', 'result.txt': '/tmp/r.1' },
      projectUrl: 'https://boinc.example.org/proj/',
      authenticatorFile: '/home/alice/run/secrets/auth',
    });
    // BOINC_FETCH_OUTPUT as HTCondor's BuildOutputInfo builds it.
    expect(fetchOutputSpec(p)).toEqual({
      iwd: '/home/alice/run/run_1',
      stderrPath: 'job.err',
      mode: 'SOME',
      specs: [['out', 'out.42.1'], ['result.txt', '/tmp/r.1'], ['job.out', 'job.out'], ['job.err', 'job.err']],
    });
    expect(d.notes).toEqual([]);
  });

  test('no transfer_output_files: ALL; no error: /dev/null', () => {
    const d = parse('executable = concat\nqueue');
    expect(fetchOutputSpec(d.procs[0]!)).toEqual({ iwd: cwd, stderrPath: '/dev/null', mode: 'ALL', specs: [] });
    expect(d.procs[0]!.args).toEqual([]);
    expect(d.procs[0]!.inputs).toEqual([]);
  });

  test('BOINC_SUBMIT arguments as the gridmanager builds them', () => {
    const d = parse('executable = uppercase\narguments = -x $(Process)\ntransfer_input_files = a\nqueue 2');
    expect(submitArgs('condor#s#uppercase#1', 'uppercase', 42, d.procs)).toEqual([
      'condor#s#uppercase#1', 'uppercase', '2',
      'condor#s#uppercase#1#42.0', '2', '-x', '0', '1', '/home/alice/run/a', 'a',
      'condor#s#uppercase#1#42.1', '2', '-x', '1', '1', '/home/alice/run/a', 'a',
      'NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL',
    ]);
  });

  test('macros: $(Cluster) $(ClusterId) $(Process) $(ProcId), user macros, defaults, $ENV, late binding', () => {
    const d = parse([
      'base = data',
      'name = $(base)_$(Cluster).$(ProcId)',
      'executable = uppercase',
      'arguments = $(name) $(ClusterId) $(Process) $(missing:dflt) $(undefined) $ENV(HOME)',
      'queue',
      'base = other',
      'queue',
    ].join('\n'), 7, { env: { HOME: '/home/alice' } });
    expect(d.procs.map((p) => p.args)).toEqual([
      ['data_7.0', '7', '0', 'dflt', '/home/alice'],
      ['other_7.1', '7', '1', 'dflt', '/home/alice'],
    ]);
  });

  test('queue N, queue <var> in (...), multi-line lists, several vars, queue from <file>, $(Step) $(ItemIndex)', () => {
    const dir = makeTempDir('boinc-gahp-subfile-');
    try {
      fs.writeFileSync(path.join(dir, 'items.txt'), '# comment\nred, 1\n\ngreen 2\nblue,3 extra\n');
      const d = parse([
        'executable = uppercase',
        'arguments = $(Item) $(Step) $(ItemIndex)',
        'queue 2',
        'queue 2 Item in (a, b)',
        'queue letter in (',
        '  x',
        '  y',
        ')',
        'arguments = $(colour) $(n) $(Row)',
        'queue colour, n from items.txt',
        'queue 0',
      ].join('\n'), 1, { cwd: dir });
      expect(d.procs.map((p) => `${p.proc}:${p.args.join(',')}`)).toEqual([
        '0:0,0', '1:1,0',
        '2:a,0,0', '3:a,1,0', '4:b,0,1', '5:b,1,1',
        '6:0,0', '7:0,1',
        '8:red,1,0', '9:green,2,1', '10:blue,3,extra,2',
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('inline queue from ( ... ), continuation lines, case-insensitive commands', () => {
    const d = parse('Executable = up\\\n  percase\nARGUMENTS = $(a)-$(b)\nQueue a,b from (\n 1 2\n 3 4\n)\n');
    expect(d.procs.map((p) => [p.app, ...p.args])).toEqual([['uppercase', '1-2'], ['uppercase', '3-4']]);
  });

  test('arguments syntax, old and new', () => {
    expect(parseArguments('a b  c')).toEqual(['a', 'b', 'c']);
    expect(parseArguments('a\\"b')).toEqual(['a"b']);
    expect(parseArguments('"a ""q"" \'x y\' \'\'"')).toEqual(['a', '"q"', 'x y', '']);
    expect(() => parseArguments('"a \'b"')).toThrow(/unterminated/);
    expect(parseRemaps('"a = b ; c=d"')).toEqual({ a: 'b', c: 'd' });
    expect(() => parseRemaps('a')).toThrow(/name = new_name/);
  });

  test('commands that mean nothing for a BOINC job are accepted, with a note unless their value is what BOINC does', () => {
    const d = parse([
      'executable = x', 'log = job.log', 'should_transfer_files = YES', '+ProjectName = "p"', 'transfer_executable = false',
      'when_to_transfer_output = ON_EXIT', 'getenv = False', 'request_memory = 2G', 'request_cpus = 1', 'request_disk = 1G',
      'accounting_group = g', 'priority = 5', 'x509userproxy = /tmp/x', 'notification = never', 'queue',
    ].join('\n'));
    expect(d.procs).toHaveLength(1);
    expect(d.notes).toEqual([
      'job.sub:2: "log" has no effect with boinc-gahp submit (ignored)',
      'job.sub:4: custom job attribute "+ProjectName" has no effect with boinc-gahp submit (ignored)',
      ...['request_memory', 'request_cpus', 'request_disk', 'accounting_group', 'priority', 'x509userproxy', 'notification']
        .map((c, i) => `job.sub:${8 + i}: "${c}" has no effect with boinc-gahp submit (ignored)`),
    ]);
  });

  test('a name one edit away from a command is taken for its typo, unless used as a macro', () => {
    for (const [typo, meant] of [['transfer_input_file', 'transfer_input_files'], ['arguemnts', 'arguments'], ['Executabel', 'executable'], ['outptu', 'output']]) {
      const err = errorOf(`executable = uppercase\n${typo} = a\nqueue`);
      expect(err.message).toBe(`job.sub:2: unknown command "${typo}": did you mean "${meant}"?`);
    }
    const d = parse('executable = uppercase\noutputs = a b\narguments = $(outputs)\nqueue');
    expect(d.procs[0]!.args).toEqual(['a', 'b']);
  });

  describe('errors name the line', () => {
    const unsupported = [
      'requirements = Memory > 1024', 'rank = Memory', 'environment = "A=1"', 'getenv = true',
      'transfer_executable = true', 'should_transfer_files = NO', 'when_to_transfer_output = ON_SUCCESS',
      'stream_output = true', 'periodic_hold = true', 'on_exit_remove = true', 'hold = true', 'max_retries = 3',
      'request_gpus = 1', 'concurrency_limits = a', 'docker_image = alpine', 'container_image = x.sif', 'machine_count = 2', 'next_job_start_delay = 1',
      'deferral_time = 0', 'cron_minute = 1', 'nice_user = true', 'output_destination = osdf:///x',
    ];
    test.each(unsupported)('%s', (line) => {
      const err = errorOf(`executable = uppercase\n\n${line}\nqueue`);
      expect(err.line).toBe(3);
      expect(err.message).toMatch(/^job\.sub:3: "[a-z_0-9]+( = [^"]+)?" is not supported by boinc-gahp submit: \S/);
    });

    test.each([
      ['universe = vanilla', 1, /universe "vanilla" is not supported/],
      ['grid_resource = condor host host', 1, /grid_resource must be "boinc <project_url>"/],
      ['grid_resource = boinc ftp://x/', 1, /not an http\(s\) URL/],
      ['executable = /bin/sh', 1, /executable must be a BOINC app name/],
      ['arguments = "unterminated', 1, /must end with "/],
      ['transfer_output_remaps = "nonsense"', 1, /name = new_name/],
      ['transfer_input_files = dir/', 1, /is a directory/],
    ])('%s', (line, lineNo, re) => {
      const text = line.startsWith('executable') ? `${line}\nqueue` : `${line}\nexecutable = uppercase\nqueue`;
      const err = errorOf(text);
      expect(err.line).toBe(lineNo);
      expect(err.message).toMatch(re);
    });

    test.each([
      ['queue x matching (*.txt)', /"queue \.\.\. matching" is not supported/],
      ['queue x in (a, b', /never closed/],
      ['queue x from /no/such/file', /queue from: cannot read/],
      ['queue what is this', /cannot parse "queue/],
      ['if $(x)', /"if" statements are not supported/],
      ['include : other.sub', /"include" statements are not supported/],
      ['this is not a command', /cannot parse "this is not a command"/],
      ['arguments = $$(Memory)', /"\$\$\(\.\.\.\)".*not supported/],
      ['arguments = $INT(x)', /macro function "\$INT\(\.\.\.\)" is not supported/],
      ['arguments = $(a', /unterminated macro reference/],
    ])('%s', (line, re) => {
      const err = errorOf(`executable = uppercase\n${line}\nqueue`);
      expect(err.line).toBe(2);
      expect(err.message).toMatch(re);
    });

    test('no executable; no queue; self-referencing macro', () => {
      expect(errorOf('arguments = a\nqueue').message).toMatch(/job\.sub:2: no "executable"/);
      expect(errorOf('executable = uppercase').message).toMatch(/no "queue" statement/);
      expect(errorOf('a = $(a)\nexecutable = uppercase\narguments = $(a)\nqueue').message).toMatch(/nests too deeply/);
    });
  });
});
