/**
 * HTTP for the BOINC RPCs, on got (docs/architecture.md, "HTTP, proxies and trust"): the POST of every RPC (a
 * form-data body, multipart.ts, its reply read whole up to a limit) and the download of
 * output files (streamed to the caller, who writes it to disk and decides about redirects).
 * transport.ts adds retries, the concurrency bound, redaction and the BoincRpcError mapping
 * on top; got's own retries and redirects are off.
 *
 * Routes (routes.ts; network.ts says which proxy): direct; through an HTTP proxy for an http:// project, as
 * curl does it, the request in absolute form (`POST http://host/path`) to the proxy; through
 * a CONNECT tunnel (hpagent) for an https:// project. TLS trusts node's bundled roots and the
 * system's bundles (network.ts, trustSources), in one secure context made at the first
 * https request. got, hpagent and node:https load with the first request that needs them:
 * an idle GAHP pays for none.
 *
 * Failures carry the hop that failed: `hop: 'proxy'` names the proxy (never its
 * credentials) and what it said; `hop: 'tls'` names the certificate problem and the trust
 * sources.
 *
 * Timeouts, each an HttpTimeout naming its phase (`event`): `total` (POST without files),
 * the whole exchange, 'connect' while nothing was sent yet, else 'request'; `idle` (uploads
 * and downloads), no byte moved either way for that long: 'connect' before the connection,
 * 'socket' after it.
 */
import type * as http from 'node:http';
import type * as net from 'node:net';
import type * as tls from 'node:tls';
import { PassThrough } from 'node:stream';
import type { Got, Request as GotRequest } from 'got';
import { redactUrl, trustSources, type NetworkSettings } from './network.js';
import { FileChangedError, HttpFailure, HttpTimeout, ReplyTooLarge } from './http-errors.js';
import { Routes, type Route } from './routes.js';

export { FileChangedError, HttpFailure, HttpTimeout, ReplyTooLarge };

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
  /** The proxy the request was forwarded by (absolute form; no credentials): its 5xx may be the proxy's own. */
  via?: string;
}

/** What `get` saw of its connection, filled in as it happens. */
export interface ConnectionTrace {
  /** The peer the socket connected to (the proxy's, through one) and how long connecting took. */
  connected?: { address: string; port: number; ms: number };
  /** The TLS of the reply's connection, its certificate verified. */
  tls?: { protocol: string; subject: string; issuer: string };
}

export interface GetReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body, cut at the caller's limit. */
  body: Buffer;
}

/** The head of a download's reply; its body is read from `body`. */
export interface DownloadReply {
  statusCode: number;
  headers: http.IncomingHttpHeaders;
  body: NodeJS.ReadableStream & { destroy(err?: Error): void; resume(): unknown };
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


/** Connection failures that happen before anything reaches the other end. */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ECONNRESET', 'ETIMEDOUT']);
/** Codes of a certificate node could not verify (OpenSSL's, and node's name check). */
const CERTIFICATE_CODE = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ERR_TLS_CERT_ALTNAME_INVALID/;

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 407: 'Proxy Authentication Required',
  500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

/**
 * A signal for one request, aborted with the caller's until unlink(). got adds an abort
 * listener to the signal it is given and never removes it, and Node keeps a signal of
 * AbortSignal.timeout() or AbortSignal.any() that has listeners, with all they reach,
 * until it fires: given the caller's signal (a fetch's has a 5-minute timeout), every
 * finished request, its reply and its socket's state stayed in memory that long, tens of
 * KB a job over a cluster's drain (issue 44, item 10). This one is got's alone, and the
 * caller's signal lets go of it when the request ends.
 */
function linkedSignal(signal: AbortSignal | undefined): { signal?: AbortSignal; unlink(): void } {
  if (!signal) return { unlink: () => undefined };
  const own = new AbortController();
  const onAbort = () => own.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  return { signal: own.signal, unlink: () => signal.removeEventListener('abort', onAbort) };
}

/**
 * All the HTTP of one client: its agents (kept-alive connections, one set per route), its
 * requests in flight; destroy() ends them all.
 */
export class HttpClient {
  private libs: Promise<{ got: Got }> | undefined;
  private readonly routes: Routes;
  private readonly inFlight = new Set<GotRequest>();
  private destroyed = false;

  /**
   * `proxyConnectTimeoutMs`: how long a proxy may leave a CONNECT unanswered before the
   * tunnel attempt is given up (the request waiting for it has its own timeouts; this ends
   * the proxy connection itself, which would otherwise stay open as long as the proxy keeps
   * it: one more per retry in a GAHP that runs for days).
   */
  constructor(private readonly network: NetworkSettings = {}, proxyConnectTimeoutMs = 60_000) {
    this.routes = new Routes(network, proxyConnectTimeoutMs);
  }

