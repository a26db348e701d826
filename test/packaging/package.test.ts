/**
 * The npm package as a site installs it: `npm pack` of a clean copy of the checkout (no dist/,
 * so the package must build itself), `npm install -g --prefix <tmp>` of the tarball, and the
 * installed commands run from there: `boinc-gahp --version`, the GAHP speaking its protocol,
 * the demo, the test server, and `boinc-gahp blahp install` whose scripts then run a job as
 * blahpd runs them (test/support/blahpd.ts). The tarball must hold product files only.
 *
 * The runtime dependencies travel inside the tarball (package.json's bundleDependencies), so
 * the install is what a site cut off from the internet does: `--offline`, an empty npm cache,
 * and a registry address where nothing listens (any request npm made would fail the install).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { upperAscii } from '../../fixtures/apps.js';
import { startTestServer } from '../../fixtures/test-server/index.js';
import { Blahpd, stopBlahpFetcher, v2Arguments, type StatusOutcome } from '../support/blahpd.js';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program (never through a shell), with a hard time limit. */
function run(file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The environment of a site admin's shell: this node first on PATH, nothing left over from `npm test`. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k) && !/^npm_config_(cache|userconfig)$/i.test(k)) continue;
    env[k] = v;
  }
  env.PATH = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`;
  env.NO_COLOR = '1';
  return env;
}

/** npm itself: the one running `npm test` when there is one, else npm from PATH. */
function npm(args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Ran> {
  const cli = process.env.npm_execpath;
  if (cli && /\.c?js$/.test(cli)) return run(process.execPath, [cli, ...args], { cwd, env, timeoutMs });
  return run('npm', args, { cwd, env, timeoutMs });
}

const show = (r: Ran) => `exit ${r.code ?? r.signal}\n--- stdout\n${r.stdout.slice(-3000)}\n--- stderr\n${r.stderr.slice(-3000)}`;

/** What a tarball may hold of its own: the package manifest, README/licence, the bin scripts, compiled product code, docs. */
const PRODUCT_FILE = /^(package\.json|README\.md|LICEN[CS]E(\.[a-z]+)?|bin\/(boinc-[a-z-]+|load-built\.mjs)|dist\/(gahp|boinc-rpc|fixtures)\/[A-Za-z0-9_./-]+\.js|docs\/[A-Za-z0-9_.-]+\.md)$/;

interface Manifest {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}

/**
 * The package names in package-lock.json that only dev dependencies need: npm marks such an
 * entry "dev"; a name with another entry (another version, elsewhere in the tree) that is
 * not dev is needed at run time.
 */
function devOnlyPackages(): Set<string> {
  const lock = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const dev = new Set<string>();
  const runtime = new Set<string>();
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === '') continue;
    (entry.dev ? dev : runtime).add(where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length));
  }
  return new Set([...dev].filter((name) => !runtime.has(name)));
}

describe('the npm package', () => {
  let work: string;
  let env: NodeJS.ProcessEnv;
  let tarball: string;
  let files: Array<{ path: string; mode: number }>;
  let bundled: string[];
  let prefix: string;
  let installedBin: string;
  const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as Manifest;
  const version = manifest.version;

  beforeAll(async () => {
    work = makeTempDir('boinc-gahp-package-');
    env = cleanEnv();
    // A clean checkout: the sources without dist/ (the bug was a tarball without dist/).
    const checkout = path.join(work, 'checkout');
    const skip = new Set(['node_modules', 'dist', '.git', 'demo-output', 'coverage']);
    fs.cpSync(REPO_ROOT, checkout, {
      recursive: true,
      filter: (src) => !(path.dirname(src) === REPO_ROOT && skip.has(path.basename(src))) && !src.endsWith('.log'),
    });
    fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(checkout, 'node_modules'), 'dir');

    const out = path.join(work, 'tarballs');
    fs.mkdirSync(out);
    const packed = await npm(['pack', '--json', '--pack-destination', out], checkout, env, 180_000);
    if (packed.code !== 0) throw new Error(`npm pack failed:\n${show(packed)}`);
    const json = packed.stdout.slice(packed.stdout.search(/^\[/m));
    const info = (JSON.parse(json) as Array<{ filename: string; files: Array<{ path: string; mode: number }>; bundled: string[] }>)[0]!;
    tarball = path.join(out, info.filename);
    files = info.files;
    bundled = info.bundled;

    // Port 9 (discard) on loopback: nothing answers there, so a request would fail the install.
    prefix = path.join(work, 'prefix');
    const emptyCache = path.join(work, 'npm-cache');
    fs.mkdirSync(emptyCache);
    const installed = await npm(
      ['install', '--global', '--prefix', prefix, '--offline', '--cache', emptyCache, '--registry', 'http://127.0.0.1:9/',
        '--no-audit', '--no-fund', '--no-update-notifier', tarball],
      work, env, 120_000,
    );
    if (installed.code !== 0) throw new Error(`npm install -g --offline of the tarball failed:\n${show(installed)}`);
    installedBin = path.join(prefix, 'bin');
  }, 300_000);

  afterAll(async () => {
    if (work) {
      // The BLAHP job below leaves its background worker writing in work/blahp-state.
      await stopBlahpFetcher(path.join(work, 'blahp-state'));
      fs.rmSync(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    }
  });

  test('the tarball holds the compiled product and nothing of tests, bench or sources', () => {
    const paths = files.map((f) => f.path).filter((p) => !p.startsWith('node_modules/')).sort();
    expect(paths).toEqual(expect.arrayContaining([
      'package.json', 'README.md', 'bin/boinc-gahp', 'bin/boinc-gahp-demo', 'bin/boinc-test-server',
      'dist/gahp/cli/main.js', 'dist/gahp/staging/hash-worker.js', 'dist/boinc-rpc/client.js',
      'dist/fixtures/demo.js', 'dist/fixtures/test-server/cli.js',
    ]));
    expect(paths.filter((p) => !PRODUCT_FILE.test(p))).toEqual([]);
    expect(paths.filter((p) => /(^|\/)(test|tests|bench|__tests__)(\/|$)|\.test\.|\.ts$|\.map$|tsconfig|jest\.config/.test(p))).toEqual([]);
    for (const bin of ['bin/boinc-gahp', 'bin/boinc-gahp-demo', 'bin/boinc-test-server']) {
      expect(files.find((f) => f.path === bin)!.mode & 0o111).not.toBe(0);
    }
  });

  test('the tarball bundles every runtime dependency (and what they need), nothing only the tests or the build need', () => {
    expect(bundled).toEqual(expect.arrayContaining(Object.keys(manifest.dependencies)));
    const devOnly = devOnlyPackages();
    expect(bundled.filter((name) => devOnly.has(name) || name in manifest.devDependencies)).toEqual([]);
    // Every package the tarball has files of (nested ones too) is one npm says it bundled.
    const inNodeModules = new Set(files.flatMap((f) => [...f.path.matchAll(/node_modules\/((@[^/]+\/)?[^/]+)\//g)].map((m) => m[1]!)));
    expect([...inNodeModules].sort()).toEqual([...new Set(bundled)].sort());
  });

  test('the tarball installed with --offline and an empty npm cache', () => {
    for (const name of ['boinc-gahp', 'boinc-gahp-demo', 'boinc-test-server']) {
      expect(fs.existsSync(path.join(installedBin, name))).toBe(true);
    }
    expect(fs.existsSync(path.join(prefix, 'lib', 'node_modules', 'boinc-gahp', 'test'))).toBe(false);
    for (const name of Object.keys(manifest.dependencies)) {
      expect(fs.existsSync(path.join(prefix, 'lib', 'node_modules', 'boinc-gahp', 'node_modules', name, 'package.json'))).toBe(true);
    }
  });

  test('installed boinc-gahp --version', async () => {
    const r = await run(path.join(installedBin, 'boinc-gahp'), ['--version'], { cwd: work, env, timeoutMs: 30_000 });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(version);
  });

  test('installed boinc-gahp speaks the GAHP protocol (what HTCondor starts)', async () => {
    const child = spawn(path.join(installedBin, 'boinc-gahp'), ['--protocol'], { cwd: work, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stdin.write('VERSION\r\nQUIT\r\n');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    const lines = out.split(/\r?\n/);
    expect(lines[0]).toMatch(/^\$GahpVersion: \S+ .* \$$/);
    expect(lines).toContain('S');
  });

  test('installed boinc-gahp-demo runs the whole round trip', async () => {
    const outputs = path.join(work, 'demo-output');
    const r = await run(path.join(installedBin, 'boinc-gahp-demo'), ['--quiet', '--output-dir', outputs], { cwd: work, env, timeoutMs: 120_000 });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('OK: every job ran');
    expect(fs.readdirSync(outputs).filter((f) => f.startsWith('out.'))).toHaveLength(20);
  }, 150_000);

  test('installed boinc-test-server starts and prints its project URL', async () => {
    const child = spawn(path.join(installedBin, 'boinc-test-server'), ['--port', '0'], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`no project URL printed: ${out}`)), 30_000);
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /project URL: (http:\/\/127\.0\.0\.1:\d+\/\S*)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
        child.on('error', reject);
        child.on('close', (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    } finally {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
        const closed = new Promise((resolve) => child.on('close', resolve));
        child.kill('SIGTERM');
        await closed;
      }
    }
  });
  test('installed boinc-gahp blahp install: six scripts running the installed package; a job through them as blahpd runs it', async () => {
    const libexec = path.join(work, 'libexec');
    fs.mkdirSync(libexec);
    const inst = await run(path.join(installedBin, 'boinc-gahp'), ['blahp', 'install', libexec], { cwd: work, env, timeoutMs: 30_000 });
    expect({ code: inst.code, stderr: inst.stderr }).toEqual({ code: 0, stderr: '' });
    const installedEntry = path.join(fs.realpathSync(path.join(prefix, 'lib', 'node_modules', 'boinc-gahp')), 'bin', 'boinc-gahp');
    for (const action of ['submit', 'status', 'cancel', 'hold', 'resume', 'ping']) {
      const script = path.join(libexec, `boinc_${action}.sh`);
      expect(fs.statSync(script).mode & 0o777).toBe(0o755);
      const text = fs.readFileSync(script, 'utf8');
      expect(text).toContain(installedEntry);
      expect(text).not.toContain(REPO_ROOT + path.sep);
    }

    // The site's side, as the README sets it up: blah.config holds the boinc_* lines, and
    // blahp's loader (here reduced to sourcing that file) sits beside the scripts.
    fs.writeFileSync(path.join(libexec, 'blah_load_config.sh'), '. "$BLAHPD_CONFIG_LOCATION"\n');
    const server = await startTestServer();
    try {
      const authFile = path.join(work, 'project.auth');
      fs.writeFileSync(authFile, `${server.authenticator}\n`, { mode: 0o600 });
      const blahConfig = path.join(work, 'blah.config');
      fs.writeFileSync(blahConfig, [
        `boinc_project_url=${server.url}`,
        `boinc_authenticator_file=${authFile}`,
        `boinc_state_dir=${path.join(work, 'blahp-state')}`,
        'boinc_status_max_age=0',
      ].join('\n') + '\n');
      const blahpdEnv: NodeJS.ProcessEnv = { BLAHPD_CONFIG_LOCATION: blahConfig };
      for (const [k, v] of Object.entries(env)) if (!k.startsWith('BOINC_')) blahpdEnv[k] = v;
      const blahpdTmp = path.join(work, 'blahpd-tmp');
      fs.mkdirSync(blahpdTmp);
      const blahpd = new Blahpd({ libexecDir: libexec, tmpDir: blahpdTmp, cwd: work, env: blahpdEnv, resultsCacheFile: null });

      const ping = await blahpd.ping();
      expect({ problem: ping.problem, answer: ping.answer }).toEqual({ problem: undefined, answer: { rc: 0, errorString: 'No error' } });

      const iwd = path.join(work, 'job');
      fs.mkdirSync(iwd);
      const input = 'installed from the tarball\n';
      fs.writeFileSync(path.join(iwd, 'in'), input);
      const sub = await blahpd.submit({
        Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, In: '/dev/null', Out: 'job.out', Err: 'job.err',
        TransferInput: 'in', TransferOutput: 'out', TransferOutputRemaps: 'out=result', Arguments: v2Arguments(['n=1']), JobDirectory: iwd,
      });
      // (the script's stderr shown only when the submit failed)
      expect({ problem: sub.problem, stderr: sub.problem ? sub.run?.stderr : '' }).toEqual({ problem: undefined, stderr: '' });
      expect(sub.listFilesLeft).toEqual([]);
      expect(sub.run!.stdinConsumed).toBe('');
      const id = sub.jobId!;
      expect(id).toMatch(/^boinc\/[A-Za-z0-9._-]+$/);

      const idle = await blahpd.status(id);
      expect({ problem: idle.problem, jobStatus: idle.answer?.jobStatus }).toEqual({ problem: undefined, jobStatus: 1 });

      server.advanceJob(id.slice('boinc/'.length), 'DONE');
      let done: StatusOutcome = idle;
      for (const until = Date.now() + 60_000; done.answer?.jobStatus !== 4 && Date.now() < until;) {
        await new Promise((r) => setTimeout(r, 300));
        done = await blahpd.status(id);
        expect(done.problem).toBeUndefined();
      }
      expect(done.answer!.jobStatus).toBe(4);
      expect(done.answer!.ad!.get('ExitCode')).toBe(0);
      // Status 4: the output is already in Iwd, under its remapped name.
      expect(fs.readFileSync(path.join(iwd, 'result'))).toEqual(Buffer.concat([upperAscii(Buffer.from(input)), Buffer.from('\nargs: n=1\n')]));
    } finally {
      await server.close();
    }
  }, 150_000);

  test('packaging/stage.mjs lays the tarball out as the .deb and the RPM install it: launcher, BLAHP scripts and man page', async () => {
    const root = path.join(work, 'stage');
    const staged = await run(process.execPath, [path.join(REPO_ROOT, 'packaging', 'stage.mjs'), tarball, root], { cwd: work, env, timeoutMs: 60_000 });
    expect({ code: staged.code, stderr: staged.stderr }).toEqual({ code: 0, stderr: '' });
    const lib = path.join(root, 'usr/lib/boinc-gahp');
    const listed = (dir: string): string[] => fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((p) => !fs.statSync(path.join(dir, p)).isDirectory());
    const outsideLib = listed(root).filter((p) => !p.startsWith('usr/lib/boinc-gahp/')).sort();
    expect(outsideLib).toEqual([
      'usr/bin/boinc-gahp',
      ...['cancel', 'hold', 'ping', 'resume', 'status', 'submit'].map((a) => `usr/libexec/blahp/boinc_${a}.sh`),
      'usr/share/doc/boinc-gahp/README.md',
      ...fs.readdirSync(path.join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `usr/share/doc/boinc-gahp/docs/${f}`),
      'usr/share/man/man1/boinc-gahp.1.gz',
    ]);
    // The program's tree is the tarball's, without the documentation moved out of it.
    expect(listed(lib).sort()).toEqual(files.map((f) => f.path).filter((p) => p !== 'README.md' && !p.startsWith('docs/')).sort());

    expect(fs.statSync(path.join(root, 'usr/bin/boinc-gahp')).mode & 0o777).toBe(0o755);
    expect(fs.readFileSync(path.join(root, 'usr/bin/boinc-gahp'), 'utf8')).toContain('\nexec /usr/bin/node /usr/lib/boinc-gahp/bin/boinc-gahp "$@"\n');
    for (const action of ['submit', 'status', 'cancel', 'hold', 'resume', 'ping']) {
      const script = path.join(root, `usr/libexec/blahp/boinc_${action}.sh`);
      expect(fs.statSync(script).mode & 0o777).toBe(0o755);
      const text = fs.readFileSync(script, 'utf8');
      expect(text).toContain(`\nexec '/usr/bin/node' '/usr/lib/boinc-gahp/bin/boinc-gahp' blahp ${action} "$@" </dev/null\n`);
      expect(text).not.toContain(work);
    }

    // The staged tree runs as it is (nothing left for npm to do), and the man page says what --help says.
    const ran = await run(process.execPath, [path.join(lib, 'bin/boinc-gahp'), '--version'], { cwd: work, env, timeoutMs: 30_000 });
    expect({ code: ran.code, stdout: ran.stdout.trim() }).toEqual({ code: 0, stdout: version });
    const help = await run(process.execPath, [path.join(lib, 'bin/boinc-gahp'), '--help'], { cwd: work, env, timeoutMs: 30_000 });
    expect(help.code).toBe(0);
    const man = zlib.gunzipSync(fs.readFileSync(path.join(root, 'usr/share/man/man1/boinc-gahp.1.gz'))).toString('utf8');
    expect(man).toMatch(new RegExp(`^\\.TH BOINC-GAHP 1 "" "boinc-gahp ${version.replace(/\./g, '\\.')}"`));
    const longOptions = [...new Set(help.stdout.match(/--[a-z][a-z-]*/g))];
    expect(longOptions).toEqual(expect.arrayContaining(['--version', '--state-dir', '--project-url']));
    for (const option of longOptions) expect(man).toContain(option.replace(/-/g, '\\-'));
    const commandList = help.stdout.slice(help.stdout.indexOf('\nCommands:\n')).split('\n\n')[0]!;
    const commands = [...commandList.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!);
    expect(commands).toEqual(expect.arrayContaining(['ping', 'submit']));
    for (const command of commands) expect(man).toMatch(new RegExp(`^\\.B ${command}\\b`, 'm'));
    // Each command's own options (submit --no-wait, doctor --json, ...), and examples.
    for (const command of commands) {
      const own = await run(process.execPath, [path.join(lib, 'bin/boinc-gahp'), 'help', command], { cwd: work, env, timeoutMs: 30_000 });
      expect(man).toMatch(new RegExp(`^\\.SS boinc\\\\-gahp ${command}\\b`, 'm'));
      for (const option of new Set(own.stdout.match(/--[a-z][a-z-]*/g))) expect(man).toContain(option.replace(/-/g, '\\-'));
    }
    expect(man).toContain('\\-\\-no\\-wait');
    expect(man).toMatch(/^\.SH EXAMPLES\n\.TP\n\.B boinc\\-gahp /m);
  });
});
