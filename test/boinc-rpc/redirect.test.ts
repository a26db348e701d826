/**
 * Output downloads carry the authenticator in their URL (get_output.php's auth_str): a
 * redirect to another origin must not be followed (the next request would hand the URL, and
 * so the secret, to whoever the redirect names), and the error must not show the secret.
 * A redirect within the project's own origin is followed.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { makeTempDir } from '../support/gahp-process.js';

const SECRET = '0123456789abcdef0123456789abcdef';

interface Local {
  server: http.Server;
  base: string;
  seen: string[];
}

async function listen(handler: (req: http.IncomingMessage, res: http.ServerResponse, base: string) => void): Promise<Local> {
  const seen: string[] = [];
  let base = '';
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    handler(req, res, base);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, base, seen };
}

let project: Local;
let elsewhere: Local;
let dir: string;

beforeAll(async () => {
  dir = makeTempDir('boinc-gahp-redirect-');
  elsewhere = await listen((_req, res) => res.end('stolen'));
  project = await listen((req, res, base) => {
    const u = new URL(req.url ?? '/', base);
    const job = u.searchParams.get('wu_name');
    if (u.pathname === '/p/moved/out') {
      res.end('the output');
    } else if (job === 'same-origin') {
      res.writeHead(302, { Location: `${base}/p/moved/out` });
      res.end();
    } else {
      // Another origin, with the query (and so auth_str) passed along, as a careless proxy does.
      res.writeHead(302, { Location: `${elsewhere.base}/collect?${u.searchParams.toString()}` });
      res.end();
    }
  });
});

afterAll(async () => {
  for (const l of [project, elsewhere]) {
    l?.server.closeAllConnections();
    await new Promise((r) => l?.server.close(r));
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

function client(logs: string[]): BoincClient {
  return new BoincClient({ projectUrl: `${project.base}/p/`, authenticator: SECRET, timeoutMs: 5000, retries: 2, retryBaseMs: 5, log: (l) => logs.push(l) });
}

test('a download redirected to another origin fails without following it or showing the authenticator', async () => {
  const logs: string[] = [];
  const c = client(logs);
  const dest = path.join(dir, 'out-other');
  let err: unknown;
  try {
    await c.fetchOutputFile({ jobName: 'other-origin', fileNum: 0, destPath: dest });
  } catch (e) {
    err = e;
  } finally {
    c.close();
  }
  expect(err).toBeInstanceOf(BoincRpcError);
  const e = err as BoincRpcError;
  expect(e.message).toMatch(/redirect/i);
  expect(e.message).toContain(elsewhere.base);
  expect(e.message).not.toContain(SECRET);
  expect(logs.join('\n')).not.toContain(SECRET);
  expect(elsewhere.seen).toEqual([]);
  expect(project.seen.length).toBeGreaterThan(0);
  expect(fs.readdirSync(dir).filter((n) => n.includes('out-other'))).toEqual([]);
});

test('a download redirected within the project origin is followed', async () => {
  const logs: string[] = [];
  const c = client(logs);
  const dest = path.join(dir, 'out-same');
  try {
    expect(await c.fetchOutputFile({ jobName: 'same-origin', fileNum: 0, destPath: dest })).toEqual({ bytes: 10 });
  } finally {
    c.close();
  }
  expect(fs.readFileSync(dest, 'utf8')).toBe('the output');
  expect(project.seen.some((u) => u === '/p/moved/out')).toBe(true);
});
