/**
 * Assembles a GAHP on stdin/stdout: services, commands, protocol server. This is what
 * HTCondor's gridmanager runs (BOINC_GAHP points at bin/boinc-gahp).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { GahpServer } from '../protocol/server.js';
import { Logger } from '../log.js';
import { ProjectSession } from '../session.js';
import { boincCommands } from '../commands/index.js';
import { JournalLedger } from '../ledger/journal-ledger.js';
import { AppTemplateMemory } from '../app-templates.js';
import { BoincClient } from '../../boinc-rpc/client.js';
import { GAHP_VERSION, gahpBanner } from '../version.js';
import { defaultStateDir } from '../settings.js';
import { chooseStateDir, type StateDirError } from '../state-dir.js';
import type { GahpConfig, GahpServices } from '../services.js';
import type { Ledger } from '../ledger/types.js';
import type { Command } from '../protocol/commands.js';
import type { ProgressSink } from '../staging/progress.js';
import { redactBoincCredentials } from '../../boinc-rpc/redact.js';
import { proxySecrets, type NetworkSettings } from '../../boinc-rpc/network.js';

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
  /** BoincClientOptions.network: --proxy, --no-proxy, --ca-file (the environment's variables are read by boinc-rpc). */
  network?: NetworkSettings;
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

export function defaultConfig(stateDir: string | undefined, overrides: Partial<GahpConfig> = {}): GahpConfig {
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
  const { stateDir, ledger } = openState(opts.stateDir ?? defaultStateDir(), log);
  const session = new ProjectSession((o) => new BoincClient(o), {
    timeoutMs: opts.rpcTimeoutMs,
    concurrency: opts.rpcConcurrency,
    ...(opts.network ? { network: opts.network } : {}),
    log: (line) => log.debug(line),
  });
  // The proxy's user and password never reach the log, as the authenticator does not.
  for (const secret of proxySecrets(opts.network)) log.addSecret(secret);
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
  return { session, config, log, ledger, templates: new AppTemplateMemory(), ...(opts.progress ? { progress: opts.progress } : {}) };
}

/**
 * The state directory and the ledger in it, or their fallbacks (gahp/state-dir.ts): a GAHP
 * never exits for its state directory, it says once what it uses instead and carries on.
 */
function openState(configured: string, log: Logger): { stateDir: string | undefined; ledger: Ledger } {
  const warned = new Set<string>();
  const warnOnce = (key: string, text: string) => {
    if (warned.has(key)) return;
    warned.add(key);
    log.warn(text);
    // The gridmanager copies our stderr to its log; with --debug the log is stderr already.
    if (!log.writesToStderr) process.stderr.write(`boinc-gahp: warning: ${log.redact(text)}\n`);
  };
  const choice = chooseStateDir(configured);
  if (choice.notice) warnOnce('start', choice.notice);
  const onUnwritable = (err: StateDirError) =>
    warnOnce('later', `${err.message}; from now on the record of submitted batches is kept in memory only, until this GAHP exits`);
  if (choice.dir === undefined) return { stateDir: undefined, ledger: JournalLedger.inMemory() };
  try {
    return { stateDir: choice.dir, ledger: JournalLedger.open(choice.dir, { onUnwritable }) };
  } catch (err) {
    warnOnce('start', `the ledger in ${choice.dir} cannot be opened (${(err as Error).message}); the record of submitted batches is kept in memory until this GAHP exits`);
    return { stateDir: choice.dir, ledger: JournalLedger.inMemory() };
  }
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
  services.log.info(`boinc-gahp ${GAHP_VERSION} started, pid ${process.pid}, state directory ${services.config.stateDir ?? 'none (kept in memory)'}`);
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
  exitOnInternalError(services.log);
  server.start();
  return { server, services, commands, exited };
}

/**
 * The exit status after an internal error: an exception nobody caught or a rejection nobody
 * handled (sysexits' EX_SOFTWARE; options.ts's EXIT_OK, EXIT_FAILED and EXIT_USAGE are answers
 * to the user).
 */
const EXIT_INTERNAL_ERROR = 70;

let guarded = false;

/**
 * Fail fast on an internal error. Each request has its own error path (a failing command is
 * an error result, a malformed line an `E`); an exception or rejection that escapes them
 * comes from a callback nobody owns, and leaves some piece of the GAHP (a command's promise,
 * a lock, the ledger's memory of what it wrote) in a state no code path expects: a command
 * whose result never comes holds its jobs after the gridmanager's 300 s call timeout. So the
 * GAHP says what happened, in one redacted line on stderr (the gridmanager copies our stderr
 * to its log) and with the stack in the debug log, and exits at once: the gridmanager
 * notices, exits, is started again by the schedd with a new GAHP, and recovers its jobs by
 * asking BOINC; the ledger is crash-safe, so the submits it repeats are safe
 * (docs/gahp-protocol.md, "When the GAHP fails").
 */
function exitOnInternalError(log: Logger): void {
  if (guarded) return;
  guarded = true;
  const fail = (what: string, err: unknown): never => {
    try {
      log.error(`internal error, exiting: ${what}: ${describeError(err, true)}`);
      // Synchronous: the process exits right after (the debug log writes its rest on exit).
      fs.writeSync(2, log.redact(`boinc-gahp: internal error, exiting: ${what}: ${describeError(err, false)}`) + '\n');
    } catch {
      // Exiting anyway.
    }
    process.exit(EXIT_INTERNAL_ERROR);
  };
  process.on('uncaughtException', (err) => fail('uncaught exception', err));
  process.on('unhandledRejection', (reason) => fail('unhandled rejection', reason));
}

/** An error as text (its stack, or its message on one line), for something that may not even be an Error. */
function describeError(err: unknown, withStack: boolean): string {
  try {
    if (err instanceof Error) return withStack && err.stack ? err.stack : `${err.name}: ${err.message}`.replace(/\s*[\r\n]+\s*/g, ' ');
    return String(err).replace(/\s*[\r\n]+\s*/g, ' ');
  } catch {
    return 'an error that cannot be printed';
  }
}

/** Runs the GAHP until QUIT or EOF; resolves with the exit code. */
export function runGahp(opts: GahpRunOptions = {}): Promise<number> {
  return startGahp(opts).exited;
}
