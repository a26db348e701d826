/**
 * MD5s of BOINC_SUBMIT's input files: each unique path once, from the persistent cache
 * when its identity (dev, ino, size, mtime, ctime: hash-key.ts) is unchanged; else, when
 * the rest is small, on the main thread (hash-file.ts), and otherwise by a pool of worker
 * threads streaming the files (hash-worker.ts). The pool starts on demand and its threads
 * exit when the hashing is done.
 */
import type { Worker } from 'node:worker_threads';
import type * as fs from 'node:fs';
import type { FileKey, WorkerHashReply, WorkerHashRequest, WorkerHashResult } from './hash-types.js';
import type { HashCache } from './hash-cache.js';
import { fileKey } from './hash-key.js';
import { hashFileSync } from './hash-file.js';

export interface HashedFile {
  md5: string;
  /** The identity the hash belongs to (checked again before the file is uploaded). */
  key: FileKey;
}

export class HashError extends Error {
  override name = 'HashError';
  constructor(readonly path: string, reason: string) {
    super(`cannot hash input file ${path}: ${reason}`);
  }
}


interface PoolWorker {
  worker: Worker;
  busy: number;
}

interface Pending {
  resolve: (r: WorkerHashResult[]) => void;
  reject: (e: Error) => void;
  worker: PoolWorker;
}

export class HashPool {
  private workers: PoolWorker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** hash() calls under way: the threads live while there is one. */
  private active = 0;

  constructor(private readonly maxWorkers: number) {}

  /**
   * Hashes the paths (in any order inside; results in input order). The threads exit when
   * the last call under way ends: a submit's uploads and submit_batch (seconds for a big
   * batch) need none of the ~9 MiB each holds (test/bench submit_rss_mb, 2,000 jobs over
   * 500 x 1 MiB: median 141 MiB kept 0.5 s longer, 129 at once); the next call starts them
   * again, for some 30 ms.
   */
  async hash(paths: readonly string[], signal?: AbortSignal, onResults?: (results: WorkerHashResult[]) => void): Promise<WorkerHashResult[]> {
    if (paths.length === 0) return [];
    this.active++;
    try {
      return await this.hashWithThreads(paths, signal, onResults);
    } finally {
      if (--this.active === 0) this.close();
    }
  }

  private async hashWithThreads(paths: readonly string[], signal: AbortSignal | undefined, onResults: ((results: WorkerHashResult[]) => void) | undefined): Promise<WorkerHashResult[]> {
    const nworkers = Math.max(1, Math.min(this.maxWorkers, paths.length));
    if (this.workers.length < nworkers) {
      // node:worker_threads is loaded with the first pool: a GAHP that never hashes much never pays for it.
      const { Worker: WorkerThread } = await import('node:worker_threads');
      while (this.workers.length < nworkers) this.workers.push(this.spawn(WorkerThread));
    }
    // Small chunks balance the load; several in flight per worker hide the messaging.
    const chunk = Math.max(1, Math.min(32, Math.ceil(paths.length / (nworkers * 8))));
    const out = new Array<WorkerHashResult>(paths.length);
    let next = 0;
    await Promise.all(this.workers.slice(0, nworkers).map(async (w) => {
      // Two chunks in flight per worker.
      const lane = async () => {
        while (next < paths.length) {
          if (signal?.aborted) throw new Error('aborted');
          const start = next;
          next = Math.min(paths.length, next + chunk);
          const results = await this.send(w, paths.slice(start, next));
          for (let i = 0; i < results.length; i++) out[start + i] = results[i]!;
          onResults?.(results);
        }
      };
      await Promise.all([lane(), lane()]);
    }));
    return out;
  }

  /** Terminates the threads (they are also unref'd: they never keep the process alive). */
  close(): void {
    for (const w of this.workers) void w.worker.terminate();
    this.workers = [];
  }

  private send(w: PoolWorker, paths: string[]): Promise<WorkerHashResult[]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, worker: w });
      w.busy++;
      const msg: WorkerHashRequest = { id, paths };
      w.worker.postMessage(msg);
    });
  }

  private spawn(WorkerThread: typeof Worker): PoolWorker {
    // A hash thread allocates little on its heap (file data lives in its two reused
    // buffers): a small young generation keeps each thread's memory near its floor,
    // instead of the 16 MiB semi-spaces V8 would grow for the steady stream of read results.
    const worker = new WorkerThread(new URL('./hash-worker.js', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 2 } });
    worker.unref();
    const pw: PoolWorker = { worker, busy: 0 };
    worker.on('message', (reply: WorkerHashReply) => {
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      pw.busy--;
      p.resolve(reply.results);
    });
    const fail = (err: Error) => {
      this.workers = this.workers.filter((x) => x !== pw);
      for (const [id, p] of this.pending) {
        if (p.worker !== pw) continue;
        this.pending.delete(id);
        p.reject(err);
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`hash worker exited (code ${code})`)));
    return pw;
  }

}

