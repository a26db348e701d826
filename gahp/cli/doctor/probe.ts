/**
 * The ladder under an HTTP request, one rung at a time so a failure says which: DNS, TCP,
 * the proxy's CONNECT (when a proxy applies), TLS (https), then the HTTP status of a GET.
 * For `boinc-gahp doctor` only: the GAHP's own requests go through boinc-rpc, which reports
 * a failure as a whole; here each rung is timed and named. Node's core modules only, since
 * a client library hides exactly these steps.
 */
import * as dns from 'node:dns';
import * as http from 'node:http';
import * as net from 'node:net';
import * as tls from 'node:tls';

export type ProbeStep = 'dns' | 'tcp' | 'proxy' | 'tls' | 'http';

/** A rung that failed: `steps` are the ones that worked before it. */
export class ProbeFailure extends Error {
  override name = 'ProbeFailure';
  constructor(
    readonly step: ProbeStep,
    message: string,
    readonly steps: string[],
    readonly code?: string,
  ) {
    super(message);
  }
}

export interface ProbeOptions {
  /** The proxy that applies to this URL (credentials are never printed). */
  proxy?: URL;
  /** Extra trusted CAs (PEM) added to node's bundled ones. */
  ca?: string[];
  timeoutMs: number;
  /** Longest body kept (default 1 MiB; the rest is dropped). */
  maxBody?: number;
}

export interface ProbeResult {
  /** One text per rung that worked, e.g. `DNS example.org -> 192.0.2.1`. */
  steps: string[];
  status: number;
  body: string;
}

const defaultPort = (u: URL) => Number(u.port || (u.protocol === 'https:' ? 443 : 80));
const bareHost = (u: URL) => u.hostname.replace(/^\[|\]$/g, '');

function within<T>(ms: number, what: string, work: Promise<T>, onTimeout: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(Object.assign(new Error(`no answer within ${ms / 1000} s (${what})`), { code: 'ETIMEDOUT' }));
    }, ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function connectTcp(address: string, port: number, ms: number): Promise<net.Socket> {
  const socket = net.connect({ host: address, port });
  return within(ms, 'TCP connect', new Promise<net.Socket>((resolve, reject) => {
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  }), () => socket.destroy());
}

/** Basic credentials from the proxy URL, as the GAHP's HTTP layer sends them. */
function proxyAuthorization(proxy: URL | undefined): Record<string, string> {
  if (!proxy?.username) return {};
  const creds = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return { 'Proxy-Authorization': `Basic ${Buffer.from(creds).toString('base64')}` };
}

/** CONNECT through the proxy; resolves once it answered 200. */
function tunnel(socket: net.Socket, proxy: URL, target: URL, ms: number): Promise<void> {
  const hostPort = `${bareHost(target).includes(':') ? `[${bareHost(target)}]` : bareHost(target)}:${defaultPort(target)}`;
  let head = `CONNECT ${hostPort} HTTP/1.1\r\nHost: ${hostPort}\r\n`;
  for (const [name, value] of Object.entries(proxyAuthorization(proxy))) head += `${name}: ${value}\r\n`;
  socket.write(head + '\r\n');
  return within(ms, 'proxy CONNECT', new Promise<void>((resolve, reject) => {
    let got = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(got.toString('latin1'))?.[1];
      if (status === '200') resolve();
      else reject(Object.assign(new Error(`the proxy answered CONNECT with ${got.toString('latin1').split('\r\n')[0] ?? '?'}`), { code: `HTTP_${status ?? '?'}` }));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('the proxy closed the connection during CONNECT')));
  }), () => socket.destroy());
}

