/**
 * The quick status lines (gahp/blahp/quick.ts) through refreshes, read by the installed
 * boinc_status.sh itself (bash, no blahpd, no server): after each step every job's answer is
 * either node's own line or "ask node", never a line node would not print. The script's
 * node is a stand-in that prints `NODE`, so a fall-through shows in the output.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { install } from '../../gahp/blahp-scripts.js';
import { loadConfig } from '../../gahp/blahp/config.js';
import { openContext, type BlahpContext } from '../../gahp/blahp/context.js';
import { statusLine } from '../../gahp/blahp/classad.js';
import { parseJobName } from '../../gahp/batch-boinc/names.js';
import type { StatusSnapshot } from '../../gahp/blahp/records.js';
import { finalLine, writeFinalRecord, writeSnapshotLines, writeStamp } from '../../gahp/blahp/quick.js';
import { writeJsonAtomic } from '../../gahp/blahp/state.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';

const URL = 'http://127.0.0.1:9/project/';
const BATCH = 'blahp-uppercase-m0abc-1a2b3c';
const name = (n: number) => `${BATCH}_${n}`;
const id = (n: number) => `boinc/${name(n)}`;

let dir: string;
let libexec: string;
let env: NodeJS.ProcessEnv;
let ctx: BlahpContext;

beforeAll(() => {
  dir = makeTempDir('boinc-quick-lines-');
  libexec = path.join(dir, 'libexec');
  fs.mkdirSync(libexec);
  const stub = path.join(dir, 'node-stub');
  fs.writeFileSync(stub, '#!/bin/sh\necho NODE\n', { mode: 0o755 });
  install(libexec, { node: stub, entry: GAHP_BIN });
  // blahp's loader, with nothing to load: the variables below come from the environment.
  fs.writeFileSync(path.join(libexec, 'blah_load_config.sh'), ':\n');
  fs.writeFileSync(path.join(dir, 'auth'), 'x\n', { mode: 0o600 });
  env = {
    PATH: process.env.PATH,
    HOME: dir,
    BOINC_GAHP_PROJECT_URL: URL,
    BOINC_GAHP_AUTHENTICATOR_FILE: path.join(dir, 'auth'),
    BOINC_GAHP_STATE_DIR: path.join(dir, 'state'),
    BOINC_BLAHP_STATUS_MAX_AGE: '600',
  };
  ctx = openContext(loadConfig(env));
  fs.mkdirSync(path.join(ctx.cfg.paths.jobs, BATCH), { recursive: true });
});

afterAll(async () => {
  await ctx.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** What boinc_status.sh prints for the job: a line, or NODE when it went to node. */
