/**
 * bin/boinc-gahp loads the node built-ins that the GAHP's start-up modules import before
 * those modules, so that V8 compiles the GAHP's own code whole and node's as usual
 * (docs/architecture.md, "Round trips and memory"). Its list must name exactly those
 * built-ins: one missing would be compiled whole (memory in every idle GAHP), one too many
 * loaded for nothing. The
 * start-up modules are those reached by static imports from dist/gahp/cli/main.js (the
 * compiled build, as `npm test` makes it); dynamic import() is how the rest loads later.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../support/gahp-process.js';

/** Static `import ... from 'x'`, `import 'x'` and `export ... from 'x'` of compiled ES modules. */
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;

/** The node: built-ins imported by the modules statically reachable from `entry`, and those modules. */
function startUpGraph(entry: string): { builtins: Set<string>; modules: Set<string> } {
  const builtins = new Set<string>();
  const modules = new Set<string>();
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    for (const m of fs.readFileSync(file, 'utf8').matchAll(STATIC_IMPORT)) {
      const spec = m[1]!;
      if (spec.startsWith('node:')) builtins.add(spec);
      else if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec));
    }
  };
  visit(entry);
  return { builtins, modules };
}

/** An array of names in bin/boinc-gahp (`const <name> = [...]`). */
function listedBuiltins(name: string): string[] {
  const bin = fs.readFileSync(path.join(REPO_ROOT, 'bin', 'boinc-gahp'), 'utf8');
  const m = new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(bin);
  if (!m) throw new Error(`bin/boinc-gahp has no ${name} list`);
  return [...m[1]!.matchAll(/'([^']+)'/g)].map((x) => x[1]!);
}

describe('bin/boinc-gahp start-up', () => {
  const { builtins, modules } = startUpGraph(path.join(REPO_ROOT, 'dist', 'gahp', 'cli', 'main.js'));

  test('the graph walked is the GAHP (its protocol server, BOINC_SUBMIT and the RPC client)', () => {
    const names = [...modules].map((f) => path.relative(path.join(REPO_ROOT, 'dist'), f));
    expect(names).toEqual(expect.arrayContaining(['gahp/protocol/server.js', 'gahp/commands/submit.js', 'boinc-rpc/client.js']));
    // What loads later stays out of it: node's HTTP client and TLS (downloads, https
    // projects), the worker threads, the CLI's subcommands.
    expect(builtins.has('node:http')).toBe(false);
    expect(builtins.has('node:https')).toBe(false);
    expect(builtins.has('node:tls')).toBe(false);
    expect(builtins.has('node:worker_threads')).toBe(false);
    expect(names).not.toContain('gahp/cli/program.js');
  });

  test('lists exactly the built-ins its start-up modules import, each once', () => {
    const listed = listedBuiltins('STARTUP_BUILTINS');
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual([...builtins].sort());
  });
});
