#!/usr/bin/env node
// Lays out the installed tree of the distribution packages (.deb and .rpm) from the packed
// npm tarball, which holds the compiled program and its runtime dependencies:
//
//   usr/lib/boinc-gahp/                  the tarball's package/ (bin/, dist/, node_modules/, package.json)
//   usr/bin/boinc-gahp                   runs /usr/bin/node on usr/lib/boinc-gahp/bin/boinc-gahp
//   usr/libexec/blahp/boinc_*.sh         the BLAHP scripts, as `boinc-gahp blahp install` writes them
//   usr/share/doc/boinc-gahp/            README.md and docs/
//   usr/share/man/man1/boinc-gahp.1.gz   the man page, made from `boinc-gahp --help` and each command's help
//
// Usage: node packaging/stage.mjs <boinc-gahp-VERSION.tgz> <destdir>
// Used by packaging/build-packages.sh (.deb) and packaging/rpm/boinc-gahp.spec (%install).
// No network, no shell: tar and the program itself are run with fixed argument lists.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as zlib from 'node:zlib';
import { commandNames, helpToMan } from './man-page.mjs';

// Where the package puts things (paths in the installed system).
const LIB_DIR = '/usr/lib/boinc-gahp';
const NODE = '/usr/bin/node';
const BLAHP_DIR = '/usr/libexec/blahp';
const DOC_DIR = '/usr/share/doc/boinc-gahp';
const MAN_PAGE = '/usr/share/man/man1/boinc-gahp.1.gz';

/** /usr/bin/boinc-gahp: the system's node (the packages depend on nodejs >= 20), not whichever is first on PATH. */
const LAUNCHER = `#!/bin/sh
# boinc-gahp, from the boinc-gahp package: the program in ${LIB_DIR}, run by the
# system's node. HTCondor's BOINC_GAHP may point here.
exec ${NODE} ${LIB_DIR}/bin/boinc-gahp "$@"
`;

async function stage(tarball, dest) {
  process.umask(0o022);
  const under = (p) => path.join(dest, p);
  const lib = under(LIB_DIR);
  if (fs.existsSync(lib)) throw new Error(`${lib} exists already: stage into an empty directory`);
  fs.mkdirSync(lib, { recursive: true });
  // npm's tarballs hold everything under package/; owners are not taken from the archive.
  execFileSync('tar', ['-xzf', tarball, '-C', lib, '--strip-components=1', '--no-same-owner'], { stdio: 'inherit' });
  const version = JSON.parse(fs.readFileSync(path.join(lib, 'package.json'), 'utf8')).version;

  // The documentation goes where the distribution keeps it; the program never reads it.
  const doc = under(DOC_DIR);
  fs.mkdirSync(doc, { recursive: true });
  fs.renameSync(path.join(lib, 'README.md'), path.join(doc, 'README.md'));
  fs.renameSync(path.join(lib, 'docs'), path.join(doc, 'docs'));

  fs.mkdirSync(under('/usr/bin'), { recursive: true });
  fs.writeFileSync(under('/usr/bin/boinc-gahp'), LAUNCHER, { mode: 0o755 });

  return writeGenerated(lib, under, version);
}

/** The BLAHP scripts and the man page, made by the staged program itself. */
async function writeGenerated(lib, under, version) {
  // The scripts' text comes from the same function `blahp install` uses, given the
  // installed paths instead of this build's node and checkout.
  const { SCRIPT_ACTIONS, scriptText } = await import(pathToFileURL(path.join(lib, 'dist/gahp/blahp-scripts.js')).href);
  const blahp = under(BLAHP_DIR);
  fs.mkdirSync(blahp, { recursive: true });
  for (const action of SCRIPT_ACTIONS) {
    fs.writeFileSync(path.join(blahp, `boinc_${action}.sh`), scriptText(action, NODE, `${LIB_DIR}/bin/boinc-gahp`), { mode: 0o755 });
  }

  // The help as a user sees it: no BOINC_GAHP_* settings of the builder's environment.
  const helpOf = (...args) => execFileSync(process.execPath, [path.join(lib, 'bin/boinc-gahp'), ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' },
  });
  const help = helpOf('--help');
  const commandHelps = Object.fromEntries(commandNames(help).map((name) => [name, helpOf('help', name)]));
  const man = helpToMan(help, { version, docDir: DOC_DIR, blahpDir: BLAHP_DIR, libDir: LIB_DIR }, commandHelps);
  fs.mkdirSync(path.dirname(under(MAN_PAGE)), { recursive: true });
  // gzip without a name or time in its header: the same page gives the same bytes.
  fs.writeFileSync(under(MAN_PAGE), zlib.gzipSync(man, { level: 9 }), { mode: 0o644 });
  return version;
}

const [tarball, dest] = process.argv.slice(2);
if (!tarball || !dest) {
  console.error('usage: node packaging/stage.mjs <boinc-gahp-VERSION.tgz> <destdir>');
  process.exit(2);
}
stage(path.resolve(tarball), path.resolve(dest)).then(
  (version) => console.log(`staged boinc-gahp ${version} in ${dest}`),
  (err) => {
    console.error(`stage.mjs: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
