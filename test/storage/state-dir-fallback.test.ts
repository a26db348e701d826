/**
 * A GAHP never exits for its state directory (issue 23 point 1; docs/storage.md, "When the
 * state directory cannot be used"), through bin/boinc-gahp: a directory that cannot be made
 * (under a regular file), a read-only one, the fallback under TMPDIR refused (a symbolic
 * link, another user's) and the state kept in memory, and a directory that fails mid-run.
 * Each time the banner, ping, submit, query and fetch work and the warning comes once.
 *
 * Read-only directories are tmpfs mounts (root; CI runs as root), or mode 0555 for a
 * non-root user; the mid-run failure is a read-only tmpfs mounted over the directory
 * (root), or the directory replaced by a regular file.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { GahpProcess, makeTempDir } from '../support/gahp-process.js';
import { batchName, esc, jobName } from '../commands/helpers.js';
import { submitLine, writeInput } from '../submit/support.js';
import { mountsUnavailable, mountTmpfs, unmount, unmountAll } from '../support/mounts.js';

const isRoot = process.getuid?.() === 0;
const noMounts = mountsUnavailable();

let server: ExtendedTestBoincServer;
let dir: string;
let tmp: string;
const gahps: GahpProcess[] = [];

beforeAll(async () => {
  server = await startTestServer();
});

beforeEach(() => {
  dir = makeTempDir('boinc-gahp-statedir-');
  // The GAHP's temp dir (os.tmpdir() reads TMPDIR): where its fallback directory goes.
  tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
});

afterEach(async () => {
  for (const g of gahps.splice(0)) await g.close();
  unmountAll();
  fs.chmodSync(dir, 0o700);
  fs.rmSync(dir, { recursive: true, force: true });
});

afterAll(async () => {
  unmountAll();
  await server?.close();
});

const fallbackDir = () => path.join(tmp, `boinc-gahp-${process.getuid?.() ?? 'user'}`);

async function start(stateDir: string): Promise<GahpProcess> {
  const gahp = await GahpProcess.start({ stateDir, env: { TMPDIR: tmp } });
  gahps.push(gahp);
  await gahp.startup();
  await gahp.selectProject(server.url, server.authenticator);
  return gahp;
}

/** Ping, submit one job, let it finish, query it, fetch its output: each must work. */
async function everyCommandWorks(gahp: GahpProcess, tag: string): Promise<string> {
  expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
  const batch = batchName('uppercase');
  const job = jobName(batch, 1, 0);
  const input = writeInput(dir, `in-${tag}.txt`, `${tag}\n`);
  expect(await gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: job, inputs: [[input, 'in']] }])}`, 60_000)).toEqual(['NULL']);
  server.advanceAll(batch);
  await server.settled();
  const query = await gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
  expect(query[0]).toBe('NULL');
  expect(query.slice(2)).toEqual(['1', job, 'DONE']);
  const iwd = path.join(dir, `iwd-${tag}`);
  fs.mkdirSync(iwd);
  expect((await gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err ALL 0`))[0]).toBe('NULL');
  expect(fs.readFileSync(path.join(iwd, 'out'), 'utf8')).toBe(`${tag.toUpperCase()}\n`);
  return batch;
}

function warnings(gahp: GahpProcess): string[] {
  return gahp.stderr.split('\n').filter((l) => l.startsWith('boinc-gahp: warning:'));
}

/** The state directory cannot be made: the fallback is used, said once, and holds the ledger. */
async function expectFallbackUsed(stateDir: string, why: RegExp): Promise<void> {
  const gahp = await start(stateDir);
  const batch = await everyCommandWorks(gahp, 'a');
  await everyCommandWorks(gahp, 'b');
  const fallback = fallbackDir();
  const [warning, ...more] = warnings(gahp);
  expect(more).toEqual([]);
  expect(warning).toContain(`state directory ${stateDir} cannot be used: `);
  expect(warning).toMatch(why);
  expect(warning).toContain(`using ${fallback} instead`);
  expect(warning).toMatch(/may not survive a reboot/);
  expect(fs.statSync(fallback).mode & 0o777).toBe(0o700);
  expect(fs.readFileSync(path.join(fallback, 'ledger.jsonl'), 'utf8')).toContain(batch);
}

