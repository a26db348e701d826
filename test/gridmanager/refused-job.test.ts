/**
 * A job with a problem of its own in a batch HTCondor 10.0's gridmanager gathered (issue 38,
 * item 1), as the gridmanager drives bin/boinc-gahp (test/support/gridmanager.ts): an error
 * reply to BOINC_SUBMIT would hold every job of the batch with that one job's reason (seen
 * on a real 10.0: one-job clusters gathered into one batch, a good cluster held for a file
 * only its neighbour named). So the bad job is left out, the others go to BOINC; a status
 * query reports the bad job DONE, and its BOINC_FETCH_OUTPUT fails with its reason, which
 * GM_STAGE_OUT -> GM_CLEAR_REQUEST -> GM_HOLD makes its hold reason
 * (docs/gahp-protocol.md, "A job refused alone").
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
  boincRetireBatch,
  holdReason,
  remoteJobName,
  writeAuthenticatorFile,
  type GridJob,
  type ResourceRef,
} from '../support/gridmanager.js';

let dir: string;
let stateDir: string;
let s: ExtendedTestBoincServer;
let ref: ResourceRef;
const gms: GridmanagerGahp[] = [];

beforeEach(async () => {
  dir = makeTempDir('boinc-gahp-refused-');
  stateDir = makeTempDir('boinc-gahp-refused-state-');
  s = await startTestServer({});
  ref = { url: s.url, authenticatorFile: writeAuthenticatorFile(dir, 'auth', s.authenticator) };
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

/** A one-job cluster of the uppercase app with its own directory and input `data.txt`. */
function cluster(id: number, extra: Partial<GridJob> = {}): GridJob {
  const iwd = path.join(dir, `run${id}`);
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, 'data.txt'), `cluster ${id}\n`);
  return { cluster: id, proc: 0, app: 'uppercase', args: [], iwd, transferInput: ['data.txt'], remoteState: '', ...extra };
}

const rpcsSince = (since: number) => s.rpcLog().slice(since).map((e) => e.rpc);

