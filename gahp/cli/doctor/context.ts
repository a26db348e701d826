/** What every check family of `boinc-gahp doctor` is given. */
import type { AppTemplates } from '../../../boinc-rpc/types.js';
import type { GlobalOptions } from '../options.js';
import type { Report } from './report.js';

/** The project a round of checks 1-4 looks at, and where its settings came from. */
export interface DoctorTarget {
  url?: string;
  authenticatorFile?: string;
  /** Where the URL and the file were given, for the fixes, e.g. `--project-url` or `boinc_project_url in /etc/blah.config`. */
  urlSetting: string;
  authSetting: string;
  /** A state directory other than the command line's (blah.config's boinc_state_dir, HTCondor's BOINC_GAHP_STATE_DIR). */
  stateDir?: string;
  /** Where that state directory was given (default: boinc_state_dir beside the authenticator file's setting). */
  stateDirSetting?: string;
  /** The keep-files setting's text where the configuration gives it (blah.config's boinc_keep_files, HTCondor's BOINC_GAHP_KEEP_FILES). */
  keepFiles?: string;
  /** Where that setting was given. */
  keepFilesSetting?: string;
}

export interface DoctorContext {
  g: GlobalOptions;
  report: Report;
  /** --app names (empty: the apps the account may submit to). */
  apps: string[];
  /** One RPC's timeout in ms. */
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
}

/** What the project checks learnt, for the families after them. */
export interface ProjectFindings {
  /** The authenticator when the file gave one (kept in memory only, never printed). */
  authenticator?: string;
  /** The project answered as a BOINC project and accepted the account. */
  accountAccepted: boolean;
  /** The project's app names from apps.php?xml=1, when it lists them. */
  projectApps?: string[];
  /** Apps the account may submit to, with their templates (asked once). */
  submitApps: Map<string, AppTemplates>;
}
