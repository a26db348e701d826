/**
 * The start-up warm-up of node's primitives (gahp/cli/warm-up.ts) runs before every GAHP's
 * banner: it must leave nothing pending (a timer or handle that would keep the process
 * alive) and no descriptor open, and may run again without harm. Checked in a node process of its own, where
 * nothing else comes and goes meanwhile.
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from '../support/gahp-process.js';

/** The built module, as bin/boinc-gahp runs it. */
const warmUp = pathToFileURL(path.join(REPO_ROOT, 'dist', 'gahp', 'cli', 'warm-up.js')).href;

test('leaves no timer, handle or open descriptor behind, run once or again', () => {
  const script = `
    import * as fs from 'node:fs';
    const { warmUpNodePrimitives } = await import(${JSON.stringify(warmUp)});
    const state = () => ({ resources: process.getActiveResourcesInfo().sort(), fds: fs.readdirSync('/proc/self/fd').length });
    // Whatever loading the module left (a descriptor being closed) settles first.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = state();
    await warmUpNodePrimitives();
    const once = state();
    await warmUpNodePrimitives();
    const twice = state();
    process.stdout.write(JSON.stringify({ before, once, twice }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as Record<string, unknown>;
  expect(out.once).toEqual(out.before);
  expect(out.twice).toEqual(out.before);
});
