/**
 * Check family 1, last line: the proxy in effect for the project URL and the sources of
 * trust for its TLS certificate. What the probe (probe.ts) uses comes from here too, so
 * the doctor connects the way the GAHP would. A proxy's password is never printed.
 */
import * as fs from 'node:fs';
import * as tls from 'node:tls';
import type { DoctorContext } from './context.js';
import type { Report } from './report.js';

export interface NetworkPlan {
  /** The proxy the GAHP would use for this URL (none today: see below). */
  proxy?: URL;
  /** Extra CAs to trust (PEM texts). */
  ca: string[];
}

/** A proxy URL fit to print: the password replaced. */
export function redactProxy(u: URL): string {
  const c = new URL(u.href);
  if (c.password) c.password = '***';
  return c.href;
}

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy'];

/**
 * The proxy line and the trust line for `url`. This version of the RPC client connects
 * directly and ignores the proxy variables: a proxy variable set in the environment is a
 * warning (the GAHP will not use it), not a proxy in effect.
 */
export function checkNetwork(ctx: DoctorContext, report: Report, url: URL | undefined): NetworkPlan {
  const { env } = ctx;
  const plan: NetworkPlan = { ca: [] };
  const set = PROXY_VARIABLES.filter((v) => env[v]);
  const target = url ? ` for ${url.origin}` : '';
  if (set.length > 0) {
    let shown = '(unparsable)';
    try {
      shown = redactProxy(new URL(env[set[0]!]!));
    } catch {
      // The variable's text is not printed: it may hold a password.
    }
    report.warn('host', `proxy${target}`, `${set.join(', ')} set (${shown}), but this boinc-gahp connects directly and does not use it`,
      'unset the proxy variables for boinc-gahp, or let this host reach the project directly');
  } else {
    report.ok('host', `proxy${target}`, 'none in effect: direct connection');
  }
  const sources = [`node's bundled CA list (${tls.rootCertificates.length} certificates)`];
  const extra = env.NODE_EXTRA_CA_CERTS;
  if (extra) {
    try {
      plan.ca.push(fs.readFileSync(extra, 'utf8'));
      sources.push(`NODE_EXTRA_CA_CERTS ${extra}`);
    } catch (err) {
      report.fail('host', 'trust sources', `NODE_EXTRA_CA_CERTS names ${extra}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        `point NODE_EXTRA_CA_CERTS at the site's CA bundle (PEM) or unset it`);
      return plan;
    }
  }
  report.ok('host', 'trust sources', sources.join(' + '));
  return plan;
}
