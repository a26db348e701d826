/**
 * The proxy and trust rules of boinc-rpc/network.ts, read as libcurl reads them: which
 * variable gives the proxy for which scheme, what no_proxy matches, what --proxy and
 * --no-proxy override, and what describeNetwork (ping, doctor) reports, never a password.
 */
import { chooseProxy, describeNetwork, noProxyMatch, parseProxyUrl, proxySecrets, ProxySettingError, BUNDLED_ROOTS } from '../../boinc-rpc/network.js';

const proxyOf = (url: string, env: Record<string, string>, extra: { proxy?: string; noProxy?: string } = {}) => chooseProxy(new URL(url), { env, ...extra }).proxy?.href ?? null;

test('the variable per scheme: http_proxy in lower case only, https_proxy or HTTPS_PROXY, then all_proxy or ALL_PROXY', () => {
  expect(proxyOf('http://p.example/', { http_proxy: 'http://a:3128' })).toBe('http://a:3128/');
  // curl ignores HTTP_PROXY (a CGI client could set it through a Proxy: header).
  expect(proxyOf('http://p.example/', { HTTP_PROXY: 'http://a:3128' })).toBeNull();
  expect(proxyOf('https://p.example/', { http_proxy: 'http://a:3128' })).toBeNull();
  expect(proxyOf('https://p.example/', { HTTPS_PROXY: 'http://b:3128' })).toBe('http://b:3128/');
  expect(proxyOf('https://p.example/', { https_proxy: 'http://b:1', HTTPS_PROXY: 'http://c:2' })).toBe('http://b:1/');
  expect(proxyOf('http://p.example/', { ALL_PROXY: 'http://d:8080' })).toBe('http://d:8080/');
  expect(proxyOf('https://p.example/', { all_proxy: 'http://d:8080', https_proxy: 'http://b:1' })).toBe('http://b:1/');
  expect(proxyOf('http://p.example/', {})).toBeNull();
  expect(proxyOf('http://p.example/', { http_proxy: '  ' })).toBeNull();
});

test('a proxy as curl reads it: http:// when no scheme, port 1080 when none; other schemes refused', () => {
  expect(parseProxyUrl('proxy.site:3128', 'http_proxy').href).toBe('http://proxy.site:3128/');
  expect(parseProxyUrl('proxy.site', 'http_proxy').href).toBe('http://proxy.site:1080/');
  expect(parseProxyUrl('http://proxy.site:80', 'http_proxy').port).toBe('');
  expect(parseProxyUrl('https://proxy.site', 'https_proxy').href).toBe('https://proxy.site/');
  expect(() => parseProxyUrl('socks5://proxy.site:1080', 'all_proxy')).toThrow(ProxySettingError);
  expect(() => parseProxyUrl('socks5://u:secret@proxy.site:1080', 'all_proxy')).toThrow(/only http:\/\/ and https:\/\/ proxies are supported/);
  try {
    parseProxyUrl('socks5://u:secret@proxy.site:1080', 'all_proxy');
  } catch (e) {
    expect((e as Error).message).not.toContain('secret');
  }
});

test.each([
  ['example.org', 'example.org', 80, 'example.org'],
  ['example.org', 'www.example.org', 80, 'example.org'],
  ['.example.org', 'example.org', 80, '.example.org'],
  ['.example.org', 'a.b.example.org', 80, '.example.org'],
  ['*.example.org', 'www.example.org', 80, '*.example.org'],
  ['example.org', 'badexample.org', 80, undefined],
  ['EXAMPLE.org.', 'www.example.org', 80, 'EXAMPLE.org.'],
  ['a.test, example.org', 'example.org', 80, 'example.org'],
  ['a.test example.org', 'example.org', 80, 'example.org'],
  ['*', 'anything.at.all', 443, '*'],
  ['127.0.0.1', '127.0.0.1', 80, '127.0.0.1'],
  ['127.0.0.0/8', '127.1.2.3', 80, '127.0.0.0/8'],
  ['10.0.0.0/8', '127.0.0.1', 80, undefined],
  ['::1', '::1', 80, '::1'],
  ['[::1]', '::1', 80, '[::1]'],
  ['fd00::/8', 'fd12::5', 443, 'fd00::/8'],
  ['example.org:8080', 'example.org', 8080, 'example.org:8080'],
  ['example.org:8080', 'example.org', 80, undefined],
  ['[::1]:8080', '::1', 8080, '[::1]:8080'],
  ['', 'example.org', 80, undefined],
])('no_proxy %j and host %s port %d: %s', (list, host, port, expected) => {
  expect(noProxyMatch(list, host, port)).toBe(expected);
});

test('no_proxy / NO_PROXY bypass the proxy; --proxy and --no-proxy override the environment', () => {
  const env = { https_proxy: 'http://b:3128', no_proxy: '.example.org' };
  expect(chooseProxy(new URL('https://boinc.example.org/p/'), { env })).toEqual({ proxy: null, bypassedBy: 'no_proxy: .example.org' });
  expect(chooseProxy(new URL('https://[::1]:8443/p/'), { env: { https_proxy: 'http://b:1', NO_PROXY: '::1' } }).bypassedBy).toBe('NO_PROXY: ::1');
  expect(proxyOf('https://boinc.example.org/', env, { noProxy: '' })).toBe('http://b:3128/');
  expect(proxyOf('https://boinc.example.org/', env, { proxy: '' })).toBeNull();
  expect(proxyOf('http://other.test/', env, { proxy: 'http://c:8080' })).toBe('http://c:8080/');
  expect(chooseProxy(new URL('http://boinc.example.org/'), { env: {}, proxy: 'http://c:8080', noProxy: 'example.org' }).bypassedBy).toBe('--no-proxy: example.org');
});

test('describeNetwork: the proxy without its credentials, why it is bypassed, the trust sources', () => {
  const env = { https_proxy: 'http://user:pa%40ss@proxy.site:3128', SSL_CERT_FILE: '/site/ca.pem', NODE_EXTRA_CA_CERTS: '/extra.pem' };
  const d = describeNetwork('https://boinc.example.org/p/', { env, caFile: '/my/ca.pem' });
  expect(d).toEqual({ proxy: 'http://proxy.site:3128', trustSources: [BUNDLED_ROOTS, 'SSL_CERT_FILE /site/ca.pem', 'NODE_EXTRA_CA_CERTS /extra.pem', '--ca-file /my/ca.pem'] });
  expect(JSON.stringify(d)).not.toMatch(/pa%40ss|pa@ss|user/);
  expect(describeNetwork('https://boinc.example.org/p/', { env: { ...env, NO_PROXY: 'example.org' } })).toMatchObject({ proxy: null, bypassedBy: 'NO_PROXY: example.org' });
  expect(describeNetwork('http://boinc.example.org/p/', { env: { http_proxy: 'socks5://u:secret@s:1080' } }).proxy).toMatch(/^\(unusable: .*socks5/);
  expect(describeNetwork('http://boinc.example.org/p/', { env: { http_proxy: 'socks5://u:secret@s:1080' } }).proxy).not.toContain('secret');
});

test('the proxy credentials to redact: raw and percent-decoded, from the options and every variable', () => {
  const secrets = proxySecrets({ proxy: 'http://u1:p%40ss1@a:1', env: { HTTPS_PROXY: 'b-user:pw2@b:2', http_proxy: 'http://c:3' } });
  expect(secrets).toEqual(expect.arrayContaining(['u1:p%40ss1', 'p%40ss1', 'p@ss1', 'b-user:pw2', 'pw2']));
  expect(proxySecrets({ env: {} })).toEqual([]);
});
