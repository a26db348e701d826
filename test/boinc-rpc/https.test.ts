/**
 * A project served over https, as real BOINC projects are: the GAHP (a real child process)
 * talks TLS to a terminating proxy in front of the test server, with the proxy's
 * certificate trusted through NODE_EXTRA_CA_CERTS as a site would add its own CA. BOINC_PING
 * and a BOINC_SUBMIT with an upload go through; a GAHP that does not trust the certificate
 * gets an error result naming the certificate problem, without the authenticator.
 *
 * The certificate and key in test/support/tls are for this test only (self-signed, for
 * 127.0.0.1 and localhost).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { GahpProcess, REPO_ROOT, makeTempDir } from '../support/gahp-process.js';
import { startTlsFront, type TlsFront } from '../support/tls-front.js';
import { batchName, esc, jobName } from '../commands/helpers.js';
import { submitLine, writeInput } from '../submit/support.js';

const TLS_DIR = path.join(REPO_ROOT, 'test', 'support', 'tls');
const CERT = path.join(TLS_DIR, 'test-cert.pem');

describe('an https project', () => {
  let server: ExtendedTestBoincServer;
  let proxy: TlsFront;
  let httpsUrl: string;
  let dir: string;
  const gahps: GahpProcess[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    const target = new URL(server.url);
    proxy = await startTlsFront(target, path.join(TLS_DIR, 'test-key.pem'), CERT);
    httpsUrl = `https://127.0.0.1:${proxy.port}${target.pathname}`;
    dir = makeTempDir('boinc-gahp-https-');
  });

  afterAll(async () => {
    for (const g of gahps) await g.close();
    await proxy.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const gahpFor = async (env: NodeJS.ProcessEnv, logFile?: string) => {
    const gahp = await GahpProcess.start({ env, ...(logFile ? { logFile } : {}) });
    gahps.push(gahp);
    await gahp.startup();
    await gahp.selectProject(httpsUrl, server.authenticator);
    return gahp;
  };

  test('with the certificate trusted: BOINC_PING, and a submit whose input is uploaded over TLS', async () => {
    const log = path.join(dir, 'trusted.log');
    const gahp = await gahpFor({ NODE_EXTRA_CA_CERTS: CERT }, log);
    expect(await gahp.call('BOINC_PING')).toEqual(['NULL']);
    const batch = batchName('uppercase');
    const input = writeInput(dir, 'in.txt', `sent over TLS for ${batch}\n`);
    const job = jobName(batch, 900, 0);
    expect(await gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: job, inputs: [[input, 'in']] }])}`)).toEqual(['NULL']);
    const status = await gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
    expect(status[0]).toBe('NULL');
    expect(status.join(' ')).toContain(job);
    // Every call of the submit went over TLS to the project and was answered.
    const calls = fs.readFileSync(log, 'utf8').split('\n').filter((l) => /boinc-rpc (create_batch|query_files|upload_files|submit_batch) .* HTTP 200 /.test(l));
    expect(calls.length).toBeGreaterThanOrEqual(3);
  });

  test('with the certificate not trusted: an error result naming it, without the authenticator', async () => {
    const gahp = await gahpFor({ NODE_EXTRA_CA_CERTS: '' });
    const [error] = await gahp.call('BOINC_PING');
    expect(error).toMatch(/certificate/i);
    expect(error).not.toContain(server.authenticator);
  });
});
