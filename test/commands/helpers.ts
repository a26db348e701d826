/**
 * Shared set-up for the command tests: a test BOINC server in this process, the real GAHP
 * as a child process speaking to it, and batches put on the server through the real RPC
 * client (create_batch, query_files/upload_files, submit_batch) the way a submit does.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { startTestServer, type ExtendedTestBoincServer, type ExtendedTestServerOptions, type TestApp } from '../../fixtures/test-server/index.js';
import { JournalLedger } from '../../gahp/ledger/journal-ledger.js';
import { GahpProcess, makeTempDir, type GahpStartOptions } from '../support/gahp-process.js';

export interface TestJob {
  name: string;
  /** Input file contents, in input-template order. */
  inputs: Array<string | Buffer>;
  commandLine?: string;
}

export interface Env {
  server: ExtendedTestBoincServer;
  gahp: GahpProcess;
  rpc: BoincClient;
  /** Scratch directory (removed by close()). */
  dir: string;
  /** The GAHP's state directory (kept across restart(); removed by close()). */
  stateDir: string;
  /** Stops the GAHP (QUIT), runs `between` (e.g. seeding the ledger), starts a new one. */
  restart(between?: () => Promise<void> | void, gahpOpts?: GahpStartOptions): Promise<void>;
  close(): Promise<void>;
}

/** A GAHP started and pointed at the server (a second one may share a state directory with the first: `opts.stateDir`). */
export async function launch(server: ExtendedTestBoincServer, opts: GahpStartOptions): Promise<GahpProcess> {
  const gahp = await GahpProcess.start(opts);
  try {
    await gahp.startup();
    await gahp.selectProject(server.url, server.authenticator);
  } catch (err) {
    await gahp.close();
    throw err;
  }
  return gahp;
}

export async function startEnv(serverOpts: ExtendedTestServerOptions = {}, gahpOpts: GahpStartOptions = {}): Promise<Env> {
  const server = await startTestServer(serverOpts);
  const dir = makeTempDir('boinc-gahp-cmd-');
  const stateDir = gahpOpts.stateDir ?? makeTempDir('boinc-gahp-state-');
  let gahp: GahpProcess;
  try {
    gahp = await launch(server, { ...gahpOpts, stateDir });
  } catch (err) {
    await server.close();
    throw err;
  }
  const rpc = new BoincClient({ projectUrl: server.url, authenticator: server.authenticator });
  const env: Env = {
    server,
    gahp,
    rpc,
    dir,
    stateDir,
    async restart(between, opts) {
      await env.gahp.close();
      await between?.();
      env.gahp = await launch(server, { ...gahpOpts, ...opts, stateDir });
    },
    async close() {
      rpc.close();
      await env.gahp.close();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
      if (!gahpOpts.stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
  return env;
}

/** Puts a batch on the server (create, stage inputs linked to it, submit); returns its id. */
export async function submitBatch(env: Env, batchName: string, app: string, jobs: TestJob[], expireTime = Math.floor(Date.now() / 1000) + 6 * 3600): Promise<number> {
  const batchId = await env.rpc.createBatch({ batchName, appName: app, expireTime });
  const byPhys = new Map<string, string>();
  const jobFiles: string[][] = [];
  for (const job of jobs) {
    const names: string[] = [];
    for (const content of job.inputs) {
      const buf = Buffer.isBuffer(content) ? content : Buffer.from(content, 'latin1');
      const phys = `condorv_${crypto.createHash('md5').update(buf).digest('hex')}`;
      if (!byPhys.has(phys)) {
        const p = path.join(env.dir, phys);
        fs.writeFileSync(p, buf);
        byPhys.set(phys, p);
      }
      names.push(phys);
    }
    jobFiles.push(names);
  }
  const physNames = [...byPhys.keys()];
  if (physNames.length > 0) {
    const absent = await env.rpc.queryFiles({ physNames, batchId });
    if (absent.length > 0) {
      await env.rpc.uploadFiles({ batchId, files: absent.map((i) => ({ physName: physNames[i]!, path: byPhys.get(physNames[i]!)! })) });
    }
  }
  await env.rpc.submitBatch({
    batchId,
    batchName,
    appName: app,
    jobs: jobs.map((j, i) => ({ name: j.name, commandLine: j.commandLine ?? '', inputFiles: jobFiles[i]! })),
  });
  return batchId;
}

let counter = 0;
/** A batch name like HTCondor's: condor#<schedd>#<app>#<time>; unique per call. */
export function batchName(app: string): string {
  return `condor#schedd@submit.example.org#${app}#${1796204752 + process.pid * 1000 + counter++}`;
}

export function jobName(batch: string, cluster: number, proc = 0): string {
  return `${batch}#${cluster}.${proc}`;
}

/** Writes ledger records as the submit command does, before a GAHP opens the state dir. */
export async function seedLedger(stateDir: string, projectUrl: string, batches: Array<{ name: string; app: string; batchId: number; jobs: string[]; leaseExpiresAt?: number }>): Promise<void> {
  const ledger = JournalLedger.open(stateDir);
  for (const b of batches) {
    await ledger.upsert(projectUrl, b.name, {
      app: b.app,
      state: 'submitted',
      batchId: b.batchId,
      ...(b.leaseExpiresAt !== undefined ? { leaseExpiresAt: b.leaseExpiresAt } : {}),
      physFiles: [],
      jobs: Object.fromEntries(b.jobs.map((j) => [j, 'SUBMITTED'])),
    });
  }
  await ledger.close();
}

/** Files and directories under dir (relative paths, sorted), hidden temp files included. */
export function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      out.push(e.isDirectory() ? r + '/' : r);
      if (e.isDirectory()) walk(path.join(d, e.name), r);
    }
  };
  walk(dir, '');
  return out.sort();
}

