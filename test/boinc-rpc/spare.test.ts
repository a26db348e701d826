/**
 * Connections opened ahead for the next RPC (boinc-rpc/spare.ts), seen from a raw loopback
 * server that records every connection: when it was accepted, whether a request came on it,
 * whether the client closed it. Calls in a burst go out on connections opened ahead, one
 * request per connection; calls far apart open none; a spare the server closed or wrote on
 * is never used; an unused spare is closed after its idle limit, and with its client.
 */
import * as net from 'node:net';
import { Connections } from '../../boinc-rpc/http.js';
import { postMultipart } from '../../boinc-rpc/post.js';

interface Seen {
  acceptedAt: number;
  requests: number;
  /** The client ended or reset it. */
  closedByClient: boolean;
  /** The server closed it without an answer (idleCloseMs). */
  closedIdle: boolean;
}

let server: net.Server;
let port: number;
let seen: Seen[] = [];
/** The server closes a connection that sent nothing for this long (undefined: never). */
let idleCloseMs: number | undefined;
/** The server writes this on a connection as soon as it accepts it. */
let greeting: string | undefined;
let connections: Connections;

const XML = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<success>1</success>\n</ping>\n';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  server = net.createServer((socket) => {
    const s: Seen = { acceptedAt: Date.now(), requests: 0, closedByClient: false, closedIdle: false };
    seen.push(s);
    if (greeting) socket.write(greeting);
    const idle = idleCloseMs === undefined ? undefined : setTimeout(() => {
      s.closedIdle = true;
      socket.end();
    }, idleCloseMs);
    let data = Buffer.alloc(0);
    socket.on('data', (c: Buffer) => {
      clearTimeout(idle);
      data = Buffer.concat([data, c]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(data.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (data.length < end + 4 + length) return;
      s.requests++;
      data = data.subarray(end + 4 + length);
      // As BOINC's PHP replies: no length, the body ends with the connection.
      socket.end(`HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${XML}`);
    });
    socket.on('end', () => {
      clearTimeout(idle);
      if (!s.closedIdle) s.closedByClient = true;
    });
    socket.on('error', () => (s.closedByClient = true));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  seen = [];
  idleCloseMs = undefined;
  greeting = undefined;
});
afterEach(() => connections.destroy());

const post = () =>
  postMultipart(`http://127.0.0.1:${port}/boinc_test/submit_rpc_handler.php`, '<ping>\n</ping>\n', [], {
    connections,
    timeouts: { total: 10_000 },
    userAgent: 'spare test',
    maxReplyBytes: 1 << 20,
  });

/** Waits until the server has seen `n` connections (a spare is opened in the background). */
async function connectionsSeen(n: number): Promise<void> {
  for (let i = 0; i < 200 && seen.length < n; i++) await sleep(5);
}

test('calls one after another in a burst go out on connections opened ahead, one request each', async () => {
  connections = new Connections({ burstMs: 1000, maxIdleMs: 5000 });
  const replies = [];
  for (let i = 0; i < 5; i++) {
    replies.push(await post());
    // From the second call on, the next call's connection is opened once this one's
    // request is on its way.
    if (i > 0) await connectionsSeen(i + 2);
  }
  for (const r of replies) expect(r.body.toString()).toBe(XML);
  // The first two connect themselves (the second makes the burst); the other three take the
  // connection opened during the call before; one is left for a next call.
  expect(replies.map((r) => r.ahead)).toEqual([false, false, true, true, true]);
  expect(connections.spares.counts).toEqual({ opened: 4, taken: 3 });
  expect(seen.map((s) => s.requests)).toEqual([1, 1, 1, 1, 1, 0]);
});

test('calls further apart than the burst window open no connection ahead', async () => {
  connections = new Connections({ burstMs: 50, maxIdleMs: 5000 });
  for (let i = 0; i < 3; i++) {
    expect((await post()).ahead).toBe(false);
    await sleep(120);
  }
  expect(connections.spares.counts).toEqual({ opened: 0, taken: 0 });
  expect(seen.map((s) => s.requests)).toEqual([1, 1, 1]);
});

test('with no time to wait (connectAheadMs 0), no connection is ever opened ahead', async () => {
  connections = new Connections({ burstMs: 1000, maxIdleMs: 0 });
  for (let i = 0; i < 4; i++) expect((await post()).ahead).toBe(false);
  await sleep(30);
  expect(connections.spares.counts).toEqual({ opened: 0, taken: 0 });
  expect(seen.map((s) => s.requests)).toEqual([1, 1, 1, 1]);
});

test('a spare the server closed is never used: no request is written on a closed connection', async () => {
  connections = new Connections({ burstMs: 1000, maxIdleMs: 5000 });
  idleCloseMs = 20;
  await post();
  await post();
  for (let i = 0; i < 3; i++) {
    await sleep(80); // the spare opened meanwhile is closed by the server after 20 ms
    const reply = await post();
    expect(reply.body.toString()).toBe(XML);
    expect(reply.ahead).toBe(false);
  }
  expect(connections.spares.counts.taken).toBe(0);
  expect(connections.spares.counts.opened).toBeGreaterThanOrEqual(3);
  // Every connection the server closed idle carried no request; every request got its answer.
  for (const s of seen) expect(s.closedIdle ? s.requests : 1).toBe(s.closedIdle ? 0 : 1);
});

test('a spare the server wrote on is dropped, never read as a reply', async () => {
  connections = new Connections({ burstMs: 1000, maxIdleMs: 5000 });
  greeting = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';
  // Every connection is greeted, the calls' own ones too: their replies start with that
  // 408, which they read as the reply; the spares are dropped unread.
  await post().catch(() => undefined);
  await post().catch(() => undefined);
  await connectionsSeen(3);
  await sleep(30);
  greeting = undefined;
  const reply = await post();
  expect(reply.ahead).toBe(false);
  expect(reply.status).toBe(200);
  expect(connections.spares.counts.taken).toBe(0);
});

test('an unused spare is closed after its idle limit, and the others when the client closes', async () => {
  connections = new Connections({ burstMs: 1000, maxIdleMs: 100 });
  await post();
  await post();
  await connectionsSeen(3);
  const spare = seen[2]!;
  expect(spare.requests).toBe(0);
  await sleep(50);
  expect(spare.closedByClient).toBe(false);
  await sleep(150);
  expect(spare.closedByClient).toBe(true);
  // A new burst, then the client closes: its spare goes too, and no other is opened.
  await post();
  await post();
  await connectionsSeen(6);
  connections.destroy();
  await sleep(50);
  expect(seen.every((s) => s.closedByClient || s.requests === 1)).toBe(true);
  expect(seen[5]!.requests).toBe(0);
  expect(seen[5]!.closedByClient).toBe(true);
  expect(connections.spares.take({ host: '127.0.0.1', port })).toBeUndefined();
  await sleep(50);
  expect(seen).toHaveLength(6);
});
