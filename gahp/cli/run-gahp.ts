/**
 * Assembles a GAHP on stdin/stdout: services (gahp/create-services.ts), commands, protocol server. This is what
 * HTCondor's gridmanager runs (BOINC_GAHP points at bin/boinc-gahp).
 */
import * as fs from 'node:fs';
import { GahpServer } from '../protocol/server.js';
import type { Logger } from '../log.js';
import { boincCommands } from '../commands/index.js';
import { blahCommands } from '../blah/commands.js';
import { BlahRoute } from '../blah/route.js';
import { GAHP_VERSION, gahpBanner } from '../version.js';
import { createServices, type GahpRunOptions } from '../create-services.js';
import type { GahpServices } from '../services.js';
import type { Command } from '../protocol/commands.js';

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
  // One GAHP serves both HTCondor routes: the BOINC_* commands of the `boinc` grid type
  // (HTCondor 10.0) and the BLAH_* commands of `batch boinc` (docs/blah-route.md).
  const blahRoute = new BlahRoute(services);
  const commands = [...boincCommands(services), ...blahCommands(blahRoute)];
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
  server.onShutdown(() => blahRoute.close());
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
