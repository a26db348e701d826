/**
 * The journal ledger: replay (torn last line), snapshots from get(), one entry per status
 * query with only the changes, online compaction, and kill -9 of a writing process while
 * another process reads.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';

const P = 'http://127.0.0.1:1/proj/';

describe('JournalLedger', () => {
  let dir: string;
  beforeEach(() => {
    dir = makeTempDir('boinc-gahp-ledger-');
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const file = () => path.join(dir, 'ledger.jsonl');

  test('replay skips a torn last line; the next writer starts a fresh line after it', async () => {
    const l1 = JournalLedger.open(dir);
    await l1.upsert(P, 'b1', { app: 'uppercase', state: 'submitted', batchId: 7, physFiles: ['condorv_x'], jobs: { j1: 'SUBMITTED', j2: 'SUBMITTED' } });
    await l1.recordStatuses(P, 'b1', { j1: 'DONE' }, '100.5');
    await l1.close();
    // A crash in the middle of an append leaves half a line.
    fs.appendFileSync(file(), '{"op":"upsert","p":"http://127.0.0.1:1/proj/","n":"b1","t":1,"patch":{"state":"ret');

    const reader = JournalLedger.readOnly(dir);
    const b = reader.get(P, 'b1')!;
    expect(b).toMatchObject({ app: 'uppercase', state: 'submitted', batchId: 7, physFiles: ['condorv_x'], lastServerTime: '100.5' });
    expect(b.jobs).toEqual({ j1: 'DONE', j2: 'SUBMITTED' });

    const l2 = JournalLedger.open(dir);
    await l2.upsert(P, 'b2', { app: 'concat', state: 'creating' });
    await l2.close();
    const again = JournalLedger.readOnly(dir);
    expect(again.list().map((x) => x.name).sort()).toEqual(['b1', 'b2']);
    expect(again.get(P, 'b1')!.state).toBe('submitted');
    const lines = fs.readFileSync(file(), 'utf8').split('\n');
    expect(lines.filter((l) => l.startsWith('{"op":"upsert"') && l.includes('"b2"'))).toHaveLength(1);
  });

  test('get() returns a snapshot: later changes do not show in it', async () => {
    const l = JournalLedger.open(dir);
    await l.upsert(P, 'b', { state: 'submitted', jobs: { j1: 'SUBMITTED' } });
    const before = l.get(P, 'b')!;
    await l.recordQuery(P, '5.0', [{ name: 'b', jobs: [{ name: 'j1', status: 'DONE' }] }]);
    expect(before.jobs).toEqual({ j1: 'SUBMITTED' });
    expect(before.lastServerTime).toBeUndefined();
    expect(l.get(P, 'b')!.jobs).toEqual({ j1: 'DONE' });
    // Changing a snapshot does not change the ledger.
    const snap = l.get(P, 'b')!;
    snap.jobs['j1'] = 'ERROR';
    snap.physFiles.push('x');
    expect(l.get(P, 'b')!.jobs).toEqual({ j1: 'DONE' });
    expect(l.get(P, 'b')!.physFiles).toEqual([]);
    await l.close();
  });

  test('recordQuery: one journal line per query, only changed statuses, unknown batches ignored', async () => {
    const l = JournalLedger.open(dir);
    await l.upsert(P, 'a', { state: 'submitted', jobs: { a1: 'SUBMITTED', a2: 'SUBMITTED' } });
    await l.upsert(P, 'b', { state: 'submitted', jobs: { b1: 'SUBMITTED' } });
    const size0 = fs.statSync(file()).size;
    await l.recordQuery(P, '10.25', [
      { name: 'a', jobs: [{ name: 'a1', status: 'NOT_STARTED' }, { name: 'a2', status: 'NOT_STARTED' }] },
      { name: 'b', jobs: [{ name: 'b1', status: 'IN_PROGRESS' }] },
      { name: 'stranger', jobs: [{ name: 's1', status: 'DONE' }] },
    ]);
    await l.recordQuery(P, '11.5', [
      { name: 'a', jobs: [{ name: 'a1', status: 'NOT_STARTED' }, { name: 'a2', status: 'DONE' }] },
      { name: 'b', jobs: [{ name: 'b1', status: 'IN_PROGRESS' }] },
    ]);
    await l.close();
    const added = fs.readFileSync(file(), 'utf8').slice(size0).split('\n').filter(Boolean).map((x) => JSON.parse(x) as { b?: unknown });
    expect(added).toHaveLength(2);
    expect(added[1]!.b).toEqual({ a: { a2: 'DONE' }, b: {} });
    const r = JournalLedger.readOnly(dir);
    expect(r.get(P, 'a')!.jobs).toEqual({ a1: 'NOT_STARTED', a2: 'DONE' });
    expect(r.get(P, 'b')!.lastServerTime).toBe('11.5');
    expect(r.get(P, 'stranger')).toBeUndefined();
  });

  test('100 batches x 1000 jobs: a query is recorded quickly and get() stays cheap', async () => {
    const l = JournalLedger.open(dir);
    const names = Array.from({ length: 100 }, (_, i) => `condor#schedd@host#app#17962047${i}`);
    const jobsOf = (b: string) => Array.from({ length: 1000 }, (_, k) => `${b}#${1000 + k}.0`);
    for (const b of names) await l.upsert(P, b, { state: 'submitted', jobs: Object.fromEntries(jobsOf(b).map((j) => [j, 'SUBMITTED'])) });
    const query = (status: string) => names.map((name) => ({ name, jobs: jobsOf(name).map((j) => ({ name: j, status })) }));
    const q1 = query('NOT_STARTED');
    const q2 = query('IN_PROGRESS');
    let t = performance.now();
    await l.recordQuery(P, '1.0', q1);
    const first = performance.now() - t;
    t = performance.now();
    await l.recordQuery(P, '2.0', q1); // nothing changed: a small entry
    const unchanged = performance.now() - t;
    await l.recordQuery(P, '3.0', q2);
    t = performance.now();
    for (const b of names) l.get(P, b);
    const gets = performance.now() - t;
    await l.close();
    console.log(`ledger 100x1000: first query ${first.toFixed(0)} ms, unchanged ${unchanged.toFixed(0)} ms, 100 gets ${gets.toFixed(1)} ms`);
    // The times are printed for the record; speed is measured by `npm run bench`, not asserted.
    const r = JournalLedger.readOnly(dir);
    expect(Object.values(r.get(P, names[42]!)!.jobs).every((s) => s === 'IN_PROGRESS')).toBe(true);
  });

  test('compaction while running keeps the journal bounded and the state intact', async () => {
    const old = Date.now() - 40 * 24 * 3600 * 1000;
    const snap = (name: string, state: string, t: number) =>
      JSON.stringify({ op: 'snapshot', batch: { projectUrl: P, name, app: 'x', state, physFiles: [], jobs: { j: 'DONE' }, createdAt: t, updatedAt: t } }) + '\n';
    fs.writeFileSync(file(), snap('long-retired', 'retired', old) + snap('old-but-live', 'submitted', old) + snap('just-retired', 'retired', Date.now()));
    const l = JournalLedger.open(dir, { compactMinBytes: 20_000, compactRatio: 2 });
    const jobs = Array.from({ length: 50 }, (_, k) => `job${k}`);
    await l.upsert(P, 'b', { state: 'submitted', app: 'x', jobs: Object.fromEntries(jobs.map((j) => [j, 'SUBMITTED'])) });
    for (let i = 0; i < 200; i++) {
      await l.recordQuery(P, String(i), [{ name: 'b', jobs: jobs.map((j) => ({ name: j, status: i % 2 ? 'IN_PROGRESS' : 'NOT_STARTED' })) }]);
    }
    await l.upsert(P, 'b', { leaseExpiresAt: 12345 });
    await l.close();
    expect(fs.statSync(file()).size).toBeLessThan(60_000);
    expect(fs.readdirSync(dir).sort()).toEqual(['ledger.jsonl', 'ledger.writers']);
    expect(fs.readdirSync(path.join(dir, 'ledger.writers'))).toEqual([]);
    const r = JournalLedger.readOnly(dir);
    const b = r.get(P, 'b')!;
    expect(b).toMatchObject({ state: 'submitted', app: 'x', leaseExpiresAt: 12345, lastServerTime: '199' });
    expect(Object.values(b.jobs).every((s) => s === 'IN_PROGRESS')).toBe(true);
    // Batches retired over 30 days ago are forgotten; live and recently retired ones stay.
    expect(r.list().map((x) => x.name).sort()).toEqual(['b', 'just-retired', 'old-but-live']);
  });

  test('kill -9 of a writing process: every acknowledged change survives; readers never fail', async () => {
    const script = `
      import { JournalLedger } from ${JSON.stringify(path.join(REPO_ROOT, 'dist/gahp/ledger/journal-ledger.js'))};
      const l = JournalLedger.open(process.argv[process.argv.length - 1], { compactMinBytes: 200000, compactRatio: 2 });
      const P = ${JSON.stringify(P)};
      await l.upsert(P, 'b', { state: 'submitted', jobs: {} });
      for (let i = 0; ; i++) {
        const jobs = [];
        for (let k = 0; k < 200; k++) jobs.push({ name: 'job' + i + '.' + k, status: 'DONE' });
        await l.recordQuery(P, String(i), [{ name: 'b', jobs }]);
        process.stdout.write(i + '\\n');
      }
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    const exited = new Promise((r) => child.on('exit', r));
    // Read it from this process while it writes.
    let reads = 0;
    const started = Date.now();
    while (Date.now() - started < 1500 && !out.includes('\n40\n')) {
      if (fs.existsSync(file())) {
        JournalLedger.readOnly(dir).get(P, 'b');
        reads++;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    child.kill('SIGKILL');
    await exited;
    expect(err).toBe('');
    const acked = out.split('\n').filter(Boolean).map(Number);
    expect(acked.length).toBeGreaterThan(5);
    expect(reads).toBeGreaterThan(0);
    const last = acked[acked.length - 1]!;
    const r = JournalLedger.readOnly(dir);
    const jobs = r.get(P, 'b')!.jobs;
    for (let i = 0; i <= last; i++) expect(jobs[`job${i}.199`]).toBe('DONE');
    // And a writer can carry on after the crash.
    const w = JournalLedger.open(dir);
    await w.upsert(P, 'b', { state: 'retired' });
    await w.close();
    expect(JournalLedger.readOnly(dir).get(P, 'b')!.state).toBe('retired');
  });

  test('a writer whose journal was replaced (compacted by another process) writes to the new file', async () => {
    const l = JournalLedger.open(dir);
    await l.upsert(P, 'a', { state: 'submitted' });
    // What a compacting process does: snapshot to a temp file, rename over the journal.
    fs.writeFileSync(file() + '.tmp', fs.readFileSync(file()));
    fs.renameSync(file() + '.tmp', file());
    await l.upsert(P, 'b', { state: 'submitted' });
    await l.close();
    expect(JournalLedger.readOnly(dir).list().map((x) => x.name).sort()).toEqual(['a', 'b']);
  });

  test('no compaction while another live process has the ledger open; appends of both kept', async () => {
    const script = `
      import { JournalLedger } from ${JSON.stringify(path.join(REPO_ROOT, 'dist/gahp/ledger/journal-ledger.js'))};
      const l = JournalLedger.open(process.argv[process.argv.length - 1]);
      await l.upsert(${JSON.stringify(P)}, 'child', { state: 'submitted' });
      process.stdout.write('ready\\n');
      process.stdin.resume();
      process.stdin.on('end', async () => {
        await l.upsert(${JSON.stringify(P)}, 'child-after', { state: 'submitted' });
        await l.close();
        process.exit(0);
      });
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.on('data', (c) => String(c).includes('ready') && resolve()));
    const exited = new Promise((r) => child.on('exit', r));

    const l = JournalLedger.open(dir, { compactMinBytes: 2_000, compactRatio: 1.5 });
    await l.upsert(P, 'parent', { state: 'submitted', jobs: { j0: 'SUBMITTED' } });
    for (let i = 0; i < 50; i++) await l.recordQuery(P, String(i), [{ name: 'parent', jobs: [{ name: 'j0', status: i % 2 ? 'DONE' : 'IN_PROGRESS' }] }]);
    // Not compacted: every query line is still there.
    const queries = fs.readFileSync(file(), 'utf8').split('\n').filter((x) => x.includes('"op":"query"'));
    expect(queries).toHaveLength(50);

    child.stdin.end();
    await exited;
    for (let i = 50; i < 100; i++) await l.recordQuery(P, String(i), [{ name: 'parent', jobs: [{ name: 'j0', status: i % 2 ? 'DONE' : 'IN_PROGRESS' }] }]);
    await l.close();
    // The other writer is gone: compaction ran, and kept everything.
    expect(fs.readFileSync(file(), 'utf8').split('\n').filter((x) => x.includes('"op":"query"')).length).toBeLessThan(50);
    const r = JournalLedger.readOnly(dir);
    expect(r.list().map((x) => x.name).sort()).toEqual(['child', 'child-after', 'parent']);
    expect(r.get(P, 'parent')).toMatchObject({ lastServerTime: '99', jobs: { j0: 'DONE' } });
  });

  test('a writer that registers while another process compacts loses no line (registration and compaction share one lock)', async () => {
    // The window: this process has checked for other writers and written its snapshot, and
    // is about to rename it over the journal. Another process opens the ledger right then
    // and appends. Were it let in, its line would go to the old file and vanish with it.
    const script = `
      import { JournalLedger } from ${JSON.stringify(path.join(REPO_ROOT, 'dist/gahp/ledger/journal-ledger.js'))};
      const l = JournalLedger.open(process.argv[process.argv.length - 1]);
      await l.upsert(${JSON.stringify(P)}, 'child', { state: 'submitted' });
      process.stdout.write('acked\\n');
      await l.close();
    `;
    let child: ReturnType<typeof spawn> | undefined;
    let ackedInWindow = false;
    let windows = 0;
    let windowClosed!: () => void;
    const compacted = new Promise<void>((r) => { windowClosed = r; });
    const l = JournalLedger.open(dir, {
      compactMinBytes: 1,
      compactRatio: 1,
      beforeCompactionRename: async () => {
        if (windows++ > 0) return;
        child = spawn(process.execPath, ['--input-type=module', '-e', script, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
        // Give the other process time to register and append (it cannot: it waits for the lock).
        ackedInWindow = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 3000);
          child!.stdout!.on('data', (c) => String(c).includes('acked') && (clearTimeout(timer), resolve(true)));
        });
        windowClosed();
      },
    });
    // The write is acknowledged first; the compaction it triggers follows.
    await l.upsert(P, 'parent', { state: 'submitted' });
    await compacted;
    const childOut: string[] = [];
    child!.stdout!.on('data', (c) => childOut.push(String(c)));
    const code = await new Promise((r) => child!.on('exit', r));
    await l.upsert(P, 'parent-after', { state: 'submitted' });
    await l.close();
    expect(code).toBe(0);
    const r = JournalLedger.readOnly(dir);
    expect(r.list().map((x) => x.name).sort()).toEqual(['child', 'parent', 'parent-after']);
    // It was kept out of the window (the lock), not merely lucky.
    expect(ackedInWindow).toBe(false);
    expect(windows).toBeGreaterThanOrEqual(1);
    expect(fs.readdirSync(path.join(dir, 'ledger.writers'))).toEqual([]);
    expect(fs.existsSync(path.join(dir, 'ledger.lock'))).toBe(false);
  }, 30_000);

  test('compaction on open runs in slices: the event loop turns while the snapshot is written', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 3000; i++) {
      lines.push(JSON.stringify({ op: 'upsert', p: P, n: `b${i % 600}`, t: i, patch: { state: 'submitted', jobs: { [`j${i}`]: 'SUBMITTED' } } }));
    }
    fs.writeFileSync(file(), lines.join('\n') + '\n');
    let turns = 0;
    let turnsAtRename = -1;
    let spinning = true;
    const spin = () => { turns++; if (spinning) setImmediate(spin); };
    setImmediate(spin);
    // open() returns before compacting; the compaction then shares the loop.
    const l = JournalLedger.open(dir, { beforeCompactionRename: async () => { turnsAtRename = turns; } });
    expect(turns).toBe(0);
    await l.upsert(P, 'b0', { leaseExpiresAt: 1 });
    spinning = false;
    await l.close();
    expect(turnsAtRename).toBeGreaterThan(3);
    const text = fs.readFileSync(file(), 'utf8').split('\n').filter(Boolean);
    expect(text.length).toBe(601);
    const r = JournalLedger.readOnly(dir);
    expect(r.list()).toHaveLength(600);
    expect(r.get(P, 'b0')).toMatchObject({ leaseExpiresAt: 1, jobs: { j0: 'SUBMITTED', j600: 'SUBMITTED' } });
  });
});
