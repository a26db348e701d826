/**
 * Another commit's tree, built, for measuring it with this checkout's harness (at-commit.ts,
 * pairs.ts): `git archive` of <rev> into a temp dir (no change to the repository or its
 * worktrees), node_modules linked, this checkout's test/bench put in it, built.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from './driver.js';
import { benchTempDir } from './tmp.js';

export function run(cmd: string, args: string[], opts: { cwd: string; stdin?: NodeJS.ReadableStream; stdio?: 'inherit' | 'ignore' }): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: [opts.stdin ? 'pipe' : 'ignore', opts.stdio ?? 'inherit', 'inherit'], shell: false });
    if (opts.stdin) opts.stdin.pipe(child.stdin!);
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });
}

/** A revision name git can take as it is (no option, no shell character). */
export const REV_PATTERN = /^[0-9A-Za-z._/][0-9A-Za-z._/-]*$/;

/** Exports and builds <rev>; returns its directory (removed by cleanupAll()). */
export async function buildAt(rev: string): Promise<string> {
  if (!REV_PATTERN.test(rev)) throw new Error(`not a revision name: ${rev}`);
  const dir = benchTempDir(`at-${rev.replace(/[^0-9A-Za-z]/g, '_').slice(0, 20)}`);
  const archive = spawn('git', ['archive', '--format=tar', rev], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], shell: false });
  const archived = new Promise<number>((resolve) => archive.on('close', (c) => resolve(c ?? 1)));
  const untar = await run('tar', ['-x', '-f', '-'], { cwd: dir, stdin: archive.stdout });
  if ((await archived) !== 0 || untar !== 0) throw new Error(`could not export ${rev}`);
  fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  fs.rmSync(path.join(dir, 'test', 'bench'), { recursive: true, force: true });
  fs.cpSync(path.join(REPO_ROOT, 'test', 'bench'), path.join(dir, 'test', 'bench'), { recursive: true });
  // tsc emits even with type errors elsewhere in an old tree: its exit code is not fatal.
  await run(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'ignore' });
  console.error(`bench: built ${rev} in ${dir}`);
  return dir;
}
