/**
 * get_output3.php through BoincClient against the test server (real HTTP on 127.0.0.1, real
 * files; docs/boinc-server.md, "Batch-collect projects: get_output3.php"): a kept output by
 * result id and index, a batch's zip, each logged in by the authenticator as the `auth`
 * cookie. What is not a file (the 302 to login_form.php, the "bad WU name" page, a file that
 * is not there, no batch directory) is a clear error with nothing written, never file
 * content; and the authenticator appears in no log line or message.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { rejection } from '../support/rpc-errors.js';
import { serverAndClients } from '../support/rpc-clients.js';

const bed = serverAndClients('boinc-rpc-get-output3-');
const { client } = bed;
let seq = 0;

/** A done batch of `uppercase` jobs with these names (inputs `in <name>`); its canonical result ids by job. */
async function doneBatch(c: BoincClient, batchName: string, jobNames: string[]): Promise<{ batchId: number; resultIds: Map<string, number> }> {
  const batchId = await c.createBatch({ batchName, appName: 'uppercase', expireTime: Math.floor(Date.now() / 1000) + 3600 });
  const inputs = jobNames.map((n) => {
    const p = path.join(bed.tmp, `in-${seq++}`);
    fs.writeFileSync(p, `in ${n}\n`);
    return { path: p, physName: `condorv_${crypto.createHash('md5').update(`in ${n}\n`).digest('hex')}` };
  });
  const absent = await c.queryFiles({ physNames: inputs.map((f) => f.physName) });
  await c.uploadFiles({ files: absent.map((i) => inputs[i]!), batchId });
  await c.submitBatch({ batchId, batchName, appName: 'uppercase', jobs: jobNames.map((name, i) => ({ name, commandLine: '', inputFiles: [inputs[i]!.physName] })) });
  bed.server.advanceAll(batchName, 'DONE');
  await bed.server.settled();
  const resultIds = new Map<string, number>();
  for (const n of jobNames) resultIds.set(n, (await c.queryCompletedJob(n)).canonicalResultId!);
  return { batchId, resultIds };
}

test('get_file: a kept output by canonical result and index, sent with the cookie', async () => {
  const c = client();
  const job = `gahp_${Date.now()}_0`;
  const { resultIds } = await doneBatch(c, `gahp_${Date.now()}`, [job]);
  bed.server.assimilateCollect(job);
  const dest = path.join(bed.tmp, 'out-file');
  const { bytes } = await c.fetchCollectedFile({ resultId: resultIds.get(job)!, index: 0, destPath: dest });
  expect(fs.readFileSync(dest, 'latin1')).toBe(`IN ${job.toUpperCase()}\n`);
  expect(bytes).toBe(fs.statSync(dest).size);
  const sent = bed.server.rpcLog().filter((e) => e.script === 'get_output3.php');
  expect(sent.at(-1)!.rpc).toBe('get_file');
});

test('no login (an authenticator the pages do not know): the 302 to login_form.php is an error, not a file', async () => {
  const c = client();
  const job = `gahp_${Date.now()}_1`;
  const { resultIds } = await doneBatch(c, `gahp_${Date.now()}b`, [job]);
  bed.server.assimilateCollect(job);
  const stranger = 'f'.repeat(32);
  const dest = path.join(bed.tmp, 'out-302');
  const e = await rejection(client(stranger).fetchCollectedFile({ resultId: resultIds.get(job)!, index: 0, destPath: dest }));
  expect(e.code).toBe('refused');
  expect(e.options.httpStatus).toBe(302);
  expect(e.message).toMatch(/login_form\.php.*did not take the authenticator/);
  expect(e.message).not.toContain(stranger);
  expect(fs.existsSync(dest)).toBe(false);
});

test('a job name BOINC\'s check refuses: the "bad WU name" page is an error (code bad-name); the batch zip has its output', async () => {
  const c = client();
  const batchName = `condor#schedd@h#uppercase#${Date.now()}`;
  const job = `${batchName}#123.0`;
  const { batchId, resultIds } = await doneBatch(c, batchName, [job]);
  bed.server.assimilateCollect(job);
  const dest = path.join(bed.tmp, 'out-bad-name');
  const e = await rejection(c.fetchCollectedFile({ resultId: resultIds.get(job)!, index: 0, destPath: dest }));
  expect(e.code).toBe('bad-name');
  expect(e.message).toBe('get_output3 failed: bad WU name');
  expect(fs.existsSync(dest)).toBe(false);

  const zip = path.join(bed.tmp, 'batch.zip');
  await c.fetchBatchZip({ batchId, destPath: zip });
  const { SafeZip } = await import('../../gahp/output/unzip.js');
  const z = await SafeZip.open(zip);
  try {
    expect(z.files).toEqual([`${job}__file_out`]);
  } finally {
    z.close();
  }
});

test('a file that is not there (not assimilated yet) and a batch without a directory: errors with code no-such-file, nothing written', async () => {
  const c = client();
  const job = `gahp_${Date.now()}_2`;
  const { batchId, resultIds } = await doneBatch(c, `gahp_${Date.now()}c`, [job]);
  const dest = path.join(bed.tmp, 'out-missing');
  const e = await rejection(c.fetchCollectedFile({ resultId: resultIds.get(job)!, index: 0, destPath: dest }));
  expect(e.code).toBe('no-such-file');
  expect(fs.existsSync(dest)).toBe(false);
  const z = await rejection(c.fetchBatchZip({ batchId, destPath: path.join(bed.tmp, 'none.zip') }));
  expect(z.code).toBe('no-such-file');
  expect(z.message).toBe('get_output3 failed: no batch dir');
  expect(fs.existsSync(path.join(bed.tmp, 'none.zip'))).toBe(false);
});

test('retire_batch removes the batch directory: its zip is gone', async () => {
  const c = client();
  const batchName = `gahp_${Date.now()}d`;
  const job = `${batchName}_0`;
  const { batchId } = await doneBatch(c, batchName, [job]);
  bed.server.assimilateCollect(job);
  await c.fetchBatchZip({ batchId, destPath: path.join(bed.tmp, 'before.zip') });
  await c.retireBatch({ batchName });
  const e = await rejection(c.fetchBatchZip({ batchId, destPath: path.join(bed.tmp, 'after.zip') }));
  expect(e.code).toBe('no-such-file');
});