function startTls(socket: net.Socket, url: URL, opts: ProbeOptions): Promise<{ socket: tls.TLSSocket; text: string }> {
  const servername = net.isIP(bareHost(url)) ? undefined : bareHost(url);
  const ca = opts.ca?.length ? [...tls.rootCertificates, ...opts.ca] : undefined;
  // Verified by hand below, so that a refused certificate can be described.
  const t = tls.connect({ socket, servername, rejectUnauthorized: false, ...(ca ? { ca } : {}) });
  return within(opts.timeoutMs, 'TLS handshake', new Promise((resolve, reject) => {
    t.once('secureConnect', () => {
      const cert = t.getPeerCertificate();
      const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
      const subject = first(cert?.subject?.CN) ?? '?';
      const issuer = first(cert?.issuer?.O) ?? first(cert?.issuer?.CN) ?? '?';
      const identityError = servername ? tls.checkServerIdentity(servername, cert) : undefined;
      if (!t.authorized || identityError) {
        const code = identityError ? (identityError as NodeJS.ErrnoException).code ?? 'ERR_TLS_CERT_ALTNAME_INVALID' : String(t.authorizationError);
        t.destroy();
        reject(Object.assign(new Error(`certificate of ${subject} issued by ${issuer} refused: ${identityError?.message ?? code}`), { code }));
        return;
      }
      resolve({ socket: t, text: `TLS ${t.getProtocol() ?? ''} certificate of ${subject} issued by ${issuer} verified` });
    });
    t.once('error', (err: NodeJS.ErrnoException) => {
      // OpenSSL's text is long; the common case said plainly.
      if (/wrong version number/.test(err.message)) reject(Object.assign(new Error('the server does not speak TLS on this port (an http:// URL?)'), { code: err.code }));
      else reject(err);
    });
  }), () => t.destroy());
}

function get(socket: net.Socket, url: URL, viaProxy: boolean, opts: ProbeOptions): Promise<{ status: number; body: string }> {
  const max = opts.maxBody ?? 1024 * 1024;
  let req: http.ClientRequest | undefined;
  return within(opts.timeoutMs, 'HTTP GET', new Promise((resolve, reject) => {
    req = http.request({
      createConnection: () => socket,
      method: 'GET',
      path: viaProxy && url.protocol === 'http:' ? `${url.protocol}//${url.host}${url.pathname}${url.search}` : url.pathname + url.search,
      headers: {
        host: url.host,
        'user-agent': 'boinc-gahp doctor',
        connection: 'close',
        ...(viaProxy && url.protocol === 'http:' ? proxyAuthorization(opts.proxy) : {}),
        // Credentials in the project URL are sent as the GAHP's client sends them.
        ...(url.username ? { authorization: `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}` } : {}),
      },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        if (size < max) chunks.push(d);
        size += d.length;
      });
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).subarray(0, max).toString('latin1') }));
      res.once('error', reject);
    });
    req.end();
  }), () => req?.destroy());
}

/** GETs `url` rung by rung; a ProbeFailure names the rung that failed. */
export async function probeGet(url: URL, opts: ProbeOptions): Promise<ProbeResult> {
  const steps: string[] = [];
  const hop = opts.proxy ?? url;
  const fail = (step: ProbeStep, err: unknown): never => {
    const e = err as NodeJS.ErrnoException;
    throw new ProbeFailure(step, e?.message ?? String(err), [...steps], e?.code);
  };
  let address = '';
  try {
    const found = await within(opts.timeoutMs, 'DNS', dns.promises.lookup(bareHost(hop), { all: true }), () => undefined);
    address = found[0]!.address;
    steps.push(`DNS ${bareHost(hop)}${opts.proxy ? ' (proxy)' : ''} -> ${found.map((a) => a.address).slice(0, 3).join(', ')}`);
  } catch (err) {
    fail('dns', err);
  }
  let socket: net.Socket = undefined as unknown as net.Socket;
  const started = Date.now();
  try {
    socket = await connectTcp(address, defaultPort(hop), opts.timeoutMs);
    steps.push(`TCP ${address}:${defaultPort(hop)} connected in ${Date.now() - started} ms`);
  } catch (err) {
    fail('tcp', err);
  }
  try {
    if (opts.proxy?.protocol === 'https:') {
      // An https:// proxy: TLS to the proxy first, then the request or the tunnel inside it.
      try {
        const t = await startTls(socket, opts.proxy, opts);
        socket = t.socket;
        steps.push(`${t.text} (proxy)`);
      } catch (err) {
        fail('proxy', err);
      }
    }
    if (opts.proxy && url.protocol === 'https:') {
      try {
        await tunnel(socket, opts.proxy, url, opts.timeoutMs);
        steps.push(`proxy CONNECT ${url.host} accepted`);
      } catch (err) {
        fail('proxy', err);
      }
    }
    if (url.protocol === 'https:') {
      try {
        const t = await startTls(socket, url, opts);
        socket = t.socket;
        steps.push(t.text);
      } catch (err) {
        fail('tls', err);
      }
    }
    try {
      const r = await get(socket, url, opts.proxy !== undefined, opts);
      steps.push(`HTTP ${r.status}`);
      return { steps, ...r };
    } catch (err) {
      return fail('http', err);
    }
  } finally {
    socket.destroy();
  }
}
