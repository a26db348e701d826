/**
 * Interactive mode driven through a real pseudo-terminal (Python's pty module relays a
 * terminal to bin/boinc-gahp): prompt, help, optional request ids, results printed as they
 * arrive, readable errors, history without the authenticator.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestBoincServer } from '../../fixtures/test-server/index.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';
import { runCli } from './cli-support.js';

const RELAY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pty-relay.py');
const havePython = spawnSync('python3', ['-c', 'import pty'], { stdio: 'ignore' }).status === 0;
const describePty = havePython ? describe : describe.skip;

// eslint-disable-next-line no-control-regex
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '');

class Terminal {
  readonly child: ChildProcessWithoutNullStreams;
  private raw = '';
  private waiters: Array<() => void> = [];
  readonly exited: Promise<number | null>;

  constructor(args: string[], extraEnv: NodeJS.ProcessEnv = {}) {
    const env: NodeJS.ProcessEnv = { TERM: 'xterm' };
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BOINC_GAHP_')) env[k] = v;
    Object.assign(env, extraEnv);
    env.TERM = 'xterm';
    this.child = spawn('python3', [RELAY, process.execPath, GAHP_BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    // Decoded as streams: a character split across two reads stays whole.
    this.child.stdout.setEncoding('utf8');
    this.child.stderr.setEncoding('utf8');
    this.child.stdout.on('data', (d: string) => {
      this.raw += d;
      this.waiters.splice(0).forEach((w) => w());
    });
    this.child.stderr.on('data', (d: string) => {
      this.raw += d;
    });
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  get text(): string {
    return stripAnsi(this.raw);
  }

  /** Waits until the screen text (after `from`) matches re; returns the index after the match. */
  async waitFor(re: RegExp, from = 0, timeoutMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const t = this.text.slice(from);
      const m = re.exec(t);
      if (m) return from + m.index + m[0].length;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}; screen:\n${this.text.slice(-3000)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  type(line: string): number {
    const at = this.text.length;
    this.child.stdin.write(line + '\r');
    return at;
  }

  /** Types a line and waits for the answer matching re. */
  async exchange(line: string, re: RegExp): Promise<string> {
    const at = this.type(line);
    const end = await this.waitFor(re, at);
    return this.text.slice(at, end);
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }
}

