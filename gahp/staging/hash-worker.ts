/**
 * Worker thread of the hash pool (hashing.ts): MD5s files by streaming them through a
 * pair of reused buffers, reading the next chunk while the current one is hashed. No file
 * is ever held whole in memory.
 *
 * Message in:  { id, paths: string[] }
 * Message out: { id, results: WorkerHashResult[] }
 */
import { parentPort } from 'node:worker_threads';
import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { WorkerHashRequest, WorkerHashResult } from './hash-types.js';
import { finishHash, hashError, hashFileSync, openForHash, type OpenedForHash } from './hash-file.js';

const CHUNK = 4 * 1024 * 1024;
let buffers: [Buffer, Buffer] | undefined;

function read(fd: number, buf: Buffer): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, 0, buf.length, null, (err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * Small files are read with blocking calls (this is a worker thread: nothing else waits),
 * which avoids two thread-pool round trips per file; big files are read ahead
 * asynchronously into the second buffer while the first is hashed.
 */
async function hashOne(path: string): Promise<WorkerHashResult> {
  buffers ??= [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
  let size: number;
  try {
    size = fs.statSync(path).size;
  } catch {
    size = 0; // hashFileSync reports the error
  }
  if (size <= CHUNK) return hashFileSync(path, buffers[0]);
  let f: OpenedForHash | undefined;
  try {
    const opened = openForHash(path);
    if (!('fd' in opened)) return opened;
    f = opened;
    const hash = createHash('md5');
    let total = 0;
    let cur = 0;
    let pending: Promise<number> | undefined = f.size > 0 ? read(f.fd, buffers[cur]!) : undefined;
    while (pending) {
      const n = await pending;
      pending = undefined;
      if (n === 0) break;
      total += n;
      const full = buffers[cur]!;
      cur ^= 1;
      // Read ahead into the other buffer while this one is hashed.
      if (total < f.size) pending = read(f.fd, buffers[cur]!);
      hash.update(n === full.length ? full : full.subarray(0, n));
    }
    return finishHash(path, f, hash);
  } catch (err) {
    return hashError(path, err);
  } finally {
    if (f) fs.closeSync(f.fd);
  }
}

// Requests are handled one after another: the read buffers are shared.
let queue: Promise<void> = Promise.resolve();
parentPort!.on('message', (msg: WorkerHashRequest) => {
  queue = queue.then(async () => {
    const results: WorkerHashResult[] = [];
    for (const p of msg.paths) results.push(await hashOne(p));
    parentPort!.postMessage({ id: msg.id, results });
  });
});
