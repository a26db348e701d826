/**
 * Which proxy a request goes through and which certificates it trusts, read the way
 * libcurl reads them, so that a host set up for curl needs nothing more
 * (docs/architecture.md, "Proxies and trust"):
 *
 * - Proxy: `--proxy` (the caller's `proxy`) for every scheme when given ('' for none); else
 *   `http_proxy` for http:// (lowercase only: curl ignores HTTP_PROXY, which a CGI
 *   environment lets a client set), `https_proxy` or `HTTPS_PROXY` for https://, then
 *   `all_proxy` or `ALL_PROXY`. A proxy without a scheme is http://, without a port :1080
 *   (curl's defaults). Only http:// and https:// proxies are supported.
 * - Bypass: `--no-proxy` (the caller's `noProxy`) when given, else `no_proxy` or `NO_PROXY`:
 *   a list separated by commas or spaces; `*` alone matches every host; a name matches
 *   itself and every host below it (`example.org` and `.example.org` both match
 *   `example.org` and `www.example.org`, never `badexample.org`); an IP literal (IPv6 with
 *   or without brackets) or a CIDR block matches the addresses in it; `host:port` matches
 *   that port only (curl ignores ports there; wget and Python honour them).
 * - Trust: node's bundled roots, plus the system's bundle (`SSL_CERT_FILE` when set, else
 *   the distribution's file), the certificates of `SSL_CERT_DIR` when set, node's own
 *   `NODE_EXTRA_CA_CERTS`, and `--ca-file`. Verification is never turned off.
 *
 * Nothing here sends anything: the HTTP layer (http.ts) asks these functions; `boinc-gahp
 * ping` and `doctor` print describeNetwork's answer.
 *
 * Why not the proxy-from-env package: it reads HTTP_PROXY in upper case, matches a bare
 * `example.org` only exactly, makes `.example.org` miss `example.org` itself, matches
 * suffixes without a dot boundary, keeps IPv6 brackets, and reads only process.env (no
 * --proxy / --no-proxy override): each a difference from curl, so the rules are here.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

export interface NetworkSettings {
  /** `--proxy` / BOINC_GAHP_PROXY: the proxy of every request, overriding the environment; '' for none. */
  proxy?: string;
  /** `--no-proxy` / BOINC_GAHP_NO_PROXY: the bypass list, overriding no_proxy / NO_PROXY. */
  noProxy?: string;
  /** `--ca-file` / BOINC_GAHP_CA_FILE: a PEM bundle trusted in addition. */
  caFile?: string;
  /** Where the proxy and trust variables are read (default: process.env). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** What a request to a URL goes through, for people (no credentials). */
export interface NetworkDescription {
  /** The proxy, its user and password removed; null: a direct connection. */
  proxy: string | null;
  /** Why a configured proxy is not used: the bypass entry that matched, e.g. `no_proxy: .example.org`. */
  bypassedBy?: string;
  /** Where trusted certificates come from, e.g. `node's bundled roots`, `system bundle /etc/ssl/certs/ca-certificates.crt`. */
  trustSources: string[];
}

/** The bundle files of the common distributions, the first present one is the system's. */
export const SYSTEM_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt', // Debian, Ubuntu, Arch, Gentoo
  '/etc/pki/tls/certs/ca-bundle.crt', // Red Hat, Fedora, Alma, Rocky (EL)
  '/etc/ssl/ca-bundle.pem', // SUSE
  '/etc/ssl/cert.pem', // Alpine, macOS
];

export const BUNDLED_ROOTS = "node's bundled roots";

/** The proxy chosen for a URL and the variable it came from, or why none. */
export interface ProxyChoice {
  proxy: URL | null;
  /** Where the proxy came from (`--proxy`, `https_proxy`, ...). */
  from?: string;
  bypassedBy?: string;
}

/** A proxy setting that cannot be used (bad URL, unsupported scheme): requests fail with this message. */
export class ProxySettingError extends Error {
  override name = 'ProxySettingError';
}

const envOf = (s: NetworkSettings) => s.env ?? process.env;