/** Escapes one token for a request line as HTCondor does (space, backslash, CR, LF). */
export function esc(token: string): string {
  return token.replace(/[\\ \r\n]/g, (c) => '\\' + c);
}

/** A new empty directory under env.dir, for one job's outputs (its iwd). */
export function newJobDir(env: Env): string {
  return fs.mkdtempSync(path.join(env.dir, 'iwd-'));
}

/**
 * Sends a BOINC_FETCH_OUTPUT (ALL mode, stderr to job.err) for each job at once, each into
 * a new directory; once the GAHP has acknowledged every request, returns the request ids and
 * the directories (the results are the caller's to wait for).
 */
export async function startFetches(env: Env, names: string[]): Promise<{ ids: string[]; iwds: string[] }> {
  const iwds = names.map(() => newJobDir(env));
  const ids = names.map((name, i) => {
    const id = env.gahp.reqId();
    env.gahp.send(`BOINC_FETCH_OUTPUT ${id} ${esc(name)} ${esc(iwds[i]!)} job.err ALL 0`);
    return id;
  });
  for (let i = 0; i < ids.length; i++) expect(await env.gahp.readReply()).toBe('S');
  return { ids, iwds };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until a unix time (seconds, fractional) has passed on this clock. */
export async function waitPast(unixTime: number): Promise<void> {
  const ms = unixTime * 1000 - Date.now();
  if (ms > -5) await sleep(ms + 20);
}

/**
 * Reads the ledger (as a second process would) until `check` passes: status queries
 * journal their statuses in the background, just after the result is queued.
 */
export async function readLedgerWhen(stateDir: string, check: (l: JournalLedger) => boolean, timeoutMs = 5000): Promise<JournalLedger> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const l = JournalLedger.readOnly(stateDir);
    if (check(l) || Date.now() > deadline) return l;
    await sleep(20);
  }
}

/** A test app that writes its input, as UTF-8 text, to stderr (and an empty output). */
export const echoErrApp: TestApp = {
  name: 'echoerr',
  inputs: [{ openName: 'in' }],
  outputs: [{ openName: 'out' }],
  run(ctx) {
    return { kind: 'success', outputs: [Buffer.alloc(0)], stderr: ctx.inputs[0]!.toString('utf8') };
  },
};
