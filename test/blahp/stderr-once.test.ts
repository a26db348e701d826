/**
 * The BLAHP fetches a completed job again when its done record is missing (a fetcher
 * killed after the fetch, before writing it): the job's Err file stays as after one fetch
 * (docs/storage.md, "Output files"). The installed scripts run as blahpd runs them.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile();


/** The files under dir whose name ends with suffix (paths). */
function findFiles(dir: string, suffix: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name.endsWith(suffix)) out.push(path.join(e.parentPath, e.name));
  }
  return out;
}

test('a completed job fetched again (its done record lost) keeps its Err file as after one fetch', async () => {
  const input = 'fetched twice\n';
  const iwd = jobDir(env(), 'twice', input);
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Out: 'job.out', Err: 'job.err', TransferInput: 'in', TransferOutput: 'out' });
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  env().server.advanceJob(nameOf(id), 'DONE');
  expect((await waitForStatus(env(), id, 4)).answer!.jobStatus).toBe(4);
  const err = path.join(iwd, 'job.err');
  const once = fs.readFileSync(err, 'utf8');
  expect(once).toMatch(stderrFilePattern(`uppercase: ${input.length} bytes\n`));

  // As if the fetcher died after the fetch: no done record, so the job is fetched again.
  // Nor its quick status line (gahp/blahp/quick.ts), which is written after the record.
  const done = findFiles(path.join(env().stateDir, 'blahp'), '.done.json');
  expect(done).toHaveLength(1);
  fs.rmSync(done[0]!);
  fs.rmSync(done[0]!.replace(/\.done\.json$/, '.final'));
  env().server.clearRpcLog();
  expect((await waitForStatus(env(), id, 4)).answer!.jobStatus).toBe(4);
  expect(fs.existsSync(done[0]!)).toBe(true);
  // It was fetched again: the completed instance asked for and the output downloaded.
  const rpcs = env().server.rpcLog().map((e) => e.rpc);
  expect(rpcs).toContain('query_completed_job');
  expect(env().server.rpcLog().some((e) => e.script === 'get_output.php')).toBe(true);
  expect(fs.readFileSync(err, 'utf8')).toBe(once);
  expect(fs.readFileSync(path.join(iwd, 'out'), 'utf8')).toBe(input.toUpperCase());
  expect(fs.readdirSync(iwd).sort()).toEqual(['in', 'job.err', 'job.out', 'out']);
}, LONG);