  private load(): Promise<{ got: Got }> {
    return (this.libs ??= import('got').then((m) => ({ got: m.default })));
  }

  /** A failure of a request by `route` as the transport reports it: which hop, which code. */
  private failure(err: unknown, route: Route | undefined, url: URL, answered: boolean): Error {
    if (err instanceof HttpTimeout || err instanceof HttpFailure || err instanceof FileChangedError || err instanceof ReplyTooLarge) return err;
    const e = err as { code?: string; message?: string; cause?: unknown; name?: string };
    const cause = e.cause as { code?: string; message?: string } | undefined;
    if (cause instanceof FileChangedError || cause instanceof ReplyTooLarge || cause instanceof HttpFailure || cause instanceof HttpTimeout) return cause;
    const code = cause?.code ?? e.code;
    const message = cause?.message ?? e.message ?? String(err);
    const proxy = route?.proxy ? redactUrl(route.proxy) : undefined;
    if (proxy && !answered) {
      const bad = /^Bad response: (\d+)$/.exec(message);
      if (bad) {
        const status = Number(bad[1]);
        const what = status === 407 ? 'asks for authentication (HTTP 407 Proxy Authentication Required): its user and password are missing or wrong' : `answered the CONNECT to ${url.hostname}:${portOf(url)} with HTTP ${status}${STATUS_TEXT[status] ? ' ' + STATUS_TEXT[status] : ''}: it cannot reach the project or will not`;
        return new HttpFailure('EPROXY', `proxy ${proxy} ${what}`, 'proxy', status);
      }
      if (code && CONNECT_CODES.has(code) && (!route?.tunnel || !isTlsPhase(message))) {
        return new HttpFailure(code, `proxy ${proxy} failed: ${code}: ${message}`, 'proxy');
      }
    }
    if (code && CERTIFICATE_CODE.test(code)) {
      const trust = trustSources(this.network).map((s) => s.label).join(', ');
      return new HttpFailure(code, `certificate problem with ${url.host}: ${message} (${code}); trusted: ${trust}`, 'tls');
    }
    if (answered) return new HttpFailure('ECONNRESET', 'the connection closed before the reply was complete');
    // OpenSSL's text for a plain-HTTP answer to a TLS hello, said plainly.
    if (url.protocol === 'https:' && /wrong version number/i.test(message)) {
      return new HttpFailure(code, `${url.host} does not speak TLS on this port: should the project URL begin with http:// instead of https://? (OpenSSL: wrong version number)`, 'tls');
    }
    return new HttpFailure(code, message);
  }

  private timeouts(t: Timeouts): Record<string, number> {
    if (t.total !== undefined) return { request: t.total };
    if (t.idle !== undefined) return { connect: t.idle, socket: t.idle };
    return {};
  }

  /** got's TimeoutError as our HttpTimeout: 'connect' when nothing was sent yet. */
  private timeout(err: unknown, t: Timeouts): HttpTimeout | undefined {
    const e = err as { name?: string; event?: string; timings?: { upload?: number } };
    if (e?.name !== 'TimeoutError') return undefined;
    const ms = (t.total ?? t.idle)!;
    const sent = e.timings?.upload !== undefined;
    if (!sent) return new HttpTimeout('connect', ms);
    return new HttpTimeout(e.event === 'request' ? 'request' : e.event === 'response' ? 'response' : 'socket', ms);
  }

  private common(route: Route, t: Timeouts, userAgent: string, signal?: AbortSignal): Record<string, unknown> {
    return {
      ...route.options,
      retry: { limit: 0 },
      followRedirect: false,
      throwHttpErrors: false,
      decompress: false,
      timeout: this.timeouts(t),
      headers: { 'user-agent': userAgent },
      ...(signal ? { signal } : {}),
    };
  }

  private track(req: GotRequest): () => void {
    if (this.destroyed) req.destroy();
    this.inFlight.add(req);
    return () => this.inFlight.delete(req);
  }

