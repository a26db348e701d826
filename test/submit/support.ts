/** Helpers for the BOINC_SUBMIT tests: input files, request lines, server checks. */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { esc } from '../commands/helpers.js';
import { HashCache } from '../../gahp/staging/hash-cache.js';
import { fileKey } from '../../gahp/staging/hash-key.js';

export interface LineJob {
  name: string;
  args?: string[];
  /** [src_path, dst_name] pairs, in the order HTCondor lists them. */
  inputs: Array<[string, string]>;
}

/**
 * The arguments of BOINC_SUBMIT after the reqid, escaped as HTCondor does. `params`: the six
 * job parameters (default all NULL); null leaves them out (older clients).
 */
export function submitLine(batch: string, app: string, jobs: LineJob[], params: string[] | null = ['NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL']): string {
  const parts: string[] = [esc(batch), esc(app), String(jobs.length)];
  for (const j of jobs) {
    const args = j.args ?? [];
    parts.push(esc(j.name), String(args.length), ...args.map(esc), String(j.inputs.length));
    for (const [src, dst] of j.inputs) parts.push(esc(src), esc(dst));
  }
  if (params) parts.push(...params);
  return parts.join(' ');
}

export const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');
export const phys = (data: string | Buffer) => `condorv_${md5(data)}`;

/**
 * Writes a file with an mtime a minute in the past. Its ctime is now: its hash is cached
 * only when taken some 50 ms later (hash-key.ts isRacy).
 */
export function writeInput(dir: string, name: string, content: string | Buffer): string {
  const p = path.join(dir, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  const past = new Date(Date.now() - 60_000);
  fs.utimesSync(p, past, past);
  return p;
}

/** RPC names the server received (optionally since an index of the log). */
export function rpcNames(server: ExtendedTestBoincServer, since = 0): string[] {
  return server.rpcLog().slice(since).map((e) => e.rpc);
}

/** Physical names attached to upload_files requests (every request, retries included). */
export function uploadedNames(server: ExtendedTestBoincServer, since = 0): string[] {
  return server.rpcLog().slice(since).flatMap((e) => (e.rpc === 'upload_files' ? e.uploaded ?? [] : []));
}

/**
 * Checks the server holds exactly one batch of this name with exactly these jobs, each
 * with input files that are stored and linked to the batch.
 */
export function expectOneCompleteBatch(server: ExtendedTestBoincServer, batch: string, jobNames: string[]): void {
  const batches = server.batches().filter((b) => b.name === batch);
  expect(batches).toHaveLength(1);
  const b = batches[0]!;
  const jobs = server.jobs(batch);
  expect(jobs.map((j) => j.name).sort()).toEqual([...jobNames].sort());
  const files = new Map(server.files().map((f) => [f.name, f]));
  for (const j of jobs) {
    for (const f of j.inputFiles) {
      const stored = files.get(f);
      expect(stored).toBeDefined();
      expect(stored!.batches).toContain(b.id);
    }
  }
}

/**
 * Puts the files' hashes into the state directory's hash cache (as an earlier submit of
 * this GAHP would have), once they are old enough not to be racy: a submit then finds them
 * cached (a warm submit). The GAHP reads the cache's new lines at its next submit.
 */
export async function cacheHashes(stateDir: string, paths: readonly string[]): Promise<void> {
  await new Promise((r) => setTimeout(r, 60));
  const cache = HashCache.open(stateDir);
  try {
    cache.record(paths.map((p) => ({ key: fileKey(fs.statSync(p, { bigint: true })), md5: md5(fs.readFileSync(p)), hashedAtMs: Date.now() })));
  } finally {
    cache.close();
  }
}
