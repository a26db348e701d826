/**
 * BOINC_SUBMIT's progress events (GahpServices.progress), through the CLI's in-process GAHP
 * (GahpClient.inProcess, what `boinc-gahp submit` uses) against the test server, with real
 * files: per phase they start at 0, never go back, keep their totals, come at most every
 * 100 ms, and end at the totals; nothing of them reaches the protocol.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { PROGRESS_INTERVAL_MS, type SubmitProgressEvent } from '../../gahp/staging/progress.js';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';
import { submitLine, writeInput, type LineJob } from './support.js';

// The compiled build: the GAHP's hash worker threads run dist/ code.
type ClientModule = typeof import('../../gahp/cli/gahp-client.js');
const loadClient = async (): Promise<ClientModule> => (await import(path.join(REPO_ROOT, 'dist', 'gahp', 'cli', 'gahp-client.js'))) as ClientModule;

let server: ExtendedTestBoincServer;
let dir: string;
let stateDir: string;

beforeAll(async () => {
  // Some latency per request, so the uploads spread over several events.
  server = await startTestServer({ latencyMs: 40 });
  dir = makeTempDir('boinc-gahp-progress-');
  stateDir = makeTempDir('boinc-gahp-progress-state-');
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(stateDir, { recursive: true, force: true });
});

interface Seen extends SubmitProgressEvent {
  at: number;
}

function checkPhase(events: Seen[], phase: 'hash' | 'upload', totalFiles: number, totalBytes: number): void {
  const ev = events.filter((e) => e.phase === phase);
  expect(ev.length).toBeGreaterThanOrEqual(2);
  expect(ev[0]).toMatchObject({ doneFiles: 0, doneBytes: 0, totalFiles, totalBytes });
  expect(ev.at(-1)).toMatchObject({ doneFiles: totalFiles, doneBytes: totalBytes, totalFiles, totalBytes });
  for (let i = 1; i < ev.length; i++) {
    const [a, b] = [ev[i - 1]!, ev[i]!];
    expect(b.totalFiles).toBe(totalFiles);
    expect(b.totalBytes).toBe(totalBytes);
    expect(b.doneFiles).toBeGreaterThanOrEqual(a.doneFiles);
    expect(b.doneBytes).toBeGreaterThanOrEqual(a.doneBytes);
    expect(b.doneFiles).toBeLessThanOrEqual(totalFiles);
    expect(b.doneBytes).toBeLessThanOrEqual(totalBytes);
    // Bounded rate: only the last event may follow the one before sooner than the interval.
    if (i < ev.length - 1) expect(b.at - a.at).toBeGreaterThanOrEqual(PROGRESS_INTERVAL_MS - 2);
  }
}

test('hash and upload progress arrive in order, at a bounded rate, and end at the totals', async () => {
  const size = 256 * 1024;
  const files: string[] = [];
  for (let i = 0; i < 80; i++) files.push(writeInput(dir, `in/f${i}.dat`, Buffer.alloc(size, i)));
  // Two more paths with the content of f0: hashed each, uploaded once, both counted.
  files.push(writeInput(dir, 'in/copy1.dat', Buffer.alloc(size, 0)), writeInput(dir, 'in/copy2.dat', Buffer.alloc(size, 0)));
  const totalBytes = files.length * size;

  const events: Seen[] = [];
  const protocol: string[] = [];
  const { GahpClient } = await loadClient();
  const client = GahpClient.inProcess({ stateDir, progress: (e) => events.push({ ...e, at: Date.now() }) });
  client.onTraffic = (_d, line) => protocol.push(line);
  try {
    await client.startup();
    await client.selectProject(server.url, server.authenticator);
    const submit = async (batch: string) => {
      const jobs: LineJob[] = files.map((p, i) => ({ name: `${batch}#1.${i}`, inputs: [[p, 'in']] }));
      events.length = 0;
      const t0 = Date.now();
      expect(await client.call('BOINC_SUBMIT', submitLine(batch, 'uppercase', jobs).split(' '))).toEqual([]);
      // Everything was reported before the result.
      const reqIds = new Set(events.map((e) => e.reqId));
      expect(reqIds.size).toBe(1);
      expect(events.every((e) => e.at >= t0)).toBe(true);
      return [...reqIds][0]!;
    };

    // Cold: every file hashed and uploaded.
    const r1 = await submit(`condor#progress#uppercase#${Date.now()}a`);
    checkPhase(events, 'hash', files.length, totalBytes);
    checkPhase(events, 'upload', files.length, totalBytes);
    expect(events.filter((e) => e.phase === 'upload').length).toBeGreaterThanOrEqual(3);

    // Warm: hashes cached, files on the server; still a complete pair of phases.
    const r2 = await submit(`condor#progress#uppercase#${Date.now()}b`);
    expect(r2).not.toBe(r1);
    checkPhase(events, 'hash', files.length, totalBytes);
    checkPhase(events, 'upload', files.length, totalBytes);

    // None of it on the protocol.
    expect(protocol.some((l) => /hash|upload|progress/i.test(l) && !l.includes('BOINC_SUBMIT'))).toBe(false);
  } finally {
    await client.close();
  }
});
