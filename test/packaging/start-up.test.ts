/**
 * bin/boinc-gahp imports the program and runs it, with V8's defaults; the code only some
 * runs need (the CLI's subcommands and commander, the hashing worker threads) loads when
 * first used, so the gridmanager's GAHP does not hold it. The start-up modules are those
 * reached by static imports from dist/gahp/cli/main.js (the compiled build, as `npm test`
 * makes it); dynamic import() is how the rest loads later.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../support/gahp-process.js';

/** Static `import ... from 'x'`, `import 'x'` and `export ... from 'x'` of compiled ES modules. */
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;

/** The modules statically reachable from `entry` (files) and the packages they import. */
function startUpGraph(entry: string): { packages: Set<string>; modules: Set<string> } {
  const packages = new Set<string>();
  const modules = new Set<string>();
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    for (const m of fs.readFileSync(file, 'utf8').matchAll(STATIC_IMPORT)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec));
      else packages.add(spec);
    }
  };
  visit(entry);
  return { packages, modules };
}

test('bin/boinc-gahp runs the program as node loads it: no V8 flags changed', () => {
  const bin = fs.readFileSync(path.join(REPO_ROOT, 'bin', 'boinc-gahp'), 'utf8');
  expect(bin).not.toMatch(/setFlagsFromString|node:v8/);
});

test('the GAHP loads its protocol server, BOINC_SUBMIT and the RPC client at start-up; the subcommands, commander and the worker threads when first used', () => {
  const { packages, modules } = startUpGraph(path.join(REPO_ROOT, 'dist', 'gahp', 'cli', 'main.js'));
  const names = [...modules].map((f) => path.relative(path.join(REPO_ROOT, 'dist'), f));
  expect(names).toEqual(expect.arrayContaining(['gahp/protocol/server.js', 'gahp/commands/submit.js', 'boinc-rpc/client.js']));
  expect(names).not.toContain('gahp/cli/program.js');
  expect(names).not.toContain('gahp/cli/subcommands.js');
  expect(packages.has('commander')).toBe(false);
  expect(packages.has('node:worker_threads')).toBe(false);
});