  /**
   * POSTs the multipart body (multipart.ts); resolves with the whole reply (any status). A
   * reply longer than `maxReplyBytes` fails with ReplyTooLarge as soon as that is known.
   */
  async post(
    urlText: string,
    form: { getHeaders(): Record<string, string>; getLengthSync(): number } & NodeJS.ReadableStream,
    opts: { timeouts: Timeouts; userAgent: string; maxReplyBytes: number; signal?: AbortSignal },
  ): Promise<PostReply> {
    const url = parseHttpUrl(urlText);
    if (opts.signal?.aborted) throw new HttpFailure('ABORT_ERR', 'aborted');
    if (this.destroyed) throw new HttpFailure('ECONNRESET', 'client closed');
    const [{ got }, route] = await Promise.all([this.load(), this.routes.route(url)]);
    const link = linkedSignal(opts.signal);
    const options = this.common(route, opts.timeouts, opts.userAgent, link.signal);
    const req = got.stream.post(url, {
      ...options,
      body: form,
      headers: { ...(options.headers as object), ...form.getHeaders(), 'content-length': String(form.getLengthSync()) },
    } as never);
    const untrack = this.track(req);
    return new Promise<PostReply>((resolve, reject) => {
      let res: http.IncomingMessage | undefined;
      const chunks: Buffer[] = [];
      let bytes = 0;
      let settled = false;
      const disarm = opts.timeouts.idle !== undefined ? watchIdle(req, opts.timeouts.idle) : () => undefined;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        disarm();
        untrack();
        link.unlink();
        req.destroy();
        reject(this.timeout(err, opts.timeouts) ?? this.failure(err, route, url, res !== undefined));
      };
      req.on('response', (r: http.IncomingMessage) => {
        res = r;
        const proxyRefusal = this.proxyAnswer(route, r.statusCode ?? 0, r.statusMessage);
        if (proxyRefusal) return fail(proxyRefusal);
        const announced = Number(r.headers['content-length']);
        if (announced > opts.maxReplyBytes) fail(new ReplyTooLarge(opts.maxReplyBytes, r.statusCode ?? 0));
      });
      req.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > opts.maxReplyBytes) return fail(new ReplyTooLarge(opts.maxReplyBytes, res?.statusCode ?? 0));
        chunks.push(chunk);
      });
      req.on('error', fail);
      req.on('end', () => {
        if (settled) return;
        settled = true;
        disarm();
        untrack();
        link.unlink();
        const via = route.proxy && !route.tunnel ? { via: redactUrl(route.proxy) } : {};
        resolve({ status: res?.statusCode ?? 0, statusMessage: res?.statusMessage ?? '', headers: res?.headers ?? {}, body: Buffer.concat(chunks, bytes), ...via });
      });
    });
  }

  /**
   * GETs url and reads the reply up to `maxBytes` (the rest is dropped), any status; for
   * `boinc-gahp doctor`, which reports what the connection did: `trace` is filled as the
   * request goes (the socket's peer and connect time; the TLS protocol and the certificate
   * once verified), so a failure can say how far it got. Failures as the RPCs' are.
   */
  async get(urlText: string, opts: { timeoutMs: number; userAgent: string; maxBytes: number; trace: ConnectionTrace }): Promise<GetReply> {
    const url = parseHttpUrl(urlText);
    const [{ got }, route] = await Promise.all([this.load(), this.routes.route(url)]);
    const t = { total: opts.timeoutMs };
    const req = got.stream(url, this.common(route, t, opts.userAgent) as never);
    const untrack = this.track(req);
    req.once('request', (clientRequest: http.ClientRequest) => clientRequest.once('socket', (socket) => traceSocket(socket, opts.trace)));
    return new Promise<GetReply>((resolve, reject) => {
      let res: http.IncomingMessage | undefined;
      const chunks: Buffer[] = [];
      let bytes = 0;
      req.on('response', (r: http.IncomingMessage) => {
        res = r;
        traceTls(r.socket, opts.trace);
      });
      req.on('data', (chunk: Buffer) => {
        if (bytes < opts.maxBytes) chunks.push(chunk);
        bytes += chunk.length;
      });
      req.once('error', (err) => {
        untrack();
        req.destroy();
        reject(this.timeout(err, t) ?? this.failure(err, route, url, res !== undefined));
      });
      req.once('end', () => {
        untrack();
        resolve({ status: res?.statusCode ?? 0, headers: res?.headers ?? {}, body: Buffer.concat(chunks).subarray(0, opts.maxBytes) });
      });
    });
  }

  /** A 407 on a request in absolute form is the proxy's: a failure naming it. */
  private proxyAnswer(route: Route, status: number, statusMessage: string | undefined): HttpFailure | undefined {
    if (!route.proxy || route.tunnel || status !== 407) return undefined;
    return new HttpFailure('EPROXY', `proxy ${redactUrl(route.proxy)} asks for authentication (HTTP 407 ${statusMessage || 'Proxy Authentication Required'}): its user and password are missing or wrong`, 'proxy', 407);
  }

  /**
   * GETs url; resolves with the reply once its head is in (the caller reads the body). The
   * idle timeout keeps watching the body; destroy() ends the request.
   */
  getStream(urlText: string, opts: { idleMs: number; userAgent: string; headers?: Record<string, string> }): { response: Promise<DownloadReply>; destroy: (err?: Error) => void } {
    let req: GotRequest | undefined;
    let destroyedBy: { err: Error | undefined } | undefined;
    const t = { idle: opts.idleMs };
    const response = (async () => {
      const url = parseHttpUrl(urlText);
      const [{ got }, route] = await Promise.all([this.load(), this.routes.route(url)]);
      const options = this.common(route, t, opts.userAgent);
      if (opts.headers) options.headers = { ...(options.headers as object), ...opts.headers };
      const r = got.stream(url, options as never);
      req = r;
      const untrack = this.track(r);
      const disarm = watchIdle(r, opts.idleMs);
      r.once('close', () => {
        disarm();
        untrack();
      });
      if (destroyedBy) r.destroy(destroyedBy.err);
      return new Promise<DownloadReply>((resolve, reject) => {
        let answered = false;
        r.once('error', (err) => reject(this.timeout(err, t) ?? this.failure(err, route, url, answered)));
        r.once('response', (res: http.IncomingMessage) => {
          answered = true;
          const proxyRefusal = this.proxyAnswer(route, res.statusCode ?? 0, res.statusMessage);
          if (proxyRefusal) return reject(proxyRefusal);
          // After the head, errors of the exchange reach the body's reader, mapped.
          r.removeAllListeners('error');
          resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: mappedErrors(r, (err) => this.timeout(err, t) ?? this.failure(err, route, url, true)) });
        });
      });
    })();
    return {
      response,
      destroy: (err) => {
        destroyedBy ??= { err };
        req?.destroy(err);
      },
    };
  }

  destroy(): void {
    this.destroyed = true;
    for (const req of this.inFlight) req.destroy(new HttpFailure('ECONNRESET', 'client closed'));
    this.inFlight.clear();
    this.routes.destroy();
  }
}

