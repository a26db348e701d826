/**
 * Everything the BOINC_* command handlers share: the selected project, configuration,
 * the log, the ledger. Built once by the CLI; handed to each command module.
 */
import type { Logger } from './log.js';
import type { ProjectSession } from './session.js';
import type { Ledger } from './ledger/types.js';
import type { ProgressSink } from './staging/progress.js';

export interface GahpConfig {
  /** Where the ledger and the hash cache live. */
  stateDir: string;
  /** Lease given to a new batch (expire_time = now + this), in seconds. */
  defaultLeaseSeconds: number;
  /** How many upload_files requests may run at once. */
  uploadConcurrency: number;
  /** Largest total size of one upload_files request, in bytes. */
  uploadBatchBytes: number;
  /**
   * Most files in one upload_files request (default 20: PHP's max_file_uploads default;
   * a real server silently drops the files beyond its limit).
   */
  uploadBatchFiles?: number;
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
  /**
   * Optional: BOINC_SUBMIT's hashing and upload progress, for a display in this process
   * (the CLI's bars). At most one event per phase every 100 ms, plus the first (0) and the
   * last (the totals). Never written on the protocol: a GAHP run as a child process (what
   * HTCondor starts, or `submit --spawn`) has none.
   */
  progress?: ProgressSink;
}
