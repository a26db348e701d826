/**
 * Outputs a project keeps outside the upload hierarchy: BOINC's batch-collect assimilator
 * moves each output of a job's canonical result to `results/<batch id>/<job>__file_<open
 * name>` when the job is assimilated, and `get_output3.php` serves it, per file or the whole
 * batch as a zip (docs/boinc-server.md, "Batch-collect projects: get_output3.php").
 *
 * - OutputWays: which way an app's outputs are kept (`upload`: get_output.php; `collect`:
 *   get_output3.php), learnt from the answers and remembered per project and app on disk
 *   (`output-ways.json` in the state directory): the BLAHP scripts fetch in a new process
 *   for each round, and a GAHP restarts, so a memory of the process alone would ask
 *   get_output.php in vain again for every job of a collect app after each start.
 * - CollectedZips: a batch's zip (get_batch_zip), fetched once for the jobs whose names
 *   get_file refuses, kept in the state directory (`collected/`) until every job of the
 *   batch that has outputs in it was placed, or the batch is retired (docs/storage.md,
 *   "Batch-collect zips").
 * - gunzipInPlace: a `<gzip_when_done/>` output is gzipped by the volunteer's client before
 *   it is uploaded, so both pages serve gzip bytes: the job's file is what it wrote.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { BoincRpc } from '../../boinc-rpc/types.js';
import { makeDirs } from '../dirs.js';
import { isStaleTemp, replaceFile, withLockFile } from '../state-files.js';
import { SafeZip } from './unzip.js';

export type OutputWay = 'upload' | 'collect';

/**
 * BOINC's is_valid_filename() (html/inc/util_basic.inc): the job names get_output3.php's
 * get_file accepts, and the names this GAHP gives its jobs. PHP's `\w` is `[A-Za-z0-9_]`.
 */
export function boincAcceptsName(name: string): boolean {
  return name.length > 0 && name.length <= 255 && /^[\w\-. ]+$/.test(name);
}

/** The name of a kept output in the batch-collect directory (and its zip), without and with the `.gz` some assimilators add. */
export function collectedNames(jobName: string, openName: string): [string, string] {
  const name = `${jobName}__file_${openName}`;
  return [name, `${name}.gz`];
}

/** Which way each app's outputs are kept, per project; on disk when there is a state directory. */
export class OutputWays {
  private ways: Map<string, OutputWay> | undefined;

  constructor(private readonly file: string | undefined) {}

  private read(): Map<string, OutputWay> {
    const ways = new Map<string, OutputWay>();
    if (!this.file) return ways;
    try {
      const doc = JSON.parse(fs.readFileSync(this.file, 'utf8')) as { ways?: Record<string, unknown> };
      for (const [k, v] of Object.entries(doc.ways ?? {})) if (v === 'upload' || v === 'collect') ways.set(k, v);
    } catch {
      // None yet, or unreadable: every app is learnt again (one request more per app).
    }
    return ways;
  }

  get(projectUrl: string, app: string): OutputWay | undefined {
    this.ways ??= this.read();
    return this.ways.get(`${projectUrl}\n${app}`);
  }

  /** Remembers an app's way; written to disk (merged with what other processes wrote) when it changed. */
  async learn(projectUrl: string, app: string, way: OutputWay): Promise<void> {
    if (this.get(projectUrl, app) === way) return;
    const key = `${projectUrl}\n${app}`;
    this.ways!.set(key, way);
    if (!this.file) return;
    try {
      const merged = this.read();
      merged.set(key, way);
      this.ways = merged;
      await replaceFile(this.file, JSON.stringify({ v: 1, ways: Object.fromEntries(merged) }) + '\n');
    } catch {
      // Not remembered on disk: this process still knows it.
    }
  }
}

/** The batch a job's zip comes from. */
export interface ZipBatch {
  projectUrl: string;
  name: string;
  /** The server's batch id and job count (asked only when the zip must be fetched). */
  resolve(): Promise<{ batchId: number; jobCount: number }>;
}

interface ZipSummary {
  /** Jobs with at least one kept output in the zip. */
  withFiles: Set<string>;
  /** Jobs the assimilator saw: outputs, `_error` or `_no_output_files`. */
  seen: Set<string>;
}

interface ZipMeta {
  projectUrl: string;
  batchName: string;
  batchId: number;
  jobCount: number;
  fetchedAt: number;
  /**
   * When the download of this zip was asked of the server (ms, this machine's clock): it
   * holds every job assimilated before then. Absent in a `.json` of an older boinc-gahp.
   */
  startedAt?: number;
}

/** A job's entry names from a batch-collect file name: `<job>__file_<name>`, `<job>_error`, `<job>_no_output_files`. */
function jobOfEntry(entry: string): { job: string; file: boolean } | undefined {
  const f = entry.indexOf('__file_');
  if (f > 0) return { job: entry.slice(0, f), file: true };
  const m = /^(.+)_(error|errors|no_output_files)$/.exec(entry);
  return m ? { job: m[1]!, file: false } : undefined;
}

