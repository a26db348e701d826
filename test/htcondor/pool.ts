/**
 * A personal HTCondor pool for the check (docs/htcondor-check.md): master, collector,
 * schedd and job router of an HTCondor install, run by the current user from a temporary
 * directory, on 127.0.0.1 only, with a private collector port. No negotiator and no startd:
 * grid-universe jobs need neither, and routed vanilla jobs run as grid jobs.
 *
 * Every HTCondor program gets the pool's config file (CONDOR_CONFIG), the install's lib/ on
 * LD_LIBRARY_PATH (HTCondor built with PROPER=ON has no RPATH) and a marker variable that
 * everything the pool starts inherits, so that stop() can find and kill what is left.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { processesWithEnv, run, runOk, signal, sleep, waitFor, type FoundProcess } from './processes.js';

/** A job as condor_q or condor_history print it with -json (only the attributes asked for). */
export type JobAd = Record<string, unknown>;

const JOB_ATTRIBUTES = [
  'ClusterId', 'ProcId', 'JobStatus', 'GridJobId', 'GridJobStatus', 'HoldReason', 'ExitCode',
  'RoutedFromJobId', 'RoutedToJobId', 'GridResource', 'JobUniverse', 'Iwd', 'GridResourceUnavailableTime',
];

export class PersonalPool {
  readonly configFile: string;
  readonly localDir: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly marker: string;
  private master: ChildProcess | undefined;