function script(n: number | string, extraEnv: NodeJS.ProcessEnv = {}): string {
  const all = Object.fromEntries(Object.entries({ ...env, ...extraEnv }).filter(([, v]) => v !== undefined));
  const r = spawnSync(path.join(libexec, 'boinc_status.sh'), [typeof n === 'number' ? id(n) : n], { env: all, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return r.stdout.replace(/\n$/, '');
}

/** One refresh's writes, in its order; `crash` stops before status.json. */
function refresh(old: StatusSnapshot | undefined, jobs: Record<number, string>, fetchedAt = Date.now(), crash = false) {
  const snap: StatusSnapshot = {
    v: 1, projectUrl: URL, fetchedAt, serverTime: '0', gone: [],
    batches: { [BATCH]: Object.fromEntries(Object.entries(jobs).map(([n, w]) => [name(Number(n)), w])) },
  };
  const quick = writeSnapshotLines(ctx, old, snap);
  if (!crash) {
    writeJsonAtomic(ctx.cfg.paths.statusSnapshot, snap);
    writeStamp(ctx, snap, quick.epoch);
  }
  return { snap, quick };
}

const idle = (n: number) => statusLine(name(n), 1);
const running = (n: number) => statusLine(name(n), 2);

test('lines follow the snapshots: only changes written, a job that left idle/running loses its line, final lines first', () => {
  writeFinalRecord(ctx, parseJobName(name(3))!, { kind: 'cancelled', at: 1 });
  const first = refresh(undefined, { 0: 'UNSENT', 1: 'IN_PROGRESS', 2: 'DONE', 3: 'IN_PROGRESS' });
  expect(first.quick).toMatchObject({ full: true, written: 2, removed: 0 });
  expect([0, 1, 2, 3].map((n) => script(n))).toEqual([idle(0), running(1), 'NODE', statusLine(name(3), 3)]);

  const second = refresh(first.snap, { 0: 'IN_PROGRESS', 1: 'DONE', 2: 'DONE', 3: 'IN_PROGRESS', 4: 'NOT_STARTED' });
  expect(second.quick).toMatchObject({ full: false, epoch: first.quick.epoch, written: 2, removed: 1 });
  expect([0, 1, 2, 3, 4].map((n) => script(n))).toEqual([running(0), 'NODE', 'NODE', statusLine(name(3), 3), idle(4)]);

  // A held job: its whole line (a reason with blanks), byte for byte.
  const held = parseJobName(name(1))!;
  writeFinalRecord(ctx, held, { kind: 'held', at: 2, reason: 'BOINC gave up on job x: "quotes" \\ and all', code: 0 });
  expect(script(1)).toBe(finalLine(held, { kind: 'held', at: 2, reason: 'BOINC gave up on job x: "quotes" \\ and all', code: 0 }));

  // A record written for a job asked for as `_08` (node takes it for job 8): job 8's line names job 8.
  writeFinalRecord(ctx, parseJobName(`${BATCH}_08`)!, { kind: 'cancelled', at: 3 });
  expect(script(8)).toBe(statusLine(name(8), 3));

  // A refresh that died after changing lines, before status.json: no stamp, node answers
  // everything; the next refresh starts a new epoch and writes every line again.
  refresh(second.snap, { 0: 'UNSENT', 4: 'IN_PROGRESS' }, Date.now(), true);
  expect([0, 3, 4].map((n) => script(n))).toEqual(['NODE', 'NODE', 'NODE']);
  const third = refresh(second.snap, { 0: 'IN_PROGRESS', 4: 'NOT_STARTED', 5: 'UNSENT' });
  expect(third.quick.full).toBe(true);
  expect(third.quick.epoch).not.toBe(first.quick.epoch);
  expect([0, 4, 5].map((n) => script(n))).toEqual([running(0), idle(4), idle(5)]);
});

test('a snapshot older than boinc_status_max_age, and anything node would see differently, go to node', () => {
  const fresh = refresh(undefined, { 0: 'UNSENT', 6: 'UNSENT' });
  expect(script(6)).toBe(idle(6));
  // Older than the max age.
  refresh(fresh.snap, { 0: 'UNSENT', 6: 'UNSENT' }, Date.now() - 600_001);
  expect(script(6)).toBe('NODE');
  refresh(undefined, { 0: 'UNSENT', 6: 'UNSENT' });
  expect(script(6)).toBe(idle(6));
  expect(script(6, { BOINC_BLAHP_STATUS_MAX_AGE: '0' })).toBe('NODE');
  expect(script(6, { BOINC_BLAHP_STATUS_MAX_AGE: '1e3' })).toBe('NODE');
  expect(script(6, { BOINC_BLAHP_STATUS_MAX_AGE: '4000' })).toBe('NODE');
  expect(script(6, { BOINC_BLAHP_STATUS_MAX_AGE: undefined })).toBe(idle(6)); // node's default, 30 s
  expect(script(6, { BOINC_GAHP_PROJECT_URL: 'http://127.0.0.1:9/other/' })).toBe('NODE');
  expect(script(6, { BOINC_GAHP_PROJECT_URL: URL.slice(0, -1) })).toBe(idle(6)); // node adds the slash
  expect(script(6, { BOINC_GAHP_PROJECT_URL: ` ${URL}` })).toBe('NODE');
  expect(script(6, { BOINC_GAHP_AUTHENTICATOR_FILE: ' ' })).toBe('NODE');
  expect(script(6, { BOINC_GAHP_STATE_DIR: `${path.join(dir, 'state')}/../state` })).toBe('NODE');
  expect(script(6, { BOINC_GAHP_STATE_DIR: `${path.join(dir, 'state')} ` })).toBe('NODE');
  // node's default state directory: $XDG_STATE_HOME/boinc-gahp, else $HOME/.local/state/boinc-gahp.
  fs.mkdirSync(path.join(dir, 'xdg'));
  fs.symlinkSync(path.join(dir, 'state'), path.join(dir, 'xdg', 'boinc-gahp'));
  fs.mkdirSync(path.join(dir, '.local', 'state'), { recursive: true });
  fs.symlinkSync(path.join(dir, 'state'), path.join(dir, '.local', 'state', 'boinc-gahp'));
  expect(script(6, { BOINC_GAHP_STATE_DIR: undefined, XDG_STATE_HOME: path.join(dir, 'xdg') })).toBe(idle(6));
  expect(script(6, { BOINC_GAHP_STATE_DIR: undefined })).toBe(idle(6));
  expect(script(6, { BOINC_GAHP_STATE_DIR: undefined, XDG_STATE_HOME: dir })).toBe('NODE');
  expect(script(6, { BOINC_GAHP_STATE_DIR: undefined, HOME: '' })).toBe('NODE');
  // Without blahp's loader, node reads blah.config itself: nothing is answered here.
  fs.renameSync(path.join(libexec, 'blah_load_config.sh'), path.join(dir, 'loader'));
  try {
    expect(script(6)).toBe('NODE');
  } finally {
    fs.renameSync(path.join(dir, 'loader'), path.join(libexec, 'blah_load_config.sh'));
  }
  // Ids: anything but one well-formed `boinc/<job>` (after -w) goes to node.
  // `_06` is not job 6 for node (it would look for a job named `..._06`).
  for (const bad of [`boinc/${BATCH}_06`, name(6), `boinc/${BATCH}_6/`, `boinc/../${BATCH}_6`, `boinc/${BATCH.toUpperCase()}_6`, `boinc/${BATCH}_6\n`, `boinc/${BATCH}_12345678`]) {
    expect(script(bad)).toBe('NODE');
  }
  const r = spawnSync(path.join(libexec, 'boinc_status.sh'), ['-w', id(6), id(0)], { env, encoding: 'utf8' });
  expect(r.stdout).toBe('NODE\n');
  const w = spawnSync(path.join(libexec, 'boinc_status.sh'), ['-w', id(6)], { env, encoding: 'utf8' });
  expect(w.stdout).toBe(`${idle(6)}\n`);
});

test('a torn or foreign line is not printed', () => {
  refresh(undefined, { 7: 'UNSENT' });
  const snapFile = path.join(ctx.cfg.paths.jobs, BATCH, '7.snap');
  const text = fs.readFileSync(snapFile, 'utf8');
  expect(script(7)).toBe(idle(7));
  fs.writeFileSync(snapFile, text.slice(0, -1)); // no last newline
  expect(script(7)).toBe('NODE');
  fs.writeFileSync(snapFile, text.replace('0[', '$(touch x)['));
  expect(script(7)).toBe('NODE');
  const finalFile = path.join(ctx.cfg.paths.jobs, BATCH, '7.final');
  fs.writeFileSync(finalFile, '');
  expect(script(7)).toBe('NODE');
});
