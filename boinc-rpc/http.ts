/**
 * The HTTP exchanges of the BOINC RPCs on node's own http/https: a multipart/form-data POST
 * whose reply is read whole, and a GET streamed to the caller. transport.ts adds retries,
 * the concurrency bound, redaction and the BoincRpcError mapping on top.
 *
 * Why not a general HTTP client library: the RPCs need one request shape each and no
 * redirects, cookies, decompression or retries of their own, and such a library costs
 * ~20 MiB of memory and ~100 ms of loading in every GAHP (one runs per submitting user):
 * docs/architecture.md.
 *
 * Timeouts, each an HttpTimeout naming its phase (`event`):
 * - `total` (POST without files): the whole exchange, connect to the reply's last byte;
 *   phase 'connect' while no connection exists yet (nothing was sent), else 'request';
 * - `idle` (uploads, downloads): no byte moved either way for that long: 'connect' before
 *   the connection, 'response' while waiting for the reply's head, 'socket' after it.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import type * as https from 'node:https';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';

/** Bytes of file content read and sent at a time. */
const FILE_CHUNK = 256 * 1024;

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

/** A timeout; `event` is the phase it struck in (see above). */
export class HttpTimeout extends Error {
  override name = 'HttpTimeout';
  readonly code = 'ETIMEDOUT';
  constructor(readonly event: 'connect' | 'request' | 'response' | 'socket', ms: number) {
    super(`timeout after ${ms} ms (${event})`);
  }
}

/** A failure of the connection or the exchange (not of a local file): `code` as node gives it. */
export class HttpFailure extends Error {
  override name = 'HttpFailure';
  constructor(readonly code: string | undefined, message: string) {
    super(message);
  }
}

/**
 * A reply body longer than the caller's limit (or announced so by its Content-Length): it is
 * not read further and its connection is destroyed, never reused.
 */
export class ReplyTooLarge extends Error {
  override name = 'ReplyTooLarge';
  constructor(readonly limit: number, readonly status: number) {
    super(`reply larger than ${limit} bytes, not read (the client's maxReplyBytes)`);
  }
}

/** A file part whose content differed in size from what it was announced with. */
export class FileChangedError extends Error {
  override name = 'FileChangedError';
}

function sizeChanged(f: FilePart): FileChangedError {
  return new FileChangedError(`${f.path} changed size while it was being sent (${f.size} bytes announced)`);
}

/**
 * Keep-alive agents, one per scheme. node:https (TLS, ~1 MiB) is loaded with the first
 * https URL: a GAHP that talks plain http does not pay for it.
 */
export class Agents {
  private plain: http.Agent | undefined;
  private secure: Promise<{ mod: typeof https; agent: https.Agent }> | undefined;
  private destroyed = false;

  async forUrl(url: URL): Promise<{ mod: typeof http | typeof https; agent: http.Agent }> {
    if (url.protocol === 'http:') {
      this.plain ??= new http.Agent(AGENT_OPTIONS);
      if (this.destroyed) this.plain.destroy();
      return { mod: http, agent: this.plain };
    }
    if (url.protocol !== 'https:') throw new HttpFailure('ERR_INVALID_URL', `unsupported protocol ${url.protocol}`);
    this.secure ??= import('node:https').then((mod) => ({ mod, agent: new mod.Agent(AGENT_OPTIONS) }));
    const s = await this.secure;
    if (this.destroyed) s.agent.destroy();
    return s;
  }

  destroy(): void {
    this.destroyed = true;
    this.plain?.destroy();
    void this.secure?.then((s) => s.agent.destroy());
  }
}

const AGENT_OPTIONS = { keepAlive: true, maxSockets: 64 };

interface Timeouts {
  /** The whole exchange, in ms. */
  total?: number;
  /** Longest time without traffic, in ms. */
  idle?: number;
}

