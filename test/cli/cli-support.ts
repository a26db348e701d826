/** Helpers for CLI tests: run bin/boinc-gahp (the compiled build) as a child process. */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { GAHP_BIN, withoutProxies } from '../support/gahp-process.js';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  bin?: string;
  /** Written to the child's stdin, which is then closed (else stdin is /dev/null). */
  input?: string;
}

/** A started command: its output so far, a wait for some of it, and its end. */
export interface StartedCli {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when what the child wrote (stdout and stderr) matches re. */
  waitFor(re: RegExp): Promise<void>;
  /** The exit; rejects (after killing the child) when it takes longer than timeoutMs. */
  exited: Promise<RunResult>;
}

/** The environment a test's child gets: the caller's BOINC_GAHP_* settings must not leak into a test. */
export function cliEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BOINC_GAHP_')) env[k] = v;
  return { ...withoutProxies(env), ...extra };
}

/** Starts `command args` (default: node bin/boinc-gahp args). */
export function startCli(args: string[], opts: CliOptions & { command?: string } = {}): StartedCli {
  const [command, argv] = opts.command ? [opts.command, args] : [process.execPath, [opts.bin ?? GAHP_BIN, ...args]];
  const child = spawn(command, argv, { cwd: opts.cwd, env: cliEnv(opts.env), stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  child.stdin?.on('error', () => undefined).end(opts.input);
  let stdout = '';
  let stderr = '';
  let closed = false;
  let waiters: Array<() => void> = [];
  const wrote = () => {
    const now = waiters;
    waiters = [];
    now.forEach((w) => w());
  };
  // Decoded as streams: a character split across two reads stays whole.
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stdout!.on('data', (d: string) => {
    stdout += d;
    wrote();
  });
  child.stderr!.on('data', (d: string) => {
    stderr += d;
    wrote();
  });
  const exited = new Promise<RunResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${argv.join(' ')} timed out; stdout: ${stdout}; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    // 'close', not 'exit': the output is complete only when the pipes are.
    child.on('close', (code) => {
      clearTimeout(timer);
      closed = true;
      wrote();
      resolve({ code, stdout, stderr });
    });
  });
  const waitFor = async (re: RegExp): Promise<void> => {
    while (!re.test(stdout + stderr)) {
      if (closed) throw new Error(`exited before printing ${re}; stdout: ${stdout}; stderr: ${stderr}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    waitFor,
    exited,
  };
}

export function runCli(args: string[], opts: CliOptions = {}): Promise<RunResult> {
  return startCli(args, opts).exited;
}

/**
 * Writes `file`: a submit description of `executable` jobs on the BOINC project at `url`, its
 * authenticator in `authFile` (a path as the file gives it: relative to the submit directory),
 * then `lines` (the transfer and queue commands).
 */
export function writeSubmitFile(file: string, project: { url: string; authFile: string }, lines: string[], executable = 'uppercase'): void {
  const head = [`executable = ${executable}`, `grid_resource = boinc ${project.url}`, `boinc_authenticator_file = ${project.authFile}`];
  fs.writeFileSync(file, [...head, ...lines].join('\n') + '\n');
}
