/**
 * An upload's file parts against a real loopback HTTP server: the body carries each file's
 * bytes exactly, and a file whose size is not the one its part was announced with (it grew
 * or shrank after it was stat'ed) fails the request with FileChangedError instead of a body
 * of the wrong length. Small files and one larger than a read chunk (read in several)
 * both.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { HttpClient, FileChangedError } from '../../boinc-rpc/http.js';
import { requestForm, type FilePart } from '../../boinc-rpc/multipart.js';

const SMALL = 1000;
/** Larger than a read chunk (64 KiB, boinc-rpc/multipart.ts): read in several. */
const BIG = 600 * 1024;

let server: http.Server;
let url: string;
let tmp: string;
let connections: HttpClient;
/** Bodies the server received whole. */
const bodies: Buffer[] = [];

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'upload-changed-'));
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => undefined);
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks));
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/upload`;
});

beforeEach(() => {
  connections = new HttpClient();
  bodies.length = 0;
});

afterEach(() => connections.destroy());

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  fs.rmSync(tmp, { recursive: true, force: true });
});

function file(name: string, bytes: number): string {
  const p = path.join(tmp, name);
  const buf = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) buf[i] = (i * 7 + name.length) & 0xff;
  fs.writeFileSync(p, buf);
  return p;
}

const post = async (files: FilePart[]) => {
  const body = requestForm('<req/>', files);
  try {
    return await connections.post(url, body.form, { timeouts: { idle: 10_000 }, userAgent: 'test', maxReplyBytes: 1024 });
  } finally {
    body.close();
  }
};

test('each file part carries the file exactly, small and large', async () => {
  const a = file('a', SMALL);
  const b = file('b', BIG);
  const c = file('c', SMALL + 1);
  const reply = await post([
    { path: a, size: SMALL, name: 'a' },
    { path: b, size: BIG, name: 'b' },
    { path: c, size: SMALL + 1, name: 'c' },
  ]);
  expect(reply.status).toBe(200);
  expect(bodies).toHaveLength(1);
  const body = bodies[0]!;
  for (const p of [a, b, c]) expect(body.includes(Buffer.concat([Buffer.from('\r\n\r\n'), fs.readFileSync(p), Buffer.from('\r\n--')]))).toBe(true);
});

test.each([
  ['a small file that grew', SMALL, SMALL - 1],
  ['a small file that shrank', SMALL, SMALL + 1],
  ['a large file that grew', BIG, BIG - 1],
  ['a large file that shrank', BIG, BIG + 1],
])('%s fails the request with FileChangedError', async (_what, actual, announced) => {
  const ok = file('ok', SMALL);
  const changed = file('changed', actual);
  const err = await post([
    { path: ok, size: SMALL, name: 'ok' },
    { path: changed, size: announced, name: 'changed' },
  ]).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(FileChangedError);
  expect((err as Error).message).toContain(changed);
  expect(bodies).toHaveLength(0);
});
