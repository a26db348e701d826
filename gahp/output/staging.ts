/**
 * Files that appear at their destination complete or not at all: each is first written
 * to a hidden temp file beside its destination (same directory, so same filesystem), and
 * all are renamed into place together once every one of them is complete. A crash at any
 * moment leaves at most hidden `.<name>.boinc-gahp-*.part` files, never a partial file
 * under a destination name.
 */
import * as crypto from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { pidAlive } from '../util.js';

/** The temp name marker; `boinc-gahp status`/cleanup can recognise leftovers by it. */
export const PART_MARKER = '.boinc-gahp-';

/** A fresh temp path in the destination's directory. */
export function tempPathBeside(dest: string): string {
  const base = path.basename(dest).slice(0, 100);
  return path.join(path.dirname(dest), `.${base}${PART_MARKER}${process.pid}-${crypto.randomBytes(6).toString('hex')}.part`);
}

/**
 * A relative path resolved under dir, absolute paths as they are (HTCondor's rule for
 * output destinations and the stderr path).
 */
export function resolveUnder(dir: string, p: string): string {
  return path.isAbsolute(p) ? p : path.join(dir, p);
}

/**
 * Whether a name given by the server (an output file's open_name, a zip entry) is a plain
 * relative path that stays inside its directory: no absolute path, no `..`, no backslash,
 * no NUL, not empty.
 */
export function isSafeRelativePath(name: string): boolean {
  if (name.length === 0 || name.includes('\0') || name.includes('\\')) return false;
  if (path.isAbsolute(name) || /^[a-zA-Z]:/.test(name)) return false;
  const parts = name.split('/');
  return parts.every((p, i) => p !== '..' && (p !== '' || i === parts.length - 1) && !(p === '.' && parts.length === 1));
}

export class Staging {
  private readonly staged: Array<{ tmp: string; dest: string }> = [];
  private readonly temps = new Set<string>();
  private committed = false;

  /** Reserves a temp path for dest; the caller writes it completely, then calls stage(). */
  reserve(dest: string): string {
    const tmp = tempPathBeside(dest);
    this.temps.add(tmp);
    return tmp;
  }

  /** Marks a completely written temp file as ready to become dest. */
  stage(tmp: string, dest: string): void {
    this.staged.push({ tmp, dest });
  }

  /** Writes a copy of an already staged temp file for another destination. */
  async stageCopy(srcTmp: string, dest: string): Promise<void> {
    const tmp = this.reserve(dest);
    await fsp.copyFile(srcTmp, tmp);
    this.stage(tmp, dest);
  }

  /**
   * Stages an empty file for dest unless something is there already: a file HTCondor users
   * expect after a job (its `output`, its `error`) even when BOINC has nothing for it.
   */
  async stageEmptyUnlessPresent(dest: string): Promise<void> {
    if (dest === '/dev/null' || (await fsp.lstat(dest).then(() => true, () => false))) return;
    const tmp = this.reserve(dest);
    await (await fsp.open(tmp, 'wx', 0o644)).close();
    this.stage(tmp, dest);
  }

  get destinations(): string[] {
    return this.staged.map((s) => s.dest);
  }

  /** Renames every staged file into place, in staging order. */
  async commit(): Promise<void> {
    for (const { tmp, dest } of this.staged) {
      await fsp.rename(tmp, dest);
      this.temps.delete(tmp);
    }
    this.committed = true;
  }

  /** Removes every temp file not renamed into place (call in a finally). */
  async cleanup(): Promise<void> {
    await Promise.all([...this.temps].map((t) => fsp.rm(t, { force: true }).catch(() => undefined)));
    this.temps.clear();
  }

  get isCommitted(): boolean {
    return this.committed;
  }
}

/** The directories this process has swept, least recently used first. */
const sweptDirs = new Set<string>();
const SWEPT_DIRS_KEPT = 1024;

/**
 * Removes the temp files that killed GAHPs left in the destinations' directories (ours, and
 * the RPC client's temp files beside ours), when the process that made them is gone: once
 * per directory and process (the 1,024 directories used last are remembered). A killed
 * GAHP's leftovers are there when its successor first fetches into the directory; reading
 * it again with every fetch read, for a cluster fetching into its one initialdir, a
 * directory growing by two names per job N times (~60 ms a read at 20,000 names under load).
 * Best effort.
 */
export async function sweepStaleTemps(dests: readonly string[]): Promise<void> {
  for (const dir of new Set(dests.map((d) => path.dirname(d)))) {
    const seen = sweptDirs.delete(dir);
    sweptDirs.add(dir);
    if (seen) continue;
    if (sweptDirs.size > SWEPT_DIRS_KEPT) sweptDirs.delete(sweptDirs.values().next().value!);
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const m = /^\.\.?.*\.boinc-gahp-(\d+)-[0-9a-f]{12}\.part(\.\d+\.[0-9a-f]+\.part)?$/.exec(name);
      if (!m || pidAlive(Number(m[1]))) continue;
      await fsp.rm(path.join(dir, name), { force: true }).catch(() => undefined);
    }
  }
}
