/**
 * BOINC_FETCH_OUTPUT into a job directory on a full file system (issue 23 point 2): the
 * result names the file and the error, no partial output appears under its final name,
 * the GAHP keeps serving, and the same fetch succeeds once there is space again. The job
 * directory is a small tmpfs, filled up by the test: that takes root (CI runs as root);
 * elsewhere the test is skipped, saying why.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { batchName, esc, jobName, listTree, startEnv, submitBatch, type Env } from './helpers.js';
import { mountsUnavailable, mountTmpfs, unmountAll } from '../support/mounts.js';

const noMounts = mountsUnavailable();
let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  unmountAll();
  await env?.close();
});

/** Fills the file system under dir until a write fails with ENOSPC; returns the filler's path. */
function fill(dir: string): string {
  const filler = path.join(dir, 'filler');
  const fd = fs.openSync(filler, 'w');
  const chunk = Buffer.alloc(4096, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

(noMounts ? test.skip : test)(`a full job directory: the error names the file and ENOSPC, nothing partial is left, a later fetch succeeds${noMounts ? ` (skipped: ${noMounts})` : ''}`, async () => {
  const batch = batchName('uppercase');
  const job = jobName(batch, 1, 0);
  await submitBatch(env, batch, 'uppercase', [{ name: job, inputs: ['disk full\n'] }]);
  env.server.advanceAll(batch);
  await env.server.settled();

  const iwd = path.join(env.dir, 'small');
  fs.mkdirSync(iwd);
  mountTmpfs(iwd, 'size=256k');
  const filler = fill(iwd);
  const [error] = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err SOME 1 out job.out`);
  expect(error).toContain(`${path.join(iwd, 'job.out')}`);
  expect(error).toContain('ENOSPC');
  expect(listTree(iwd)).toEqual(['filler']);

  // The GAHP carries on; with space again the same fetch succeeds.
  expect(await env.gahp.call('BOINC_PING')).toEqual(['NULL']);
  fs.rmSync(filler);
  expect((await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err SOME 1 out job.out`))[0]).toBe('NULL');
  expect(fs.readFileSync(path.join(iwd, 'job.out'), 'utf8')).toBe('DISK FULL\n');
  expect(listTree(iwd)).toEqual(['job.err', 'job.out']);
});
