/**
 * Where blahpd looks (docs/blahp.md, "Where blahpd looks"): its install location, the
 * blah.config it reads and the folder it runs `<lrms>_*.sh` from, found the way blahpd and
 * the gridmanager find them. Shared by `boinc-gahp blahp install` / `uninstall` (the folder
 * to write to), the BLAHP scripts' Node side (the blah.config to read when blahp's loader
 * is not beside them) and `doctor` (the folder and file to check). HTCondor is asked with
 * condor_config_val, run with an argument list, no shell. blah.config is read as text,
 * never run.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** blahp's own default install location (blahpd, when neither BLAHPD_LOCATION nor GLITE_LOCATION is set). */
const BLAHP_DEFAULT_HOME = '/usr';

/** The environment variables the BLAHP side reads (docs/blahp.md, "Configuration"). */
export const ENV = {
  projectUrl: 'BOINC_GAHP_PROJECT_URL',
  authenticatorFile: 'BOINC_GAHP_AUTHENTICATOR_FILE',
  stateDir: 'BOINC_GAHP_STATE_DIR',
  log: 'BOINC_GAHP_LOG',
  logLevel: 'BOINC_GAHP_LOG_LEVEL',
  maxLog: 'BOINC_GAHP_MAX_LOG',
  maxNumLog: 'BOINC_GAHP_MAX_NUM_LOG',
  rpcTimeout: 'BOINC_GAHP_RPC_TIMEOUT',
  statusMaxAge: 'BOINC_BLAHP_STATUS_MAX_AGE',
  gatherMs: 'BOINC_BLAHP_GATHER_MS',
  leaseHours: 'BOINC_BLAHP_LEASE_HOURS',
  keepFiles: 'BOINC_GAHP_KEEP_FILES',
} as const;

/** Set by a script that sourced blahp's loader, to the blah.config it read: the Node side then reads none itself. */
export const LOADED_CONFIG_ENV = 'BOINC_BLAHP_LOADED_CONFIG';

/** blah.config key -> environment variable (what the installed scripts export). */
export const BLAH_CONFIG_KEYS: ReadonlyArray<readonly [string, string]> = [
  ['boinc_project_url', ENV.projectUrl],
  ['boinc_authenticator_file', ENV.authenticatorFile],
  ['boinc_state_dir', ENV.stateDir],
  ['boinc_log', ENV.log],
  ['boinc_log_level', ENV.logLevel],
  ['boinc_max_log', ENV.maxLog],
  ['boinc_max_num_log', ENV.maxNumLog],
  ['boinc_rpc_timeout', ENV.rpcTimeout],
  ['boinc_status_max_age', ENV.statusMaxAge],
  ['boinc_submit_gather_ms', ENV.gatherMs],
  ['boinc_lease_hours', ENV.leaseHours],
  ['boinc_keep_files', ENV.keepFiles],
];

/**
 * blah.config's `key=value` lines (a bash file that blah_load_config.sh sources): values
 * unquoted, comments and other lines skipped. Read as text, never run: a value that needs
 * the shell to mean something (`$x`, `$(...)`) is kept as written.
 */
export function parseBlahConfig(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(raw);
    if (!m) continue;
    let value = m[2]!.trim();
    const quoted = /^"([^"]*)"|^'([^']*)'/.exec(value);
    if (quoted) value = quoted[1] ?? quoted[2] ?? '';
    else value = value.replace(/\s+#.*$/, '');
    values.set(m[1]!, value);
  }
  return values;
}

const readable = (file: string) => {
  try {
    fs.accessSync(file, fs.constants.R_OK);
    return true;
  } catch {
    return false;
  }
};

/** The blah.config blahpd reads for install location `home`, and the files looked at before it. */
export interface BlahConfigFile {
  file: string;
  /** Files tried first and passed over because they could not be read (for messages). */
  passedOver: string[];
}

/**
 * blahpd's search: $BLAHPD_CONFIG_LOCATION when set; else `<home>/etc/blah.config` when
 * readable; else /etc/blah.config.
 */
export function blahConfigFile(home: string, env: NodeJS.ProcessEnv): BlahConfigFile {
  if (env.BLAHPD_CONFIG_LOCATION) return { file: env.BLAHPD_CONFIG_LOCATION, passedOver: [] };
  const own = path.join(home, 'etc', 'blah.config');
  if (readable(own)) return { file: own, passedOver: [] };
  return { file: '/etc/blah.config', passedOver: own === '/etc/blah.config' ? [] : [own] };
}

/** blahpd's install location as its environment gives it (what blahpd itself does). */
export function blahpdHomeFromEnv(env: NodeJS.ProcessEnv): { home: string; from: string } {
  if (env.BLAHPD_LOCATION) return { home: env.BLAHPD_LOCATION, from: '$BLAHPD_LOCATION' };
  if (env.GLITE_LOCATION) return { home: env.GLITE_LOCATION, from: '$GLITE_LOCATION' };
  return { home: BLAHP_DEFAULT_HOME, from: `blahp's default ${BLAHP_DEFAULT_HOME}` };
}

