/**
 * A project reachable only through the site's proxy, as on many submit hosts: the real GAHP
 * (bin/boinc-gahp) with the proxy in its environment as curl reads it, the project named
 * boinc.invalid, a name only the test proxy (test/support/forward-proxy.ts) resolves. A
 * whole cycle (submit, query, fetch, retire) over http:// (requests in absolute form) and
 * over https:// (CONNECT, the test server behind TLS with a certificate of a site CA given
 * by --ca-file, and once by SSL_CERT_FILE); no_proxy bypassing the proxy; a proxy asking
 * for credentials, a proxy that is down and one that cannot reach the project giving
 * results that name the proxy; the proxy's password in no output and no log.
 *
 * test/support/tls/site-ca.pem is a CA made for these tests; site-server-cert.pem (key
 * beside it) is signed by it for boinc.invalid, localhost and 127.0.0.1.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { BoincClient } from '../../boinc-rpc/client.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { GahpProcess, REPO_ROOT, makeTempDir } from '../support/gahp-process.js';
import { closedPort, startForwardProxy, type ForwardProxy } from '../support/forward-proxy.js';
import { startTlsFront, type TlsFront } from '../support/tls-front.js';
import { batchName, esc, jobName, waitPast } from '../commands/helpers.js';
import { runCli } from '../cli/cli-support.js';

const TLS_DIR = path.join(REPO_ROOT, 'test', 'support', 'tls');
const SITE_CA = path.join(TLS_DIR, 'site-ca.pem');
const PASSWORD = 'pr0xy-s3cret';
const CREDENTIALS = `site-user:${PASSWORD}`;

let server: ExtendedTestBoincServer;
let terminator: TlsFront;
let proxy: ForwardProxy;
let dir: string;
/** The project's URLs by the name only the proxy knows. */
let httpUrl: string;
let httpsUrl: string;
const gahps: GahpProcess[] = [];

beforeAll(async () => {
  server = await startTestServer();
  const target = new URL(server.url);
  // TLS in front of the test server, with the site CA's certificate for boinc.invalid.
  terminator = await startTlsFront(target, path.join(TLS_DIR, 'site-server-key.pem'), path.join(TLS_DIR, 'site-server-cert.pem'));
  httpUrl = `http://boinc.invalid:${target.port}${target.pathname}`;
  httpsUrl = `https://boinc.invalid:${terminator.port}${target.pathname}`;
  proxy = await startForwardProxy({ hosts: { 'boinc.invalid': '127.0.0.1' }, credentials: CREDENTIALS });
  dir = makeTempDir('boinc-gahp-proxy-');
});

