/**
 * Builds the services every front end shares (gahp/services.ts): the project session and
 * its RPC clients, the state directory and the ledger in it (or their fallbacks), the log's
 * redaction, the configuration. The GAHP on stdio (gahp/cli/run-gahp.ts), the CLI's
 * in-process GAHP and the BLAHP scripts' Node side (gahp/blahp/context.ts) all start here,
 * so none of them imports another front end.
 */
import * as os from 'node:os';
import { Logger } from './log.js';
import { ProjectSession } from './session.js';
import { JournalLedger } from './ledger/journal-ledger.js';
import { AppTemplateMemory } from './app-templates.js';
import { BoincClient } from '../boinc-rpc/client.js';
import { defaultStateDir } from './settings.js';
import { SiteProject, type SiteProjectSettings } from './site-project.js';
import { chooseStateDir, type StateDirError } from './state-dir.js';
import type { GahpConfig, GahpServices } from './services.js';
import type { Ledger } from './ledger/types.js';
import type { ProgressSink } from './staging/progress.js';
import { redactBoincCredentials } from '../boinc-rpc/redact.js';
import { proxySecrets, type NetworkSettings } from '../boinc-rpc/network.js';

export interface GahpRunOptions {
  stateDir?: string;
  log?: Logger;
  projectUrl?: string;
  authenticator?: string;
  /**
   * The site's project for batch boinc, its authenticator file still to be read (a GAHP on
   * a pipe: gahp/site-project.ts): selected at start when the file can be read, else the
   * GAHP starts without it and reads the file again while batch boinc is asked for.
   */
  siteProject?: SiteProjectSettings;
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
  /** GahpConfig.keepFiles (default true). */
  keepFiles?: boolean;
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
    keepFiles: true,
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
    session.select({ url: withSlash(opts.projectUrl), authenticator: opts.authenticator });
  }
  let site: SiteProject | undefined;
  if (opts.siteProject) {
    site = new SiteProject({ ...opts.siteProject, url: withSlash(opts.siteProject.url) }, session, log);
    if (site.unusableReason === '') session.select(site.bind().project);
    // The gridmanager copies our stderr to its log; with --debug the log is stderr already.
    else if (!log.writesToStderr) process.stderr.write(`boinc-gahp: warning: ${log.redact(site.unusableReason)}\n`);
  }
  const config = defaultConfig(stateDir, {
    ...(opts.leaseSeconds ? { defaultLeaseSeconds: opts.leaseSeconds } : {}),
    ...(opts.keepFiles !== undefined ? { keepFiles: opts.keepFiles } : {}),
    ...((opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS) > 0 ? { commandTimeoutMs: opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS } : {}),
    ...(opts.maxFileUploads ? { uploadBatchFiles: opts.maxFileUploads } : {}),
    ...(opts.postMaxSize ? { postMaxSize: opts.postMaxSize } : {}),
    ...(opts.uploadMaxFilesize ? { uploadMaxFilesize: opts.uploadMaxFilesize } : {}),
  });
  return { session, config, log, ledger, templates: new AppTemplateMemory(), ...(site ? { site } : {}), ...(opts.progress ? { progress: opts.progress } : {}) };
}

function withSlash(url: string): string {
  return url.endsWith('/') ? url : url + '/';
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

