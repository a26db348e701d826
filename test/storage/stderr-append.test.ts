/**
 * gahp/output/stderr.ts's in-place append: a torn append left by a killed process is cut
 * off by the next one, a complete one is kept, and appends of several processes to one file
 * take turns (real processes, real files).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { appendInPlace, stageStderrAppend } from '../../gahp/output/stderr.js';
import { Staging } from '../../gahp/output/staging.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stderr-append-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const undoOf = (file: string) => path.join(dir, `.${path.basename(file)}.boinc-gahp-stderr.undo`);
/** What a process killed after its undo record and `written` bytes of its append leaves. */
function leaveTorn(file: string, before: string, length: number, written: string): void {
  fs.writeFileSync(file, before);
  fs.writeFileSync(undoOf(file), JSON.stringify({ ino: String(fs.statSync(file, { bigint: true }).ino), size: before.length, length }));
  fs.appendFileSync(file, written);
}

test('appends in place (same inode), leaving no lock or undo file', async () => {
  const file = path.join(dir, 'all.err');
  fs.writeFileSync(file, 'first\n');
  const ino = fs.statSync(file).ino;
  await appendInPlace(file, Buffer.from('second\n'));
  await appendInPlace(file, Buffer.from('third\n'));
  expect(fs.readFileSync(file, 'utf8')).toBe('first\nsecond\nthird\n');
  expect(fs.statSync(file).ino).toBe(ino);
  expect(fs.readdirSync(dir)).toEqual(['all.err']);
});

test('a half-written append of a killed process is cut off before the next append', async () => {
  const file = path.join(dir, 'all.err');
  leaveTorn(file, 'job 1 whole\n', 12, 'job 2 ha');
  await appendInPlace(file, Buffer.from('job 3 whole\n'));
  expect(fs.readFileSync(file, 'utf8')).toBe('job 1 whole\njob 3 whole\n');
  expect(fs.readdirSync(dir)).toEqual(['all.err']);
});

test('a complete append whose undo record was left is kept; so is a file rotated away meanwhile', async () => {
  const file = path.join(dir, 'all.err');
  leaveTorn(file, 'job 1 whole\n', 12, 'job 2 whole\n');
  await appendInPlace(file, Buffer.from('job 3 whole\n'));
  expect(fs.readFileSync(file, 'utf8')).toBe('job 1 whole\njob 2 whole\njob 3 whole\n');
  // The user replaced the file (another inode): its content is not ours to cut.
  leaveTorn(file, 'old\n', 100, 'half');
  fs.renameSync(file, `${file}.1`);
  fs.writeFileSync(file, 'old\nhalf');
  await appendInPlace(file, Buffer.from('next\n'));
  expect(fs.readFileSync(file, 'utf8')).toBe('old\nhalfnext\n');
});

test('processes appending to one file at once lose nothing and tear nothing', async () => {
  const file = path.join(dir, 'shared.err');
  fs.writeFileSync(file, '');
  const module = path.resolve('dist/gahp/output/stderr.js');
  const script = (who: string) => `
    import(${JSON.stringify(module)}).then(async ({ appendInPlace }) => {
      for (let i = 0; i < 40; i++) await appendInPlace(${JSON.stringify(file)}, Buffer.from('${who} ' + i + ' ' + 'x'.repeat(3000) + '\\n'));
    });`;
  const runs = ['a', 'b', 'c'].map((who) => new Promise<number | null>((resolve) => {
    spawn(process.execPath, ['-e', script(who)], { stdio: 'inherit' }).on('exit', resolve);
  }));
  expect(await Promise.all(runs)).toEqual([0, 0, 0]);
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
  expect(lines).toHaveLength(120);
  for (const l of lines) expect(l).toMatch(/^[abc] \d+ x{3000}$/);
  for (const who of ['a', 'b', 'c']) {
    expect(lines.filter((l) => l.startsWith(`${who} `)).map((l) => Number(l.split(' ')[1]))).toEqual(Array.from({ length: 40 }, (_, i) => i));
  }
  expect(fs.readdirSync(dir)).toEqual(['shared.err']);
}, 60_000);

test('an empty stderr still leaves the error file (created empty, whole, with the outputs); an existing one is left alone', async () => {
  const file = path.join(dir, 'job.0.err');
  const staging = new Staging();
  expect(await stageStderrAppend(staging, file, '')).toBeUndefined();
  expect(fs.existsSync(file)).toBe(false); // not before the commit
  await staging.commit();
  await staging.cleanup();
  expect(fs.readFileSync(file, 'utf8')).toBe('');
  expect(fs.readdirSync(dir)).toEqual(['job.0.err']);

  fs.writeFileSync(file, 'earlier\n');
  const again = new Staging();
  await stageStderrAppend(again, file, '');
  await again.commit();
  expect(fs.readFileSync(file, 'utf8')).toBe('earlier\n');
});