afterAll(async () => {
  for (const g of gahps) await g.close();
  await proxy.close();
  await terminator.close();
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const proxyWithCredentials = () => `http://${CREDENTIALS}@127.0.0.1:${proxy.port}`;

async function gahpFor(projectUrl: string, env: NodeJS.ProcessEnv, args: string[] = [], logName = `gahp-${gahps.length}.log`): Promise<{ gahp: GahpProcess; log: string }> {
  const log = path.join(dir, logName);
  const gahp = await GahpProcess.start({ env, args, logFile: log });
  gahps.push(gahp);
  await gahp.startup();
  await gahp.selectProject(projectUrl, server.authenticator);
  return { gahp, log };
}

/** submit, query until done, fetch an output, retire: every result as the gridmanager reads it. */
async function cycle(gahp: GahpProcess, tag: string): Promise<string[]> {
  const results: string[] = [];
  const batch = batchName('uppercase');
  const input = path.join(dir, `${tag}-in.txt`);
  fs.writeFileSync(input, `through the proxy ${tag}\n`);
  const job = jobName(batch, 700, 0);
  const submit = await gahp.call(`BOINC_SUBMIT ${esc(batch)} uppercase 1 ${esc(job)} 0 1 ${esc(input)} in NULL NULL NULL NULL NULL NULL`);
  expect(submit).toEqual(['NULL']);
  const q1 = await gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
  expect(q1.slice(2)).toEqual(['1', job, 'NOT_STARTED']);
  await waitPast(Math.ceil(Number(q1[1])));
  server.advanceAll(batch);
  const q2 = await gahp.call(`BOINC_QUERY_BATCHES ${q1[1]} 1 ${esc(batch)}`);
  expect(q2.slice(2)).toEqual(['1', job, 'DONE']);
  const iwd = path.join(dir, `${tag}-iwd`);
  fs.mkdirSync(iwd);
  const fetched = await gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(iwd)} job.err SOME 1 out out.txt`);
  expect(fetched[0]).toBe('NULL');
  expect(fs.readFileSync(path.join(iwd, 'out.txt'), 'latin1')).toBe(`THROUGH THE PROXY ${tag.toUpperCase()}\n`);
  const retired = await gahp.call(`BOINC_RETIRE_BATCH ${esc(batch)}`);
  expect(retired).toEqual(['NULL']);
  results.push(...submit, ...q1, ...q2, ...fetched, ...retired);
  return results;
}

/** Nothing a user or the gridmanager sees, and nothing logged, holds the proxy's password. */
function expectNoPassword(...texts: string[]): void {
  for (const t of texts) {
    expect(t).not.toContain(PASSWORD);
    expect(t).not.toContain(Buffer.from(CREDENTIALS).toString('base64'));
  }
}

test('http:// project through http_proxy: every RPC and download of a cycle goes through it, in absolute form', async () => {
  const rpcsBefore = server.rpcLog().length;
  const seenBefore = proxy.requests.length;
  const { gahp, log } = await gahpFor(httpUrl, { http_proxy: proxyWithCredentials() });
  expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
  const results = await cycle(gahp, 'http');
  const rpcs = server.rpcLog().slice(rpcsBefore);
  const seen = proxy.requests.slice(seenBefore);
  // Each request the server saw came through the proxy, asked for by its absolute URL.
  expect(rpcs.map((r) => r.script)).toEqual(expect.arrayContaining(['submit_rpc_handler.php', 'job_file.php', 'get_output.php']));
  expect(seen.filter((r) => r.refused === undefined)).toHaveLength(rpcs.length);
  for (const r of seen) {
    expect(r.kind).toBe('forward');
    expect(r.target.startsWith(`${httpUrl}`)).toBe(true);
    expect(r.proxyAuthorization).toBe(`Basic ${Buffer.from(CREDENTIALS).toString('base64')}`);
  }
  await gahp.close();
  expectNoPassword(results.join(' '), gahp.stderr, fs.readFileSync(log, 'utf8'));
});

test('https:// project through HTTPS_PROXY: a CONNECT tunnel, the site CA given by --ca-file', async () => {
  const rpcsBefore = server.rpcLog().length;
  const seenBefore = proxy.requests.length;
  const { gahp, log } = await gahpFor(httpsUrl, { HTTPS_PROXY: proxyWithCredentials(), SSL_CERT_FILE: '', SSL_CERT_DIR: '', NODE_EXTRA_CA_CERTS: '' }, ['--ca-file', SITE_CA]);
  expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
  const results = await cycle(gahp, 'https');
  const rpcs = server.rpcLog().slice(rpcsBefore);
  const seen = proxy.requests.slice(seenBefore);
  expect(rpcs.map((r) => r.script)).toEqual(expect.arrayContaining(['submit_rpc_handler.php', 'job_file.php', 'get_output.php']));
  // Only tunnels: the project's name resolves nowhere else, so every request went through one.
  expect(seen.length).toBeGreaterThan(0);
  for (const r of seen) {
    expect(r).toMatchObject({ kind: 'connect', target: `boinc.invalid:${new URL(httpsUrl).port}` });
    expect(r.refused).toBeUndefined();
  }
  await gahp.close();
  expectNoPassword(results.join(' '), gahp.stderr, fs.readFileSync(log, 'utf8'));
});

test('https:// through the proxy with the site CA as SSL_CERT_FILE; ping names the proxy and the trust, not the password', async () => {
  const { gahp } = await gahpFor(httpsUrl, { https_proxy: proxyWithCredentials(), SSL_CERT_FILE: SITE_CA, SSL_CERT_DIR: '', NODE_EXTRA_CA_CERTS: '' });
  expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
  const auth = path.join(dir, 'auth');
  fs.writeFileSync(auth, `${server.authenticator}\n`);
  const ping = await runCli(['--state-dir', makeTempDir('boinc-gahp-proxy-state-'), '--project-url', httpsUrl, '--authenticator-file', auth, 'ping'], {
    env: { https_proxy: proxyWithCredentials(), SSL_CERT_FILE: SITE_CA, SSL_CERT_DIR: '', NODE_EXTRA_CA_CERTS: '' },
  });
  expect(ping.code).toBe(0);
  expect(ping.stdout).toContain(`proxy: http://127.0.0.1:${proxy.port}\n`);
  expect(ping.stdout).toContain(`trust: node's bundled roots; SSL_CERT_FILE ${SITE_CA}\n`);
  expectNoPassword(ping.stdout, ping.stderr);
});