/**
 * The inactivity timeout before got has a socket to watch: a proxy that accepts the
 * connection and never answers the CONNECT would hold an upload or a download (which have
 * no total timeout) until the command's deadline. Any progress either way restarts it;
 * got's own socket timeout does the same once connected.
 */
function watchIdle(req: GotRequest, ms: number): () => void {
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => req.destroy(new HttpTimeout(req.uploadProgress.transferred > 0 ? 'socket' : 'connect', ms)), ms);
  };
  arm();
  req.on('uploadProgress', arm);
  req.on('downloadProgress', arm);
  return () => {
    if (timer) clearTimeout(timer);
    req.off('uploadProgress', arm);
    req.off('downloadProgress', arm);
  };
}

/** Records the socket's peer once connected (a socket from a tunnel is connected already). */
function traceSocket(socket: net.Socket, trace: ConnectionTrace): void {
  const started = Date.now();
  const record = () => {
    trace.connected = { address: socket.remoteAddress ?? '?', port: socket.remotePort ?? 0, ms: Date.now() - started };
  };
  if (socket.connecting) socket.once('connect', record);
  else record();
}

/** Records the TLS protocol and certificate of a reply's socket, when it is TLS (node verified it, or there is no reply). */
function traceTls(socket: net.Socket | null, trace: ConnectionTrace): void {
  const t = socket as tls.TLSSocket | null;
  if (!t || typeof t.getPeerCertificate !== 'function') return;
  const cert = t.getPeerCertificate();
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  trace.tls = {
    protocol: t.getProtocol() ?? '?',
    subject: first(cert?.subject?.CN) ?? '?',
    issuer: first(cert?.issuer?.O) ?? first(cert?.issuer?.CN) ?? '?',
  };
}

const portOf = (url: URL) => Number(url.port) || (url.protocol === 'https:' ? 443 : 80);

/** Whether a connection failure's message is of the TLS handshake (inside a tunnel: the project's). */
function isTlsPhase(message: string): boolean {
  return /TLS|SSL|secure/i.test(message);
}

/**
 * The body stream of a download, its errors mapped by `map` (a got error as the transport
 * reports it). Returns a PassThrough fed by the got request.
 */
function mappedErrors(r: GotRequest, map: (err: unknown) => Error): DownloadReply['body'] {
  const out = new PassThrough();
  r.on('data', (c: Buffer) => {
    if (!out.write(c)) r.pause();
  });
  out.on('drain', () => r.resume());
  r.on('end', () => out.end());
  // An error once the body has ended belongs to the connection, not to this reply: BOINC's
  // get_output3.php, for a kept file that is not there, answers `Content-Length: 0` and then
  // writes its PHP warnings after the reply (docs/boinc-server.md, "Batch-collect projects:
  // get_output3.php"). The reply is complete; the error must not end the process.
  r.on('error', (err) => {
    if (!out.writableEnded && !out.destroyed) out.destroy(map(err));
  });
  // Every reader attaches its own listener (pipeline, for await); a body drained with
  // resume() has none, and an error emitted to nobody would be an uncaught exception.
  out.on('error', () => {});
  const destroy = out.destroy.bind(out);
  out.destroy = ((err?: Error) => {
    r.destroy();
    return destroy(err);
  });
  return out;
}