/**
 * What an open zip holds, read from that zip itself: a summary kept by the path's mtime and
 * size could pair the entries of one zip with the stat of the next one renamed over it
 * while it was being read, and then deny a fresh zip the jobs it holds.
 */
function summarize(zip: SafeZip): ZipSummary {
  const s: ZipSummary = { withFiles: new Set(), seen: new Set() };
  for (const name of zip.files) {
    const e = jobOfEntry(name);
    if (!e) continue;
    s.seen.add(e.job);
    if (e.file) s.withFiles.add(e.job);
  }
  return s;
}

/**
 * The batches' zips kept on disk: one `<key>.zip` per project and batch (key: a hash of
 * both), its `<key>.json` (batch id, job count, when its download began and ended) and
 * `<key>.placed` (the jobs whose outputs were put in place, a line each).
 */
export class CollectedZips {
  /**
   * The download of each batch's zip this process has in flight, by key: at most one at a
   * time per batch, and every fetch of the batch waits for it instead of downloading its own
   * (a batch's jobs are reported DONE together and fetched at once). `seq` places it in the
   * order of openFor calls, `signal` is that of the call that started it; `done` resolves
   * to whether the zip kept then is fresh for its waiters (fetch()).
   */
  private readonly downloads = new Map<string, { seq: number; signal: AbortSignal; done: Promise<boolean> }>();
  /** Orders openFor calls and downloads: a download is fresh for a call when it started after the call. */
  private seq = 0;
  private dirMade = false;

  constructor(readonly dir: string) {}

  private key(projectUrl: string, batchName: string): string {
    return path.join(this.dir, createHash('sha256').update(`${projectUrl}\n${batchName}`).digest('hex').slice(0, 32));
  }

  private ensureDir(): void {
    if (this.dirMade) return;
    makeDirs(this.dir, 'the directory of kept batch zips');
    this.dirMade = true;
    // Temp files of processes killed while fetching.
    for (const name of fs.readdirSync(this.dir)) if (isStaleTemp(name)) fs.rmSync(path.join(this.dir, name), { force: true });
  }

  /**
   * The batch's zip holding the job (its outputs, or the assimilator's note that it has
   * none), open: the kept one if it holds the job, else (when `mayFetch`) one downloaded
   * after this call began, shared with every call of this process waiting for the batch
   * then (and with another process sharing the state directory that downloads it: fetch()).
   * A zip downloaded before (kept, or in flight when this call began) may predate the job's
   * assimilation, so only a fresh one lacking the job makes the answer undefined. The caller
   * closes it.
   */
  async openFor(rpc: BoincRpc, batch: ZipBatch, jobName: string, signal: AbortSignal, mayFetch = true): Promise<SafeZip | undefined> {
    this.ensureDir();
    const key = this.key(batch.projectUrl, batch.name);
    const since = ++this.seq;
    for (;;) {
      const zip = await this.openKept(key);
      if (zip && summarize(zip).seen.has(jobName)) return zip;
      zip?.close();
      if (!mayFetch) return undefined;
      const inFlight = this.downloads.get(key);
      if (!inFlight) {
        // None in flight: this call starts the batch's next download, and waits for it below.
        const entry = { seq: ++this.seq, signal, done: this.fetch(rpc, batch, key, jobName, signal) };
        this.downloads.set(key, entry);
        entry.done
          .finally(() => {
            if (this.downloads.get(key) === entry) this.downloads.delete(key);
          })
          .catch(() => undefined);
        continue;
      }
      let fresh: boolean;
      try {
        fresh = await inFlight.done;
      } catch (err) {
        // Stopped by the abort of the call that started it: this call downloads (or joins) the next.
        if (!signal.aborted && inFlight.signal.aborted) continue;
        throw err;
      }
      // Begun before this call, or an older zip another process kept (it held the job of the
      // call that started the fetch): looked at again, and a new download only if it lacks the job.
      if (inFlight.seq < since || !fresh) continue;
      const zipNow = await this.openKept(key);
      if (zipNow && summarize(zipNow).seen.has(jobName)) return zipNow;
      zipNow?.close();
      return undefined;
    }
  }

  private async openKept(key: string): Promise<SafeZip | undefined> {
    try {
      return await SafeZip.open(`${key}.zip`);
    } catch {
      return undefined;
    }
  }

