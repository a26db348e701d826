/**
 * The POST of every BOINC RPC: a multipart/form-data body (the text field `request`, then
 * `file_0`, `file_1`, ... streamed from disk) on a connection of its own (net, or tls for
 * an https URL; in a burst of calls the one opened for it while the call before was
 * answered, spare.ts), `Connection: close`, the reply read whole (http-reply.ts).
 *
 * Why a socket and not node's http client: each RPC is one request on one connection (the
 * real server closes it after the reply: docs/boinc-server.md), with no keep-alive, redirect,
 * cookie or content coding to handle. node's http client runs a few thousand lines of
 * JavaScript per request (the request and response objects, the agent, the parser's
 * callbacks and their streams); a fresh GAHP runs them for the first time on its first
 * calls, one after another. Measured in a fresh process against the test server: four
 * concurrent POSTs 11.6 ms with node's http, 8.2 ms this way, and the next one 2.5 ms
 * against 1.1 (test/bench/README.md, issue 12 round 5). Downloads keep node's http
 * (http.ts, getStream): they stream to disk and follow redirects.
 *
 * Timeouts, each an HttpTimeout naming its phase (`event`):
 * - `total` (POST without files): the whole exchange, connect to the reply's last byte;
 *   phase 'connect' while no connection exists yet (nothing was sent), else 'request';
 * - `idle` (uploads): no byte moved either way for that long: 'connect' before the
 *   connection, 'response' while waiting for the reply's head, 'socket' after it.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import { randomBytes } from 'node:crypto';
import { ReplyReader } from './http-reply.js';
import { FileChangedError, HttpFailure, armTimeouts, asFailure, parseHttpUrl, type Connections, type PostReply, type Timeouts } from './http.js';

/** Bytes of file content read and sent at a time. */
const FILE_CHUNK = 256 * 1024;
const CRLF = Buffer.from('\r\n');

export interface FilePart {
  /** Path of the content (read when the body reaches it). */
  path: string;
  /** Size the part is announced with (the file is stat'ed just before). */
  size: number;
  /** The filename in its Content-Disposition. */
  name: string;
}

/**
 * Reads a file smaller than `buf` whole with synchronous calls (open, read, close: tens of
 * microseconds from the page cache, where it was just hashed), instead of three or four
 * thread-pool round trips one after another, each milliseconds on a busy machine, for every
 * small file of an upload. Returns the bytes read, up to f.size + 1 (one more than announced
 * tells that the file grew).
 */
function readSmallFile(f: FilePart, buf: Buffer): number {
  const fd = fs.openSync(f.path, 'r');
  try {
    let got = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, got, f.size + 1 - got, null);
      if (n === 0) return got;
      got += n;
      if (got > f.size) return got;
    }
  } finally {
    fs.closeSync(fd);
  }
}

function sizeChanged(f: FilePart): FileChangedError {
  return new FileChangedError(`${f.path} changed size while it was being sent (${f.size} bytes announced)`);
}

/** The head of file part `index` (before its bytes). */
function partHead(boundary: string, index: number, name: string): string {
  return `--${boundary}\r\nContent-Disposition: form-data; name="file_${index}"; filename="${name.replace(/["\r\n\\]/g, '_')}"\r\n` + 'Content-Type: application/octet-stream\r\n\r\n';
}

