/**
 * condor_hold then condor_release of one job of a cluster, as HTCondor 10.0's gridmanager
 * does it (test/support/gridmanager.ts): the hold aborts the BOINC job (BOINC_ABORT_JOBS)
 * and deletes the job object; the release makes a new one, which joins a new batch and is
 * submitted there. The gridmanager matches status answers to jobs by `cluster.proc` alone,
 * so the old batch's answer must no longer carry the aborted job once it has been
 * submitted again: its ERROR would put the new job on hold. Until then it is reported as
 * the server has it; after a GAHP restart (same state directory) it stays left out.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import {
  BoincResourceEmu,
  GridmanagerGahp,
  boincAbortJobs,
  boincFetchOutput,
  boincQueryBatches,
  remoteJobName,
  writeAuthenticatorFile,
  type GridJob,
  type ResourceRef,
} from '../support/gridmanager.js';

let dir: string;
let stateDir: string;
let s: ExtendedTestBoincServer;
const gms: GridmanagerGahp[] = [];

beforeEach(async () => {
  dir = makeTempDir('boinc-gahp-hold-');
  stateDir = makeTempDir('boinc-gahp-hold-state-');
  s = await startTestServer({});
});

afterEach(async () => {
  for (const gm of gms.splice(0)) await gm.quit().catch(() => undefined);
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(stateDir, { recursive: true, force: true });
});

async function gridmanager(): Promise<GridmanagerGahp> {
  const gm = await GridmanagerGahp.start({ stateDir });
  gms.push(gm);
  return gm;
}

function job(cluster: number, proc: number, content: string): GridJob {
  const iwd = path.join(dir, `run${cluster}`);
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, `data.${proc}.txt`), content);
  return { cluster, proc, app: 'uppercase', args: [], iwd, transferInput: [`data.${proc}.txt`], remoteState: '' };
}

/** A full query of one batch by hand: its (job name, status) pairs. */
async function fullQuery(gm: GridmanagerGahp, ref: ResourceRef, batch: string): Promise<Array<[string, string]>> {
  const r = await boincQueryBatches(gm, ref, [batch], '0');
  expect(r.rc).toBe(0);
  return r.batches![0]!;
}

test('hold (abort), release (new batch): the old batch stops reporting the aborted job once it is submitted again, also after a GAHP restart', async () => {
  const gm = await gridmanager();
  const ref: ResourceRef = { url: s.url, authenticatorFile: writeAuthenticatorFile(dir, 'auth', s.authenticator) };
  const res = new BoincResourceEmu(gm, ref);
  const now = Math.floor(Date.now() / 1000);
  const held = job(16, 0, 'held and released\n');
  const other = job(16, 1, 'left alone\n');
  const first = res.joinNew(held, now);
  res.joinNew(other, now);
  expect(await res.submit(first)).toEqual({ rc: 0 });
  await res.statusPass();
  expect([held.remoteState, other.remoteState]).toEqual(['NOT_STARTED', 'NOT_STARTED']);

  // condor_hold: GM_CANCEL aborts the BOINC job, then the job object goes away.
  const oldName = remoteJobName(held);
  expect(await boincAbortJobs(gm, ref, [oldName])).toEqual({ rc: 0 });
  res.unregister(held);
  // Not submitted again yet: the aborted job is reported as the server has it.
  expect(await fullQuery(gm, ref, first.name)).toContainEqual([oldName, 'ERROR']);

  // condor_release: a new job object 16.0 in a new batch.
  const released = job(16, 0, 'held and released\n');
  const second = res.joinNew(released, now + 5);
  expect(second.name).not.toBe(first.name);
  expect(await res.submit(second)).toEqual({ rc: 0 });
  const queriesBefore = res.queries.length;

  // The status pass asks for both batches: nothing of the old 16.0 reaches the new one.
  await res.statusPass();
  await res.statusPass();
  expect(released.remoteState).toBe('NOT_STARTED');
  expect(released.statuses).not.toContain('ERROR');
  const answered = res.queries.slice(queriesBefore).flatMap((q) => q.outcome.batches ?? []).flat();
  expect(answered.map(([name]) => name)).not.toContain(oldName);
  expect(await fullQuery(gm, ref, first.name)).toEqual([[remoteJobName(other), 'NOT_STARTED']]);

  // The gridmanager and its GAHP restart: jobs come back with their batch names; the new
  // GAHP reads the same ledger.
  await gm.quit();
  const gm2 = await gridmanager();
  const res2 = new BoincResourceEmu(gm2, ref);
  const released2 = { ...released, remoteState: '' };
  const other2 = { ...other, remoteState: '' };
  res2.joinRecovered(released2);
  res2.joinRecovered(other2);
  await res2.statusPass();
  await res2.statusPass();
  expect(res2.batch(first.name).status).toBe('Submitted');
  expect(res2.batch(second.name).status).toBe('Submitted');
  s.advanceAll(second.name, 'DONE');
  for (let i = 0; i < 30 && released2.remoteState !== 'DONE'; i++) {
    res2.needFullQuery = true;
    await res2.statusPass();
  }
  expect(released2.statuses).not.toContain('ERROR');
  expect(released2.remoteState).toBe('DONE');
  expect(await fullQuery(gm2, ref, first.name)).toEqual([[remoteJobName(other2), 'NOT_STARTED']]);
  expect((await boincFetchOutput(gm2, ref, released2)).rc).toBe(0);
  expect(fs.readFileSync(path.join(released2.iwd, 'out'), 'latin1')).toBe('HELD AND RELEASED\n');
  expect(gm.aborts.concat(gm2.aborts).map((a) => a.message)).toEqual([]);
});