/** The first of `names` set to a non-empty value in env, with its name. */
function firstSet(env: NetworkSettings['env'] & object, names: string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') return { name, value: value.trim() };
  }
  return undefined;
}

/** A proxy URL as curl reads it: http:// when no scheme, port 1080 when none. */
export function parseProxyUrl(text: string, from: string): URL {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ProxySettingError(`the proxy of ${from} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ProxySettingError(`the proxy of ${from} (${redactUrl(url)}) uses ${url.protocol.slice(0, -1)}; only http:// and https:// proxies are supported`);
  }
  const authority = withScheme.replace(/^[^:]+:\/\//, '').split(/[/?#]/)[0]!.replace(/^.*@/, '');
  if (url.protocol === 'http:' && !/:\d+$/.test(authority)) url.port = '1080';
  return url;
}

/** A URL without its user and password (and without path, query or fragment beyond `/`). */
export function redactUrl(url: URL | string): string {
  const u = typeof url === 'string' ? safeUrl(url) : url;
  if (!u) return '(not a URL)';
  return `${u.protocol}//${u.host}`;
}

function safeUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** The port a URL goes to. */
function portOf(url: URL): number {
  return Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
}

/** The host of a URL as no_proxy entries are compared with it: lower case, no brackets, no trailing dot. */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '').toLowerCase();
}

/** The no_proxy entry matching host:port, or undefined. */
export function noProxyMatch(list: string, host: string, port: number): string | undefined {
  const trimmed = list.trim();
  if (trimmed === '') return undefined;
  if (trimmed === '*') return '*';
  const hostIp = net.isIP(host);
  for (const entry of trimmed.split(/[\s,]+/)) {
    if (entry === '') continue;
    let name = entry.toLowerCase();
    // A port: `host:port`, `[v6]:port`; a bare IPv6 literal has colons but no port.
    const withPort = /^\[([^\]]+)\]:(\d+)$/.exec(name) ?? (net.isIPv6(name.split('/')[0]!) ? null : /^(.+):(\d+)$/.exec(name));
    if (withPort) {
      if (Number(withPort[2]) !== port) continue;
      name = withPort[1]!;
    }
    name = name.replace(/^\[(.*)\]$/, '$1');
    if (name === '*') return entry;
    if (hostIp) {
      if (ipMatches(host, name)) return entry;
      continue;
    }
    name = name.replace(/^\*?\./, '').replace(/\.$/, '');
    if (name !== '' && (host === name || host.endsWith(`.${name}`))) return entry;
  }
  return undefined;
}

/** Whether IP address `host` is `entry` (an address, or a CIDR block `addr/bits`). */
function ipMatches(host: string, entry: string): boolean {
  const [addr, bits] = entry.split('/') as [string, string | undefined];
  const family = net.isIP(addr);
  if (family === 0) return false;
  const type = family === 6 ? 'ipv6' : 'ipv4';
  const list = new net.BlockList();
  try {
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
    return list.check(host, net.isIPv6(host) ? 'ipv6' : 'ipv4');
  } catch {
    return false;
  }
}

/**
 * The proxy of a request to `url` (http: or https:), or none. Throws ProxySettingError for a
 * proxy setting that cannot be used.
 */
export function chooseProxy(url: URL, settings: NetworkSettings = {}): ProxyChoice {
  const env = envOf(settings);
  let chosen: { name: string; value: string } | undefined;
  if (settings.proxy !== undefined) {
    chosen = settings.proxy.trim() === '' ? undefined : { name: '--proxy', value: settings.proxy.trim() };
  } else {
    const schemeVars = url.protocol === 'https:' ? ['https_proxy', 'HTTPS_PROXY'] : ['http_proxy'];
    chosen = firstSet(env, [...schemeVars, 'all_proxy', 'ALL_PROXY']);
  }
  if (!chosen) return { proxy: null };
  const bypass = settings.noProxy !== undefined ? { name: '--no-proxy', value: settings.noProxy } : firstSet(env, ['no_proxy', 'NO_PROXY']);
  if (bypass) {
    const entry = noProxyMatch(bypass.value, bareHost(url), portOf(url));
    if (entry !== undefined) return { proxy: null, bypassedBy: `${bypass.name}: ${entry}` };
  }
  return { proxy: parseProxyUrl(chosen.value, chosen.name), from: chosen.name };
}

