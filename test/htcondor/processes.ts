/**
 * Running programs for the HTCondor check (docs/htcondor-check.md): every program is
 * spawned with an argument array (no shell sees a path, a job attribute or a submit file),
 * with a time limit, and everything the pool started is found again by its environment so
 * that it can be killed by pid at the end.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs a program to its end (killed after timeoutMs) and returns what it printed. */
export function run(file: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${opts.timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, opts.timeoutMs ?? 120_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: stderr + err.message });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs a program and returns its stdout; a non-zero exit is an error naming the program. */
export async function runOk(file: string, args: string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(file, args, opts);
  if (r.code !== 0) {
    const name = file.split('/').pop();
    throw new Error(`${name} ${args.join(' ')} exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(0, 600)}`);
  }
  return r.stdout;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` every `everyMs` until it returns a value (not undefined) and returns it;
 * after timeoutMs it fails with "timed out waiting for <what>" and the last state seen.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  everyMs = 2000,
  lastState?: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const state = lastState ? ` (last seen: ${lastState()})` : '';
      throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}${state}`);
    }
    await sleep(everyMs);
  }
}

export interface FoundProcess {
  pid: number;
  /** argv[0]'s base name. */
  name: string;
}

/**
 * The processes (of this user: others' environments are unreadable) whose environment
 * holds `marker` exactly as one `NAME=value` entry. The pool's master is started with a
 * marker variable that its daemons, the gridmanager, the GAHP, blahpd and the BLAHP
 * scripts (and their background worker) all inherit.
 */
export function processesWithEnv(marker: string): FoundProcess[] {
  const found: FoundProcess[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      if (!env.includes(marker)) continue;
      const argv0 = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')[0] ?? '';
      found.push({ pid, name: argv0.split('/').pop() ?? argv0 });
    } catch {
      // gone, or not ours
    }
  }
  return found;
}

/** Sends a signal to a pid; false when it is gone already. */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
