/**
 * The BOINC project the HTCondor check submits to: the bundled test server
 * (bin/boinc-test-server, jobs completing on their own), started as a child process on
 * 127.0.0.1, or a project named by the environment. Also what the check asks the server
 * directly, behind HTCondor's back: the status of every BOINC job of some batches, to see
 * that a job was aborted or was not submitted twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { signal, sleep } from './processes.js';

/** The input file every check job gets (its name is the `uppercase` app's input open_name). */
export const INPUT_TEXT = 'boinc-gahp htcondor check: input file\n';

export interface ProjectSettings {
  url: string;
  authenticatorFile: string;
  /** The app the jobs run: input `in`, output `out`. */
  app: string;
  /** True for the bundled server: its `uppercase` app's output is known byte for byte. */
  bundled: boolean;
}

export class BoincProject {
  private server: ChildProcess | undefined;
  private client: BoincClient | undefined;

  private constructor(readonly settings: ProjectSettings) {}

  /**
   * The bundled test server on a free loopback port: each job moves one step (unsent, in
   * progress, done) every `stepSeconds`, slow enough for condor_rm and condor_hold to find
   * a job still running on BOINC.
   */
  static async startBundled(repoDir: string, workDir: string, stepSeconds: number): Promise<BoincProject> {
    const child = spawn(
      process.execPath,
      [path.join(repoDir, 'bin/boinc-test-server'), '--port', '0', '--auto-complete', String(stepSeconds)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let printed = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (printed += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (printed += s));
    const deadline = Date.now() + 30_000;
    const started = /project URL: (\S+)\nauthenticator: (\S+)\n/;
    let match = started.exec(printed);
    while (!match) {
      if (child.exitCode !== null || Date.now() > deadline) {
        signal(child.pid ?? 0, 'SIGKILL');
        throw new Error(`the bundled test server did not start: ${printed.trim() || 'no output'}`);
      }
      await sleep(100);
      match = started.exec(printed);
    }
    const authenticatorFile = path.join(workDir, 'boinc.auth');
    fs.writeFileSync(authenticatorFile, match[2]! + '\n', { mode: 0o600 });
    const project = new BoincProject({ url: match[1]!, authenticatorFile, app: 'uppercase', bundled: true });
    project.server = child;
    return project;
  }

  /** A project given by the environment (its app must have input `in` and output `out`). */
  static external(url: string, authenticatorFile: string, app: string): BoincProject {
    return new BoincProject({ url, authenticatorFile, app, bundled: false });
  }

  /** What `out` must hold after a job with arguments `-n <proc>` (undefined: not known). */
  expectedOutput(proc: number): string | undefined {
    if (!this.settings.bundled) return undefined;
    return INPUT_TEXT.toUpperCase() + `\nargs: -n ${proc}\n`;
  }

  /** Every BOINC job of these batches with its status (UNSENT, IN_PROGRESS, DONE, ERROR). */
  async jobsOf(batchNames: string[]): Promise<Array<{ name: string; status: string }>> {
    if (batchNames.length === 0) return [];
    this.client ??= new BoincClient({
      projectUrl: this.settings.url,
      authenticator: fs.readFileSync(this.settings.authenticatorFile, 'utf8').trim().split('\n')[0]!.trim(),
      timeoutMs: 30_000,
    });
    const reply = await this.client.queryBatch2('0', batchNames);
    return reply.batches.flatMap((b) => b.jobs);
  }

  /** The batches a GAHP or the BLAHP scripts created in a state directory since `sinceMs`. */
  static batchesCreatedSince(stateDir: string, sinceMs: number): string[] {
    if (!fs.existsSync(path.join(stateDir, 'ledger.jsonl'))) return [];
    return JournalLedger.readOnly(stateDir)
      .list()
      .filter((b) => b.createdAt >= sinceMs)
      .map((b) => b.name);
  }

  async stop(): Promise<void> {
    this.client?.close();
    const child = this.server;
    if (!child?.pid || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    signal(child.pid, 'SIGTERM');
    const timer = setTimeout(() => signal(child.pid!, 'SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
