/** Helpers for CLI tests: run bin/boinc-gahp (the compiled build) as a child process. */
import { spawn } from 'node:child_process';
import { GAHP_BIN, withoutProxies } from '../support/gahp-process.js';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; bin?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    // The caller's BOINC_GAHP_* settings must not leak into a test.
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BOINC_GAHP_')) env[k] = v;
    const child = spawn(process.execPath, [opts.bin ?? GAHP_BIN, ...args], {
      cwd: opts.cwd,
      env: { ...withoutProxies(env), ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    // Decoded as streams: a character split across two reads stays whole.
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => (stdout += d));
    child.stderr.on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`boinc-gahp ${args.join(' ')} timed out; stdout: ${stdout}; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
