/**
 * How a request reaches its URL (http.ts asks): direct; through an HTTP proxy for an http://
 * project, as curl does it, the request in absolute form (`POST http://host/path`) to the
 * proxy (squid's default configuration refuses CONNECT to port 80); through a CONNECT
 * tunnel (hpagent) for an https:// project. network.ts says which proxy. Kept-alive agents,
 * one set per route; TLS trusts node's bundled roots and the system's bundles (network.ts,
 * trustSources) in one secure context made at the first https request.
 */
import type * as http from 'node:http';
import type * as tls from 'node:tls';
import * as fs from 'node:fs';
import { chooseProxy, trustSources, ProxySettingError, type NetworkSettings } from './network.js';
import { HttpFailure } from './http-errors.js';

/** How a request reaches its URL: got's options for it, and the proxy if there is one. */
export interface Route {
  proxy?: URL;
  /** CONNECT tunnel (https:// through a proxy) rather than a request in absolute form. */
  tunnel?: boolean;
  options: Record<string, unknown>;
}

export class Routes {
  private readonly agents = new Map<string, Promise<http.Agent>>();
  private secureContext: tls.SecureContext | undefined;

  constructor(
    private readonly network: NetworkSettings = {},
    /** A CONNECT the proxy leaves unanswered this long is given up (http.ts, HttpClient). */
    private readonly connectTimeoutMs = 60_000,
  ) {}

  /** The trusted certificates as one secure context, made once (network.ts, trustSources). */
  private async trust(): Promise<tls.SecureContext> {
    if (this.secureContext) return this.secureContext;
    const tlsModule = await import('node:tls');
    const ca: string[] = [...tlsModule.rootCertificates];
    // The same file is often named twice (SSL_CERT_FILE and NODE_EXTRA_CA_CERTS, a
    // directory's hash links to its *.pem files): each is read once.
    const read = new Set<string>();
    for (const source of trustSources(this.network)) {
      for (const file of source.files) {
        try {
          const real = fs.realpathSync(file);
          if (read.has(real)) continue;
          read.add(real);
          ca.push(fs.readFileSync(real, 'latin1'));
        } catch (err) {
          // A trust source that cannot be read is not fatal (the others still count); the
          // TLS error, if one follows, lists the sources.
          if (source.label.startsWith('--ca-file')) throw new HttpFailure('ENOENT', `cannot read the CA file ${file}: ${(err as Error).message}`);
        }
      }
    }
    return (this.secureContext ??= tlsModule.createSecureContext({ ca }));
  }

  private agent(key: string, make: () => Promise<http.Agent>): Promise<http.Agent> {
    let agent = this.agents.get(key);
    if (!agent) {
      agent = make();
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** got's options that take a request to `url` by its route. */
  async route(url: URL): Promise<Route> {
    let choice;
    try {
      choice = chooseProxy(url, this.network);
    } catch (err) {
      if (err instanceof ProxySettingError) throw new HttpFailure('EPROXYSETTING', err.message, 'proxy');
      throw err;
    }
    const keepAlive = { keepAlive: true, maxSockets: 64 };
    const proxy = choice.proxy;
    if (!proxy) {
      if (url.protocol === 'http:') {
        const agent = await this.agent('direct http', async () => new (await import('node:http')).Agent(keepAlive));
        return { options: { agent: { http: agent } } };
      }
      const secureContext = await this.trust();
      const agent = await this.agent('direct https', async () => new (await import('node:https')).Agent({ ...keepAlive, secureContext }));
      return { options: { agent: { https: agent } } };
    }
    // An https:// proxy's own certificate is checked against the same trust.
    const proxyContext = proxy.protocol === 'https:' ? { secureContext: await this.trust() } : {};
    if (url.protocol === 'https:') {
      // A CONNECT tunnel to the project, TLS with it inside (hpagent).
      const secureContext = await this.trust();
      const agent = await this.agent(`connect ${proxy.href}`, async () => {
        const { HttpsProxyAgent } = await import('hpagent');
        // `timeout` bounds the wait for the proxy's answer to the CONNECT (hpagent) and the idle
        // time of kept-alive tunnels.
        return new HttpsProxyAgent({ ...keepAlive, proxy, secureContext, proxyRequestOptions: proxyContext as object, timeout: this.connectTimeoutMs });
      });
      return { proxy, tunnel: true, options: { agent: { https: agent } } };
    }
    // http:// through the proxy: the request line carries the absolute URL (no credentials:
    // those go as Authorization, set by got), Proxy-Authorization the proxy's.
    const agent = await this.agent(`forward ${proxy.href}`, async () =>
      proxy.protocol === 'https:' ? new (await import('node:https')).Agent({ ...keepAlive, ...proxyContext }) : new (await import('node:http')).Agent(keepAlive),
    );
    const requestModule = proxy.protocol === 'https:' ? await import('node:https') : await import('node:http');
    const proxyAuth = proxy.username || proxy.password ? `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}` : undefined;
    const request = (target: URL, options: http.RequestOptions, callback?: (res: http.IncomingMessage) => void) =>
      requestModule.request(
        {
          ...options,
          protocol: proxy.protocol,
          host: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
          hostname: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: Number(proxy.port) || (proxy.protocol === 'https:' ? 443 : 80),
          path: `${target.protocol}//${target.host}${target.pathname}${target.search}`,
          agent,
          headers: { ...options.headers, host: target.host, ...(proxyAuth ? { 'proxy-authorization': proxyAuth } : {}) },
        },
        callback,
      );
    return { proxy, options: { request } };
  }

  destroy(): void {
    for (const agent of this.agents.values()) void agent.then((a) => a.destroy(), () => undefined);
  }
}
