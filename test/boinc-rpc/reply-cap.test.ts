/**
 * The client's limit on RPC replies read into memory (maxReplyBytes), against a real
 * loopback HTTP server: a reply over it fails the call with a 'protocol' error (code
 * 'reply-too-large'), is not retried, and its connection is discarded; replies under it and
 * output files (streamed to disk) are not affected.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincClient, DEFAULT_MAX_REPLY_BYTES } from '../../boinc-rpc/client.js';
import { rejection } from '../support/rpc-errors.js';

type Mode = 'ok' | 'stream' | 'announced';

const LIMIT = 64 * 1024;
const STREAM_TOTAL = 8 * 1024 * 1024;
const OUTPUT_BYTES = 3 * 1024 * 1024;
const OK = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<success>1</success>\n</ping>\n';
const NOISE = Buffer.alloc(64 * 1024, '<br />\n');

let server: http.Server;
let url: string;
let mode: Mode = 'ok';
let posts = 0;
let connections = 0;
/** Per streamed reply: bytes the server wrote, and whether the client closed the connection first. */
const streamed: Array<{ written: number; closedEarly: Promise<boolean> }> = [];
let tmp: string;
const clients: BoincClient[] = [];

function client(extra: { maxReplyBytes?: number } = {}): BoincClient {
  const c = new BoincClient({ projectUrl: url, authenticator: 'secret-auth', timeoutMs: 10_000, retries: 3, retryBaseMs: 5, maxReplyBytes: LIMIT, ...extra });
  clients.push(c);
  return c;
}

/** Writes noise until STREAM_TOTAL or until the client goes away. */
function streamNoise(res: http.ServerResponse): void {
  const entry = { written: 0, closedEarly: new Promise<boolean>((resolve) => res.on('close', () => resolve(!res.writableFinished))) };
  streamed.push(entry);
  res.writeHead(200, { 'content-type': 'text/xml' });
  const more = () => {
    while (entry.written < STREAM_TOTAL && !res.destroyed) {
      entry.written += NOISE.length;
      if (!res.write(NOISE)) {
        res.once('drain', more);
        return;
      }
    }
    if (!res.destroyed) res.end();
  };
  more();
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'reply-cap-'));
  server = http.createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(OUTPUT_BYTES) });
      res.end(Buffer.alloc(OUTPUT_BYTES, 'o'));
      return;
    }
    req.resume();
    req.on('end', () => {
      posts++;
      if (mode === 'ok') {
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(OK);
      } else if (mode === 'stream') {
        streamNoise(res);
      } else {
        // Announces 10 MiB, sends a little, then waits: only the header can tell.
        res.writeHead(200, { 'content-type': 'text/xml', 'content-length': String(10 * 1024 * 1024) });
        res.write(OK.slice(0, 40));
      }
    });
  });
  server.on('connection', (s: Socket) => {
    connections++;
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/proj/`;
});

afterAll(async () => {
  for (const c of clients) c.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  fs.rmSync(tmp, { recursive: true, force: true });
});

beforeEach(() => {
  mode = 'ok';
  posts = 0;
});

test('the default limit is far above the largest reply measured (14.7 MB for 100,000 jobs) and below what node decodes', () => {
  expect(DEFAULT_MAX_REPLY_BYTES).toBeGreaterThanOrEqual(10 * 15_000_000);
  expect(DEFAULT_MAX_REPLY_BYTES).toBeLessThan(512 * 1024 * 1024);
});

test('a streamed reply over the limit: protocol error reply-too-large, not retried, the connection discarded; the next call works', async () => {
  const c = client();
  await c.ping(); // a kept-alive connection exists now
  const before = connections;
  posts = 0;
  mode = 'stream';
  const e = await rejection(c.ping());
  expect(e.kind).toBe('protocol');
  expect(e.code).toBe('reply-too-large');
  expect(e.uncertain).toBe(true);
  expect(e.message).toBe(`ping failed: reply larger than ${LIMIT} bytes, not read (the client's maxReplyBytes)`);
  expect(posts).toBe(1);
  const last = streamed[streamed.length - 1]!;
  expect(await last.closedEarly).toBe(true);
  expect(last.written).toBeLessThan(STREAM_TOTAL);
  mode = 'ok';
  await c.ping();
  expect(connections).toBeGreaterThan(before); // the discarded connection was not reused
});

test('a Content-Length over the limit fails the call without reading the body', async () => {
  mode = 'announced';
  const e = await rejection(client().ping());
  expect(e.kind).toBe('protocol');
  expect(e.code).toBe('reply-too-large');
  expect(e.timedOut).toBe(false);
  expect(posts).toBe(1);
});

test('replies under the limit and output files over it are read whole', async () => {
  mode = 'stream';
  // 8 MiB of noise under a 16 MiB limit is read (and then is no XML reply).
  const e = await rejection(client({ maxReplyBytes: 16 * 1024 * 1024 }).ping());
  expect(e.code).toBeUndefined();
  expect(e.serverMessage).toMatch(/^not an XML reply/);
  const dest = path.join(tmp, 'out');
  const { bytes } = await client().fetchOutputFile({ jobName: 'job', fileNum: 0, destPath: dest });
  expect(bytes).toBe(OUTPUT_BYTES);
  expect(fs.statSync(dest).size).toBe(OUTPUT_BYTES);
});
