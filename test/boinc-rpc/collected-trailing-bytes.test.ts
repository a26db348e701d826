/**
 * A get_output3.php reply followed by stray bytes is an answer, never a crash. BOINC's real
 * page, asked for a kept file that is not there, sends `Content-Length: 0` and then its PHP
 * warnings after the reply (docs/boinc-server.md, "Batch-collect projects:
 * get_output3.php"); the HTTP parser then fails the connection after the reply has ended.
 * On the real project that error reached nobody and ended `boinc-gahp submit` with status
 * 70. A raw HTTP server on 127.0.0.1 answers the same way.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { BoincClient } from '../../boinc-rpc/client.js';

let server: http.Server;
let url: string;
let tmp: string;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-trailing-'));
  server = http.createServer((_req, res) => {
    res.socket!.write(
      'HTTP/1.1 200 OK\r\nContent-Description: File Transfer\r\nContent-Type: application/octet-stream\r\n' +
        'Content-Disposition: attachment; filename=job_1.0__file_out\r\nContent-Length: 0\r\n\r\n' +
        '<br />\n<b>Warning</b>:  readfile(../../results/7/job_1.0__file_out): Failed to open stream: No such file or directory<br />\n',
    );
    setTimeout(() => res.socket?.destroy(), 50);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('an empty kept file followed by stray bytes on the connection: the fetch settles, the process goes on', async () => {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  const listeners = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  process.on('uncaughtException', onUncaught);
  const c = new BoincClient({ projectUrl: url, authenticator: '0123456789abcdef0123456789abcdef', timeoutMs: 5000, retries: 1, retryBaseMs: 5 });
  try {
    for (let k = 0; k < 4; k++) {
      const dest = path.join(tmp, `out-${k}`);
      // The page's answer is an empty file; whatever the client makes of it, it settles.
      await c.fetchCollectedFile({ resultId: 7, index: 0, destPath: dest }).then(() => undefined, () => undefined);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(uncaught).toEqual([]);
  } finally {
    process.off('uncaughtException', onUncaught);
    for (const l of listeners) process.on('uncaughtException', l);
    c.close();
  }
});
