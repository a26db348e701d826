/**
 * One HTTP layer (docs/architecture.md, "HTTP, proxies and trust"): the package depends on
 * got and form-data, and no product file opens a socket itself, so every RPC and download
 * goes through got, its proxies and its trust.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../support/gahp-process.js';

/**
 * `boinc-gahp doctor`'s probe (issue 25) opens its own connections on purpose: it tells a
 * DNS, a TCP, a TLS and an HTTP failure apart, step by step, which a client library hides.
 * It sends no RPC.
 */
const DIAGNOSTIC_PROBES = new Set(['gahp/cli/doctor/probe.ts']);

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
  expect(files).toEqual(expect.arrayContaining(['boinc-rpc/http.ts', 'bin/boinc-gahp']));
  const offenders = files
    .filter((f) => !DIAGNOSTIC_PROBES.has(f))
    .filter((f) => /\b(net\.connect|tls\.connect|createConnection)\(/.test(fs.readFileSync(path.join(REPO_ROOT, f), 'utf8')));
  expect(offenders).toEqual([]);
});
