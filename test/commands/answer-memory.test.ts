/**
 * The memory behind BOINC_QUERY_BATCHES' suppression of repeated statuses: keyed by account
 * and server_time token, and bounded. (End to end through the GAHP: query-batches.test.ts.)
 */
import { AnswerMemory, type ReportedJobs } from '../../gahp/commands/query-batches.js';

const answer = (batch: string, jobs: Record<string, string>): ReportedJobs => new Map([[batch, new Map(Object.entries(jobs))]]);

describe('AnswerMemory', () => {
  test('a token is known only to the account it was given to', () => {
    const m = new AnswerMemory();
    m.remember('A\n#1', '100.5', answer('b', { j1: 'DONE' }), 1);
    expect(m.reportedIn('A\n#1', '100.5')?.get('b')?.get('j1')).toBe('DONE');
    expect(m.reportedIn('A\n#2', '100.5')).toBeUndefined();
    expect(m.reportedIn('A\n#1', '100.50')).toBeUndefined();
  });

  test('a token carried by two answers suppresses nothing', () => {
    const m = new AnswerMemory();
    m.remember('A', '7', answer('b', { j1: 'DONE' }), 1);
    m.remember('A', '7', answer('c', { j2: 'DONE' }), 1);
    expect(m.reportedIn('A', '7')).toBeUndefined();
    expect(m.size).toBe(0);
  });

  test('only the newest tokens of an account are kept; a token looked up counts as new', () => {
    const m = new AnswerMemory(3, 1000);
    m.remember('A', '1', answer('b', { j: 'IN_PROGRESS' }), 1);
    m.remember('B', 'x', answer('b', { j: 'DONE' }), 1);
    m.remember('A', '2', answer('b', { j: 'DONE' }), 1);
    m.remember('A', '3', answer('b', { j: 'DONE' }), 1);
    expect(m.reportedIn('A', '1')).toBeDefined();
    m.remember('A', '4', answer('b', { j: 'DONE' }), 1);
    // '2' was the oldest of A once '1' was used again.
    expect(m.reportedIn('A', '2')).toBeUndefined();
    for (const t of ['1', '3', '4']) expect(m.reportedIn('A', t)).toBeDefined();
    // Another account's tokens do not count against A.
    expect(m.reportedIn('B', 'x')).toBeDefined();
    expect(m.size).toBe(4);
  });

  test('at most maxJobs statuses in all, oldest answers forgotten first; an answer bigger than that is not kept', () => {
    const m = new AnswerMemory(8, 10);
    m.remember('A', '1', answer('b', { j1: 'DONE', j2: 'DONE', j3: 'DONE', j4: 'DONE' }), 4);
    m.remember('B', '1', answer('b', { j1: 'DONE', j2: 'DONE', j3: 'DONE', j4: 'DONE' }), 4);
    m.remember('A', '2', answer('b', { j1: 'DONE', j2: 'DONE', j3: 'DONE', j4: 'DONE' }), 4);
    expect(m.size).toBe(8);
    expect(m.reportedIn('A', '1')).toBeUndefined();
    expect(m.reportedIn('B', '1')).toBeDefined();
    m.remember('A', '3', new Map(), 11);
    expect(m.reportedIn('A', '3')).toBeUndefined();
    expect(m.size).toBe(8);
  });
});
