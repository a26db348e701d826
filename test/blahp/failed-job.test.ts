/**
 * A job BOINC gave up on, from a server that reports failed instances (the test server's
 * reportFailedJobs; a real BOINC server does not, see lifecycle.test.ts): held with its
 * exit status in the reason, and the instance's stderr appended to Err before the hold.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jobDir, nameOf, blahpEnvForFile } from './support.js';
import { stderrFilePattern } from '../../fixtures/test-server/index.js';

const LONG = 120_000;
const env = blahpEnvForFile({ reportFailedJobs: true });

test('held with the exit status; the stderr is in Err', async () => {
  const iwd = jobDir(env(), 'failing', 'first "line" <here>\nsecond\n');
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'failing', Iwd: iwd, TransferInput: 'in', Out: 'job.out', Err: 'job.err', JobDirectory: iwd });
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  env().server.advanceJob(nameOf(id), 'DONE');
  let status: number | undefined;
  let reason: unknown;
  const until = Date.now() + 30_000;
  while (status !== 5 && Date.now() < until) {
    const st = await env().blahpd.status(id);
    expect(st.problem).toBeUndefined();
    status = st.answer?.jobStatus;
    reason = st.answer?.ad?.get('HoldReason');
    if (status !== 5) {
      // Until the details are in, the job reads as running.
      expect(status).toBe(2);
      await new Promise((r) => setTimeout(r, 300));
    }
  }
  expect(status).toBe(5);
  expect(reason).toMatch(/^BOINC gave up on job \S+: its instance ended with exit status 7 \(its stderr is in job\.err\)$/);
  expect(fs.readFileSync(path.join(iwd, 'job.err'), 'utf8')).toMatch(stderrFilePattern('failing: fatal error <&> in "first "line" <here>"\nexit 7\n', 7));
}, LONG);
