/**
 * The blahpd scripts route on a batch-collect project (the test server with `daemons:
 * 'collect'`): the installed scripts run as blahpd runs them; a done job's output, moved by
 * the assimilator out of the upload hierarchy, is fetched by the background worker from
 * get_output3.php (get_file: the BLAHP's job names pass BOINC's check) and the job is
 * completed (4) with it in place.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const env = blahpEnvForFile({ daemons: 'collect', deleteAfterDoneSeconds: 0.2 });

test('a job whose output the assimilator moved completes with it in place', async () => {
  const input = 'moved by the assimilator\n';
  const iwd = jobDir(env(), 'collected', input);
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Out: 'job.out', Err: 'job.err', TransferInput: 'in', TransferOutput: 'out' });
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  expect(nameOf(id)).toMatch(/^[\w\-. ]{1,255}$/);
  let job: { batchId: number } | undefined;
  for (let i = 0; i < 600 && !job; i++) {
    job = env().server.jobs().find((j) => j.name === nameOf(id));
    if (!job) await new Promise((r) => setTimeout(r, 50));
  }
  expect(job).toBeDefined();
  env().server.advanceJob(nameOf(id), 'DONE');
  await env().server.settled();
  const kept = path.join(env().server.dataDir, 'results', String(job!.batchId), `${nameOf(id)}__file_out`);
  for (let i = 0; i < 600 && !fs.existsSync(kept); i++) await new Promise((r) => setTimeout(r, 50));
  expect(fs.existsSync(kept)).toBe(true);

  env().server.clearRpcLog();
  expect((await waitForStatus(env(), id, 4)).answer!.jobStatus).toBe(4);
  expect(fs.readFileSync(path.join(iwd, 'out'), 'utf8')).toBe(input.toUpperCase());
  expect(env().server.rpcLog().filter((e) => e.rpc === 'get_file').length).toBe(1);
}, 180_000);