  /**
   * @param prefix  the HTCondor install: bin/, sbin/, libexec/, lib/
   * @param dir     an empty directory of the pool's own (config, LOCAL_DIR)
   * @param extraConfig  configuration lines added at the end (the route's settings)
   * @param extraEnv  environment variables of the pool's processes (the route's)
   */
  constructor(readonly prefix: string, readonly dir: string, private readonly extraConfig: string[], extraEnv: Record<string, string> = {}) {
    this.configFile = path.join(dir, 'condor_config');
    this.localDir = path.join(dir, 'local');
    this.marker = `BOINC_GAHP_HTCONDOR_CHECK=${dir}`;
    const env: NodeJS.ProcessEnv = {};
    // The pool sees only its own configuration: no _CONDOR_* overrides of the caller.
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('_CONDOR_')) env[k] = v;
    const lib = path.join(prefix, 'lib');
    env.LD_LIBRARY_PATH = process.env.LD_LIBRARY_PATH ? `${lib}:${process.env.LD_LIBRARY_PATH}` : lib;
    env.CONDOR_CONFIG = this.configFile;
    env.BOINC_GAHP_HTCONDOR_CHECK = dir;
    this.env = { ...env, ...extraEnv };
  }

  /** The pool's environment with the install's bin/ first on PATH: an administrator's shell on this pool. */
  toolEnv(): NodeJS.ProcessEnv {
    const bin = path.join(this.prefix, 'bin');
    return { ...this.env, PATH: this.env.PATH ? `${bin}:${this.env.PATH}` : bin };
  }

  /** Writes the configuration file and LOCAL_DIR (before start, or for tools alone). */
  async writeConfig(): Promise<void> {
    for (const sub of ['log', 'spool', 'execute', 'lock', 'run']) fs.mkdirSync(path.join(this.localDir, sub), { recursive: true });
    const port = await freePort();
    fs.writeFileSync(this.configFile, this.config(port).join('\n') + '\n');
  }

  /** Starts condor_master on the configuration written; resolves when the schedd answers. */
  async start(): Promise<void> {
    this.master = spawn(path.join(this.prefix, 'sbin/condor_master'), ['-f'], { env: this.env, stdio: 'ignore' });
    const exited = new Promise<string>((resolve) => {
      this.master!.once('exit', (code, sig) => resolve(`condor_master exited (${sig ?? code}); see ${this.localDir}/log/MasterLog`));
      this.master!.once('error', (err) => resolve(`condor_master did not start: ${err.message}`));
    });
    let masterGone: string | undefined;
    void exited.then((why) => (masterGone = why));
    await waitFor('the schedd to answer condor_q', 120_000, async () => {
      if (masterGone) throw new Error(masterGone);
      const r = await this.tool('condor_q', ['-totals']);
      return r.code === 0 ? true : undefined;
    });
  }

  private config(collectorPort: number): string[] {
    const allow = '127.0.0.1, localhost';
    return [
      '# written by the boinc-gahp HTCondor check (docs/htcondor-check.md)',
      `RELEASE_DIR = ${this.prefix}`,
      `LOCAL_DIR = ${this.localDir}`,
      'BIN = $(RELEASE_DIR)/bin',
      'SBIN = $(RELEASE_DIR)/sbin',
      'LIB = $(RELEASE_DIR)/lib',
      'LIBEXEC = $(RELEASE_DIR)/libexec',
      'LOG = $(LOCAL_DIR)/log',
      'SPOOL = $(LOCAL_DIR)/spool',
      'EXECUTE = $(LOCAL_DIR)/execute',
      'LOCK = $(LOCAL_DIR)/lock',
      'RUN = $(LOCAL_DIR)/run',
      'CONDOR_HOST = 127.0.0.1',
      'NETWORK_INTERFACE = 127.0.0.1',
      `COLLECTOR_HOST = 127.0.0.1:${collectorPort}`,
      'USE_SHARED_PORT = False',
      'DAEMON_LIST = MASTER COLLECTOR SCHEDD JOB_ROUTER',
      'SEC_DEFAULT_AUTHENTICATION_METHODS = FS, CLAIMTOBE',
      ...['READ', 'WRITE', 'ADMINISTRATOR', 'DAEMON', 'OWNER', 'NEGOTIATOR', 'CONFIG'].map((a) => `ALLOW_${a} = ${allow}`),
      'CONDOR_ADMIN =',
      'JOB_DEFAULT_NOTIFICATION = NEVER',
      'GRIDMANAGER_DEBUG = D_FULLDEBUG',
      // HTCONDOR_CHECK_PROBE_INTERVAL=default leaves HTCondor's own default (60 s), as a
      // site would run; the checks' 10 s keeps their waits short.
      ...probeIntervalLines(process.env.HTCONDOR_CHECK_PROBE_INTERVAL),
      'SCHEDD_INTERVAL = 10',
      'JOB_ROUTER_POLLING_PERIOD = 10',
      ...this.extraConfig,
    ];
  }

  /** Runs an HTCondor tool from the install's bin/ (or a program named by its absolute path) with the pool's environment. */
  tool(name: string, args: string[], cwd?: string) {
    return run(path.isAbsolute(name) ? name : path.join(this.prefix, 'bin', name), args, { env: this.env, cwd, timeoutMs: 120_000 });
  }

  /** condor_submit of `text` written to `<dir>/<file>`, run in dir; returns the cluster id. */
  async submit(dir: string, text: string, file = 'job.sub'): Promise<number> {
    fs.writeFileSync(path.join(dir, file), text);
    const out = await runOk(path.join(this.prefix, 'bin/condor_submit'), [file], { env: this.env, cwd: dir, timeoutMs: 300_000 });
    const m = /submitted to cluster (\d+)/.exec(out);
    if (!m) throw new Error(`condor_submit printed no cluster id: ${out.trim()}`);
    return Number(m[1]);
  }

  /** The jobs of a cluster (or matching a constraint) still in the queue. */
  async queue(clusterOrConstraint: number | string): Promise<JobAd[]> {
    return this.ads('condor_q', clusterOrConstraint);
  }

  /** The jobs of a cluster (or matching a constraint) that have left the queue. */
  async history(clusterOrConstraint: number | string): Promise<JobAd[]> {
    return this.ads('condor_history', clusterOrConstraint);
  }

  private async ads(tool: string, which: number | string): Promise<JobAd[]> {
    const select = typeof which === 'number' ? [String(which)] : ['-constraint', which];
    const out = await runOk(path.join(this.prefix, 'bin', tool), [...select, '-json', '-attributes', JOB_ATTRIBUTES.join(',')], {
      env: this.env,
      timeoutMs: 120_000,
    });
    return out.trim() === '' ? [] : (JSON.parse(out) as JobAd[]);
  }

  /** condor_rm, condor_hold or condor_release of a whole cluster or one job ("C.P"). */
  async act(tool: 'condor_rm' | 'condor_hold' | 'condor_release', job: number | string): Promise<void> {
    await runOk(path.join(this.prefix, 'bin', tool), [String(job)], { env: this.env, timeoutMs: 120_000 });
  }

  /**
   * The text of a daemon's log in LOCAL_DIR/log (e.g. `GridmanagerLog`, with a `.<user>`
   * suffix where the configuration gives one), rotated part first; '' when there is none.
   */
  logText(name: string): string {
    const dir = path.join(this.localDir, 'log');
    const files = fs.readdirSync(dir).filter((f) => f === name || f.startsWith(`${name}.`)).sort((a, b) => Number(b.endsWith('.old')) - Number(a.endsWith('.old')));
    return files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
  }

  /** Processes the pool started (daemons, gridmanager, GAHP, blahpd, scripts), by name. */
  processes(): FoundProcess[] {
    return processesWithEnv(this.marker);
  }

  /**
   * Stops the pool: SIGTERM to the master (it stops its daemons, which stop the gridmanager
   * and its GAHP), up to 60 s for it to exit and 10 s more for the rest to go, then SIGKILL
   * to whatever still carries the marker. Returns the processes that had to be killed.
   */
  async stop(): Promise<FoundProcess[]> {
    const master = this.master;
    if (master?.pid && master.exitCode === null && master.signalCode === null) {
      const exited = new Promise<void>((resolve) => master.once('exit', () => resolve()));
      signal(master.pid, 'SIGTERM');
      await Promise.race([exited, sleep(60_000)]);
    }
    let left = processesWithEnv(this.marker);
    for (let i = 0; i < 20 && left.length > 0; i++) {
      await sleep(500);
      left = processesWithEnv(this.marker);
    }
    for (const p of left) signal(p.pid, 'SIGKILL');
    if (left.length > 0) await sleep(1000);
    return left;
  }
}

/** GRIDMANAGER_JOB_PROBE_INTERVAL: 10 unless the setting says `default` (no line) or a number of seconds. */
function probeIntervalLines(setting: string | undefined): string[] {
  if (setting === 'default') return [];
  if (setting === undefined || setting === '') return ['GRIDMANAGER_JOB_PROBE_INTERVAL = 10'];
  if (!/^\d+$/.test(setting)) throw new Error(`HTCONDOR_CHECK_PROBE_INTERVAL must be a number of seconds or "default", not ${JSON.stringify(setting)}`);
  return [`GRIDMANAGER_JOB_PROBE_INTERVAL = ${setting}`];
}

/** A TCP port free on 127.0.0.1 right now (for the collector). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}
