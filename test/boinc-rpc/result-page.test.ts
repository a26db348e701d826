/**
 * result.php through BoincClient.instanceStderr against the test server (real HTTP on
 * 127.0.0.1; docs/boinc-server.md, "A failed instance's stderr"): the stderr of a failed
 * instance, which the real query_completed_job cannot give, read from the instance's page
 * logged in by the authenticator as the `auth` cookie and unescaped; the 302 to
 * login_form.php without a login is a clear error; an instance not over shows none. The
 * authenticator appears in no log line or message.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { rejection } from '../support/rpc-errors.js';
import { serverAndClients } from '../support/rpc-clients.js';

const bed = serverAndClients('boinc-rpc-result-page-');
const { client } = bed;

/** One job of app `failing` whose input's first line is `line`; its query_batch id. */
async function submitFailing(c: BoincClient, batchName: string, line: string): Promise<{ name: string; id: number }> {
  const batchId = await c.createBatch({ batchName, appName: 'failing', expireTime: Math.floor(Date.now() / 1000) + 3600 });
  const p = path.join(bed.tmp, batchName);
  fs.writeFileSync(p, `${line}\n`);
  const physName = `condorv_${crypto.createHash('md5').update(`${line}\n`).digest('hex')}`;
  const absent = await c.queryFiles({ physNames: [physName] });
  await c.uploadFiles({ files: absent.map(() => ({ path: p, physName })), batchId });
  const name = `${batchName}_0`;
  await c.submitBatch({ batchId, batchName, appName: 'failing', jobs: [{ name, commandLine: '', inputFiles: [physName] }] });
  const job = (await c.queryBatch({ batchName })).jobs.find((j) => j.name === name)!;
  return { name, id: job.id };
}

test("a failed instance's stderr, from its page with the cookie, unescaped; query_completed_job dies for it", async () => {
  const c = client();
  const job = await submitFailing(c, `rp_${Date.now()}`, `it's "quoted" <&amp;>`);
  // Not over yet: the page shows no stderr.
  const [unsent] = await c.queryJob(job.id);
  expect(await c.instanceStderr(unsent!.id)).toBeUndefined();
  bed.server.advanceJob(job.name, 'DONE');
  await bed.server.settled();
  const [instance] = await c.queryJob(job.id);
  expect(instance!.state).toBe('Error while computing');
  const stderr = await c.instanceStderr(instance!.id);
  expect(stderr).toMatch(/^<core_client_version>8\.3\.0<\/core_client_version>\n<!\[CDATA\[\n[\s\S]*\n\]\]>\n$/);
  expect(stderr).toContain(`failing: fatal error <&> in "it's "quoted" <&amp;>"\nexit 7\n`);
  const page = bed.server.rpcLog().filter((e) => e.rpc === 'result_page').at(-1)!;
  expect(page.raw).toBe(`/boinc_test/result.php?resultid=${instance!.id}`);
  // As BOINC's handler: no stderr there for a job without a canonical instance.
  await expect(c.queryCompletedJob(job.name)).rejects.toThrow();
});

test('no login (an authenticator the pages do not know): the 302 to login_form.php is an error', async () => {
  const job = await submitFailing(client(), `rp_${Date.now()}b`, 'second');
  bed.server.advanceJob(job.name, 'DONE');
  await bed.server.settled();
  const [instance] = await client().queryJob(job.id);
  const stranger = 'f'.repeat(32);
  const e = await rejection(client(stranger).instanceStderr(instance!.id));
  expect(e.code).toBe('refused');
  expect(e.options.httpStatus).toBe(302);
  expect(e.message).toMatch(/login_form\.php.*did not take the authenticator/);
  expect(e.message).not.toContain(stranger);
});