  /**
   * get_batch_zip into a temp file beside the kept zip, renamed over it when complete; true
   * when the zip kept then was downloaded after this fetch was asked for (fresh for every
   * call waiting for it). Processes sharing the state directory (two GAHPs) take turns under
   * the lock, and the one that waited takes the zip the other just kept when that will do
   * (keptWillDo): false when it is older than this fetch but holds `jobName`.
   */
  private async fetch(rpc: BoincRpc, batch: ZipBatch, key: string, jobName: string, signal: AbortSignal): Promise<boolean> {
    const askedAt = Date.now();
    const { batchId, jobCount } = await batch.resolve();
    return withLockFile(`${key}.lock`, async () => {
      const kept = await this.keptWillDo(key, jobName, askedAt);
      if (kept !== undefined) return kept;
      const startedAt = Date.now();
      const tmp = `${key}.zip.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
      try {
        await rpc.fetchBatchZip({ batchId, destPath: tmp, destIsTemp: true, signal });
        await fsp.rename(tmp, `${key}.zip`);
      } finally {
        await fsp.rm(tmp, { force: true });
      }
      // Written after the rename: a crash between the two leaves an older startedAt, which
      // only costs a download more, never a zip taken for fresher than it is.
      const meta: ZipMeta = { projectUrl: batch.projectUrl, batchName: batch.name, batchId, jobCount, fetchedAt: Date.now(), startedAt };
      await replaceFile(`${key}.json`, JSON.stringify(meta) + '\n');
      return true;
    }, { timeoutMs: 10 * 60_000, signal });
  }

  /**
   * Whether the kept zip spares a download (called holding the lock, so no zip is being
   * renamed in): true when its download began after `askedAt` (it holds every job
   * assimilated before any waiting call began); false when it began earlier but holds
   * `jobName` (the waiters' jobs may be missing from it: each looks again); undefined when
   * there is none or it will not do.
   */
  private async keptWillDo(key: string, jobName: string, askedAt: number): Promise<boolean | undefined> {
    const zip = await this.openKept(key);
    if (!zip) return undefined;
    try {
      let meta: ZipMeta | undefined;
      try {
        meta = JSON.parse(await fsp.readFile(`${key}.json`, 'utf8')) as ZipMeta;
      } catch {
        // None (removed, or a crash before it was written): judged by its jobs alone.
      }
      // Strictly after: within the same millisecond the order is unknown.
      if (meta?.startedAt !== undefined && meta.startedAt > askedAt) return true;
      return summarize(zip).seen.has(jobName) ? false : undefined;
    } finally {
      zip.close();
    }
  }

  /**
   * The job's outputs are in place: noted; once every job of the batch was seen by the
   * assimilator and each one with outputs in the zip was placed, the zip goes.
   */
  async placed(batch: { projectUrl: string; name: string }, jobName: string): Promise<void> {
    const key = this.key(batch.projectUrl, batch.name);
    if (!fs.existsSync(`${key}.zip`)) return;
    await fsp.appendFile(`${key}.placed`, `${JSON.stringify(jobName)}\n`, { mode: 0o600 });
    const zip = await this.openKept(key);
    if (!zip) return;
    let s: ZipSummary;
    try {
      s = summarize(zip);
    } finally {
      zip.close();
    }
    let meta: ZipMeta | undefined;
    try {
      meta = JSON.parse(await fsp.readFile(`${key}.json`, 'utf8')) as ZipMeta;
    } catch {
      return;
    }
    if (s.seen.size < meta.jobCount) return;
    const placed = new Set((await fsp.readFile(`${key}.placed`, 'utf8')).split('\n').filter((l) => l).map((l) => JSON.parse(l) as string));
    for (const job of s.withFiles) if (!placed.has(job)) return;
    await this.remove(key);
  }

  /** The batch was retired: its zip (if any) goes. */
  async forget(projectUrl: string, batchName: string): Promise<void> {
    await this.remove(this.key(projectUrl, batchName));
  }

  private async remove(key: string): Promise<void> {
    for (const ext of ['.zip', '.json', '.placed']) await fsp.rm(`${key}${ext}`, { force: true }).catch(() => undefined);
  }
}

/** Replaces a gzip file with what it holds (the file the job wrote); a file that is not gzip is left as it is. */
export async function gunzipInPlace(file: string, signal: AbortSignal): Promise<void> {
  const head = Buffer.alloc(2);
  const fh = await fsp.open(file, 'r');
  try {
    await fh.read(head, 0, 2, 0);
  } finally {
    await fh.close();
  }
  if (head[0] !== 0x1f || head[1] !== 0x8b) return;
  const out = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.part`;
  try {
    await pipeline(fs.createReadStream(file), createGunzip(), fs.createWriteStream(out, { flags: 'wx', mode: 0o644 }), { signal });
    await fsp.rename(out, file);
  } catch (err) {
    await fsp.rm(out, { force: true });
    throw err;
  }
}

/** The stores of one state directory (none: a private temp directory of this process, and ways in memory). */
const stores = new Map<string, { ways: OutputWays; zips: CollectedZips }>();

export function collectedStores(stateDir: string | undefined): { ways: OutputWays; zips: CollectedZips } {
  const k = stateDir ?? '';
  let s = stores.get(k);
  if (!s) {
    const zipDir = stateDir ? path.join(stateDir, 'collected') : path.join(os.tmpdir(), `boinc-gahp-collected-${process.pid}-${randomBytes(4).toString('hex')}`);
    s = { ways: new OutputWays(stateDir ? path.join(stateDir, 'output-ways.json') : undefined), zips: new CollectedZips(zipDir) };
    stores.set(k, s);
  }
  return s;
}
