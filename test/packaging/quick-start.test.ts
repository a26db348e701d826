/**
 * The README's "Quick start" as a new user walks it, in a fresh clone of this repository's
 * HEAD: before any build, bin/* say in one line how to build; then every fenced command of
 * the quick start runs as written, the submit file it shows is the one submitted, and the
 * output it shows is the output printed.
 *
 * Two liberties, both to stay offline and out of other tests' way: `npm ci` is npm's
 * install (node_modules is linked from this checkout instead) followed by the `prepare`
 * script, so the test runs `npm run prepare`; and the README's port 8090 becomes a free
 * port, in the commands, the submit file and the expected output alike.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { makeTempDir, REPO_ROOT } from '../support/gahp-process.js';

/** The fenced blocks of a README section: language and text. */
function fencedBlocks(readme: string, heading: string): Array<{ lang: string; text: string }> {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README has no section "${heading}"`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** A shell's environment with nothing of the `npm test` running this (npm_* variables), HOME in the temp dir. */
function userEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, HOME: home, XDG_STATE_HOME: path.join(home, '.local', 'state') };
}

/** npm itself: the one running `npm test` when there is one, else npm from PATH. */
function npmCommand(args: string[]): [string, string[]] {
  const cli = process.env.npm_execpath;
  return cli ? [process.execPath, [cli, ...args]] : ['npm', args];
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let work: string;
let checkout: string;
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  work = makeTempDir('boinc-gahp-quick-start-');
  checkout = path.join(work, 'boinc-gahp');
  const cloned = spawnSync('git', ['clone', '--quiet', REPO_ROOT, checkout], { encoding: 'utf8' });
  if (cloned.status !== 0) throw new Error(`git clone failed: ${cloned.stderr}`);
  fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(checkout, 'node_modules'), 'dir');
  const home = path.join(work, 'home');
  fs.mkdirSync(home);
  env = userEnv(home);
});

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test('before any build, each bin/* says in one line how to build, and exits 2', async () => {
  expect(fs.existsSync(path.join(checkout, 'dist'))).toBe(false);
  for (const [bin, args] of [['boinc-gahp', ['--help']], ['boinc-gahp', ['blahp', 'install']], ['boinc-test-server', []], ['boinc-gahp-demo', []]] as const) {
    const r = await run(process.execPath, [path.join(checkout, 'bin', bin), ...args], checkout, env);
    expect({ bin, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
      bin, code: 2, stdout: '', stderr: `${bin}: not built yet: run "npm ci" (or "npm run build") in ${checkout}${path.sep}\n`,
    });
  }
});

test('the quick start runs as written: the submit file submitted, the output shown, the outputs made', async () => {
  const port = String(await freePort());
  const localized = (text: string) => text.replaceAll('8090', port);
  const blocks = fencedBlocks(fs.readFileSync(path.join(checkout, 'README.md'), 'utf8'), 'Quick start (in a checkout)');
  let server: ChildProcess | undefined;
  let lastStdout = '';
  let ran = 0;
  try {
    for (const block of blocks) {
      if (block.lang === 'sh') {
        for (const line of block.text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))) {
          ran++;
          if (line === 'npm ci') {
            const [cmd, args] = npmCommand(['run', 'prepare']);
            const built = await run(cmd, args, checkout, env);
            expect({ line, code: built.code, stderr: built.code === 0 ? '' : built.stderr }).toEqual({ line, code: 0, stderr: '' });
          } else if (line.endsWith('&')) {
            // A server left running: started in its own process group, ready once it prints its URL.
            const started = spawn('sh', ['-c', localized(line.slice(0, -1))], { cwd: checkout, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
            server = started;
            await new Promise<void>((resolve, reject) => {
              let out = '';
              started.stdout.on('data', (d) => {
                out += d;
                if (/^project URL: /m.test(out)) resolve();
              });
              started.on('exit', (code) => reject(new Error(`"${line}" exited ${code}: ${out}`)));
            });
          } else if (line === 'kill %1') {
            const exited = new Promise((resolve) => server!.on('exit', resolve));
            process.kill(-server!.pid!, 'SIGTERM');
            await exited;
            server = undefined;
          } else {
            const r = await run('sh', ['-c', localized(line)], checkout, env);
            expect({ line, code: r.code, stderr: r.code === 0 ? '' : r.stderr }).toEqual({ line, code: 0, stderr: '' });
            lastStdout = r.stdout;
          }
        }
      } else if (/^queue\b/m.test(block.text)) {
        // A submit file: saved under the name its first line gives (`# job.sub: ...`).
        const name = /^# ([\w.-]+):/.exec(block.text)?.[1];
        expect(name).toBeDefined();
        fs.writeFileSync(path.join(checkout, name!), localized(block.text));
      } else {
        // Output as the README shows it: what the last command printed.
        expect(lastStdout).toBe(localized(block.text));
      }
    }
  } finally {
    if (server?.pid && server.exitCode === null) process.kill(-server.pid, 'SIGKILL');
  }
  expect(ran).toBeGreaterThanOrEqual(6);
  expect(server).toBeUndefined();
  // What the README says the outputs hold.
  for (const i of [0, 1, 2]) expect(fs.readFileSync(path.join(checkout, `out.${i}`), 'utf8')).toBe('HELLO, BOINC\n');
  expect(fs.readFileSync(path.join(checkout, 'err.0'), 'utf8')).toMatch(/^uppercase: 13 bytes\n/);
  expect((fs.statSync(path.join(checkout, 'auth')).mode & 0o777).toString(8)).toBe('600');
}, 600_000);
