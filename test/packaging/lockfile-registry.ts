/**
 * A package registry on 127.0.0.1 that knows exactly the packages of package-lock.json, so
 * `npm install -g <tarball>` can resolve the package's dependencies without the internet.
 *
 * npm needs each dependency's packument (its version list) to resolve the tarball's
 * dependencies, and `npm ci` caches only tarballs, never packuments. This serves packuments
 * built from the lock entries (versions, dependencies, integrity); the tarballs themselves
 * then come from npm's cache, found by integrity, as `npm ci` left them. A tarball request
 * reaching this server means the cache lacks it: it gets a 404 and is recorded.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

interface LockEntry {
  name?: string;
  version?: string;
  integrity?: string;
  link?: boolean;
  [field: string]: unknown;
}

const MANIFEST_FIELDS = ['dependencies', 'optionalDependencies', 'peerDependencies', 'peerDependenciesMeta', 'engines', 'bin', 'os', 'cpu'];

export interface LockfileRegistry {
  url: string;
  /** Every request path, in order. */
  requests: string[];
  /** Tarball requests (each one a cache miss, answered 404). */
  tarballMisses: string[];
  close(): Promise<void>;
}

export async function startLockfileRegistry(lockfilePath: string): Promise<LockfileRegistry> {
  const lock = JSON.parse(fs.readFileSync(lockfilePath, 'utf8')) as { packages: Record<string, LockEntry> };
  const versionsByName = new Map<string, Map<string, LockEntry>>();
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === '' || entry.link || !entry.version || !entry.integrity) continue;
    const name = entry.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
    if (!versionsByName.has(name)) versionsByName.set(name, new Map());
    versionsByName.get(name)!.set(entry.version, entry);
  }

  const requests: string[] = [];
  const tarballMisses: string[] = [];
  let base = '';
  const packument = (name: string) => {
    const versions: Record<string, unknown> = {};
    for (const [version, entry] of versionsByName.get(name)!) {
      const manifest: Record<string, unknown> = { name, version };
      for (const f of MANIFEST_FIELDS) if (entry[f] !== undefined) manifest[f] = entry[f];
      const file = `${name.split('/').pop()}-${version}.tgz`;
      manifest.dist = { integrity: entry.integrity, tarball: `${base}/${name}/-/${file}` };
      versions[version] = manifest;
    }
    const latest = [...versionsByName.get(name)!.keys()].pop()!;
    return { name, 'dist-tags': { latest }, versions };
  };

  const server = http.createServer((req, res) => {
    const urlPath = (req.url ?? '/').split('?')[0]!;
    requests.push(urlPath);
    const name = decodeURIComponent(urlPath.slice(1));
    if (urlPath.endsWith('.tgz')) {
      tarballMisses.push(urlPath);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'not in the npm cache: run npm ci first' }));
      return;
    }
    if (!versionsByName.has(name)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'not in package-lock.json' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(packument(name)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    requests,
    tarballMisses,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
