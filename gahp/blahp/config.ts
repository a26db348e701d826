/**
 * The BLAHP side's configuration. blah.config values reach a script only by sourcing
 * blahp's blah_load_config.sh; the scripts `boinc-gahp blahp install` writes turn the
 * `boinc_*` keys into these environment variables (docs/blahp.md, "Configuration").
 * Variables already in blahpd's environment are used when blah.config lacks the key.
 */
import { defaultStateDir, readAuthenticator } from '../settings.js';
import { Logger, type LogLevel } from '../log.js';
import { blahpPaths, type BlahpPaths } from './state.js';

/** A missing or bad configuration: the script fails with this message, nothing is done. */
export class BlahpConfigError extends Error {
  override name = 'BlahpConfigError';
}

export interface BlahpConfig {
  projectUrl: string;
  authenticatorFile: string;
  stateDir: string;
  paths: BlahpPaths;
  logFile?: string;
  logLevel: LogLevel;
  /** One RPC's timeout (ms). Short: blahpd kills a script that is silent for 30 s. */
  rpcTimeoutMs: number;
  /** A status snapshot is used while younger than this (ms). */
  statusMaxAgeMs: number;
  /** A submit group's leader waits this long for more jobs of its app (ms). */
  gatherMs: number;
  /** Lease given to (and renewed for) a batch, in seconds. */
  leaseSeconds: number;
  /** Largest number of jobs in one batch. */
  maxBatchJobs: number;
}

export const ENV = {
  projectUrl: 'BOINC_GAHP_PROJECT_URL',
  authenticatorFile: 'BOINC_GAHP_AUTHENTICATOR_FILE',
  stateDir: 'BOINC_GAHP_STATE_DIR',
  log: 'BOINC_GAHP_LOG',
  logLevel: 'BOINC_GAHP_LOG_LEVEL',
  rpcTimeout: 'BOINC_GAHP_RPC_TIMEOUT',
  statusMaxAge: 'BOINC_BLAHP_STATUS_MAX_AGE',
  gatherMs: 'BOINC_BLAHP_GATHER_MS',
  leaseHours: 'BOINC_BLAHP_LEASE_HOURS',
} as const;

/** blah.config key -> environment variable (what the installed scripts export). */
export const BLAH_CONFIG_KEYS: ReadonlyArray<readonly [string, string]> = [
  ['boinc_project_url', ENV.projectUrl],
  ['boinc_authenticator_file', ENV.authenticatorFile],
  ['boinc_state_dir', ENV.stateDir],
  ['boinc_log', ENV.log],
  ['boinc_log_level', ENV.logLevel],
  ['boinc_rpc_timeout', ENV.rpcTimeout],
  ['boinc_status_max_age', ENV.statusMaxAge],
  ['boinc_submit_gather_ms', ENV.gatherMs],
  ['boinc_lease_hours', ENV.leaseHours],
];

function num(env: NodeJS.ProcessEnv, name: string, dflt: number, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text.trim() === '') return dflt;
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || n > max) throw new BlahpConfigError(`${name} must be a number from ${min} to ${max}, got ${JSON.stringify(text.slice(0, 40))}`);
  return n;
}

/** The configuration from the environment; `needProject` false for commands that talk to no server. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, needProject = true): BlahpConfig {
  let projectUrl = env[ENV.projectUrl]?.trim() ?? '';
  const authenticatorFile = env[ENV.authenticatorFile]?.trim() ?? '';
  if (needProject) {
    if (projectUrl === '') throw new BlahpConfigError('no BOINC project configured: set boinc_project_url in blah.config');
    if (!/^https?:\/\/[^\s]+$/.test(projectUrl)) throw new BlahpConfigError(`boinc_project_url must be an http(s) URL, got ${JSON.stringify(projectUrl.slice(0, 100))}`);
    if (authenticatorFile === '') throw new BlahpConfigError('no BOINC account configured: set boinc_authenticator_file in blah.config');
  }
  if (projectUrl !== '' && !projectUrl.endsWith('/')) projectUrl += '/';
  const stateDir = env[ENV.stateDir]?.trim() || defaultStateDir();
  const level = (env[ENV.logLevel]?.trim() || 'info') as LogLevel;
  if (!['error', 'warn', 'info', 'debug'].includes(level)) throw new BlahpConfigError(`${ENV.logLevel} must be error, warn, info or debug`);
  const cfg: BlahpConfig = {
    projectUrl,
    authenticatorFile,
    stateDir,
    paths: blahpPaths(stateDir),
    logLevel: level,
    rpcTimeoutMs: num(env, ENV.rpcTimeout, 10, 0.1, 600) * 1000,
    statusMaxAgeMs: num(env, ENV.statusMaxAge, 30, 0, 3600) * 1000,
    gatherMs: num(env, ENV.gatherMs, 300, 0, 10_000),
    leaseSeconds: Math.round(num(env, ENV.leaseHours, 6, 0.01, 24 * 30) * 3600),
    maxBatchJobs: 1000,
  };
  const log = env[ENV.log]?.trim();
  if (log) cfg.logFile = log;
  return cfg;
}

/** The authenticator, read from its file (never printed); a config error when unreadable. */
export function authenticatorOf(cfg: BlahpConfig): string {
  try {
    return readAuthenticator(cfg.authenticatorFile);
  } catch (err) {
    throw new BlahpConfigError((err as Error).message);
  }
}

export function loggerOf(cfg: BlahpConfig): Logger {
  if (!cfg.logFile) return Logger.silent();
  try {
    return Logger.toFile(cfg.logFile, cfg.logLevel);
  } catch {
    // A log that cannot be opened must not fail the job.
    return Logger.silent();
  }
}

/**
 * Where blahpd reads blah.config: $BLAHPD_CONFIG_LOCATION, else
 * $BLAHPD_LOCATION/etc/blah.config, else /etc/blah.config.
 */
export function blahConfigLocation(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BLAHPD_CONFIG_LOCATION) return env.BLAHPD_CONFIG_LOCATION;
  if (env.BLAHPD_LOCATION) return `${env.BLAHPD_LOCATION.replace(/\/+$/, '')}/etc/blah.config`;
  return '/etc/blah.config';
}

/**
 * blah.config's `key=value` lines (a bash file that blah_load_config.sh sources): values
 * unquoted, comments and other lines skipped. Read as text, never run: a value that needs
 * the shell to mean something (`$x`, `$(...)`) is kept as written.
 */
export function parseBlahConfig(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(raw);
    if (!m) continue;
    let value = m[2]!.trim();
    const quoted = /^"([^"]*)"|^'([^']*)'/.exec(value);
    if (quoted) value = quoted[1] ?? quoted[2] ?? '';
    else value = value.replace(/\s+#.*$/, '');
    values.set(m[1]!, value);
  }
  return values;
}