test('without the site CA the certificate is refused, the message naming the problem and the trust in effect', async () => {
  const { gahp } = await gahpFor(httpsUrl, { https_proxy: proxyWithCredentials(), SSL_CERT_FILE: '', SSL_CERT_DIR: '', NODE_EXTRA_CA_CERTS: '' });
  const [error] = await gahp.call('BOINC_PING');
  expect(error).toMatch(/certificate problem with boinc\.invalid:\d+: .*; trusted: node's bundled roots/);
  expectNoPassword(error!);
});

test('no_proxy and --no-proxy send a request past the proxy', async () => {
  const seenBefore = proxy.requests.length;
  // The test server by its address: reachable directly, listed in no_proxy.
  const direct = await gahpFor(server.url, { http_proxy: proxyWithCredentials(), no_proxy: 'example.org, 127.0.0.1' });
  expect(await direct.gahp.call('BOINC_PING')).toEqual(['NULL']);
  const byOption = await gahpFor(server.url, { http_proxy: proxyWithCredentials() }, ['--no-proxy', '127.0.0.0/8']);
  expect(await byOption.gahp.call('BOINC_PING')).toEqual(['NULL']);
  expect(proxy.requests.slice(seenBefore)).toEqual([]);
});

test('a proxy asking for credentials (407), over http:// and over CONNECT: a result naming the proxy, not the project', async () => {
  const plain = await gahpFor(httpUrl, { http_proxy: `http://127.0.0.1:${proxy.port}` });
  const [plainError] = await plain.gahp.call('BOINC_PING');
  expect(plainError).toBe(`ping failed: proxy http://127.0.0.1:${proxy.port} asks for authentication (HTTP 407 Proxy Authentication Required): its user and password are missing or wrong`);
  const wrong = await gahpFor(httpsUrl, { https_proxy: `http://site-user:wrong-${PASSWORD}@127.0.0.1:${proxy.port}` }, ['--ca-file', SITE_CA]);
  const [tunnelError] = await wrong.gahp.call('BOINC_PING');
  expect(tunnelError).toBe(`ping failed: proxy http://127.0.0.1:${proxy.port} asks for authentication (HTTP 407 Proxy Authentication Required): its user and password are missing or wrong`);
  await wrong.gahp.close();
  expectNoPassword(tunnelError!, wrong.gahp.stderr, fs.readFileSync(wrong.log, 'utf8'));
});

test('a proxy that is down, and one that cannot reach the project: results naming the proxy', async () => {
  const port = await closedPort();
  const down = await gahpFor(httpsUrl, { https_proxy: `http://site-user:${PASSWORD}@127.0.0.1:${port}` }, ['--ca-file', SITE_CA, '--rpc-timeout', '5']);
  const [downError] = await down.gahp.call('BOINC_PING', 60_000);
  expect(downError).toMatch(new RegExp(`^ping failed: proxy http://127\\.0\\.0\\.1:${port} failed: ECONNREFUSED`));
  const unknown = await gahpFor(`https://nowhere.invalid:443/boinc_test/`, { https_proxy: proxyWithCredentials() });
  const [unknownError] = await unknown.gahp.call('BOINC_PING', 60_000);
  expect(unknownError).toBe(`ping failed: proxy http://127.0.0.1:${proxy.port} answered the CONNECT to nowhere.invalid:443 with HTTP 502 Bad Gateway: it cannot reach the project or will not`);
  // Over http:// the proxy answers the forwarded request itself: its 502 names it.
  const unknownPlain = await gahpFor(`http://nowhere.invalid/boinc_test/`, { http_proxy: proxyWithCredentials() });
  const [plainError] = await unknownPlain.gahp.call('BOINC_PING', 60_000);
  expect(plainError).toBe(`ping failed: HTTP 502 Bad Gateway from proxy http://127.0.0.1:${proxy.port} (its own answer or the project's): proxy refused: 502`);
  await down.gahp.close();
  expectNoPassword(downError!, unknownError!, plainError!, down.gahp.stderr, fs.readFileSync(down.log, 'utf8'));
});

test('a proxy that accepts the connection and never answers the CONNECT: an upload times out, nothing sent, the proxy connection closed', async () => {
  const held = new Set<net.Socket>();
  const closedByClient: Array<Promise<void>> = [];
  const silent = net.createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
    s.resume(); // reads the CONNECT (and sees the client's end), answers nothing
    closedByClient.push(new Promise((resolve) => s.once('close', () => resolve())));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as net.AddressInfo).port;
  const input = path.join(dir, 'silent-upload.txt');
  fs.writeFileSync(input, 'never sent\n');
  const client = new BoincClient({ projectUrl: httpsUrl, authenticator: server.authenticator, timeoutMs: 500, retries: 0, network: { proxy: `http://127.0.0.1:${port}`, caFile: SITE_CA } });
  try {
    const t0 = Date.now();
    const err = await client.uploadFiles({ files: [{ path: input, physName: 'condorv_silent' }] }).then(() => undefined, (e: unknown) => e as BoincRpcError);
    expect(err).toBeInstanceOf(BoincRpcError);
    expect(err!.timedOut).toBe(true);
    expect(err!.uncertain).toBe(false);
    expect(Date.now() - t0).toBeLessThan(5000);
    // The CONNECT left pending is given up too (after the RPC timeout), not kept open for as
    // long as the proxy holds it; the client is still open here.
    expect(closedByClient.length).toBeGreaterThan(0);
    let timer: NodeJS.Timeout | undefined;
    const closed = await Promise.race([Promise.all(closedByClient).then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 5000)))]);
    clearTimeout(timer);
    expect(closed).toBe(true);
  } finally {
    client.close();
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});
