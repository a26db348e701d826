/**
 * The --log file through the real bin/boinc-gahp: it rotates by size (--max-log,
 * --max-num-log or their BOINC_GAHP_* variables) without losing a line, keeps only the
 * newest old files, stays whole when several processes share it, and records no protocol
 * lines unless asked (--log-level debug).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';

let dir: string;
beforeEach(() => {
  dir = makeTempDir('boinc-gahp-log-');
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the GAHP on `input` with these options; resolves with its exit status. `started` gets its pid. */
function runGahp(args: string[], input: string, env: NodeJS.ProcessEnv = {}, started: (pid: number) => void = () => undefined): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GAHP_BIN, '--state-dir', path.join(dir, 'state'), ...args], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    if (child.pid !== undefined) started(child.pid);
    child.on('error', reject);
    child.on('close', resolve);
    child.stdin.end(input);
  });
}

/** `count` lines the GAHP answers with E (unknown commands), each naming its number, then QUIT. */
function numberedLines(tag: string, count: number): string {
  return Array.from({ length: count }, (_, i) => `${tag}_${i + 1}\n`).join('') + 'QUIT\n';
}

/** The log's files, oldest first (rotated ones by their time stamp, then the current one), with their text. */
function logFiles(log: string): Array<{ name: string; bytes: number; text: string }> {
  const base = path.basename(log);
  const rotated = fs.readdirSync(dir).filter((n) => n.startsWith(`${base}.`)).sort();
  return [...rotated, base].map((name) => {
    const text = fs.readFileSync(path.join(dir, name), 'utf8');
    return { name, bytes: Buffer.byteLength(text), text };
  });
}

/** The numbers of the request lines `< <tag>_<n>` logged, in file order. */
function requestNumbers(text: string, tag: string): number[] {
  return [...text.matchAll(new RegExp(`DEBUG < ${tag}_(\\d+)\\n`, 'g'))].map((m) => Number(m[1]));
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test('a log driven past --max-log rotates into old files and keeps every line, none over the bound', async () => {
  const log = path.join(dir, 'gahp.log');
  expect(await runGahp(['--log', log, '--log-level', 'debug', '--max-log', '16K', '--max-num-log', '50'], numberedLines('LINE', 3000))).toBe(0);
  const files = logFiles(log);
  expect(files.length).toBeGreaterThan(5);
  for (const f of files.slice(0, -1)) expect(f.name).toMatch(/^gahp\.log\.\d{8}T\d{6}\.\d{3}Z\.\d+$/);
  for (const f of files) expect(f.bytes).toBeLessThanOrEqual(16 * 1024);
  // Each new file is made as the first was: private to its owner.
  for (const f of files) expect((fs.statSync(path.join(dir, f.name)).mode & 0o777).toString(8)).toBe('600');
  const all = files.map((f) => f.text).join('');
  // Every request in order, each line whole; the start line first and the shutdown last.
  expect(requestNumbers(all, 'LINE')).toEqual(range(1, 3000));
  for (const f of files) expect(f.text).toMatch(/^(\d{4}-\d\d-\d\dT[\d:.]+Z \[\d+ \S+\] (INFO|DEBUG) [^\n]*\n)+$/);
  expect(all).toMatch(/^[^\n]* INFO boinc-gahp [\d.]+ started, pid \d+/);
  expect(all).toMatch(/INFO QUIT: shutting down\n$/);
});

test('only the newest --max-num-log old files are kept (bound from BOINC_GAHP_MAX_LOG); the lines left run to the last', async () => {
  const log = path.join(dir, 'gahp.log');
  expect(await runGahp(['--log', log, '--log-level', 'debug', '--max-num-log', '2'], numberedLines('LINE', 3000), { BOINC_GAHP_MAX_LOG: '16K' })).toBe(0);
  const files = logFiles(log);
  expect(files).toHaveLength(3);
  for (const f of files) expect(f.bytes).toBeLessThanOrEqual(16 * 1024);
  const kept = requestNumbers(files.map((f) => f.text).join(''), 'LINE');
  // Whole old files went, so what is left is one unbroken run up to the last request.
  expect(kept.length).toBeGreaterThan(100);
  expect(kept).toEqual(range(kept[0]!, 3000));
});

test('processes sharing one log rotate it without losing or repeating a line; every line names its process and user', async () => {
  const log = path.join(dir, 'shared.log');
  const tags = ['P1', 'P2', 'P3', 'P4'];
  const pids = new Map<string, number>();
  const codes = await Promise.all(tags.map((tag) =>
    runGahp(['--log', log, '--log-level', 'debug', '--max-log', '8K', '--max-num-log', '1000'], numberedLines(tag, 1500), {}, (pid) => pids.set(tag, pid))));
  expect(codes).toEqual([0, 0, 0, 0]);
  const files = logFiles(log);
  expect(files.length).toBeGreaterThan(10);
  const all = files.map((f) => f.text).join('');
  for (const tag of tags) expect(requestNumbers(all, tag).sort((a, b) => a - b)).toEqual(range(1, 1500));
  // Two GAHPs sharing a log (two owners whose log name expands alike): each line says whose it is.
  const user = os.userInfo().username;
  for (const line of all.split('\n').filter((l) => l !== '')) expect(line).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z \[\d+ \S+\] (INFO|DEBUG|WARN) /);
  for (const tag of tags) {
    const mine = all.split('\n').filter((l) => new RegExp(`DEBUG < ${tag}_\\d+$`).test(l));
    expect(mine).toHaveLength(1500);
    for (const line of mine) expect(line).toContain(` [${pids.get(tag)} ${user}] DEBUG < ${tag}_`);
  }
});

test('by default the log holds the GAHP\'s life and failures, not the protocol lines', async () => {
  const log = path.join(dir, 'gahp.log');
  expect(await runGahp(['--log', log], 'VERSION\nBOINC_PING 1\nRESULTS\nNO_SUCH_COMMAND\nQUIT\n')).toBe(0);
  const text = fs.readFileSync(log, 'utf8');
  expect(text).toMatch(/ INFO boinc-gahp [\d.]+ started, pid \d+, state directory /);
  // The ping failed (no project selected): a failed command is logged.
  expect(text).toMatch(/ INFO BOINC_PING 1 failed: /);
  expect(text).toMatch(/ INFO QUIT: shutting down\n/);
  expect(text).not.toContain('DEBUG');
  expect(text).not.toContain('NO_SUCH_COMMAND');
});
