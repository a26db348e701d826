/**
 * The executable's global options as every entry reads them (the GAHP's plain command line
 * in gahp-args.ts, commander in program.ts, the subcommands), and the exit codes. Kept free
 * of the subcommands' and commander's modules: the GAHP as HTCondor starts it loads only
 * this much of the CLI (docs/architecture.md, "Round trips and memory").
 */
import { Logger, type LogLevel } from '../log.js';
import type { GahpRunOptions } from './run-gahp.js';
import { defaultStateDir } from '../settings.js';
import type { NetworkSettings } from '../../boinc-rpc/network.js';

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** The global options (also settable through BOINC_GAHP_* environment variables). */
export interface GlobalOptions {
  stateDir?: string;
  log?: string;
  logLevel?: LogLevel;
  debug?: boolean;
  projectUrl?: string;
  authenticatorFile?: string;
  rpcTimeout?: number;
  commandTimeout?: number;
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
  const level = g.logLevel ?? 'debug';
  if (g.log) return Logger.toFile(g.log, level);
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
    network: networkSettings(g),
    maxFileUploads: g.maxFileUploads,
    postMaxSize: g.postMaxSize,
    uploadMaxFilesize: g.uploadMaxFilesize,
  };
}