export interface PostReply {
  status: number;
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface FilePart {
  /** Path of the content (read when the body reaches it). */
  path: string;
  /** Size the part is announced with (the file is stat'ed just before). */
  size: number;
  /** The filename in its Content-Disposition. */
  name: string;
}

/**
 * The multipart body: text field `request`, then `file_0`, `file_1`, ... streamed from disk
 * one after another. Its length is known in advance (Content-Length); a file whose size
 * changed meanwhile fails the request (FileChangedError) instead of sending a body of the
 * wrong length.
 */
function multipart(request: string, files: readonly FilePart[]): { contentType: string; length: number; write: (req: http.ClientRequest) => Promise<void> } {
  const boundary = `----boinc-gahp-${randomBytes(12).toString('hex')}`;
  const { head, partHeads, tail } = multipartFraming(boundary, request, files);
  const crlf = Buffer.from('\r\n');
  let length = head.length + tail.length;
  files.forEach((f, i) => (length += partHeads[i]!.length + f.size + crlf.length));

  async function write(req: http.ClientRequest): Promise<void> {
    const closed = new Promise<void>((resolve) => req.once('close', resolve));
    /** Writes a chunk; resolves false when the request went away meanwhile (no more writing). */
    const put = async (chunk: Buffer): Promise<boolean> => {
      if (req.destroyed) return false;
      if (req.write(chunk)) return true;
      await Promise.race([new Promise<void>((resolve) => req.once('drain', resolve)), closed]);
      return !req.destroyed;
    };
    /** Writes a chunk of the reused buffer and waits until the socket has taken it (then it may be refilled). */
    const putAndRelease = async (chunk: Buffer): Promise<boolean> => {
      if (req.destroyed) return false;
      await Promise.race([new Promise<void>((resolve) => req.write(chunk, () => resolve())), closed]);
      return !req.destroyed;
    };
    if (!(await put(head))) return;
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
      if (!(await put(crlf))) return;
    }
    if (!(await put(tail))) return;
    req.end();
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, length, write };
}

/** Arms the timeouts on a request; `fail` gets the HttpTimeout. Returns a function that disarms them. */
function armTimeouts(req: http.ClientRequest, t: Timeouts, phase: { connected: boolean; responded: boolean }, fail: (err: HttpTimeout) => void): () => void {
  let total: NodeJS.Timeout | undefined;
  if (t.total !== undefined) {
    total = setTimeout(() => fail(new HttpTimeout(phase.connected ? 'request' : 'connect', t.total!)), t.total);
  }
  if (t.idle !== undefined) {
    req.setTimeout(t.idle, () => fail(new HttpTimeout(!phase.connected ? 'connect' : phase.responded ? 'socket' : 'response', t.idle!)));
  }
  return () => {
    if (total) clearTimeout(total);
    req.setTimeout(0);
  };
}

async function resolveTarget(urlText: string, agents: Agents): Promise<{ url: URL; target: { mod: typeof http | typeof https; agent: http.Agent } }> {
  let url: URL;
  try {
    url = new URL(urlText);
  } catch (err) {
    throw new HttpFailure('ERR_INVALID_URL', (err as Error).message);
  }
  return { url, target: await agents.forUrl(url) };
}

/** Marks `phase.connected` once the socket is connected (at once for a reused keep-alive socket). */
function watchConnect(req: http.ClientRequest, phase: { connected: boolean }): void {
  req.once('socket', (socket: Socket) => {
    if (!socket.connecting) phase.connected = true;
    else socket.once('connect', () => (phase.connected = true));
  });
}

const asFailure = (err: unknown): Error => {
  if (err instanceof HttpTimeout || err instanceof HttpFailure || err instanceof FileChangedError || err instanceof ReplyTooLarge) return err;
  const e = err as NodeJS.ErrnoException;
  return new HttpFailure(e?.code, e?.message ?? String(err));
};