/**
 * Up to this many bytes to hash, a submit hashes on the main thread: starting worker
 * threads costs more (30-100 ms, ~10 MiB each) than hashing it (about 15 ms at 600 MB/s,
 * in slices with yields between).
 */
export const INLINE_HASH_BYTES = 8 * 1024 * 1024;
/**
 * Bytes hashed on the main thread between two yields to the event loop (a fraction of a
 * ms): the lookups sent just before get their connections and writes in between (1 MiB
 * slices held them back: session_submit_overhead_ms 4 ms more, test/bench).
 */
const INLINE_SLICE_BYTES = 128 * 1024;

/** Hashes the paths on this thread, a slice at a time; results in input order, delivered per slice. */
async function hashInline(paths: readonly string[], signal: AbortSignal | undefined, onResults: (rs: WorkerHashResult[]) => void): Promise<WorkerHashResult[]> {
  const buf = Buffer.allocUnsafe(INLINE_SLICE_BYTES);
  const out: WorkerHashResult[] = [];
  let slice: WorkerHashResult[] = [];
  let sliceBytes = 0;
  for (const p of paths) {
    if (signal?.aborted) throw new Error('aborted');
    const r = hashFileSync(p, buf);
    out.push(r);
    slice.push(r);
    sliceBytes += r.error === undefined ? Number(r.key.size) : 0;
    if (sliceBytes >= INLINE_SLICE_BYTES) {
      onResults(slice);
      slice = [];
      sliceBytes = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  if (slice.length > 0) onResults(slice);
  return out;
}

export interface HashSourcesResult {
  files: Map<string, HashedFile>;
  fromCache: number;
  hashed: number;
  hashedBytes: number;
}

/**
 * MD5 of each path (unique paths, already stat'ed by the caller): cached ones from the
 * cache, the rest on this thread when they are small in all (INLINE_HASH_BYTES), else
 * through the pool; new hashes are recorded in the cache.
 */
export async function hashSources(
  stats: ReadonlyMap<string, fs.BigIntStats>,
  cache: HashCache,
  pool: HashPool,
  signal?: AbortSignal,
  /** Called for each file as soon as its hash is known (cached ones first). */
  onHashed?: (path: string, file: HashedFile) => void,
  /** Called with the files and bytes whose hash became known: the cached ones at once, then per worker reply. */
  onProgress?: (files: number, bytes: number) => void,
): Promise<HashSourcesResult> {
  // What other processes appended since (in slices: never a long stall of the loop).
  await cache.refreshAsync();
  const files = new Map<string, HashedFile>();
  const misses: string[] = [];
  let hashedBytes = 0;
  for (const [p, st] of stats) {
    const key = fileKey(st);
    const md5 = cache.lookup(key);
    if (md5) files.set(p, { md5, key });
    else {
      misses.push(p);
      hashedBytes += Number(st.size);
    }
  }
  const fromCache = files.size;
  if (onProgress && fromCache > 0) {
    let bytes = 0;
    for (const h of files.values()) bytes += Number(h.key.size);
    onProgress(fromCache, bytes);
  }
  if (onHashed) for (const [p, h] of files) onHashed(p, h);
  /** Records a piece of results as it arrives: a GAHP killed halfway keeps what it hashed. */
  const arrived = (rs: readonly WorkerHashResult[]) => {
    const good: Array<{ key: FileKey; md5: string; hashedAtMs: number }> = [];
    for (const r of rs) if (r.error === undefined) good.push(r);
    cache.record(good);
    if (onHashed) for (const r of rs) if (r.error === undefined) onHashed(r.path, { md5: r.md5, key: r.key });
    if (onProgress) {
      let bytes = 0;
      for (const r of good) bytes += Number(r.key.size);
      onProgress(good.length, bytes);
    }
  };
  if (misses.length > 0) {
    const results = hashedBytes <= INLINE_HASH_BYTES ? await hashInline(misses, signal, arrived) : await pool.hash(misses, signal, arrived);
    for (const r of results) {
      if (r.error !== undefined) throw new HashError(r.path, r.error);
      files.set(r.path, { md5: r.md5, key: r.key });
    }
  }
  return { files, fromCache, hashed: misses.length, hashedBytes };
}

/**
 * Convenience for benchmarks and tools: MD5 hex digests of the files, in order, with a
 * pool of `workers` threads (no cache). The pool is closed afterwards.
 */
export async function hashFiles(paths: readonly string[], workers: number): Promise<string[]> {
  const pool = new HashPool(workers);
  try {
    const results = await pool.hash(paths);
    return results.map((r) => {
      if (r.error !== undefined) throw new HashError(r.path, r.error);
      return r.md5;
    });
  } finally {
    pool.close();
  }
}
