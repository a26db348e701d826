/**
 * A forwarding HTTP proxy for tests, as a site's squid would be: requests in absolute form
 * (`POST http://host:port/path`) are forwarded, CONNECT opens a tunnel. Host names are
 * resolved only here, through `hosts` (e.g. boinc.invalid -> 127.0.0.1), so a client that
 * reaches a project named that way can only have gone through the proxy. With
 * `credentials`, a request without the right Proxy-Authorization gets 407. Every request is
 * recorded (how it came, where to, the Proxy-Authorization it carried).
 */
import * as http from 'node:http';
import * as net from 'node:net';

export interface ProxiedRequest {
  kind: 'forward' | 'connect';
  /** The absolute URL (forward) or host:port (connect) asked for. */
  target: string;
  method: string;
  proxyAuthorization?: string;
  /** What the proxy answered itself (407, 502), when it did not pass the request on. */
  refused?: number;
}

export interface ForwardProxy {
  url: string;
  port: number;
  requests: ProxiedRequest[];
  close(): Promise<void>;
}

export async function startForwardProxy(opts: { hosts: Record<string, string>; credentials?: string }): Promise<ForwardProxy> {
  const requests: ProxiedRequest[] = [];
  const expected = opts.credentials ? `Basic ${Buffer.from(opts.credentials).toString('base64')}` : undefined;
  const resolve = (host: string) => opts.hosts[host.replace(/^\[(.*)\]$/, '$1').toLowerCase()];
  const sockets = new Set<net.Socket>();

  const server = http.createServer((req, res) => {
    const record: ProxiedRequest = { kind: 'forward', target: req.url ?? '', method: req.method ?? '', ...(req.headers['proxy-authorization'] ? { proxyAuthorization: req.headers['proxy-authorization'] } : {}) };
    requests.push(record);
    const refuse = (status: number, headers: http.OutgoingHttpHeaders = {}) => {
      record.refused = status;
      req.resume();
      res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(`proxy refused: ${status}\n`);
    };
    if (expected && req.headers['proxy-authorization'] !== expected) return refuse(407, { 'proxy-authenticate': 'Basic realm="test proxy"' });
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      return refuse(400);
    }
    const address = resolve(target.hostname);
    if (!address || target.protocol !== 'http:') return refuse(502);
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = http.request({ host: address, port: Number(target.port) || 80, method: req.method, path: `${target.pathname}${target.search}`, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => (res.headersSent ? res.destroy() : refuse(502)));
    req.pipe(upstream);
  });

  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const record: ProxiedRequest = { kind: 'connect', target: req.url ?? '', method: 'CONNECT', ...(req.headers['proxy-authorization'] ? { proxyAuthorization: req.headers['proxy-authorization'] } : {}) };
    requests.push(record);
    client.on('error', () => undefined);
    const refuse = (status: number, extra = '') => {
      record.refused = status;
      client.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${extra}Content-Length: 0\r\n\r\n`);
    };
    if (expected && req.headers['proxy-authorization'] !== expected) return refuse(407, 'Proxy-Authenticate: Basic realm="test proxy"\r\n');
    const m = /^(.+):(\d+)$/.exec(req.url ?? '');
    const address = m ? resolve(m[1]!) : undefined;
    if (!m || !address) return refuse(502);
    const upstream = net.connect(Number(m[2]), address, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => (client.writable ? refuse(502) : client.destroy()));
    client.on('close', () => upstream.destroy());
  });
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on (a proxy that is down). */
export async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
