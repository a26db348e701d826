/**
 * The protocol client of `submit`, the demo and the subcommands (gahp/cli/gahp-client.ts)
 * reads the GAHP's output with the GAHP's own framing and tokenizing: a character split
 * across two reads stays whole, an escaped newline stays inside its token, a response
 * prefix holding a space or backslash is recognised, and the authenticator is masked in
 * the traffic it reports whatever escaping it needed. Against the real bin/boinc-gahp, and
 * against a scripted GAHP on in-memory streams for what the real one never prints.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { GahpClient, GahpResultError } from '../../gahp/cli/gahp-client.js';
import { joinTokens } from '../../gahp/protocol/escape.js';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { batchName, jobName } from '../commands/helpers.js';

let server: ExtendedTestBoincServer;
let dir: string;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-gahp-client-');
});

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const withTimeout = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms).unref())]);

test('bin/boinc-gahp: a response prefix with a space and a backslash is recognised', async () => {
  const client = GahpClient.spawn(['--state-dir', path.join(dir, 'state-prefix')]);
  try {
    await withTimeout(client.startup('GAHP \\x:'), 15_000, 'start-up with the prefix "GAHP \\x:"');
    await client.selectProject(server.url, server.authenticator);
    expect(await withTimeout(client.call('BOINC_PING', []), 15_000, 'BOINC_PING')).toEqual([]);
  } finally {
    await client.close();
  }
}, 60_000);

test('bin/boinc-gahp: multibyte text split across reads arrives whole', async () => {
  const client = GahpClient.spawn(['--state-dir', path.join(dir, 'state')]);
  try {
    await client.startup();
    await client.selectProject(server.url, server.authenticator);
    // 40 submits failing on a missing input file whose path is ~12 KB of 3-byte characters:
    // their results come back in one RESULTS write of ~480 KB, which the pipe delivers in
    // 64 KiB reads that cut characters in two.
    const missing = (i: number) => path.join(dir, `${i}-` + Array.from({ length: 12 }, () => '\u65e5\u672c\u8a9e'.repeat(80)).join('/'));
    const calls: Array<Promise<string>> = [];
    for (let i = 0; i < 40; i++) {
      const b = batchName('uppercase');
      // <batch> <app> <njobs> (<job> <nargs> <ninputs> (<src> <dst>)...)... and six NULL parameters.
      const args = [b, 'uppercase', '1', jobName(b, 1, i), '0', '1', missing(i), 'in', ...Array<string>(6).fill('NULL')];
      calls.push(client.call('BOINC_SUBMIT', args).then(() => 'succeeded', (e: Error) => (e instanceof GahpResultError ? e.message : `other: ${e.message}`)));
    }
    const messages = await withTimeout(Promise.all(calls), 60_000, 'the 40 results');
    messages.forEach((m, i) => {
      expect(m).not.toContain('\ufffd');
      // The message names the path (cut in the middle when long, never re-encoded).
      expect(m).toContain(missing(i).slice(0, 200));
      expect(m).toContain(missing(i).slice(-200));
    });
  } finally {
    await client.close();
  }
}, 90_000);

/** A scripted GAHP on in-memory streams: prints what the test says, byte by byte if asked. */
function scriptedGahp(): { client: GahpClient; requests: string[]; print(bytes: Buffer, oneByOne?: boolean): Promise<void>; finish(): Promise<void> } {
  const toGahp = new PassThrough();
  const fromGahp = new PassThrough();
  const requests: string[] = [];
  toGahp.setEncoding('utf8');
  toGahp.on('data', (d: string) => requests.push(...d.split('\n').filter(Boolean)));
  const client = GahpClient.overStreams(toGahp, fromGahp);
  return {
    client,
    requests,
    async finish() {
      fromGahp.end();
      await client.close();
    },
    async print(bytes, oneByOne = false) {
      if (!oneByOne) {
        fromGahp.write(bytes);
        return;
      }
      for (const b of bytes) {
        fromGahp.write(Buffer.from([b]));
        await new Promise((r) => setImmediate(r));
      }
    },
  };
}

test('a token with an escaped newline, CR and backslash, delivered one byte per read, comes back as that token', async () => {
  const g = scriptedGahp();
  const token = 'line one\nline two\r\n\\ end \u00e9\u65e5\ud83d\ude00';
  await g.print(Buffer.from('$GahpVersion: 1.0.0 Jan 01 2030 scripted $\n'));
  await g.client.banner;
  const reqId = g.client.allocReqId();
  const result = g.client.awaitResult(reqId);
  const reply = g.client.send('RESULTS');
  await g.print(Buffer.from(`S 1\n${reqId} ${joinTokens(['NULL', token, 'x'])}\n`, 'utf8'), true);
  expect(await reply).toBe('S 1');
  expect(await result).toEqual(['NULL', token, 'x']);
  await g.finish();
});

test('the authenticator is masked in the reported traffic also where escaping changed it', async () => {
  const g = scriptedGahp();
  const seen: string[] = [];
  g.client.onTraffic = (dir, line) => seen.push(`${dir} ${line}`);
  await g.print(Buffer.from('$GahpVersion: 1.0.0 Jan 01 2030 scripted $\n'));
  await g.client.banner;
  const auth = 'abc\\def\\\\ghi';
  const done = g.client.selectProject('http://127.0.0.1:1/p/', auth);
  await g.print(Buffer.from('S\n'));
  await done;
  expect(g.requests.join('\n')).toContain(joinTokens([auth]));
  expect(seen.join('\n')).toContain('BOINC_SELECT_PROJECT http://127.0.0.1:1/p/ ***');
  for (const part of ['abc', 'def', 'ghi']) expect(seen.join('\n')).not.toContain(part);
  await g.finish();
});

test('an error result naming a missing batch carries the name as the gridmanager reads it (missingBatch); other errors carry none', async () => {
  const client = GahpClient.inProcess({ stateDir: path.join(dir, 'state-missing') });
  try {
    await client.startup();
    await client.selectProject(server.url, server.authenticator);
    // A name that holds the very words: the name is everything after their first occurrence.
    const missing = `${batchName('uppercase')} no batch named x`;
    const gone = await client.call('BOINC_QUERY_BATCHES', ['0', '1', missing]).then(() => undefined, (e: unknown) => e);
    expect(gone).toBeInstanceOf(GahpResultError);
    expect((gone as GahpResultError).missingBatch).toBe(missing);

    const b = batchName('uppercase');
    const args = [b, 'uppercase', '1', jobName(b, 1, 0), '0', '1', path.join(dir, 'no-such-input'), 'in', ...Array<string>(6).fill('NULL')];
    const failed = await client.call('BOINC_SUBMIT', args).then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(GahpResultError);
    expect((failed as GahpResultError).message).toContain('no-such-input');
    expect((failed as GahpResultError).missingBatch).toBeUndefined();
  } finally {
    await client.close();
  }
}, 60_000);