test('one job with an argument BOINC cannot carry and one with a missing input: each held alone with its own reason, the others run; abort of one succeeds; a GAHP killed -9 still answers for them', async () => {
  const gm = await gridmanager();
  const res = new BoincResourceEmu(gm, ref);
  const good1 = cluster(31);
  const badArg = cluster(32, { args: ['two words'] });
  const noInput = cluster(33, { transferInput: ['nope.txt'] });
  const good2 = cluster(34);
  const batch = res.joinNew(good1);
  for (const j of [badArg, noInput, good2]) res.joinNew(j);
  expect(batch.jobs).toHaveLength(4);

  expect(await res.submit(batch)).toEqual({ rc: 0 });
  expect(batch.status).toBe('Submitted');
  expect(s.jobs(batch.name).map((j) => j.name).sort()).toEqual([remoteJobName(good1), remoteJobName(good2)].sort());

  // The first status pass: the refused jobs are DONE at once, the others wait on BOINC.
  await res.statusPass();
  expect([badArg.remoteState, noInput.remoteState]).toEqual(['DONE', 'DONE']);
  expect([good1.remoteState, good2.remoteState]).toEqual(['NOT_STARTED', 'NOT_STARTED']);

  // GM_STAGE_OUT: the fetch fails with the job's own reason; nothing is asked of the server.
  const since = s.rpcLog().length;
  const f1 = await boincFetchOutput(gm, ref, badArg);
  const f2 = await boincFetchOutput(gm, ref, noInput);
  expect(rpcsSince(since)).toEqual([]);
  const held1 = holdReason(f1.error!, 'fetch');
  const held2 = holdReason(f2.error!, 'fetch');
  expect(held1).toMatch(/^BOINC error: job not sent to BOINC: checking names and arguments: job \S+#32\.0: argument 1 "two words" holds character U\+0020/);
  expect(held1).not.toContain('#33.0');
  expect(held2).toContain(`job ${remoteJobName(noInput)}: input file ${path.join(noInput.iwd, 'nope.txt')} does not exist`);
  expect(held2).not.toContain('#32.0');
  for (const h of [held1, held2]) expect(h).toMatch(/; fix that, then remove the job with condor_rm and submit it again \(a release holds it again\)$/);

  // Incremental passes: the refused jobs were reported; an answer after the one that carried them leaves them out.
  await res.statusPass();
  await res.statusPass();
  const lastAnswer = res.queries.at(-1)!.outcome.batches!.flat().map(([name]) => name);
  expect(lastAnswer).not.toContain(remoteJobName(badArg));
  expect(lastAnswer).not.toContain(remoteJobName(noInput));

  // condor_rm of a refused job: GM_CANCEL's abort succeeds without the server, which would
  // have failed the call with "no job <name>".
  const sinceAbort = s.rpcLog().length;
  expect(await boincAbortJobs(gm, ref, [remoteJobName(noInput)])).toEqual({ rc: 0 });
  expect(rpcsSince(sinceAbort)).toEqual([]);
  res.unregister(noInput);
  res.unregister(badArg);

  // The good jobs run and are fetched.
  s.advanceAll(batch.name, 'DONE');
  for (let i = 0; i < 20 && (good1.remoteState !== 'DONE' || good2.remoteState !== 'DONE'); i++) await res.statusPass();
  for (const j of [good1, good2]) {
    expect(await boincFetchOutput(gm, ref, j)).toMatchObject({ rc: 0, exitStatus: 0 });
    expect(fs.readFileSync(path.join(j.iwd, 'out'), 'latin1')).toBe(`CLUSTER ${j.cluster}\n`);
  }

  // kill -9: the GAHP the next gridmanager starts reads the same ledger.
  await gm.kill();
  const gm2 = await gridmanager();
  const full = await boincQueryBatches(gm2, ref, [batch.name], '0');
  expect(full.rc).toBe(0);
  expect(full.batches![0]).toEqual(expect.arrayContaining([
    [remoteJobName(good1), 'DONE'], [remoteJobName(good2), 'DONE'], [remoteJobName(badArg), 'DONE'], [remoteJobName(noInput), 'DONE'],
  ]));
  const again = await boincFetchOutput(gm2, ref, badArg);
  expect(holdReason(again.error!, 'fetch')).toBe(held1);
  expect(await boincAbortJobs(gm2, ref, [remoteJobName(badArg)])).toEqual({ rc: 0 });
  expect(await boincRetireBatch(gm2, ref, batch.name)).toEqual({ rc: 0 });
  expect(gm.aborts.concat(gm2.aborts).map((a) => a.message)).toEqual([]);
});

test('a batch whose every job is refused fails with each job and its reason, and nothing is created on the server', async () => {
  const gm = await gridmanager();
  const res = new BoincResourceEmu(gm, ref);
  const badArg = cluster(41, { args: ['it\'s'] });
  const noInput = cluster(42, { transferInput: ['gone.txt'] });
  const batch = res.joinNew(badArg);
  res.joinNew(noInput);
  const since = s.rpcLog().length;
  const r = await res.submit(batch);
  expect(r.rc).toBe(1);
  expect(batch.status).toBe('Failed');
  // BatchFailed holds both jobs with this text: each finds its own name and problem in it.
  const held = holdReason(r.error!, 'submit');
  expect(held).toMatch(/^no job was sent to BOINC: /);
  expect(held).toContain(`job ${remoteJobName(badArg)}: argument 1 "it's"`);
  expect(held).toContain(`job ${remoteJobName(noInput)}: input file ${path.join(noInput.iwd, 'gone.txt')} does not exist`);
  expect(rpcsSince(since)).not.toContain('create_batch');
  expect(s.batches().filter((b) => b.name === batch.name)).toEqual([]);
  expect(gm.aborts.map((a) => a.message)).toEqual([]);
});