/** A file's blah.config values, or why it could not be read (an errno code). */
export function readBlahConfig(file: string): Map<string, string> | { error: string } {
  try {
    return parseBlahConfig(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    return { error: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  }
}

/** An executable file named `name` in one of PATH's directories. */
export function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      if (fs.statSync(p).isFile()) {
        fs.accessSync(p, fs.constants.X_OK);
        return p;
      }
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A configuration value from condor_config_val (`tool`), or undefined when HTCondor says it is not defined. */
export function condorConfigValue(tool: string, name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(tool, [name], { env, timeout: 20_000, stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.on('error', () => resolve(undefined));
    child.on('close', (code) => {
      const value = stdout.trim();
      resolve(code !== 0 || value === '' ? undefined : value);
    });
  });
}

export interface BlahpdLocation {
  /** blahpd's install location, and where that came from (e.g. `RELEASE_DIR from condor_config_val`, `$BLAHPD_LOCATION`). */
  home: string;
  homeFrom: string;
  /** The blah.config blahpd reads, and its values (or why it could not be read). */
  config: BlahConfigFile;
  values: Map<string, string> | { error: string };
  /** The folder blahpd runs `boinc_*.sh` from, and why that one (e.g. `RELEASE_DIR from condor_config_val + libexec/blahp`). */
  libexec: string;
  libexecFrom: string;
  /** HTCondor's condor_config_val gave the install location (else blahpd's rule from the environment). */
  askedHtcondor: boolean;
  /** The folder is blah_libexec_directory or a libexec/blahp that exists (not the bare libexec fallback). */
  blahpFolder: boolean;
}

/**
 * Where blahpd looks. The install location is what the gridmanager exports to blahpd as
 * BLAHPD_LOCATION: HTCondor's BLAHPD_LOCATION (default $(RELEASE_DIR)), except that `/usr`
 * is not exported and blahpd then takes its own default. Without condor_config_val on PATH,
 * blahpd's own rule from the environment (BLAHPD_LOCATION, GLITE_LOCATION, /usr). The
 * folder: blah_libexec_directory from blah.config or a file of blah.config.d/, else
 * `<home>/libexec/blahp` when it is a directory, else `<home>/libexec`.
 */
export async function locateBlahpd(env: NodeJS.ProcessEnv): Promise<BlahpdLocation> {
  let found = blahpdHomeFromEnv(env);
  let askedHtcondor = false;
  const tool = onPath('condor_config_val', env);
  if (tool) {
    for (const name of ['BLAHPD_LOCATION', 'RELEASE_DIR']) {
      const value = await condorConfigValue(tool, name, env);
      if (value === undefined) continue;
      askedHtcondor = true;
      // The gridmanager does not export /usr: blahpd then uses its own default, $GLITE_LOCATION or /usr.
      found = value === BLAHP_DEFAULT_HOME && env.GLITE_LOCATION ? { home: env.GLITE_LOCATION, from: '$GLITE_LOCATION' } : { home: value, from: `${name} from condor_config_val` };
      break;
    }
  }
  const config = blahConfigFile(found.home, env);
  const values = readBlahConfig(config.file);
  let libexec = path.join(found.home, 'libexec', 'blahp');
  let libexecFrom = `${found.from} + libexec/blahp`;
  const set = libexecSetting(config.file, values);
  if (set) {
    libexec = set.value;
    libexecFrom = `blah_libexec_directory in ${set.file}`;
  }
  const blahpFolder = set !== undefined || isDirectory(libexec);
  if (!blahpFolder) {
    libexec = path.join(found.home, 'libexec');
    libexecFrom = `${found.from} + libexec, which has no blahp/`;
  }
  return { home: found.home, homeFrom: found.from, config, values, libexec: path.resolve(libexec), libexecFrom, askedHtcondor, blahpFolder };
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** blah_libexec_directory as blahpd reads it: blah.config, then the files of blah.config.d/ in name order (the last wins). */
function libexecSetting(file: string, values: BlahpdLocation['values']): { value: string; file: string } | undefined {
  let set = values instanceof Map && values.get('blah_libexec_directory') ? { value: values.get('blah_libexec_directory')!, file } : undefined;
  let names: string[] = [];
  try {
    names = fs.readdirSync(`${file}.d`).filter((n) => !n.startsWith('.')).sort();
  } catch {
    // no blah.config.d
  }
  for (const name of names) {
    const more = readBlahConfig(path.join(`${file}.d`, name));
    const value = more instanceof Map ? more.get('blah_libexec_directory') : undefined;
    if (value) set = { value, file: path.join(`${file}.d`, name) };
  }
  return set;
}
