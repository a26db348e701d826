// Uploads one big file (default 300 MB) through BoincClient.uploadFiles to the test server
// running in a child process, and reports this process's peak RSS. Run after building:
//   node test/boinc-rpc/scripts/measure-upload.mjs [MB]
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincClient } from '../../../dist/boinc-rpc/client.js';

const mb = Number(process.argv[2] ?? 300);
const root = new URL('../../../', import.meta.url).pathname;
const child = spawn(process.execPath, [path.join(root, 'bin/boinc-test-server')], { stdio: ['ignore', 'pipe', 'inherit'] });
const info = await new Promise((resolve, reject) => {
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
    const url = /project URL: (\S+)/.exec(out)?.[1];
    const auth = /authenticator: (\S+)/.exec(out)?.[1];
    if (url && auth) resolve({ url, auth });
  });
  child.on('exit', (code) => reject(new Error(`test server exited ${code}`)));
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-upload-'));
const file = path.join(dir, 'big');
try {
  // Non-constant content, written in 1 MiB chunks.
  const hash = crypto.createHash('md5');
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < mb; i++) {
    chunk.fill(i % 251);
    chunk.writeUInt32LE(i, 0);
    fs.writeSync(fd, chunk);
    hash.update(chunk);
  }
  fs.closeSync(fd);
  const physName = `condorv_${hash.digest('hex')}`;
  globalThis.gc?.();
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  const c = new BoincClient({ projectUrl: info.url, authenticator: info.auth, timeoutMs: 60000 });
  const t0 = Date.now();
  await c.uploadFiles({ files: [{ physName, path: file }] });
  const ms = Date.now() - t0;
  clearInterval(timer);
  const absent = await c.queryFiles({ physNames: [physName] });
  c.close();
  console.log(JSON.stringify({ fileMB: mb, ms, stored: absent.length === 0, rssBeforeMB: +(rss0 / 1048576).toFixed(1), rssPeakMB: +(peak / 1048576).toFixed(1) }));
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
  child.kill('SIGTERM');
}
