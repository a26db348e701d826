/**
 * The BLAHP side's configuration (docs/blahp.md, "Configuration"): the `boinc_*` keys of
 * blah.config as environment variables. The scripts `boinc-gahp blahp install` writes
 * export them after sourcing blahp's blah_load_config.sh; without that loader beside them
 * this side reads blah.config itself, as text, from where blahpd reads it. Variables
 * already in blahpd's environment are used when blah.config lacks the key.
 */
import { checkProjectUrl, defaultStateDir, noAuthenticatorFile, parseYesNo, readAuthenticator } from '../settings.js';
import { BLAH_CONFIG_KEYS, blahConfigFile, blahpdHomeFromEnv, ENV, LOADED_CONFIG_ENV, readBlahConfig } from '../blahp-location.js';
import { DEFAULT_LOG_ROTATION, Logger, parseLogSize, type LogLevel, type LogRotation } from '../log.js';
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
  /** When the log rotates (boinc_max_log, boinc_max_num_log; the GAHP's --max-log, --max-num-log). */
  logRotation: LogRotation;
  /** One RPC's timeout (ms). Short: blahpd kills a script that is silent for 30 s. */
  rpcTimeoutMs: number;
  /** A status snapshot is used while younger than this (ms). */
  statusMaxAgeMs: number;
  /** A submit group's leader waits this long for more jobs of its app (ms). */
  gatherMs: number;
  /** Lease given to (and renewed for) a batch, in seconds. */
  leaseSeconds: number;
  /** Mark each job's files no_delete (boinc_keep_files, default yes: GahpConfig.keepFiles). */
  keepFiles: boolean;
  /** Largest number of jobs in one batch. */
  maxBatchJobs: number;
}

function num(env: NodeJS.ProcessEnv, name: string, dflt: number, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text.trim() === '') return dflt;
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || n > max) throw new BlahpConfigError(`${name} must be a number from ${min} to ${max}, got ${JSON.stringify(text.slice(0, 40))}`);
  return n;
}

function yesNo(env: NodeJS.ProcessEnv, name: string, dflt: boolean): boolean {
  const text = env[name];
  if (text === undefined || text.trim() === '') return dflt;
  const b = parseYesNo(text);
  if (b === undefined) throw new BlahpConfigError(`${name} must be yes or no, got ${JSON.stringify(text.slice(0, 40))}`);
  return b;
}

/**
 * The environment with blah.config's `boinc_*` values in it, and what was read, for the
 * "not configured" messages. A script that sourced blahp's loader has exported them
 * already; otherwise blah.config is read here, from where blahpd reads it (its values
 * before the environment's, as the scripts export them).
 */
function withBlahConfig(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; where: string; unread?: string } {
  const loaded = env[LOADED_CONFIG_ENV];
  if (loaded !== undefined) return { env, where: `${loaded} (read by blahp's blah_load_config.sh)` };
  const { file, passedOver } = blahConfigFile(blahpdHomeFromEnv(env).home, env);
  const values = readBlahConfig(file);
  if (!(values instanceof Map)) {
    const looked = [...passedOver.map((f) => `${f}: not readable`), `${file}: ${values.error}`].join('; ');
    return { env, where: file, unread: `no blah.config could be read (looked for ${looked}); create ${file} with supported_lrms=boinc, boinc_project_url and boinc_authenticator_file, or name another with BLAHPD_CONFIG_LOCATION` };
  }
  const merged = { ...env };
  for (const [key, name] of BLAH_CONFIG_KEYS) {
    const value = values.get(key);
    if (value) merged[name] = value;
  }
  return { env: merged, where: file };
}

/** The configuration from blah.config and the environment; `needProject` false for commands that talk to no server. */
export function loadConfig(given: NodeJS.ProcessEnv = process.env, needProject = true): BlahpConfig {
  const { env, where, unread } = withBlahConfig(given);
  let projectUrl = env[ENV.projectUrl]?.trim() ?? '';
  const authenticatorFile = env[ENV.authenticatorFile]?.trim() ?? '';
  if (needProject) {
    if (unread && (projectUrl === '' || authenticatorFile === '')) {
      throw new BlahpConfigError(`no BOINC ${projectUrl === '' ? 'project' : 'account'} configured: ${unread}`);
    }
    // In the words of doctor and the other front ends (settings.ts).
    try {
      checkProjectUrl(projectUrl, `boinc_project_url in ${where}`);
      if (authenticatorFile === '') throw noAuthenticatorFile(`boinc_authenticator_file in ${where}`);
    } catch (err) {
      throw new BlahpConfigError((err as Error).message);
    }
  }
  if (projectUrl !== '' && !projectUrl.endsWith('/')) projectUrl += '/';
  const stateDir = env[ENV.stateDir]?.trim() || defaultStateDir();
  const level = (env[ENV.logLevel]?.trim() || 'info') as LogLevel;
  if (!['error', 'warn', 'info', 'debug'].includes(level)) throw new BlahpConfigError(`${ENV.logLevel} must be error, warn, info or debug`);
  const maxLog = env[ENV.maxLog]?.trim();
  let maxBytes = DEFAULT_LOG_ROTATION.maxBytes;
  try {
    if (maxLog) maxBytes = parseLogSize(maxLog);
  } catch (err) {
    throw new BlahpConfigError(`${ENV.maxLog}: ${(err as Error).message}`);
  }
  const cfg: BlahpConfig = {
    projectUrl,
    authenticatorFile,
    stateDir,
    paths: blahpPaths(stateDir),
    logLevel: level,
    logRotation: { maxBytes, keep: Math.round(num(env, ENV.maxNumLog, DEFAULT_LOG_ROTATION.keep, 1, 1000)) },
    rpcTimeoutMs: num(env, ENV.rpcTimeout, 10, 0.1, 600) * 1000,
    statusMaxAgeMs: num(env, ENV.statusMaxAge, 30, 0, 3600) * 1000,
    gatherMs: num(env, ENV.gatherMs, 300, 0, 10_000),
    leaseSeconds: Math.round(num(env, ENV.leaseHours, 6, 0.01, 24 * 30) * 3600),
    keepFiles: yesNo(env, ENV.keepFiles, true),
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

/**
 * The log is one file that every job owner's scripts append to (docs/blahp.md, "The
 * log"): a script that creates it, or a new one when it rotates, makes it group-writable
 * (0660 whatever the umask; the group is the directory's when that is set-group-ID), not
 * 0600 for the first owner alone.
 */
export function loggerOf(cfg: BlahpConfig): Logger {
  if (!cfg.logFile) return Logger.silent();
  try {
    return Logger.toFile(cfg.logFile, cfg.logLevel, cfg.logRotation, 0o660);
  } catch {
    // A log that cannot be opened must not fail the job.
    return Logger.silent();
  }
}
