/**
 * Check family 1, last lines: the proxy in effect for the project URL and the sources of
 * trust for its TLS certificate, as boinc-rpc/network.ts decides them for every RPC
 * (--proxy, --no-proxy, --ca-file, the proxy and CA variables; docs/architecture.md,
 * "Proxies and trust"). The probe (probe.ts) sends its request through the GAHP's own HTTP
 * layer, so the doctor connects the way the GAHP does. A proxy's user and password are never printed.
 */
import * as fs from 'node:fs';
import { chooseProxy, describeNetwork, ProxySettingError, trustSources } from '../../../boinc-rpc/network.js';
import { networkSettings } from '../options.js';
import type { DoctorContext } from './context.js';
import type { Report } from './report.js';

export interface NetworkPlan {
  /** The proxy requests to the project go through (with its credentials: never print it). */
  proxy?: URL;
}

const PROXY_FIX = 'correct --proxy (BOINC_GAHP_PROXY) or the https_proxy / http_proxy / all_proxy variable: an http:// or https:// URL';

function proxyLine(ctx: DoctorContext, report: Report, url: URL | undefined, plan: NetworkPlan): void {
  if (!url) {
    report.ok('host', 'proxy', 'not checked: no usable project URL (see below)');
    return;
  }
  const settings = { ...networkSettings(ctx.g), env: ctx.env };
  const what = `proxy for ${url.origin}`;
  let proxy: URL | null;
  try {
    proxy = chooseProxy(url, settings).proxy;
  } catch (err) {
    if (!(err instanceof ProxySettingError)) throw err;
    report.fail('host', what, err.message, PROXY_FIX);
    return;
  }
  const described = describeNetwork(url.href, settings);
  if (proxy) {
    plan.proxy = proxy;
    report.ok('host', what, `${described.proxy ?? '?'}${proxy.username ? ' (with credentials, not shown)' : ''}`);
  } else {
    report.ok('host', what, `none: direct connection${described.bypassedBy ? ` (bypassed by ${described.bypassedBy})` : ''}`);
  }
}

/** The proxy line and the trust line for `url`; the proxy the probe's request goes through. */
export function checkNetwork(ctx: DoctorContext, report: Report, url: URL | undefined): NetworkPlan {
  const plan: NetworkPlan = {};
  proxyLine(ctx, report, url, plan);
  const sources = trustSources({ ...networkSettings(ctx.g), env: ctx.env });
  const unreadable: string[] = [];
  for (const source of sources) {
    for (const file of source.files) {
      try {
        fs.readFileSync(file);
      } catch (err) {
        unreadable.push(`${source.label}: ${file} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`);
      }
    }
  }
  const labels = sources.map((s) => s.label).join('; ');
  if (unreadable.length) {
    report.fail('host', 'trust sources', `${labels}; cannot read ${unreadable.join(', ')}`,
      'point --ca-file (BOINC_GAHP_CA_FILE) or the named variable at a readable PEM bundle, or unset it');
  } else {
    report.ok('host', 'trust sources', labels);
  }
  return plan;
}
