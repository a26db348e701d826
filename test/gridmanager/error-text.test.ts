/**
 * A server's error text reaches HTCondor as the server wrote it: line breaks, CRs and
 * backslashes included (issue 23, "messages intact"). The GAHP escapes CR and LF the way
 * HTCondor's escapeGahpString() does; the gridmanager emulation reads the result the way
 * read_argv() does (an escaped byte is kept, an unescaped CR is dropped). A person sees the
 * same text as lines: the CLI's stderr and the interactive prompt.
 */
import * as fs from 'node:fs';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { makeTempDir } from '../support/gahp-process.js';
import { GridmanagerGahp, boincPing, writeAuthenticatorFile, type ResourceRef } from '../support/gridmanager.js';
import { runCli } from '../cli/cli-support.js';

/** What xml_error() prints, not escaped: two line breaks (LF, CR LF), a lone CR, backslashes. */
const SERVER_TEXT = 'first line\nsecond line: C:\\boinc\\projects \\n is not a newline\r\nthird line\rafter a lone CR';

let server: ExtendedTestBoincServer;
let dir: string;
let ref: ResourceRef;

beforeAll(async () => {
  server = await startTestServer();
  dir = makeTempDir('boinc-gahp-error-text-');
  ref = { url: server.url, authenticatorFile: writeAuthenticatorFile(dir, 'auth', server.authenticator) };
});

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

let states = 0;
/** A fresh state directory inside the test's directory (removed with it). */
function stateDir(): string {
  const d = `${dir}/state-${++states}`;
  fs.mkdirSync(d);
  return d;
}

function injectError(): void {
  server.injectFault({ script: 'submit_rpc_handler.php', rpc: 'ping', kind: 'error-reply', message: SERVER_TEXT });
}

test('the gridmanager reads a multi-line error with backslashes and CRs back unchanged', async () => {
  const gm = await GridmanagerGahp.start({ stateDir: stateDir() });
  try {
    injectError();
    const failed = await boincPing(gm, ref);
    expect(failed).toEqual({ rc: 1, error: `ping failed: ${SERVER_TEXT}` });
    // On the wire: one result line, every CR and LF of the text escaped.
    const line = gm.received.find((l) => l.includes('ping\\ failed:'))!;
    expect(line).toContain('first\\ line\\\nsecond\\ line:\\ C:\\\\boinc\\\\projects\\ \\\\n\\ is');
    expect(line).toContain('\\\r\\\nthird\\ line\\\rafter');
    // The GAHP carries on.
    expect((await boincPing(gm, ref)).rc).toBe(0);
    expect(gm.aborts).toEqual([]);
  } finally {
    await gm.quit();
  }
});

test('the CLI prints the text as lines (a CR becomes a line break)', async () => {
  injectError();
  const r = await runCli(['--state-dir', stateDir(), '--project-url', server.url, '--authenticator-file', ref.authenticatorFile, 'ping']);
  expect(r.code).toBe(1);
  expect(r.stderr).not.toContain('\r');
  expect(r.stderr).toContain('ping failed: first line\nsecond line: C:\\boinc\\projects \\n is not a newline\nthird line\nafter a lone CR\n');
});

test('the interactive prompt prints the text as lines', async () => {
  injectError();
  // Piped: the prompt answers every line, and prints the results asked for before it leaves.
  const r = await runCli(['--interactive', '--state-dir', stateDir(), '--project-url', server.url, '--authenticator-file', ref.authenticatorFile], { input: 'BOINC_PING\nquit\n' });
  const out = r.stdout;
  expect(r.code).toBe(0);
  expect(out).not.toContain('\r');
  expect(out).toMatch(/\] BOINC_PING failed: ping failed: first line\nsecond line: C:\\boinc\\projects \\n is not a newline\nthird line\nafter a lone CR\n/);
});
