/**
 * Sizing upload_files bodies (what the GAHP keeps under the project's post_max_size):
 * uploadBodySize, kept file by file, says at every step what uploadBodyBytes says of the
 * same files, and both what the request really carries (its Content-Length, as the
 * bundled test server read it).
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';

let server: ExtendedTestBoincServer;
let tmp: string;
let client: BoincClient;

beforeAll(async () => {
  server = await startTestServer();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'upload-size-'));
  client = new BoincClient({ projectUrl: server.url, authenticator: server.authenticator, timeoutMs: 5000, retries: 0 });
});

afterAll(async () => {
  client.close();
  await server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('kept file by file, the size is uploadBodyBytes of the files so far, across index widths, escapes and a clear', () => {
  const request = { batchId: 12345, deleteTime: 1796826224 };
  const body = client.uploadBodySize(request);
  const files: Array<{ physName: string; size: number }> = [];
  expect(body.bytes).toBe(client.uploadBodyBytes({ ...request, files }));
  // 120 files: part indices of one, two and three digits; names that XML escapes and
  // multipart quotes (& < " and a line break), and one not in ASCII.
  const odd = ['a&b<c', 'quote"d', 'line\nbreak', 'caf\u00e9\u2603'];
  for (let i = 0; i < 120; i++) {
    const f = { physName: i < odd.length ? odd[i]! : `condorv_${i.toString(16).padStart(32, '0')}`, size: (i * 7919) % 100_000 };
    const next = client.uploadBodyBytes({ ...request, files: [...files, f] });
    expect(body.with(f)).toBe(next);
    body.add(f);
    files.push(f);
    expect(body.bytes).toBe(next);
  }
  body.clear();
  expect(body.bytes).toBe(client.uploadBodyBytes({ ...request, files: [] }));
  const f = { physName: 'again', size: 10 };
  expect(body.with(f)).toBe(client.uploadBodyBytes({ ...request, files: [f] }));
  // Without batch_id and delete_time the request field is shorter; the growth is the same.
  const bare = client.uploadBodySize({});
  bare.add(f);
  expect(bare.bytes).toBe(client.uploadBodyBytes({ files: [f] }));
});

test('the size is the Content-Length of the upload_files request sent for those files', async () => {
  const expire = Math.floor(Date.now() / 1000) + 3600;
  const batchId = await client.createBatch({ batchName: `upload-size-${Date.now()}`, appName: 'uppercase', expireTime: expire });
  const body = client.uploadBodySize({ batchId, deleteTime: expire });
  const files = Array.from({ length: 12 }, (_, i) => {
    const content = crypto.randomBytes(100 + i * 37);
    const p = path.join(tmp, `in-${i}`);
    fs.writeFileSync(p, content);
    const physName = `condorv_${crypto.createHash('md5').update(content).digest('hex')}`;
    body.add({ physName, size: content.length });
    return { path: p, physName };
  });
  await client.uploadFiles({ files, batchId, deleteTime: expire });
  const sent = server.rpcLog().filter((e) => e.rpc === 'upload_files').at(-1)!;
  expect(sent.uploaded).toEqual(files.map((f) => f.physName));
  expect(sent.bodyBytes).toBe(body.bytes);
});