describePty('interactive mode on a terminal', () => {
  let server: TestBoincServer;
  let dir: string;
  let term: Terminal | undefined;

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(() => {
    dir = makeTempDir('boinc-gahp-pty-');
  });
  afterEach(() => {
    term?.kill();
    term = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('help, optional request ids, results as they arrive, readable errors, secret-free history', async () => {
    term = new Terminal(['--state-dir', path.join(dir, 'state')]);
    await term.waitFor(/\$GahpVersion: [0-9.]+ .* \$\n/);
    await term.waitFor(/interactive mode[\s\S]*No project selected yet[\s\S]*gahp> /);

    const help = await term.exchange('help', /help <COMMAND> shows its arguments\./);
    for (const c of ['BOINC_SUBMIT', 'BOINC_QUERY_BATCHES', 'BOINC_FETCH_OUTPUT', 'BOINC_SET_LEASE', 'RESULTS', 'QUIT']) {
      expect(help).toMatch(new RegExp(`\\n  ${c} +\\S`));
    }
    const one = await term.exchange('help boinc_fetch_output', /answered S at once[^\n]*\n/i);
    expect(one).toMatch(/BOINC_FETCH_OUTPUT \[<reqid>\] <job_name> <iwd>/);

    // Before a project is selected: a readable error result.
    expect(await term.exchange('boinc_ping', /\[1\] BOINC_PING failed: [^\n]*\n/)).toMatch(/no project selected/);

    await term.exchange(`BOINC_SELECT_PROJECT ${server.url} ${server.authenticator}`, /\nS\n/);
    // No request id: one is assigned; the result prints without typing RESULTS.
    expect(await term.exchange('boinc_ping', /\[2\] BOINC_PING ok\n/)).toMatch(/S {2}\(request 2 queued\)/);
    // With a request id.
    await term.exchange('BOINC_PING 77', /\[77\] BOINC_PING ok\n/);
    expect(await term.exchange('BOINC_QUERY_BATCHES 0 1 nosuch', /BOINC_QUERY_BATCHES failed: [^\n]*\n/))
      .toMatch(/\[3\] BOINC_QUERY_BATCHES failed: .*no batch named nosuch/);
    // A query's result names each batch asked (its result lists only counts and jobs).
    const input = path.join(dir, 'in.txt');
    fs.writeFileSync(input, 'pty\n');
    await term.exchange(`BOINC_SUBMIT ptybatch uppercase 2 ptybatch#0 0 1 ${input} in ptybatch#1 0 1 ${input} in NULL NULL NULL NULL NULL NULL`, /\[4\] BOINC_SUBMIT ok\n/);
    expect(await term.exchange('BOINC_QUERY_BATCHES 0 1 ptybatch', /\[5\] BOINC_QUERY_BATCHES ok[^\n]*\n[^\n]*\n/)).toMatch(/\n {2}ptybatch: 2 jobs changed\n/);
    expect(await term.exchange('FROB 1 2', /E {2}error: [^\n]*\n/)).toMatch(/unknown command FROB \(type "help" for the commands\)/);
    expect(await term.exchange('BOINC_SET_LEASE onlyone', /E {2}error: [^\n]*\n/)).toMatch(/BOINC_SET_LEASE: .*usage: BOINC_SET_LEASE/);
    expect(await term.exchange('version', /\n(S \$GahpVersion[^\n]*)\n/)).toMatch(/S \$GahpVersion: /);

    term.type('quit');
    expect(await term.exited).toBe(0);
    const history = fs.readFileSync(path.join(dir, 'state', 'history'), 'utf8');
    expect(history).toContain(`BOINC_SELECT_PROJECT ${server.url} ***`);
    expect(history).toContain('BOINC_PING 77');
    expect(history).not.toContain(server.authenticator);
  });

  test('the history is kept in the state directory the GAHP falls back to', async () => {
    // A --state-dir that cannot be made (under a regular file): the GAHP uses its fallback
    // under the system temp dir, here the test's own (TMPDIR).
    fs.writeFileSync(path.join(dir, 'a-file'), '');
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(tmp);
    term = new Terminal(['--state-dir', path.join(dir, 'a-file', 'state')], { TMPDIR: tmp });
    await term.waitFor(/gahp> /);
    await term.exchange('BOINC_PING 5', /\[5\] BOINC_PING failed: [^\n]*\n/);
    term.type('quit');
    expect(await term.exited).toBe(0);
    const fallback = fs.readdirSync(tmp).filter((n) => n.startsWith('boinc-gahp-'));
    expect(fallback).toHaveLength(1);
    expect(fs.readFileSync(path.join(tmp, fallback[0]!, 'history'), 'utf8')).toContain('BOINC_PING 5');
  });

  test('a project pre-selected from the command line; the authenticator never shows; Ctrl-C, Ctrl-D', async () => {
    const authFile = path.join(dir, 'auth');
    fs.writeFileSync(authFile, server.authenticator + '\n');
    term = new Terminal(['--state-dir', path.join(dir, 'state'), '--project-url', server.url, '--authenticator-file', authFile]);
    await term.waitFor(/Project http:\/\/127\.0\.0\.1:[0-9]+\/[^ ]* is selected\.[\s\S]*gahp> /);
    await term.exchange('BOINC_PING', /\[1\] BOINC_PING ok\n/);
    // @file: the authenticator is read from a file, never typed nor shown.
    expect(await term.exchange('help BOINC_SELECT_PROJECT', /never shown\.\n/)).toMatch(/@<file>/);
    await term.exchange(`BOINC_SELECT_PROJECT ${server.url} @${path.join(dir, 'nope')}`, /error: authenticator file \S*nope: cannot be read: ENOENT[^\n]*-> fix: [^\n]*\n/);
    // A URL the GAHP cannot use is refused when selected, in doctor's words; the project stays.
    await term.exchange(`BOINC_SELECT_PROJECT htp://127.0.0.1/x/ @${authFile}`, /error: project URL: "htp:\/\/127\.0\.0\.1\/x\/" is not an http\(s\) URL {2}-> fix: give BOINC_SELECT_PROJECT the project's master URL[^\n]*\n/);
    await term.exchange('BOINC_PING', /\[2\] BOINC_PING ok\n/);
    await term.exchange(`BOINC_SELECT_PROJECT ${server.url} @${authFile}`, /\nS\n/);
    await term.exchange('BOINC_PING', /\[3\] BOINC_PING ok\n/);
    // Ctrl-C clears a half-typed line (nothing is sent), then Ctrl-D leaves.
    term.child.stdin.write('BOINC_PI\x03');
    await term.exchange('BOINC_PING', /\[4\] BOINC_PING ok\n/);
    term.child.stdin.write('\x04');
    expect(await term.exited).toBe(0);
    expect(term.text).not.toContain(server.authenticator);
  });
});

describe('interactive mode fed by a pipe', () => {
  let server: TestBoincServer;
  let dir: string;
  let authFile: string;

  beforeAll(async () => {
    server = await startTestServer();
    dir = makeTempDir('boinc-gahp-piped-');
    authFile = path.join(dir, 'auth');
    fs.writeFileSync(authFile, server.authenticator + '\n');
  });
  afterAll(async () => {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The prompt with all of `input` written and stdin closed at once (cli-support kills it after its timeout). */
  async function runPiped(input: string): Promise<{ code: number | null; out: string }> {
    const r = await runCli(['--interactive', '--state-dir', path.join(dir, 'state'), '--project-url', server.url, '--authenticator-file', authFile], { input });
    return { code: r.code, out: r.stdout + r.stderr };
  }

  // The lines are in the pipe before the GAHP has answered its first request: they were
  // lost, and the end of input with them, and the prompt waited for ever.
  test('lines and the end of input that come before the GAHP is up are all handled; results in flight are printed before it leaves', async () => {
    const r = await runPiped('BOINC_PING\nVERSION\n');
    expect(r.code).toBe(0);
    expect(r.out).toContain('S  (request 1 queued)');
    expect(r.out).toContain('S $GahpVersion:');
    expect(r.out).toContain('[1] BOINC_PING ok');
  }, 30_000);

  test('a command word one slip from a command, or without its BOINC_, is answered with the command meant', async () => {
    const r = await runPiped('BOINC_PIGN\nping\nversoin\nFROB\n');
    expect(r.code).toBe(0);
    expect(r.out).toContain('E  error: unknown command BOINC_PIGN (did you mean BOINC_PING? "help" lists the commands)');
    expect(r.out).toContain('E  error: unknown command ping (did you mean BOINC_PING? "help" lists the commands)');
    expect(r.out).toContain('E  error: unknown command versoin (did you mean VERSION? "help" lists the commands)');
    expect(r.out).toContain('E  error: unknown command FROB (type "help" for the commands)');
  }, 30_000);

  test('quit in a script also waits for the results asked before it', async () => {
    const r = await runPiped('BOINC_PING\nquit\nVERSION\n');
    expect(r.code).toBe(0);
    expect(r.out).toContain('[1] BOINC_PING ok');
    expect(r.out).not.toContain('S $GahpVersion:');
  }, 30_000);
});
