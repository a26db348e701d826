/**
 * Superseded jobs in the ledger: a job of a gridmanager batch submitted again (same
 * submitter, same cluster.proc) in a batch recorded later is superseded in the older
 * batch, whatever the project; derived from the journal, so a reopened or compacted ledger
 * knows it too. Names of another shape never supersede anything. A batch's refused jobs
 * (left out by its submit) are kept the same way.
 */
import * as fs from 'node:fs';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { JournalState, submitterOf, type JournalEntry } from '../../gahp/ledger/journal-state.js';
import { makeTempDir } from '../support/gahp-process.js';

const P = 'http://127.0.0.1:1/proj/';
const Q = 'http://127.0.0.1:2/other/';
const B1 = 'condor#alice@submit.example.org#uppercase#1796299007';
const B2 = 'condor#alice@submit.example.org#uppercase#1796299100';
const OTHER_SCHEDD = 'condor#bob@other.example.org#uppercase#1796299200';
const submitted = (jobs: string[]) => ({ app: 'uppercase', state: 'submitted' as const, physFiles: [], jobs: Object.fromEntries(jobs.map((j) => [j, 'SUBMITTED'])) });

let dir: string;
beforeEach(() => {
  dir = makeTempDir('boinc-gahp-superseded-');
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

test('submitterOf: only condor#<schedd>#<app>#<time> names have one', () => {
  expect(submitterOf(B1)).toBe('condor#alice@submit.example.org');
  expect(submitterOf('blahp-uppercase-mx7ir8sa-1dae41')).toBeUndefined();
  expect(submitterOf('demo#uppercase#x')).toBeUndefined();
  expect(submitterOf('#1')).toBeUndefined();
});

test('the older batch loses the job submitted again, also in another project; other schedds and shapes are untouched; a reopened ledger knows it', async () => {
  const l = JournalLedger.open(dir);
  await l.upsert(P, B1, submitted([`${B1}#16.0`, `${B1}#16.1`, `${B1}#17.0`]));
  await l.upsert(P, 'blahp-uppercase-a_0', submitted(['blahp-uppercase-a_0_0']));
  expect(l.superseded(P, B1)).toBeUndefined();
  await new Promise((r) => setTimeout(r, 5));
  await l.upsert(P, B2, submitted([`${B2}#16.0`]));
  await l.upsert(P, OTHER_SCHEDD, submitted([`${OTHER_SCHEDD}#16.1`]));
  await new Promise((r) => setTimeout(r, 5));
  await l.upsert(Q, 'condor#alice@submit.example.org#concat#1796299300', submitted(['condor#alice@submit.example.org#concat#1796299300#17.0']));
  expect([...(l.superseded(P, B1) ?? [])].sort()).toEqual([`${B1}#16.0`, `${B1}#17.0`]);
  expect(l.superseded(P, B2)).toBeUndefined();
  expect(l.superseded(P, OTHER_SCHEDD)).toBeUndefined();
  // A status of the old job recorded afterwards changes nothing.
  await l.recordQuery(P, '1796299400.5', [{ name: B1, jobs: [{ name: `${B1}#16.0`, status: 'ERROR' }] }]);
  expect([...(l.superseded(P, B1) ?? [])].sort()).toEqual([`${B1}#16.0`, `${B1}#17.0`]);
  await l.close();

  const again = JournalLedger.readOnly(dir);
  expect([...(again.superseded(P, B1) ?? [])].sort()).toEqual([`${B1}#16.0`, `${B1}#17.0`]);
  expect(again.superseded(P, B2)).toBeUndefined();
});

test('snapshots replayed in any order (compaction): the batch created earlier is the superseded one', () => {
  const batch = (name: string, createdAt: number, jobs: string[]) => ({
    op: 'snapshot', batch: { projectUrl: P, name, app: 'uppercase', state: 'submitted', physFiles: [], jobs: Object.fromEntries(jobs.map((j) => [j, 'ERROR'])), createdAt, updatedAt: createdAt },
  }) as JournalEntry;
  const state = new JournalState();
  state.apply(batch(B2, 2000, [`${B2}#16.0`]));
  state.apply(batch(B1, 1000, [`${B1}#16.0`, `${B1}#16.1`]));
  expect([...(state.superseded(P, B1) ?? [])]).toEqual([`${B1}#16.0`]);
  expect(state.superseded(P, B2)).toBeUndefined();
  const lines = [...state.snapshotLines()].join('');
  const replayed = new JournalState();
  replayed.replay(Buffer.from(lines));
  expect([...(replayed.superseded(P, B1) ?? [])]).toEqual([`${B1}#16.0`]);
});

test("a batch's refused jobs: replaced by each submit's, found by job name, kept by a reopened and a compacted ledger, and superseding like jobs", async () => {
  const l = JournalLedger.open(dir);
  await l.upsert(P, B1, { ...submitted([`${B1}#16.0`]), refused: { [`${B1}#16.1`]: 'first reason', [`${B1}#16.2`]: 'second reason' } });
  expect(l.refusal(P, `${B1}#16.1`)).toBe('first reason');
  expect(l.refusal(P, `${B1}#16.0`)).toBeUndefined();
  expect(l.get(P, B1)!.refused).toEqual({ [`${B1}#16.1`]: 'first reason', [`${B1}#16.2`]: 'second reason' });
  // A submit of the batch that completes again records its own refusals only.
  await l.upsert(P, B1, { ...submitted([`${B1}#16.0`, `${B1}#16.1`]), refused: { [`${B1}#16.2`]: 'second reason, again' } });
  expect([...(l.refused(P, B1) ?? [])]).toEqual([[`${B1}#16.2`, 'second reason, again']]);
  expect(l.refusal(P, `${B1}#16.1`)).toBeUndefined();
  // Released and submitted again in a later batch: the refused 16.2 of B1 is superseded.
  await new Promise((r) => setTimeout(r, 5));
  await l.upsert(P, B2, submitted([`${B2}#16.2`]));
  expect([...(l.superseded(P, B1) ?? [])]).toEqual([`${B1}#16.2`]);
  await l.close();

  const reopened = JournalLedger.readOnly(dir);
  expect(reopened.refusal(P, `${B1}#16.2`)).toBe('second reason, again');
  expect([...(reopened.superseded(P, B1) ?? [])]).toEqual([`${B1}#16.2`]);
  const state = new JournalState();
  state.replay(fs.readFileSync(`${dir}/ledger.jsonl`));
  const compacted = new JournalState();
  compacted.replay(Buffer.from([...state.snapshotLines()].join('')));
  expect(compacted.refusal(P, `${B1}#16.2`)).toBe('second reason, again');
  expect(compacted.get(P, B1)!.refused).toEqual({ [`${B1}#16.2`]: 'second reason, again' });
  expect([...(compacted.superseded(P, B1) ?? [])]).toEqual([`${B1}#16.2`]);
});
