/**
 * Temporary data and child processes of a benchmark run. Everything lives under
 * os.tmpdir() and is removed at the end of the run, on an error, and on Ctrl-C/SIGTERM.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const dirs = new Set<string>();
const cleanups = new Set<() => void>();
let installed = false;

/** A fresh directory under the system temp dir, removed by cleanupAll() (also on signals). */
export function benchTempDir(label: string): string {
  installHandlers();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `boinc-gahp-bench-${label}-`));
  dirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

/** A synchronous cleanup (e.g. killing a child) run on exit and on signals. */
export function onCleanup(fn: () => void): () => void {
  installHandlers();
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

export function cleanupAll(): void {
  for (const fn of [...cleanups]) {
    try {
      fn();
    } catch {
      // best effort
    }
  }
  cleanups.clear();
  for (const dir of [...dirs]) {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
    dirs.delete(dir);
  }
}

function installHandlers(): void {
  if (installed) return;
  installed = true;
  process.on('exit', cleanupAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      process.stderr.write(`\nbench: ${sig}: removing temporary data\n`);
      cleanupAll();
      process.exit(130);
    });
  }
}
