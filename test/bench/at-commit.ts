/**
 * Runs the current benchmark suite against the GAHP of another commit ("before" figures):
 *
 *   node dist/test/bench/at-commit.js <rev> [bench arguments...]
 *
 * Exports <rev> with `git archive` into a temp dir (no change to the repository or its
 * worktrees), links node_modules, puts this checkout's test/bench in it, builds, runs
 * `node dist/test/bench/run.js <bench arguments>` there, and removes the dir. Also a way to
 * measure the committed HEAD without other people's uncommitted edits in dist/.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from './lib/driver.js';
import { benchTempDir, cleanupAll } from './lib/tmp.js';

function run(cmd: string, args: string[], opts: { cwd: string; stdin?: NodeJS.ReadableStream; stdio?: 'inherit' | 'ignore' }): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: [opts.stdin ? 'pipe' : 'ignore', opts.stdio ?? 'inherit', 'inherit'], shell: false });
    if (opts.stdin) opts.stdin.pipe(child.stdin!);
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });
}

async function main(): Promise<number> {
  const [rev, ...benchArgs] = process.argv.slice(2);
  if (!rev || !/^[0-9A-Za-z._/-]+$/.test(rev)) {
    console.error('usage: node dist/test/bench/at-commit.js <rev> [bench arguments...]');
    return 2;
  }
  const dir = benchTempDir(`at-${rev.replace(/[^0-9A-Za-z]/g, '_').slice(0, 20)}`);
  const archive = spawn('git', ['archive', '--format=tar', rev], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], shell: false });
  const archived = new Promise<number>((resolve) => archive.on('close', (c) => resolve(c ?? 1)));
  const untar = await run('tar', ['-x', '-f', '-'], { cwd: dir, stdin: archive.stdout });
  if ((await archived) !== 0 || untar !== 0) throw new Error(`could not export ${rev}`);
  fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  fs.rmSync(path.join(dir, 'test', 'bench'), { recursive: true, force: true });
  fs.cpSync(path.join(REPO_ROOT, 'test', 'bench'), path.join(dir, 'test', 'bench'), { recursive: true });
  console.error(`bench: built ${rev} in ${dir}`);
  // tsc emits even with type errors elsewhere in an old tree: its exit code is not fatal.
  await run(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'ignore' });
  return run(process.execPath, [path.join(dir, 'dist', 'test', 'bench', 'run.js'), ...benchArgs], { cwd: dir });
}

main().then(
  (code) => {
    cleanupAll();
    process.exit(code);
  },
  (err) => {
    console.error(`at-commit: ${(err as Error).stack ?? err}`);
    cleanupAll();
    process.exit(2);
  },
);
