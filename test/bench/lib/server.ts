/** Parent side of lib/server-child.ts: the bundled test server in its own process. */
import { fork, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchTempDir, onCleanup, removeTempDir } from './tmp.js';
import type { ExtendedTestServerOptions } from '../../../fixtures/test-server/index.js';
import type { CallTime } from './server-child.js';

export type { CallTime };

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'server-child.js');

export interface ServerSummary {
  batches: number;
  jobs: number;
  files: number;
  fileBytes: number;
  /** RPCs received by root name since the last clearRpcLog. */
  rpcs: Record<string, number>;
}

export class BenchServer {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly unregister: () => void;

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly authenticator: string,
    private readonly dataDir: string,
  ) {
    child.on('message', (m: { id?: number; result?: unknown; error?: string }) => {
      if (m.id === undefined) return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error));
      else p.resolve(m.result);
    });
    child.on('exit', () => {
      for (const p of this.pending.values()) p.reject(new Error('test server exited'));
      this.pending.clear();
    });
    this.unregister = onCleanup(() => child.kill('SIGKILL'));
  }

  static start(opts: ExtendedTestServerOptions = {}): Promise<BenchServer> {
    // The stored files live in a dir of ours, so they go even when the child is killed.
    const dataDir = benchTempDir('server');
    const child = fork(CHILD, [JSON.stringify({ ...opts, dataDir })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new Promise((resolve, reject) => {
      const onMsg = (m: { ready?: boolean; url: string; authenticator: string }) => {
        if (!m.ready) return;
        child.off('message', onMsg);
        child.off('exit', onExit);
        resolve(new BenchServer(child, m.url, m.authenticator, dataDir));
      };
      const onExit = (code: number | null) => {
        removeTempDir(dataDir);
        reject(new Error(`test server exited (${code}) before it was ready`));
      };
      child.on('message', onMsg);
      child.on('exit', onExit);
    });
  }

  private call<T>(op: string, extra: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: (v) => resolve(v as T), reject });
      this.child.send({ id, op, ...extra });
    });
  }

  advanceAll(batchName?: string, to?: 'UNSENT' | 'IN_PROGRESS' | 'DONE' | 'ERROR'): Promise<void> {
    return this.call('advanceAll', { batchName, to });
  }

  summary(): Promise<ServerSummary> {
    return this.call('summary');
  }

  /** The HTTP calls handled since the last clearRpcLog, with their times (lib/server-child.ts). */
  calls(): Promise<CallTime[]> {
    return this.call('calls');
  }

  clearRpcLog(): Promise<void> {
    return this.call('clearRpcLog');
  }

  async close(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      await this.call('close').catch(() => undefined);
      const t = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
    this.unregister();
    removeTempDir(this.dataDir);
  }
}
