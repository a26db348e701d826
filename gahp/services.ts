/**
 * Everything the BOINC_* command handlers share: the selected project, configuration,
 * the log, the ledger. Built once by the CLI; handed to each command module.
 */
import type { Logger } from './log.js';
import { boundProject, type CapturedSelection, type ProjectBinding, type ProjectSession } from './session.js';
import type { Ledger } from './ledger/types.js';
import type { AppTemplateMemory } from './app-templates.js';
import type { ProgressSink } from './staging/progress.js';
import type { SiteProject } from './site-project.js';

export interface GahpConfig {
  /**
   * Where the ledger and the hash cache live: the configured directory, or the fallback
   * chosen at start-up; undefined when none could be used and they live in memory
   * (gahp/state-dir.ts).
   */
  stateDir: string | undefined;
  /** Lease given to a new batch (expire_time = now + this), in seconds. */
  defaultLeaseSeconds: number;
  /**
   * Each job is sent the app's templates with `<no_delete/>` on every file, so the
   * project's file_deleter leaves its inputs and outputs (gahp/staging/keep-files.ts;
   * `--keep-files`, default yes).
   */
  keepFiles: boolean;
  /** How many upload_files requests may run at once. */
  uploadConcurrency: number;
  /** Largest total size of one upload_files request, in bytes. */
  uploadBatchBytes: number;
  /**
   * Most files in one upload_files request (default 20: PHP's max_file_uploads default;
   * a real server silently drops the files beyond its limit).
   */
  uploadBatchFiles?: number;
  /**
   * Largest upload_files body in bytes, multipart framing included: the project's PHP
   * post_max_size (default 8M; a bigger POST reaches BOINC's handler empty).
   */
  postMaxSize?: number;
  /** Largest single input file the project's PHP accepts: upload_max_filesize (default 2M). */
  uploadMaxFilesize?: number;
  /** Worker threads used to hash many files (default: number of cores). */
  hashWorkers: number;
  /**
   * Longest time from accepting an async BOINC_* command to its result, in ms (undefined:
   * no limit; `--command-timeout`). When it passes the command's RPCs are cancelled and its
   * result is an error naming the timeout (README, "Retries and time to error").
   */
  commandTimeoutMs?: number;
}

export interface GahpServices {
  session: ProjectSession;
  config: GahpConfig;
  log: Logger;
  ledger: Ledger;
  /** The apps' templates kept between fetches, per app and account (gahp/app-templates.ts). */
  templates: AppTemplateMemory;
  /**
   * batch boinc's project, from the site's settings (gahp/site-project.ts): its
   * authenticator file is read again while it cannot be used. Absent when none was named.
   */
  site?: SiteProject;
  /**
   * Optional: BOINC_SUBMIT's hashing and upload progress, for a display in this process
   * (the CLI's bars). At most one event per phase every 100 ms, plus the first (0) and the
   * last (the totals). Never written on the protocol: a GAHP run as a child process (what
   * HTCondor starts, or `submit --spawn`) has none.
   */
  progress?: ProgressSink;
}

/** A parsed request with the project and account selected when its line was read. */
export interface BoundRequest<Req> {
  request: Req;
  /** Undefined when no project was selected then, or an unusable one: the command then fails when it runs. */
  binding: CapturedSelection;
}

/**
 * Wraps a command's argument parser so that the request also carries the project selected
 * at the moment its line is read (parsers run synchronously then, see AsyncCommand.parse):
 * a BOINC_SELECT_PROJECT that comes later, while the command still waits or runs, does not
 * change what it talks to.
 */
export function parseBound<Req>(services: GahpServices, parse: (args: string[]) => Req): (args: string[]) => BoundRequest<Req> {
  return (args) => {
    const request = parse(args);
    return { request, binding: services.session.bind() };
  };
}

/** The project a bound request was read for; fails (as an error result) when there was none. */
export function projectOf(bound: BoundRequest<unknown>): ProjectBinding {
  return boundProject(bound.binding);
}
