/**
 * A job's stderr file gets the app's stderr: what BOINC's client wrapped in
 * `<stderr_txt>` ... `</stderr_txt>` (with every byte above 127 written as `&#N;`), and the
 * server then HTML-escaped inside CDATA, comes back as the bytes the app wrote. The test
 * server reports stderr like the real client and server do (docs/boinc-server.md).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sampleApps } from '../../fixtures/test-server/index.js';
import { batchName, echoErrApp, esc, jobName, startEnv, submitBatch, type Env } from './helpers.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv({ apps: [...sampleApps, echoErrApp] });
});

afterAll(async () => {
  await env?.close();
});

const FINISH = /\d\d:\d\d:\d\d \(1\): called boinc_finish\(0\)\n$/;

test('the stderr file holds the text inside <stderr_txt>, non-ASCII bytes and markup as the app wrote them', async () => {
  // (A literal `&#233;` in an app's stderr cannot be told from the client's escaping: left out.)
  const text = 'na\u00efve caf\u00e9 \u2713 <stderr_txt> & "q" &amp;\nsecond line\n';
  const batch = batchName('echoerr');
  const job = jobName(batch, 7, 0);
  await submitBatch(env, batch, 'echoerr', [{ name: job, inputs: [Buffer.from(text, 'utf8')] }]);
  env.server.advanceAll(batch);
  await env.server.settled();
  const iwd = path.join(env.dir, 'iwd');
  fs.mkdirSync(iwd);
  expect(await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err ALL 0`)).toEqual(['NULL', '0', '1.000000', '1.000000']);
  const got = fs.readFileSync(path.join(iwd, 'job.err'));
  const gotText = got.toString("utf8");
  // The app's bytes, then the BOINC runtime's own last line, and nothing of the wrapper.
  expect(got.subarray(0, Buffer.byteLength(text)).equals(Buffer.from(text, 'utf8'))).toBe(true);
  expect(gotText.slice(text.length)).toMatch(new RegExp(`^${FINISH.source}`));
  expect(gotText).not.toMatch(/^<stderr_txt>|<\/stderr_txt>\s*$/);
  expect(gotText).not.toContain('&#195;');
});

test('appStderr: client lines before the wrapper are dropped, a reply cut short keeps what came, bytes that are not UTF-8 stay as they were, text without a wrapper is kept', async () => {
  const { appStderr } = await import('../../gahp/output/stderr-text.js');
  expect(appStderr('<core_client_version>8.0.2</core_client_version>\n<message>\nexit 1\n</message>\n<stderr_txt>\nsome err\n\n</stderr_txt>').toString()).toBe('some err\n');
  expect(appStderr('<stderr_txt>\nhalf a li').toString()).toBe('half a li');
  expect(appStderr('<stderr_txt>\nLatin-1: caf&#233;\n</stderr_txt>').equals(Buffer.from('Latin-1: caf\u00e9', 'latin1'))).toBe(true);
  expect(appStderr('<stderr_txt>\nno newline at the end\n</stderr_txt>').toString()).toBe('no newline at the end');
  expect(appStderr('plain text \u00e9\n').toString()).toBe('plain text \u00e9\n');
  expect(appStderr('').length).toBe(0);
});
