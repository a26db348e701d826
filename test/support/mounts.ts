/**
 * Small file systems for tests that need a full disk or a read-only directory: tmpfs
 * mounts, which only root (CI runs as root) in a namespace allowing mounts can make. Tests
 * that need one skip, saying why, where mountsUnavailable() gives a reason. Every mount is
 * removed by unmountAll() (call it in afterAll), lazily if something still holds it.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const mounted: string[] = [];
let probed: string | null | undefined;

/** Why tmpfs mounts cannot be made here, or null when they can (probed once). */
export function mountsUnavailable(): string | null {
  if (probed !== undefined) return probed;
  // To run the tests' other paths (what a machine without mounts does) on one with them.
  if (process.env.TEST_NO_MOUNTS === '1') return (probed = 'TEST_NO_MOUNTS=1');
  if (process.getuid?.() !== 0) return (probed = 'mounting a tmpfs needs root');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-gahp-mount-probe-'));
  try {
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { encoding: 'utf8' });
    if (r.status !== 0) return (probed = `mount -t tmpfs failed: ${(r.stderr || r.error?.message || '').trim()}`);
    spawnSync('umount', [dir]);
    return (probed = null);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Mounts a tmpfs on dir with the given options (e.g. `size=64k`, `ro`). */
export function mountTmpfs(dir: string, options: string): void {
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`mount -t tmpfs -o ${options} on ${dir} failed: ${r.stderr}`);
  mounted.push(dir);
}

/** Removes one mount made by mountTmpfs. */
export function unmount(dir: string): void {
  const i = mounted.lastIndexOf(dir);
  if (i < 0) return;
  mounted.splice(i, 1);
  if (spawnSync('umount', [dir]).status !== 0) spawnSync('umount', ['-l', dir]);
}

/** Removes every mount still made, newest first. */
export function unmountAll(): void {
  while (mounted.length > 0) unmount(mounted[mounted.length - 1]!);
}