/** A source of trusted certificates: a label for people, the PEM files it reads (none: node's roots). */
export interface TrustSource {
  label: string;
  files: string[];
}

/** The PEM files of a directory (SSL_CERT_DIR: OpenSSL's hashed names, or *.pem / *.crt). */
function certFilesIn(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir)
      .filter((n) => /\.(pem|crt)$/i.test(n) || /^[0-9a-f]{8}\.\d+$/i.test(n))
      .map((n) => path.join(dir, n))
      .filter((p) => fs.statSync(p, { throwIfNoEntry: false })?.isFile() ?? false);
  } catch {
    return [];
  }
}

/** Where trusted certificates come from, in the order they are added. */
export function trustSources(settings: NetworkSettings = {}): TrustSource[] {
  const env = envOf(settings);
  const sources: TrustSource[] = [{ label: BUNDLED_ROOTS, files: [] }];
  const certFile = env.SSL_CERT_FILE?.trim();
  if (certFile) {
    sources.push({ label: `SSL_CERT_FILE ${certFile}`, files: [certFile] });
  } else {
    const system = SYSTEM_BUNDLES.find((f) => fs.existsSync(f));
    if (system) sources.push({ label: `system bundle ${system}`, files: [system] });
  }
  const certDir = env.SSL_CERT_DIR?.trim();
  if (certDir) {
    for (const dir of certDir.split(':').filter((d) => d !== '')) sources.push({ label: `SSL_CERT_DIR ${dir}`, files: certFilesIn(dir) });
  }
  const extra = env.NODE_EXTRA_CA_CERTS?.trim();
  if (extra) sources.push({ label: `NODE_EXTRA_CA_CERTS ${extra}`, files: [extra] });
  if (settings.caFile) sources.push({ label: `--ca-file ${settings.caFile}`, files: [settings.caFile] });
  return sources;
}

/**
 * What a request to projectUrl goes through: the proxy (without credentials) or null, the
 * bypass entry that keeps a configured proxy out, and the trust sources. Never throws: a
 * proxy setting that cannot be used is described as such.
 */
export function describeNetwork(projectUrl: string, settings: NetworkSettings = {}): NetworkDescription {
  const trust = trustSources(settings).map((s) => s.label);
  const url = safeUrl(projectUrl);
  if (!url) return { proxy: null, trustSources: trust };
  let choice: ProxyChoice;
  try {
    choice = chooseProxy(url, settings);
  } catch (err) {
    return { proxy: `(unusable: ${(err as Error).message})`, trustSources: trust };
  }
  return {
    proxy: choice.proxy ? redactUrl(choice.proxy) : null,
    ...(choice.bypassedBy !== undefined ? { bypassedBy: choice.bypassedBy } : {}),
    trustSources: trust,
  };
}

/** The proxy's user and password as written in settings and environment, to redact wherever text is reported. */
export function proxySecrets(settings: NetworkSettings = {}): string[] {
  const env = envOf(settings);
  const values = [settings.proxy, ...['http_proxy', 'https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY'].map((n) => env[n])];
  const secrets = new Set<string>();
  for (const v of values) {
    if (!v) continue;
    const m = /^(?:[a-z][a-z0-9+.-]*:\/\/)?([^@/]*)@/i.exec(v.trim());
    if (!m) continue;
    const userinfo = m[1]!;
    const colon = userinfo.indexOf(':');
    const password = colon >= 0 ? userinfo.slice(colon + 1) : '';
    for (const s of [userinfo, password]) {
      if (s.length === 0) continue;
      secrets.add(s);
      try {
        secrets.add(decodeURIComponent(s));
      } catch {
        /* not percent-encoded */
      }
    }
  }
  return [...secrets].filter((s) => s.length > 0);
}
