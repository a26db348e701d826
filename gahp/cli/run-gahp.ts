/**
 * Assembles a GAHP on stdin/stdout: services, commands, protocol server. This is what
 * HTCondor's gridmanager runs (BOINC_GAHP points at bin/boinc-gahp).
 */
import * as os from 'node:os';
import { GahpServer } from '../protocol/server.js';
import { Logger } from '../log.js';
import { ProjectSession } from '../session.js';
import { boincCommands } from '../commands/index.js';
import { JournalLedger } from '../ledger/journal-ledger.js';
import { BoincClient } from '../../boinc-rpc/client.js';
import { gahpBanner } from '../version.js';
import { defaultStateDir } from './settings.js';
import type { GahpConfig, GahpServices } from '../services.js';
import type { Command } from '../protocol/commands.js';
import type { ProgressSink } from '../staging/progress.js';
import { redactBoincCredentials } from '../../boinc-rpc/redact.js';

export interface GahpRunOptions {
  stateDir?: string;
  log?: Logger;
  projectUrl?: string;
  authenticator?: string;
  rpcTimeoutMs?: number;
  /**
   * Per-command deadline in ms (GahpConfig.commandTimeoutMs); 0: none; undefined:
   * DEFAULT_COMMAND_TIMEOUT_MS.
   */
  commandTimeoutMs?: number;
  rpcConcurrency?: number;
  commandConcurrency?: number;
  leaseSeconds?: number;
  maxLineBytes?: number;
  /** The project's PHP upload limits (GahpConfig: uploadBatchFiles, postMaxSize, uploadMaxFilesize). */
  maxFileUploads?: number;
  postMaxSize?: number;
  uploadMaxFilesize?: number;
  input?: NodeJS.ReadableStream;
  output?: NodeJS.WritableStream;
  /** BOINC_SUBMIT's hashing and upload progress (GahpServices.progress; in-process only). */
  progress?: ProgressSink;
}

export { defaultStateDir };

export function defaultConfig(stateDir: string, overrides: Partial<GahpConfig> = {}): GahpConfig {
  return {
    stateDir,
    defaultLeaseSeconds: 6 * 3600,
    uploadConcurrency: 4,
    uploadBatchBytes: 64 * 1024 * 1024,
    hashWorkers: Math.max(1, Math.min(os.availableParallelism(), 8)),
    ...overrides,
  };
}

/**
 * The default per-command deadline: a little under the gridmanager's call timeout
 * (GRIDMANAGER_GAHP_CALL_TIMEOUT, 300 s, BOINC_SUBMIT included). Past that the gridmanager
 * drops the result and holds the jobs without repeating the command, so a submit still
 * running would create a batch nobody fetches or retires, its jobs run again once the user
 * releases them (docs/gahp-protocol.md). Stopping first makes the held jobs' reason ours.
 */
export const DEFAULT_COMMAND_TIMEOUT_MS = 290_000;

export function createServices(opts: GahpRunOptions): GahpServices {
  const log = opts.log ?? Logger.silent();
  log.addRedactor(redactBoincCredentials);
  const stateDir = opts.stateDir ?? defaultStateDir();
  const session = new ProjectSession((o) => new BoincClient(o), {
    timeoutMs: opts.rpcTimeoutMs,
    concurrency: opts.rpcConcurrency,
    log: (line) => log.debug(line),
  });
  if (opts.projectUrl && opts.authenticator) {
    log.addSecret(opts.authenticator);
    session.select({ url: opts.projectUrl.endsWith('/') ? opts.projectUrl : opts.projectUrl + '/', authenticator: opts.authenticator });
  }
  const config = defaultConfig(stateDir, {
    ...(opts.leaseSeconds ? { defaultLeaseSeconds: opts.leaseSeconds } : {}),
    ...((opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS) > 0 ? { commandTimeoutMs: opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS } : {}),
    ...(opts.maxFileUploads ? { uploadBatchFiles: opts.maxFileUploads } : {}),
    ...(opts.postMaxSize ? { postMaxSize: opts.postMaxSize } : {}),
    ...(opts.uploadMaxFilesize ? { uploadMaxFilesize: opts.uploadMaxFilesize } : {}),
  });
  return { session, config, log, ledger: JournalLedger.open(stateDir), ...(opts.progress ? { progress: opts.progress } : {}) };
}

export interface RunningGahp {
  server: GahpServer;
  services: GahpServices;
  /** The BOINC_* commands the server was given (the interactive CLI reads usage/summary and parse from them). */
  commands: Command[];
  /** Resolves with the exit code once the server has shut down (QUIT, EOF, broken output). */
  exited: Promise<number>;
}

/** Assembles and starts a GAHP on the given streams (stdin/stdout by default). */
export function startGahp(opts: GahpRunOptions = {}): RunningGahp {
  const services = createServices(opts);
  const commands = boincCommands(services);
  let onExit: (code: number) => void = () => undefined;
  const exited = new Promise<number>((resolve) => { onExit = resolve; });
  const server = new GahpServer({
    input: opts.input ?? process.stdin,
    output: opts.output ?? process.stdout,
    commands,
    banner: gahpBanner(),
    log: services.log,
    maxLineBytes: opts.maxLineBytes,
    concurrency: opts.commandConcurrency,
    commandTimeoutMs: services.config.commandTimeoutMs,
    onExit: (code) => onExit(code),
  });
  server.onShutdown(() => services.session.close());
  server.onShutdown(() => services.ledger.close());
  guardProcess(services.log);
  server.start();
  return { server, services, commands, exited };
}

let guarded = false;

/**
 * A stray rejected promise or exception in some handler's callback must not take down the
 * GAHP, and with it the gridmanager's view of every job: log it (redacted) and carry on.
 * Each request already has its own error path; this is the net under it.
 */
function guardProcess(log: Logger): void {
  if (guarded) return;
  guarded = true;
  process.on('unhandledRejection', (reason) => {
    log.error(`unhandled rejection (ignored): ${reason instanceof Error ? reason.stack ?? reason.message : String(reason)}`);
  });
  process.on('uncaughtException', (err) => {
    log.error(`uncaught exception (ignored): ${err.stack ?? err.message}`);
  });
}

/** Runs the GAHP until QUIT or EOF; resolves with the exit code. */
export function runGahp(opts: GahpRunOptions = {}): Promise<number> {
  return startGahp(opts).exited;
}