/** The multipart framing around the request field and each file part (boundary of 39 characters). */
function multipartFraming(boundary: string, request: string, files: ReadonlyArray<{ name: string }>): { head: Buffer; partHeads: Buffer[]; tail: Buffer } {
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n${request}\r\n`, 'utf8');
  const partHeads = files.map((f, i) =>
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file_${i}"; filename="${f.name.replace(/["\r\n\\]/g, '_')}"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
      'utf8',
    ),
  );
  return { head, partHeads, tail: Buffer.from(`--${boundary}--\r\n`) };
}

/**
 * The exact Content-Length postMultipart sends for this request field and these files
 * (what PHP compares with post_max_size; docs/boinc-server.md, "PHP's limits on uploads").
 */
export function multipartLength(request: string, files: ReadonlyArray<{ name: string; size: number }>): number {
  const { head, partHeads, tail } = multipartFraming(`----boinc-gahp-${'0'.repeat(24)}`, request, files);
  let length = head.length + tail.length;
  files.forEach((f, i) => (length += partHeads[i]!.length + f.size + 2));
  return length;
}

/**
 * POSTs the multipart body; resolves with the whole reply (any status). A reply longer than
 * `maxReplyBytes` fails with ReplyTooLarge as soon as that is known.
 */
export async function postMultipart(
  urlText: string,
  request: string,
  files: readonly FilePart[],
  opts: { agents: Agents; timeouts: Timeouts; userAgent: string; maxReplyBytes: number; signal?: AbortSignal },
): Promise<PostReply> {
  const { url, target } = await resolveTarget(urlText, opts.agents);
  return new Promise<PostReply>((resolve, reject) => {
    const body = multipart(request, files);
    const phase = { connected: false, responded: false };
    let settled = false;
    const finish = (err: Error | undefined, reply?: PostReply) => {
      if (settled) return;
      settled = true;
      disarm();
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) reject(asFailure(err));
      else resolve(reply!);
    };
    const req = target.mod.request(url, {
      method: 'POST',
      agent: target.agent,
      headers: { 'content-type': body.contentType, 'content-length': String(body.length), 'user-agent': opts.userAgent },
    });
    const fail = (err: Error) => {
      finish(err);
      req.destroy(err);
    };
    const disarm = armTimeouts(req, opts.timeouts, phase, fail);
    const onAbort = () => fail(new HttpFailure('ABORT_ERR', 'aborted'));
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    watchConnect(req, phase);
    req.on('error', (err) => finish(err));
    req.on('response', (res) => {
      phase.responded = true;
      const chunks: Buffer[] = [];
      let length = 0;
      const tooLarge = () => {
        fail(new ReplyTooLarge(opts.maxReplyBytes, res.statusCode ?? 0));
        res.destroy();
      };
      if (Number(res.headers['content-length']) > opts.maxReplyBytes) {
        tooLarge();
        return;
      }
      res.on('data', (c: Buffer) => {
        length += c.length;
        if (length > opts.maxReplyBytes) tooLarge();
        else chunks.push(c);
      });
      res.on('error', (err) => finish(err));
      res.on('aborted', () => finish(new HttpFailure('ECONNRESET', 'the connection closed before the reply was complete')));
      res.on('end', () => {
        if (res.complete) finish(undefined, { status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', headers: res.headers, body: Buffer.concat(chunks) });
        else finish(new HttpFailure('ECONNRESET', 'the connection closed before the reply was complete'));
      });
    });
    body.write(req).catch((err: unknown) => fail(err as Error));
  });
}

/**
 * GETs url; resolves with the response once its head is in (the caller reads the body).
 * The idle timeout keeps watching the body; `done()` disarms it and must be called when
 * the caller is finished with the response (also on errors).
 */
export function getStream(
  urlText: string,
  opts: { agents: Agents; idleMs: number; userAgent: string },
): { response: Promise<http.IncomingMessage>; destroy: (err?: Error) => void; done: () => void } {
  const phase = { connected: false, responded: false };
  let req: http.ClientRequest | undefined;
  let disarm: () => void = () => undefined;
  let destroyedBy: { err: Error | undefined } | undefined;
  const response = resolveTarget(urlText, opts.agents).then(({ url, target }) => new Promise<http.IncomingMessage>((resolve, reject) => {
    req = target.mod.request(url, { method: 'GET', agent: target.agent, headers: { 'user-agent': opts.userAgent } });
    if (destroyedBy) req.destroy(destroyedBy.err);
    let res: http.IncomingMessage | undefined;
    disarm = armTimeouts(req, { idle: opts.idleMs }, phase, (err) => {
      if (res) res.destroy(err);
      else reject(err);
      req!.destroy(err);
    });
    watchConnect(req, phase);
    req.once('error', (err) => reject(asFailure(err)));
    req.once('response', (r) => {
      res = r;
      phase.responded = true;
      // After the head, errors of the exchange reach the body stream's reader.
      req!.on('error', (err) => r.destroy(asFailure(err)));
      r.on('aborted', () => r.destroy(new HttpFailure('ECONNRESET', 'the connection closed before the download was complete')));
      resolve(r);
    });
    req.end();
  }));
  return {
    response,
    destroy: (err) => {
      destroyedBy ??= { err };
      req?.destroy(err);
    },
    done: () => disarm(),
  };
}
