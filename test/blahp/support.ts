/**
 * Set-up for the BLAHP tests: the test BOINC server in this process, the scripts installed
 * by the real `boinc-gahp blahp install` into a scratch libexec directory beside a
 * blah_load_config.sh that sources a blah.config (as blahp's loader does), and blahpd
 * emulated by test/support/blahpd.ts (command strings split like wordexp, own session,
 * stdin an unread pipe, list files deleted on return, the 30 s silence limit).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestServer, type ExtendedTestBoincServer, type ExtendedTestServerOptions } from '../../fixtures/test-server/index.js';
import { GAHP_BIN, makeTempDir } from '../support/gahp-process.js';
import { Blahpd, stopBlahpFetcher, type StatusOutcome } from '../support/blahpd.js';
import { install } from '../../gahp/blahp-scripts.js';

export interface BlahpEnv {
  server: ExtendedTestBoincServer;
  blahpd: Blahpd;
  dir: string;
  libexec: string;
  stateDir: string;
  /** blahpd's environment: no BOINC_* variables, BLAHPD_CONFIG_LOCATION set. */
  env: NodeJS.ProcessEnv;
  /** Rewrites blah.config: the defaults, then these lines. */
  config(extra?: Record<string, string>): void;
  /**
   * How many node processes the scripts have started for this action so far (with
   * `countNodeStarts` only; the background worker, which node itself starts, is not counted).
   */
  nodeStarts(action?: string): number;
  close(): Promise<void>;
}

/**
 * The BlahpEnv of a test file: started before its tests (with startBlahpEnv's arguments),
 * closed after them. The returned function gives it to the tests.
 */
export function blahpEnvForFile(serverOpts: ExtendedTestServerOptions = {}, extra: Record<string, string> = {}, startTimeoutMs = 120_000, opts: BlahpEnvOptions = {}): () => BlahpEnv {
  let env: BlahpEnv | undefined;
  beforeAll(async () => {
    env = await startBlahpEnv(serverOpts, extra, opts);
  }, startTimeoutMs);
  afterAll(async () => {
    await env?.close();
  });
  return () => {
    if (!env) throw new Error('the BLAHP test environment did not start');
    return env;
  };
}

export interface BlahpEnvOptions {
  /**
   * Install the scripts with a stand-in for node that appends its action (`status`,
   * `submit`, ...) to a file, then execs the real node: `nodeStarts()` counts the node
   * processes the scripts started, whatever they did after (they need not log anything).
   */
  countNodeStarts?: boolean;
}

export async function startBlahpEnv(serverOpts: ExtendedTestServerOptions = {}, extra: Record<string, string> = {}, opts: BlahpEnvOptions = {}): Promise<BlahpEnv> {
  const server = await startTestServer(serverOpts);
  const dir = makeTempDir('boinc-blahp-');
  const libexec = path.join(dir, 'libexec');
  const stateDir = path.join(dir, 'state');
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(libexec);
  fs.mkdirSync(tmp);
  const inst = spawnSync(process.execPath, [GAHP_BIN, 'blahp', 'install', libexec], { encoding: 'utf8' });
  if (inst.status !== 0) throw new Error(`install failed: ${inst.stderr}`);
  const startsFile = path.join(dir, 'node-starts');
  if (opts.countNodeStarts) {
    // argv of the exec: <entry> blahp <action> ...; the line is appended in one write.
    const wrapper = path.join(dir, 'node-wrapper');
    fs.writeFileSync(wrapper, `#!/bin/bash\nprintf '%s\\n' "$3" >>'${startsFile}'\nexec '${process.execPath}' "$@"\n`, { mode: 0o755 });
    install(libexec, { force: true, node: wrapper, entry: GAHP_BIN });
  }
  // What blahp's loader does, reduced to what matters here: source the config file.
  fs.writeFileSync(path.join(libexec, 'blah_load_config.sh'), '. "$BLAHPD_CONFIG_LOCATION"\n');
  const authFile = path.join(dir, 'auth');
  fs.writeFileSync(authFile, `${server.authenticator}\n`, { mode: 0o600 });
  const configFile = path.join(dir, 'blah.config');
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BOINC_')) env[k] = v;
  env.BLAHPD_CONFIG_LOCATION = configFile;
  const config = (more: Record<string, string> = {}) => {
    const all: Record<string, string> = {
      boinc_project_url: server.url,
      boinc_authenticator_file: authFile,
      boinc_state_dir: stateDir,
      boinc_log: path.join(dir, 'blahp.log'),
      boinc_log_level: 'debug',
      boinc_status_max_age: '0',
      boinc_submit_gather_ms: '300',
      ...extra,
      ...more,
    };
    fs.writeFileSync(configFile, Object.entries(all).map(([k, v]) => `${k}="${v}"\n`).join(''));
  };
  config();
  const blahpd = new Blahpd({ libexecDir: libexec, tmpDir: tmp, cwd: dir, env, resultsCacheFile: path.join(dir, 'no-blahpd-cache') });
  return {
    server,
    blahpd,
    dir,
    libexec,
    stateDir,
    env,
    config,
    nodeStarts(action = 'status') {
      if (!opts.countNodeStarts) throw new Error('startBlahpEnv without countNodeStarts');
      let text = '';
      try {
        text = fs.readFileSync(startsFile, 'utf8');
      } catch {
        // none yet
      }
      return text.split('\n').filter((l) => l === action).length;
    },
    async close() {
      await server.close();
      // A status call may have started the detached background worker (`blahp fetch`),
      // which outlives the test: its writes into the state directory would race the
      // removal (ENOTEMPTY). It is stopped first (its pid is in its lock file).
      await stopBlahpFetcher(stateDir);
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    },
  };
}

/** A job directory holding an input file `in`. */
export function jobDir(env: BlahpEnv, name: string, input: string): string {
  const iwd = path.join(env.dir, name);
  fs.mkdirSync(iwd, { recursive: true });
  fs.writeFileSync(path.join(iwd, 'in'), input);
  return iwd;
}

export const nameOf = (id: string): string => id.slice('boinc/'.length);

/**
 * Asks blahpd for the job's status until it is `want` (or the time is up); returns the last
 * answer. The default bound is generous: a final status takes the detached background
 * worker (a node process of its own), which a loaded 2-core machine (CI) starts late.
 */
export async function waitForStatus(env: BlahpEnv, id: string, want: number, ms = 60_000): Promise<StatusOutcome> {
  const until = Date.now() + ms;
  for (;;) {
    const st = await env.blahpd.status(id);
    if (st.answer?.jobStatus === want || Date.now() > until) return st;
    await new Promise((r) => setTimeout(r, 300));
  }
}