/** The multipart framing around the request field and each file part (boundary of 39 characters). */
function multipartFraming(boundary: string, request: string, files: ReadonlyArray<{ name: string }>): { head: Buffer; partHeads: Buffer[]; tail: Buffer } {
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n${request}\r\n`, 'utf8');
  const partHeads = files.map((f, i) => Buffer.from(partHead(boundary, i, f.name), 'utf8'));
  return { head, partHeads, tail: Buffer.from(`--${boundary}--\r\n`) };
}

/** A boundary of the length postMultipart's have, for sizing. */
const SIZING_BOUNDARY = `----boinc-gahp-${'0'.repeat(24)}`;

/**
 * The exact Content-Length postMultipart sends for this request field and these files
 * (what PHP compares with post_max_size; docs/boinc-server.md, "PHP's limits on uploads").
 */
export function multipartLength(request: string, files: ReadonlyArray<{ name: string; size: number }>): number {
  return framedLength(multipartFraming(SIZING_BOUNDARY, request, files), files);
}

/**
 * What file part `index` adds to that length: its head, its bytes and the CRLF after them
 * (multipartLength of n files = multipartLength of none + filePartLength of each, by index).
 */
export function filePartLength(index: number, name: string, size: number): number {
  return Buffer.byteLength(partHead(SIZING_BOUNDARY, index, name), 'utf8') + size + CRLF.length;
}

/** The body's length: the framing, and each file's bytes followed by CRLF. */
function framedLength(framing: { head: Buffer; partHeads: Buffer[]; tail: Buffer }, files: ReadonlyArray<{ size: number }>): number {
  let length = framing.head.length + framing.tail.length;
  files.forEach((f, i) => (length += framing.partHeads[i]!.length + f.size + CRLF.length));
  return length;
}

/**
 * Writes the request (head, then the body: its length is known in advance, and a file
 * whose size changed meanwhile fails the request with FileChangedError instead of a body of
 * the wrong length). Returns when all is handed to the socket, or the socket went away.
 */
async function writeRequest(socket: net.Socket, requestHead: string, request: string, files: readonly FilePart[]): Promise<void> {
  const boundary = `----boinc-gahp-${randomBytes(12).toString('hex')}`;
  const framing = multipartFraming(boundary, request, files);
  const { head, partHeads, tail } = framing;
  const length = framedLength(framing, files);
  const closed = new Promise<void>((resolve) => socket.once('close', resolve));
  /** Writes a chunk; resolves false when the connection went away meanwhile (no more writing). */
  const put = async (chunk: Buffer): Promise<boolean> => {
    if (socket.destroyed) return false;
    if (socket.write(chunk)) return true;
    await Promise.race([new Promise<void>((resolve) => socket.once('drain', resolve)), closed]);
    return !socket.destroyed;
  };
  /** Writes a chunk of the reused buffer and waits until the socket has taken it (then it may be refilled). */
  const putAndRelease = async (chunk: Buffer): Promise<boolean> => {
    if (socket.destroyed) return false;
    await Promise.race([new Promise<void>((resolve) => socket.write(chunk, () => resolve())), closed]);
    return !socket.destroyed;
  };
  const contentType = `multipart/form-data; boundary=${boundary}`;
  const start = [Buffer.from(`${requestHead}Content-Type: ${contentType}\r\nContent-Length: ${length}\r\n\r\n`, 'latin1'), head];
  // A call without files is one write (one packet); with files the head and the request
  // field go first.
  if (files.length === 0) {
    await put(Buffer.concat([...start, tail]));
    return;
  }
  if (!(await put(Buffer.concat(start)))) return;
  // File content goes through one reused buffer: a new Buffer per chunk would leave
  // hundreds of dead 64 KiB chunks (external memory) between two scavenges of a big upload.
  const buf = files.some((f) => f.size > 0) ? Buffer.allocUnsafeSlow(FILE_CHUNK) : Buffer.alloc(0);
  for (const [i, f] of files.entries()) {
    if (!(await put(partHeads[i]!))) return;
    if (f.size > 0 && f.size < buf.length) {
      const got = readSmallFile(f, buf);
      if (got !== f.size) throw sizeChanged(f);
      if (!(await putAndRelease(buf.subarray(0, got)))) return;
    } else if (f.size > 0) {
      const fd = await fsp.open(f.path, 'r');
      let sent = 0;
      try {
        for (;;) {
          const { bytesRead } = await fd.read(buf, 0, Math.min(buf.length, f.size - sent + 1), null);
          if (bytesRead === 0) break;
          sent += bytesRead;
          if (sent > f.size) break;
          if (!(await putAndRelease(buf.subarray(0, bytesRead)))) return;
        }
      } finally {
        await fd.close();
      }
      if (sent !== f.size) throw sizeChanged(f);
    }
    if (!(await put(CRLF))) return;
  }
  // The connection stays open both ways: a half-close could end the request for some servers.
  await put(tail);
}

/**
 * A connection to the host and port of a URL parseHttpUrl accepted: plain, or TLS (node:tls,
 * loaded with the first https URL); the spare opened for it if there is one (spare.ts), else
 * a new one. `connectEvent`: the event that says it is ready (none: it is).
 */
async function connect(url: URL, connections: Connections, target: { host: string; port: number }): Promise<{ socket: net.Socket; connectEvent?: string; ahead: boolean }> {
  const { host, port } = target;
  if (url.protocol === 'http:') {
    const spare = connections.spares.take(target);
    return spare ? { socket: spare, ahead: true } : { socket: net.connect({ host, port }), connectEvent: 'connect', ahead: false };
  }
  // Loaded before a spare is taken: a spare without its watching must not wait on it.
  const tls = await connections.tls();
  const spare = connections.spares.take(target);
  const socket = tls.connect({ ...(spare ? { socket: spare } : { port }), host, ...(net.isIP(host) ? {} : { servername: host }), ALPNProtocols: ['http/1.1'] });
  return { socket, connectEvent: 'secureConnect', ahead: spare !== undefined };
}

/**
 * POSTs the multipart body; resolves with the whole reply (any status). A reply longer than
 * `maxReplyBytes` fails with ReplyTooLarge as soon as that is known.
 */
export async function postMultipart(
  urlText: string,
  request: string,
  files: readonly FilePart[],
  opts: { connections: Connections; timeouts: Timeouts; userAgent: string; maxReplyBytes: number; signal?: AbortSignal },
): Promise<PostReply> {
  const url = parseHttpUrl(urlText);
  if (opts.signal?.aborted) throw new HttpFailure('ABORT_ERR', 'aborted');
  const target = { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) || (url.protocol === 'http:' ? 80 : 443) };
  const { socket, connectEvent, ahead } = await connect(url, opts.connections, target);
  // Each write goes out at once, as node's http client does: an upload's parts are written
  // one after another, and Nagle's algorithm would hold each until the last was acknowledged.
  socket.setNoDelay(true);
  const untrack = opts.connections.track(socket);
  return new Promise<PostReply>((resolve, reject) => {
    const reply = new ReplyReader(opts.maxReplyBytes);
    let connected = connectEvent === undefined;
    let settled = false;
    const finish = (err: Error | undefined) => {
      if (settled) return;
      settled = true;
      disarm();
      opts.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      untrack();
      if (err) reject(asFailure(err));
      else resolve({ status: reply.status, statusMessage: reply.statusMessage, headers: reply.headers, body: reply.body(), ahead });
    };
    const disarm = armTimeouts(socket, opts.timeouts, { get connected() { return connected; }, get responded() { return reply.answered; } }, finish);
    const onAbort = () => finish(new HttpFailure('ABORT_ERR', 'aborted'));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (connectEvent) socket.once(connectEvent, () => (connected = true));
    socket.on('error', (err) => finish(err));
    socket.on('data', (chunk: Buffer) => {
      try {
        if (reply.push(chunk)) finish(undefined);
      } catch (err) {
        finish(err as Error);
      }
    });
    socket.on('end', () => {
      if (reply.end()) finish(undefined);
      else finish(new HttpFailure('ECONNRESET', reply.answered ? 'the connection closed before the reply was complete' : 'socket hang up'));
    });
    // Closed after the reply too (finish destroys it): an error is made only if it is one.
    socket.on('close', () => settled || finish(new HttpFailure('ECONNRESET', 'socket hang up')));
    // Credentials in the project URL go as Basic authorization, as node's http client sent them.
    const credentials = url.username || url.password ? `Authorization: Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}\r\n` : '';
    const requestHead = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUser-Agent: ${opts.userAgent}\r\n${credentials}Connection: close\r\n`;
    // Once the request is on its way (written and connected), the next call's connection
    // may be opened (spare.ts): not before, where it would hold this one back.
    const requestSent = () => opts.connections.spares.requestWritten(target);
    writeRequest(socket, requestHead, request, files).then(
      () => (connected || !connectEvent ? requestSent() : socket.once(connectEvent, requestSent)),
      (err: unknown) => finish(err as Error),
    );
  });
}
