/**
 * HTTP for the BOINC RPCs, the pieces shared by the POST of every RPC (post.ts, on a socket
 * of its own) and the download of output files (getStream here, on node's http: streamed to
 * disk, redirects followed by the caller): the errors both raise, and `Connections`, all
 * the connections of one client (closed together when it closes). transport.ts adds retries, the
 * concurrency bound, redaction and the BoincRpcError mapping on top.
 *
 * Timeouts of a download, each an HttpTimeout naming its phase (`event`): `idle`, no byte
 * moved either way for that long: 'connect' before the connection, 'response' while
 * waiting for the reply's head, 'socket' after it.
 */
import type * as http from 'node:http';
import type * as https from 'node:https';
import type { Socket } from 'node:net';
import type * as tls from 'node:tls';
import { SpareConnections, DEFAULT_SPARE_LIMITS, type SpareLimits } from './spare.js';

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

/**
 * The connections of one client: node's http agents of the downloads, one per scheme, the
 * sockets of the RPC POSTs in flight (post.ts) and the one opened for the next POST
 * (spare.ts); destroy() ends them all. node:http (for a download) and node:tls (for an
 * https URL) load when first needed: a GAHP that only submits over plain http pays for
 * neither.
 */
export class Connections {
  private plain: Promise<{ mod: typeof http; agent: http.Agent }> | undefined;
  private secure: Promise<{ mod: typeof https; agent: https.Agent }> | undefined;
  private tlsModule: Promise<typeof tls> | undefined;
  private readonly sockets = new Set<Socket>();
  private destroyed = false;
  readonly spares: SpareConnections;

  constructor(spareLimits: SpareLimits = DEFAULT_SPARE_LIMITS) {
    this.spares = new SpareConnections(spareLimits);
  }

  /** The agent for a URL parseHttpUrl accepted (http: or https:). */
  async forUrl(url: URL): Promise<{ mod: typeof http | typeof https; agent: http.Agent }> {
    const target = url.protocol === 'http:'
      ? await (this.plain ??= import('node:http').then((mod) => ({ mod, agent: new mod.Agent(AGENT_OPTIONS) })))
      : await (this.secure ??= import('node:https').then((mod) => ({ mod, agent: new mod.Agent(AGENT_OPTIONS) })));
    if (this.destroyed) target.agent.destroy();
    return target;
  }

  /** node:tls, for the POSTs to an https URL. */
  tls(): Promise<typeof tls> {
    return (this.tlsModule ??= import('node:tls'));
  }

  /** Counts a POST's socket among the client's until the returned function is called. */
  track(socket: Socket): () => void {
    if (this.destroyed) socket.destroy();
    this.sockets.add(socket);
    return () => this.sockets.delete(socket);
  }

  destroy(): void {
    this.destroyed = true;
    this.spares.destroy();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    void this.plain?.then((s) => s.agent.destroy());
    void this.secure?.then((s) => s.agent.destroy());
  }
}

const AGENT_OPTIONS = { keepAlive: true, maxSockets: 64 };

export interface Timeouts {
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
  /** The request went on a connection opened ahead for it (spare.ts). */
  ahead?: boolean;
}

/** A URL the RPCs can use (http: or https:); else an HttpFailure ERR_INVALID_URL, which the transport knows was never sent. */
export function parseHttpUrl(urlText: string): URL {
  let url: URL;
  try {
    url = new URL(urlText);
  } catch (err) {
    throw new HttpFailure('ERR_INVALID_URL', (err as Error).message);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new HttpFailure('ERR_INVALID_URL', `unsupported protocol ${url.protocol}`);
  return url;
}

/**
 * Arms the timeouts of an exchange, on a download's request or a POST's socket (both time
 * out on inactivity with setTimeout); `fail` gets the HttpTimeout. Returns a function that
 * disarms them.
 */
export function armTimeouts(
  req: { setTimeout(ms: number, cb?: () => void): unknown },
  t: Timeouts,
  phase: { readonly connected: boolean; readonly responded: boolean },
  fail: (err: HttpTimeout) => void,
): () => void {
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

async function resolveTarget(urlText: string, connections: Connections): Promise<{ url: URL; target: { mod: typeof http | typeof https; agent: http.Agent } }> {
  const url = parseHttpUrl(urlText);
  return { url, target: await connections.forUrl(url) };
}

/** Marks `phase.connected` once the socket is connected (at once for a reused keep-alive socket). */
function watchConnect(req: http.ClientRequest, phase: { connected: boolean }): void {
  req.once('socket', (socket: Socket) => {
    if (!socket.connecting) phase.connected = true;
    else socket.once('connect', () => (phase.connected = true));
  });
}

export const asFailure = (err: unknown): Error => {
  if (err instanceof HttpTimeout || err instanceof HttpFailure || err instanceof FileChangedError || err instanceof ReplyTooLarge) return err;
  const e = err as NodeJS.ErrnoException;
  return new HttpFailure(e?.code, e?.message ?? String(err));
};

/**
 * GETs url; resolves with the response once its head is in (the caller reads the body).
 * The idle timeout keeps watching the body; `done()` disarms it and must be called when
 * the caller is finished with the response (also on errors).
 */
export function getStream(
  urlText: string,
  opts: { connections: Connections; idleMs: number; userAgent: string },
): { response: Promise<http.IncomingMessage>; destroy: (err?: Error) => void; done: () => void } {
  const phase = { connected: false, responded: false };
  let req: http.ClientRequest | undefined;
  let disarm: () => void = () => undefined;
  let destroyedBy: { err: Error | undefined } | undefined;
  const response = resolveTarget(urlText, opts.connections).then(({ url, target }) => new Promise<http.IncomingMessage>((resolve, reject) => {
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
