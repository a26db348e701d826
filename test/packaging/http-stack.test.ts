/**
 * One HTTP layer (docs/architecture.md, "HTTP, proxies and trust"): the package depends on
 * got and form-data, and no product file opens a socket itself, so every RPC and download
 * goes through got, its proxies and its trust.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../support/gahp-process.js';

function productFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...productFiles(rel));
    else if (/\.(ts|js|mjs)$/.test(entry.name) || dir === 'bin') out.push(rel);
  }
  return out;
}

test('package.json depends on got and form-data', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  expect(pkg.dependencies.got).toMatch(/^\^?14\./);
  expect(pkg.dependencies['form-data']).toMatch(/^\^?4\./);
});

test('no product file opens a socket itself (net.connect, tls.connect, createConnection)', () => {
  const files = ['gahp', 'boinc-rpc', 'bin'].flatMap(productFiles);
  expect(files).toEqual(expect.arrayContaining(['boinc-rpc/http.ts', 'bin/boinc-gahp', 'gahp/cli/doctor/probe.ts']));
  const offenders = files
    .filter((f) => /\b(net\.connect|tls\.connect|createConnection)\(/.test(fs.readFileSync(path.join(REPO_ROOT, f), 'utf8')));
  expect(offenders).toEqual([]);
});
