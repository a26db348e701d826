/**
 * The RPC POST (boinc-rpc/http.ts, on got) against a raw loopback server that answers byte
 * for byte as told: the request it sends (request line, Host, a Content-Length equal to the
 * body), and every way a reply can be framed (Content-Length, chunked transfer
 * coding with extensions and trailers, the end of the connection as BOINC's PHP replies
 * do, an interim 100 Continue first, a reply trickling in byte by byte), and the ways it
 * can go wrong (cut short, no reply at all, too large, not HTTP).
 */
import * as net from 'node:net';
import { HttpClient, HttpFailure, ReplyTooLarge } from '../../boinc-rpc/http.js';
import { requestForm } from '../../boinc-rpc/multipart.js';

/** What the server does once it has read a whole request (head and Content-Length bytes). */
type Answer = (socket: net.Socket) => unknown;

let server: net.Server;
let port: number;
let answer: Answer;
/** The last request the server read whole. */
let received: { head: string; body: Buffer } | undefined;
let connections: HttpClient;

beforeAll(async () => {
  server = net.createServer((socket) => {
    let data = Buffer.alloc(0);
    socket.on('data', (c: Buffer) => {
      data = Buffer.concat([data, c]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0 || received) return;
      const head = data.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (data.length < end + 4 + length) return;
      received = { head, body: data.subarray(end + 4, end + 4 + length) };
      void answer(socket);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  received = undefined;
  connections = new HttpClient();
});
afterEach(() => connections.destroy());

const post = (maxReplyBytes = 1 << 20) =>
  connections.post(`http://127.0.0.1:${port}/boinc_test/submit_rpc_handler.php?x=1`, requestForm('<ping>\n</ping>\n', []).form, {
    timeouts: { total: 10_000 },
    userAgent: 'framing test',
    maxReplyBytes,
  });
const XML = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<success>1</success>\n</ping>\n';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('sends one request: request line, Host and the exact Content-Length', async () => {
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nContent-Length: ${XML.length}\r\n\r\n${XML}`);
  const reply = await post();
  expect(reply.status).toBe(200);
  expect(reply.body.toString()).toBe(XML);
  const lines = received!.head.split('\r\n');
  expect(lines[0]).toBe('POST /boinc_test/submit_rpc_handler.php?x=1 HTTP/1.1');
  const lower = lines.map((l) => l.toLowerCase());
  expect(lower).toEqual(expect.arrayContaining([`host: 127.0.0.1:${port}`, 'user-agent: framing test', `content-length: ${received!.body.length}`]));
  expect(lower.find((l) => l.startsWith('content-type: multipart/form-data; boundary='))).toBeDefined();
  expect(received!.body.toString()).toContain('Content-Disposition: form-data; name="request"\r\n\r\n<ping>\n</ping>\n\r\n');
});

test('credentials in the project URL go as Basic authorization (as node\'s http client sent them)', async () => {
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nContent-Length: ${XML.length}\r\n\r\n${XML}`);
  await connections.post(`http://us%40er:p%3Ass@127.0.0.1:${port}/rpc.php`, requestForm('<ping/>', []).form, { timeouts: { total: 10_000 }, userAgent: 'framing test', maxReplyBytes: 1 << 20 });
  const auth = received!.head.split('\r\n').find((l) => l.toLowerCase().startsWith('authorization: '));
  expect(auth?.replace(/^authorization/i, 'Authorization')).toBe(`Authorization: Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
  expect(received!.head.toLowerCase()).toContain(`host: 127.0.0.1:${port}\r\n`);
});

test('a reply ended by the connection (no Content-Length, as BOINC PHP replies are)', async () => {
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nConnection: close\r\nContent-type: text/xml;charset=UTF-8\r\n\r\n${XML}`);
  const reply = await post();
  expect(reply.headers['content-type']).toBe('text/xml;charset=UTF-8');
  expect(reply.body.toString()).toBe(XML);
});

test('chunked transfer coding, with chunk extensions and trailer fields', async () => {
  const a = XML.slice(0, 20);
  const b = XML.slice(20);
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${a.length.toString(16)};ext=1\r\n${a}\r\n${b.length.toString(16).toUpperCase()}\r\n${b}\r\n0\r\nX-Trailer: yes\r\n\r\n`);
  expect((await post()).body.toString()).toBe(XML);
});

test('an interim 100 Continue, then the reply; and a reply that trickles in byte by byte', async () => {
  const whole = `HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${XML.length.toString(16)}\r\n${XML}\r\n0\r\n\r\n`;
  answer = async (s) => {
    for (const ch of whole) {
      s.write(ch);
      await sleep(0);
    }
  };
  const reply = await post();
  expect(reply.status).toBe(200);
  expect(reply.body.toString()).toBe(XML);
});

test('a Content-Length reply is complete at its last byte, whatever the connection does after', async () => {
  // The connection stays open: the reply is taken at its length, not at the close.
  answer = (s) => void s.write(`HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!`);
  const reply = await post();
  expect(reply.status).toBe(500);
  expect(reply.statusMessage).toBe('Internal Server Error');
  expect(reply.body.toString()).toBe('oops!');
});

test('cut short: fewer bytes than its Content-Length, or than its chunks, then the close', async () => {
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n${XML.slice(0, 10)}`);
  await expect(post()).rejects.toMatchObject({ code: 'ECONNRESET', message: 'the connection closed before the reply was complete' });
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n${XML.slice(0, 10)}`);
  received = undefined;
  await expect(post()).rejects.toMatchObject({ code: 'ECONNRESET', message: 'the connection closed before the reply was complete' });
});

test('no reply at all: the connection closed after the request', async () => {
  answer = (s) => s.end();
  await expect(post()).rejects.toMatchObject({ code: 'ECONNRESET' });
});

test('too large: announced by Content-Length, or found while reading', async () => {
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n`);
  await expect(post(100)).rejects.toBeInstanceOf(ReplyTooLarge);
  received = undefined;
  answer = (s) => s.end(`HTTP/1.1 200 OK\r\n\r\n${'x'.repeat(1000)}`);
  await expect(post(100)).rejects.toBeInstanceOf(ReplyTooLarge);
});

test('not HTTP: a malformed status line or header fails the call', async () => {
  answer = (s) => s.end('<html>hello</html>\r\n\r\n');
  const notHttp: unknown = await post().catch((e: unknown) => e);
  expect(notHttp).toBeInstanceOf(HttpFailure);
  expect((notHttp as HttpFailure).code).toMatch(/^HPE_/);
  received = undefined;
  answer = (s) => s.end('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n');
  const err: unknown = await post().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(HttpFailure);
});

test('a destroyed client ends its calls in flight', async () => {
  answer = () => undefined; // never answers
  const call = post();
  await sleep(50);
  connections.destroy();
  await expect(call).rejects.toMatchObject({ code: 'ECONNRESET' });
});
