/**
 * Issue 42, item 4, on the blahpd scripts route: with the BLAHP's keeping turned off
 * (`boinc_keep_files = no`) on a project whose daemons delete a done job's files (the test
 * server's `daemons: 'static'`), a job whose output the project deleted before the
 * background worker fetched it is held at once with the reason of gahp/output/gone.ts:
 * which file, that the project deleted or moved it, what can be set against it. One fetch,
 * no attempts after it, no result kept, never "release the job to fetch it". Through the
 * installed scripts run by the blahpd emulator.
 */
import { jobDir, nameOf, blahpEnvForFile, waitForStatus } from './support.js';

const env = blahpEnvForFile({ daemons: 'static', deleteAfterDoneSeconds: 3600 }, { boinc_keep_files: 'no' });

test('a job whose output the project deleted is held at once saying it is gone and what to set', async () => {
  const iwd = jobDir(env(), 'gone', 'deleted before fetched\n');
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, Out: 'job.out', Err: 'job.err', TransferInput: 'in', TransferOutput: 'out' });
  expect(sub.problem).toBeUndefined();
  const id = sub.jobId!;
  const name = nameOf(id);
  for (let i = 0; i < 600 && !env().server.jobs().some((j) => j.name === name); i++) await new Promise((r) => setTimeout(r, 50));
  // Keeping off: nothing marked no_delete.
  expect(env().server.rpcLog().find((e) => e.rpc === 'submit_batch')!.raw).not.toContain('no_delete');
  env().server.advanceJob(name, 'DONE');
  await env().server.settled();
  env().server.runDaemons(); // the project's file_deleter: the output goes before anyone asks
  env().server.clearRpcLog();

  const st = await waitForStatus(env(), id, 5);
  expect(st.answer?.jobStatus).toBe(5);
  const reason = String(st.answer?.ad?.get('HoldReason'));
  expect(reason).toMatch(
    new RegExp(`^BOINC finished job ${name} but get_output failed: output out of job ${name} is gone from the BOINC server: the project deleted or moved it before it was fetched \\(.*no such file.*\\)\\. It cannot be fetched any more: the job has to run again\\.`),
  );
  expect(reason).toMatch(/--keep-files yes.*--preserve_result_files.*<delete_delay_hours>.*batch-collect/);
  expect(reason).not.toMatch(/release the job|attempts|kept on BOINC/);
  // One fetch: a gone output is not tried again.
  expect(env().server.rpcLog().filter((e) => e.rpc === 'workunit_file')).toHaveLength(1);
}, 180_000);
