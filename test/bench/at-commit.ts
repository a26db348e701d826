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
import * as path from 'node:path';
import { buildAt, run, REV_PATTERN } from './lib/export.js';
import { cleanupAll } from './lib/tmp.js';

async function main(): Promise<number> {
  const [rev, ...benchArgs] = process.argv.slice(2);
  if (!rev || !REV_PATTERN.test(rev)) {
    console.error('usage: node dist/test/bench/at-commit.js <rev> [bench arguments...]');
    return 2;
  }
  const dir = await buildAt(rev);
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
