/**
 * Set-up for tests of BoincClient against the test server in this process (real HTTP on
 * 127.0.0.1): one server and one scratch directory for the test file, clients that log to
 * the test, and after each test a check that no logged line carries the project's
 * authenticator.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';

export interface ServerAndClients {
  /** The test server (started in beforeAll). */
  readonly server: ExtendedTestBoincServer;
  /** A scratch directory, removed in afterAll. */
  readonly tmp: string;
  /** A new client of the server, logged in as `authenticator` (default: the server's user); closed in afterAll. */
  readonly client: (authenticator?: string) => BoincClient;
}

/** Registers the test file's hooks (call it at the top level); the scratch directory's name starts with `tmpPrefix`. */
export function serverAndClients(tmpPrefix: string): ServerAndClients {
  let server: ExtendedTestBoincServer | undefined;
  let tmp: string | undefined;
  const clients: BoincClient[] = [];
  const logLines: string[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await server?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });
  afterEach(() => {
    for (const line of logLines) expect(line).not.toContain(server!.authenticator);
    logLines.length = 0;
  });

  return {
    get server() {
      return server!;
    },
    get tmp() {
      return tmp!;
    },
    client: (authenticator = server!.authenticator) => {
      const c = new BoincClient({ projectUrl: server!.url, authenticator, timeoutMs: 5000, retries: 2, retryBaseMs: 5, log: (l) => logLines.push(l) });
      clients.push(c);
      return c;
    },
  };
}
