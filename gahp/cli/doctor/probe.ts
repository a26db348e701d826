/**
 * The ladder under an HTTP request, read from one real GET through the GAHP's own HTTP
 * layer (boinc-rpc/http.ts: the same got client, proxy routes and trust as every RPC), so
 * that a failure says which rung broke: DNS, TCP, the proxy (when one applies), TLS
 * (https), then the HTTP status. For `boinc-gahp doctor` only. The one thing asked outside
 * that request is the DNS lookup of the first hop (the project's host, or the proxy's when
 * one applies: the project's name is then resolved at the proxy), for the "DNS" text; a
 * lookup opens no connection.
 */
import * as dns from 'node:dns';
import { HttpClient, HttpFailure, HttpTimeout, type ConnectionTrace } from '../../../boinc-rpc/http.js';
import { redactUrl, type NetworkSettings } from '../../../boinc-rpc/network.js';

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
  /** The proxy that applies to this URL (its host is the one looked up; credentials are never printed). */
  proxy?: URL;
  /** The GAHP's network settings: the request takes the route and trust every RPC takes. */
  network: NetworkSettings;
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

const bareHost = (u: URL) => u.hostname.replace(/^\[|\]$/g, '');

/** Codes of a connection that never came up (the host or port does not answer). */
const TCP_CODES = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/** The rung a failure of the request belongs to, and its text. */
function failedStep(err: unknown, url: URL, trace: ConnectionTrace, proxy: URL | undefined): { step: ProbeStep; message: string; code?: string } {
  if (err instanceof HttpTimeout) {
    const within = `no answer within ${err.message.replace(/^timeout after /, '')}`;
    if (!trace.connected) return proxy ? { step: 'proxy', message: `proxy ${redactUrl(proxy)}: ${within}`, code: err.code } : { step: 'tcp', message: within, code: err.code };
    return { step: url.protocol === 'https:' && !trace.tls ? 'tls' : 'http', message: within, code: err.code };
  }
  const e = err as { code?: string; message?: string };
  const code = e.code;
  const message = e.message ?? String(err);
  if (err instanceof HttpFailure && err.hop) return { step: err.hop, message, ...(code ? { code } : {}) };
  const known = code ? { code } : {};
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return { step: 'dns', message, ...known };
  if (code && TCP_CODES.has(code)) return { step: 'tcp', message, ...known };
  // OpenSSL's text is long; the common case said plainly.
  if (/wrong version number/i.test(message)) return { step: 'tls', message: 'the server does not speak TLS on this port (an http:// URL?)', ...known };
  if (url.protocol === 'https:' && !trace.tls && (/^ERR_(SSL|TLS)|^EPROTO$/.test(code ?? '') || /TLS|SSL|secure/.test(message))) return { step: 'tls', message, ...known };
  return { step: 'http', message, ...known };
}

/** The rungs the request got through before `failed` (or all of them). */
function rungs(url: URL, trace: ConnectionTrace, proxied: boolean): string[] {
  const steps: string[] = [];
  if (trace.connected) steps.push(`TCP ${trace.connected.address}:${trace.connected.port} connected in ${trace.connected.ms} ms`);
  if (trace.tls) steps.push(`${proxied ? `proxy CONNECT ${url.host} accepted, ` : ''}TLS ${trace.tls.protocol} certificate of ${trace.tls.subject} issued by ${trace.tls.issuer} verified`);
  return steps;
}

/** GETs `url` through the GAHP's HTTP layer; a ProbeFailure names the rung that failed. */
export async function probeGet(url: URL, opts: ProbeOptions): Promise<ProbeResult> {
  const steps: string[] = [];
  const hop = opts.proxy ?? url;
  try {
    const found = await dns.promises.lookup(bareHost(hop), { all: true });
    steps.push(`DNS ${bareHost(hop)}${opts.proxy ? ' (proxy)' : ''} -> ${found.map((a) => a.address).slice(0, 3).join(', ')}`);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ProbeFailure('dns', e.message, steps, e.code);
  }
  const client = new HttpClient(opts.network, opts.timeoutMs);
  const trace: ConnectionTrace = {};
  try {
    const r = await client.get(url.href, { timeoutMs: opts.timeoutMs, userAgent: 'boinc-gahp doctor', maxBytes: opts.maxBody ?? 1024 * 1024, trace });
    steps.push(...rungs(url, trace, opts.proxy !== undefined), `HTTP ${r.status}`);
    return { steps, status: r.status, body: r.body.toString('latin1') };
  } catch (err) {
    const failed = failedStep(err, url, trace, opts.proxy);
    throw new ProbeFailure(failed.step, failed.message, [...steps, ...rungs(url, trace, opts.proxy !== undefined)], failed.code);
  } finally {
    client.destroy();
  }
}
