/**
 * The submit ad reader (gahp/blah/classad.ts, submit-ad.ts) on ads as HTCondor writes them:
 * the first two are copied from a real HTCondor 25.14 gridmanager's BLAH_JOB_SUBMIT lines
 * (GAHP escapes removed; user and paths as in that session), the others exercise what
 * ClassAdUnParser produces for the less plain cases.
 */
import { parseClassAd, writeClassAd, ClassAdSyntaxError } from '../../gahp/blah/classad.js';
import { jobFromSubmitAd, parseRemaps, splitArgumentsV2 } from '../../gahp/blah/submit-ad.js';

const REAL_AD_REMAP_BLANKS =
  '[ In = "/dev/null"; Cmd = "/home/alice/run/uppercase"; Err = "job.0.err"; Iwd = "/home/alice/run"; Out = "job.0.out"; Queue = "uppercase"; gridtype = "boinc"; StageCmd = false; Arguments = ""; Environment = ""; GridResource = "batch boinc"; JobDirectory = "home_bl_127.0.0.1_19718_alice_vm_1.0_1796300184"; TransferInput = "in"; TransferOutput = "out"; TransferOutputRemaps = "out = out.0" ]';
const REAL_AD_ROUTED =
  '[ In = "/dev/null"; Cmd = "/usr/libexec/condor"; Err = "job.2.err"; Iwd = "/usr/libexec/condor"; Out = "job.2.out"; Queue = "uppercase"; gridtype = "boinc"; StageCmd = false; Arguments = ""; Environment = ""; GridResource = "batch boinc"; JobDirectory = "home_bl_127.0.0.1_19718_alice_vm_2.2_1796300303"; TransferInput = "in"; TransferOutput = "out"; TransferOutputRemaps = "out=out.2" ]';

test('a real submit ad: every attribute read, the remap with blanks around = kept (blahpd drops it)', () => {
  const ad = parseClassAd(REAL_AD_REMAP_BLANKS);
  expect(ad.string('cmd')).toBe('/home/alice/run/uppercase');
  expect(ad.boolean('StageCmd')).toBe(false);
  const { job, submissionKey } = jobFromSubmitAd(ad);
  expect(submissionKey).toBe('home_bl_127.0.0.1_19718_alice_vm_1.0_1796300184');
  expect(job).toEqual({
    app: 'uppercase',
    iwd: '/home/alice/run',
    cmd: '/home/alice/run/uppercase',
    args: [],
    inputPaths: ['/home/alice/run/in'],
    outputs: [{ src: 'out', dst: 'out.0' }],
    stdout: 'job.0.out',
    stderr: 'job.0.err',
  });
  expect(jobFromSubmitAd(parseClassAd(REAL_AD_ROUTED)).job.outputs).toEqual([{ src: 'out', dst: 'out.2' }]);
});

test('string escapes, numbers, booleans, undefined, lists, nested ads; expressions kept as text, never evaluated', () => {
  const ad = parseClassAd(String.raw`[ A = "q\"uote \\ back\nline\ttab \101"; B = 42; C = -1.5e3; D = TRUE; E = undefined; F = { 1, "x", { } }; G = [ x = 1 ]; H = RequestMemory * 2 + (X ? "a;b" : "]"); I = error; 'odd name' = 0x1F ]`);
  expect(ad.string('a')).toBe('q"uote \\ back\nline\ttab A');
  expect(ad.number('B')).toBe(42);
  expect(ad.number('c')).toBe(-1500);
  expect(ad.boolean('d')).toBe(true);
  expect(ad.string('E')).toBeUndefined();
  expect(ad.value('F')).toMatchObject({ kind: 'list' });
  expect(ad.value('G')).toMatchObject({ kind: 'ad' });
  expect(ad.value('H')).toEqual({ kind: 'expression', text: 'RequestMemory * 2 + (X ? "a;b" : "]")' });
  expect(ad.value('I')).toEqual({ kind: 'error' });
  expect(ad.number('odd name')).toBe(31);
  expect(() => ad.number('A')).toThrow(/should be a number/);
});

test('malformed ads are refused with where, never evaluated', () => {
  for (const bad of ['', '[', '[ A = "open ]', '[ = 1 ]', '[ A = (1 ]', '[ A = 1 ] x']) {
    expect(() => parseClassAd(bad)).toThrow(ClassAdSyntaxError);
  }
});

test('V2 arguments: blanks separate, single quotes group, two single quotes are one; $ and backslashes stay', () => {
  expect(splitArgumentsV2(`--dollar=$HOME \${USER}x $PATH 'a b' 'it''s' C:\\dir "dq"`)).toEqual(['--dollar=$HOME', '${USER}x', '$PATH', 'a b', "it's", 'C:\\dir', '"dq"']);
  expect(splitArgumentsV2('  ')).toEqual([]);
  expect(() => splitArgumentsV2("'open")).toThrow(/single-quoted/);
});

test('remaps as HTCondor reads them: blanks around = and ;, escapes', () => {
  expect([...parseRemaps('out = blank.0 ; b=x\\;y;')]).toEqual([['out', 'blank.0'], ['b', 'x;y']]);
  expect(() => parseRemaps('out')).toThrow(/no '='/);
});

test('what a job cannot carry to BOINC is refused from the ad: environment, stdin, URLs, remaps of unlisted files', () => {
  const base = { Cmd: '/x/uppercase', Iwd: '/tmp/w', TransferInput: 'in', TransferOutput: 'out' };
  const ad = (extra: Record<string, string>) => parseClassAd(writeClassAd(Object.entries({ ...base, ...extra })));
  expect(() => jobFromSubmitAd(ad({ Environment: 'A=1' }))).toThrow(/environment/);
  expect(() => jobFromSubmitAd(ad({ In: 'data.txt' }))).toThrow(/standard input/);
  expect(() => jobFromSubmitAd(ad({ TransferInput: 'http://example.org/x' }))).toThrow(/URL/);
  expect(() => jobFromSubmitAd(ad({ TransferOutputRemaps: 'other=x' }))).toThrow(/not in transfer_output_files/);
  expect(() => jobFromSubmitAd(ad({ Iwd: 'relative' }))).toThrow(/absolute/);
  expect(jobFromSubmitAd(ad({ Queue: 'concat' })).job.app).toBe('concat');
});

test('the status ad written for the gridmanager reads back exactly', () => {
  const text = writeClassAd([['BatchjobId', 'b_1'], ['JobStatus', 5], ['HoldReason', 'a "quoted" \\ reason\nline 2'], ['X', true]]);
  const back = parseClassAd(text);
  expect(back.string('HoldReason')).toBe('a "quoted" \\ reason\nline 2');
  expect(back.number('JobStatus')).toBe(5);
  expect(back.boolean('X')).toBe(true);
});
