/**
 * The executable's global options as every entry reads them (the GAHP's plain command line
 * in gahp-args.ts, commander in program.ts, the subcommands), and the exit codes. Kept free
 * of the subcommands' and commander's modules: the GAHP as HTCondor starts it loads only
 * this much of the CLI (docs/architecture.md, "Round trips and memory").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_LOG_LEVEL, DEFAULT_LOG_ROTATION, Logger, type LogLevel } from '../log.js';
import type { GahpRunOptions } from '../create-services.js';
import { defaultStateDir, UsageError } from '../settings.js';
import { errnoText } from '../dirs.js';
import type { NetworkSettings } from '../../boinc-rpc/network.js';
import { BoincClient } from '../../boinc-rpc/client.js';
import { shellWord } from '../util.js';

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** The global options (also settable through BOINC_GAHP_* environment variables). */
export interface GlobalOptions {
  stateDir?: string;
  log?: string;
  logLevel?: LogLevel;
  /** Rotate the --log file past this many bytes (0: never); like HTCondor's MAX_<SUBSYS>_LOG. */
  maxLog?: number;
  /** Rotated log files kept; like HTCondor's MAX_NUM_<SUBSYS>_LOG. */
  maxNumLog?: number;
  debug?: boolean;
  projectUrl?: string;
  authenticatorFile?: string;
  rpcTimeout?: number;
  commandTimeout?: number;
  /** Lease of the batches the GAHP creates (and the batch boinc route renews), hours. */
  leaseHours?: number;
  /** Mark each job's files no_delete (default true; `--keep-files no`). */
  keepFiles?: boolean;
  concurrency?: number;
  /** The proxy of every RPC, overriding the environment's ('' for none); boinc-rpc/network.ts. */
  proxy?: string;
  /** Hosts reached without the proxy, overriding no_proxy / NO_PROXY. */
  noProxy?: string;
  /** A PEM bundle of CA certificates trusted in addition. */
  caFile?: string;
  maxFileUploads?: number;
  postMaxSize?: number;
  uploadMaxFilesize?: number;
  quiet?: boolean;
}

/** The options of the GAHP itself (no subcommand). */
export type GahpCliOptions = GlobalOptions & { protocol?: boolean; interactive?: boolean };

export function makeLogger(g: GlobalOptions): Logger {
  // --debug is for watching a GAHP at work: everything, unless a level is given.
  const level = g.logLevel ?? (g.debug && !g.log ? 'debug' : DEFAULT_LOG_LEVEL);
  if (g.log) {
    try {
      return Logger.toFile(g.log, level, { maxBytes: g.maxLog ?? DEFAULT_LOG_ROTATION.maxBytes, keep: g.maxNumLog ?? DEFAULT_LOG_ROTATION.keep });
    } catch (err) {
      // A configuration error (exit 2), not node's raw `ENOENT: ..., open '...'`.
      throw new UsageError(`cannot open the log file ${g.log}: ${errnoText(err)}; give --log (BOINC_GAHP_LOG) a file in a directory this user can write`);
    }
  }
  if (g.debug) return Logger.toStderr(level);
  return Logger.silent();
}

/** The proxy and trust settings of the options (the environment's variables are read by boinc-rpc). */
export function networkSettings(g: GlobalOptions): NetworkSettings {
  return {
    ...(g.proxy !== undefined ? { proxy: g.proxy } : {}),
    ...(g.noProxy !== undefined ? { noProxy: g.noProxy } : {}),
    ...(g.caFile !== undefined ? { caFile: g.caFile } : {}),
  };
}

export function runOptions(g: GlobalOptions): Omit<GahpRunOptions, 'input' | 'output'> {
  return {
    stateDir: g.stateDir ?? defaultStateDir(),
    log: makeLogger(g),
    rpcTimeoutMs: g.rpcTimeout ? g.rpcTimeout * 1000 : undefined,
    commandTimeoutMs: g.commandTimeout !== undefined ? g.commandTimeout * 1000 : undefined,
    rpcConcurrency: g.concurrency,
    leaseSeconds: g.leaseHours ? Math.max(1, Math.round(g.leaseHours * 3600)) : undefined,
    ...(g.keepFiles !== undefined ? { keepFiles: g.keepFiles } : {}),
    network: networkSettings(g),
    maxFileUploads: g.maxFileUploads,
    postMaxSize: g.postMaxSize,
    uploadMaxFilesize: g.uploadMaxFilesize,
  };
}

/**
 * This program as the user can type it: its name when PATH finds this very file, else its
 * path (relative when under the working directory, e.g. bin/boinc-gahp in a checkout).
 */
export function invokedAs(): string {
  const script = process.argv[1];
  if (!script) return 'boinc-gahp';
  const real = (p: string) => {
    try {
      return fs.realpathSync(p);
    } catch {
      return undefined;
    }
  };
  const name = path.basename(script);
  const self = real(script);
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && self !== undefined && real(path.join(dir, name)) === self) return name;
  }
  const rel = path.relative(process.cwd(), script);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return script;
  return rel.includes(path.sep) ? rel : `./${rel}`;
}

/**
 * A command line for the user to run: this program with the options that decide which state
 * directory and which project it uses (without them it would act on another state, e.g.
 * submit a resumed file again), then `words`; every word quoted for the shell. With `cd`,
 * the command changes to that directory first (the program and the options' files named
 * by absolute paths, so that they are found from there).
 */
export function commandToRun(g: GlobalOptions, words: string[], o: { cd?: string } = {}): string {
  const abs = (p: string) => (o.cd !== undefined ? path.resolve(p) : p);
  const where = [
    ...(g.stateDir !== undefined ? ['--state-dir', abs(g.stateDir)] : []),
    ...(g.projectUrl !== undefined ? ['--project-url', g.projectUrl] : []),
    ...(g.authenticatorFile !== undefined ? ['--authenticator-file', abs(g.authenticatorFile)] : []),
  ];
  const self = invokedAs();
  const program = o.cd !== undefined && self.includes(path.sep) ? path.resolve(self) : self;
  const command = [program, ...where, ...words].map(shellWord).join(' ');
  return o.cd !== undefined ? `cd ${shellWord(o.cd)} && ${command}` : command;
}

/**
 * A BOINC RPC client of the CLI's own (not through a GAHP): the project and account given,
 * the options' RPC timeout and network settings.
 */
export function cliRpcClient(g: GlobalOptions, project: { url: string; authenticator: string }): BoincClient {
  return new BoincClient({
    projectUrl: project.url,
    authenticator: project.authenticator,
    ...(g.rpcTimeout ? { timeoutMs: g.rpcTimeout * 1000 } : {}),
    network: networkSettings(g),
  });
}