/** Neither directory can be used: the state is in memory, said once; nothing is written in `untouched`. */
async function expectMemoryUsed(stateDir: string, whyNot: RegExp, untouched: string): Promise<void> {
  const gahp = await start(stateDir);
  await everyCommandWorks(gahp, 'a');
  await everyCommandWorks(gahp, 'b');
  const [warning, ...more] = warnings(gahp);
  expect(more).toEqual([]);
  expect(warning).toContain(`state directory ${stateDir} cannot be used: `);
  expect(warning).toContain(`; nor can ${fallbackDir()}: `);
  expect(warning).toMatch(whyNot);
  expect(warning).toMatch(/kept in memory.*until this GAHP exits/);
  expect(fs.readdirSync(untouched)).toEqual([]);
}

test('a state directory that cannot be made (under a regular file): the private fallback under TMPDIR', async () => {
  fs.writeFileSync(path.join(dir, 'file'), '');
  await expectFallbackUsed(path.join(dir, 'file', 'state'), /ENOTDIR/);
});

const readOnlyWay = !noMounts ? 'a read-only tmpfs' : !isRoot ? 'mode 0555' : null;
(readOnlyWay ? test : test.skip)(`a read-only state directory (${readOnlyWay ?? `skipped: root without mounts cannot make one (${noMounts})`}): the fallback`, async () => {
  const stateDir = path.join(dir, 'state');
  fs.mkdirSync(stateDir);
  if (!noMounts) mountTmpfs(stateDir, 'ro,size=64k');
  else fs.chmodSync(stateDir, 0o555);
  await expectFallbackUsed(stateDir, noMounts ? /EACCES/ : /EROFS/);
});

test('the fallback directory is a symbolic link: refused, the state is kept in memory', async () => {
  fs.writeFileSync(path.join(dir, 'file'), '');
  const target = path.join(dir, 'planted');
  fs.mkdirSync(target, { mode: 0o700 });
  fs.symlinkSync(target, fallbackDir());
  await expectMemoryUsed(path.join(dir, 'file', 'state'), /it is a symbolic link/, target);
});

(isRoot ? test : test.skip)(`the fallback directory belongs to another user: refused, the state is kept in memory${isRoot ? '' : ' (skipped: only root can make a directory owned by another user)'}`, async () => {
  fs.writeFileSync(path.join(dir, 'file'), '');
  fs.mkdirSync(fallbackDir(), { mode: 0o700 });
  fs.chownSync(fallbackDir(), 65534, 65534);
  await expectMemoryUsed(path.join(dir, 'file', 'state'), /owned by user 65534/, fallbackDir());
});

test(`a state directory that fails mid-run (${noMounts ? 'replaced by a regular file' : 'a read-only tmpfs mounted over it'}): that command's error names it and the errno, then the GAHP goes on in memory`, async () => {
  const stateDir = path.join(dir, 'state');
  fs.mkdirSync(stateDir);
  const gahp = await start(stateDir);
  await everyCommandWorks(gahp, 'a');
  expect(warnings(gahp)).toEqual([]);

  if (!noMounts) {
    mountTmpfs(stateDir, 'ro,size=64k');
  } else {
    fs.renameSync(stateDir, `${stateDir}.gone`);
    fs.writeFileSync(stateDir, '');
  }
  const batch = batchName('uppercase');
  const input = writeInput(dir, 'in-mid.txt', 'mid\n');
  const [failed] = await gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: jobName(batch, 1, 0), inputs: [[input, 'in']] }])}`, 60_000);
  expect(failed).toContain(`cannot write the state directory ${stateDir} (${noMounts ? 'ENOTDIR' : 'EROFS'})`);

  await everyCommandWorks(gahp, 'b');
  await everyCommandWorks(gahp, 'c');
  const [warning, ...more] = warnings(gahp);
  expect(more).toEqual([]);
  expect(warning).toContain(`cannot write the state directory ${stateDir} (`);
  expect(warning).toMatch(/kept in memory only, until this GAHP exits/);
  expect(await gahp.quit()).toBe(0);
  if (!noMounts) unmount(stateDir);
});
