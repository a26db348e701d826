// npm's `prepare` script. `npm ci` and `npm install` in a checkout run it, and it builds, so
// bin/*, `npm run demo` and `npm test` work with no other step. `npm pack` runs it too, just
// after prepack's product-only build (tsconfig.package.json), which the development build
// (source maps, tests, bench) must not replace: then it does nothing.
import { spawnSync } from 'node:child_process';

if (!['pack', 'publish'].includes(process.env.npm_command ?? '')) {
  const npm = process.env.npm_execpath;
  const built = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build', '--silent'], { stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  process.exit(built.status ?? 1);
}
