/**
 * The BLAHP scripts: boinc_submit.sh, boinc_status.sh, boinc_cancel.sh, boinc_hold.sh,
 * boinc_resume.sh and boinc_ping.sh, as `boinc-gahp blahp install` writes them into
 * blahpd's script folder and `blahp uninstall` removes them (docs/blahp.md, "The scripts
 * and install"); doctor checks them against the same text, and packaging/stage.mjs writes
 * the packages' copies with it.
 *
 * Each script sources blahp's blah_load_config.sh when it is there (as blahp's own
 * scripts do; its output goes to stderr so a status stays one line) and exports the
 * `boinc_*` blah.config values as the environment variables the Node side reads; without
 * the loader the Node side reads blah.config itself (gahp/blahp/config.ts). It then execs
 * this installation's node and bin/boinc-gahp by absolute path with "$@" untouched and
 * stdin from /dev/null (stdin is blahpd's command pipe). The shell never looks at job data,
 * except that boinc_status.sh first tries to answer a status already known by itself
 * (QUICK_STATUS below). bash, not sh: blah_load_config.sh uses bash syntax, and so does the
 * status answer.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BLAH_CONFIG_KEYS, ENV, LOADED_CONFIG_ENV } from './blahp-location.js';
import { replaceFileSync } from './state-files.js';
import { shQuote } from './util.js';

export const SCRIPT_ACTIONS = ['submit', 'status', 'cancel', 'hold', 'resume', 'ping'] as const;
export const MARKER = '# written by boinc-gahp blahp install';

/** bin/boinc-gahp of this installation (this file is dist/gahp/blahp-scripts.js). */
export function defaultEntry(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const entry = path.resolve(here, '..', '..', 'bin', 'boinc-gahp');
  try {
    return fs.realpathSync(entry);
  } catch {
    return entry;
  }
}

/**
 * boinc_status.sh's answer without node (docs/blahp.md, "Status without node"; the files are
 * gahp/blahp/quick.ts's). blahpd runs the script once per job and poll, and most answers are
 * already on disk: starting node for each made a large cluster's polling the machine's main
 * load. So the script prints them itself, with bash builtins only (`read`, `printf`, `[[ ]]`;
 * no process is started): the job's final line (`jobs/<batch>/<n>.final`), or its idle or
 * running line of the current snapshot (`<n>.snap`, valid while `status.stamp` names its
 * epoch) while that snapshot is younger than boinc_status_max_age as node judges it
 * (status.ts), with one second to spare (this clock has whole seconds). Anything else, or any
 * doubt, returns 1 and the script execs node: no blahp loader (node then reads blah.config
 * itself, values unknown here); a state directory or setting node would read differently
 * (blanks around it, `..`, not a whole number); a project URL other than the snapshot's; a
 * missing or torn file. The id is matched against the job-name pattern of
 * gahp/batch-boinc/names.ts with its characters listed (a range such as A-Z depends on the locale),
 * so the path built from it has no `/` of its own and no `..`; a job number with a leading
 * zero goes to node too (node names that job `..._06`, which no snapshot holds). The line
 * read is printed as it is, never evaluated.
 */
const QUICK_STATUS = `boinc_quick_status() {
  local id='' a
  for a in "$@"; do
    case $a in
      -w|-n|--) ;;
      *) [ -z "$id" ] || return 1; id=$a ;;
    esac
  done
  [ -n "\${${LOADED_CONFIG_ENV}:-}" ] || return 1
  local re='^boinc/(blahp-[ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-]+-[0123456789abcdefghijklmnopqrstuvwxyz]+-[0123456789abcdef]{6})_(0|[123456789][0123456789]{0,6})$'
  [ "\${#id}" -le 206 ] && [[ $id =~ $re ]] || return 1
  local batch=\${BASH_REMATCH[1]} n=\${BASH_REMATCH[2]}
  local dir=\${${ENV.stateDir}:-}
  if [ -z "$dir" ]; then
    if [ -n "\${XDG_STATE_HOME:-}" ]; then dir=$XDG_STATE_HOME/boinc-gahp
    elif [ -n "\${HOME:-}" ]; then dir=$HOME/.local/state/boinc-gahp
    else return 1
    fi
  fi
  [[ $dir == [[:space:]]* || $dir == *[[:space:]] || /$dir/ == */../* ]] && return 1
  local url=\${${ENV.projectUrl}:-} age=\${${ENV.statusMaxAge}:-30}
  [[ $url != *[[:space:]]* && \${${ENV.authenticatorFile}:-} == *[![:space:]]* && $age =~ ^[0123456789]{1,4}$ ]] || return 1
  [[ $url == */ ]] || url=$url/
  age=$((10#$age))
  [ "$age" -le 3600 ] || return 1
  local root=$dir/blahp stamp surl epoch line gen now
  { read -r stamp && read -r surl && read -r epoch; } 2>/dev/null <"$root/status.stamp" || return 1
  [[ $stamp =~ ^[0123456789]{1,16}$ && $surl == "$url" && -n $epoch ]] || return 1
  local job=$root/jobs/$batch/$n
  if [ -e "$job.final" ]; then
    { IFS= read -r line; } 2>/dev/null <"$job.final" && [[ $line == '0['*']' ]] || return 1
    printf '%s\\n' "$line"
    return 0
  fi
  printf -v now '%(%s)T' -1
  [[ $now =~ ^[0123456789]+$ ]] && (( (now + 1) * 1000 - 10#$stamp < age * 1000 )) || return 1
  { read -r gen && IFS= read -r line; } 2>/dev/null <"$job.snap" || return 1
  [[ $gen == "$epoch" && $line == '0['*']' ]] || return 1
  printf '%s\\n' "$line"
}
boinc_quick_status "$@" && exit 0
`;

/** One script's text; packaging/stage.mjs calls it too, for the scripts the RPM and the .deb ship. */
export function scriptText(action: string, node: string, entry: string): string {
  const exports = BLAH_CONFIG_KEYS.map(([key, env]) => `if [ -n "\${${key}:-}" ]; then ${env}=$${key}; export ${env}; fi`).join('\n');
  const quick = action === 'status' ? `# A status already known is printed here, without node (docs/blahp.md, "Status without node").\n${QUICK_STATUS}` : '';
  return `#!/bin/bash
# boinc_${action}.sh: BOINC as a BLAHP batch system (boinc-gahp, docs/blahp.md).
${MARKER}; run it again rather than editing this file.
# bash because blahp's blah_load_config.sh is bash. "$@" reaches node as blahpd gave it.
case $0 in */*) blah_script_dir=\${0%/*} ;; *) blah_script_dir=. ;; esac
if [ -r "$blah_script_dir/blah_load_config.sh" ]; then
  . "$blah_script_dir/blah_load_config.sh" >&2
  # Without blahp's loader, boinc-gahp reads blah.config itself, in blahpd's order.
  ${LOADED_CONFIG_ENV}=\${config_file:-blah.config}; export ${LOADED_CONFIG_ENV}
fi
${exports}
${quick}exec ${shQuote(node)} ${shQuote(entry)} blahp ${action} "$@" </dev/null
`;
}

const scriptFiles = (dir: string) => SCRIPT_ACTIONS.map((a) => path.join(dir, `boinc_${a}.sh`));

/** A directory that exists, resolved; else an error naming it. */
function existingDir(dir: string): string {
  const target = path.resolve(dir);
  let st: fs.Stats;
  try {
    st = fs.statSync(target);
  } catch {
    throw new Error(`${target} does not exist (blahpd's script folder is part of HTCondor's installation; give the right one, e.g. $(condor_config_val RELEASE_DIR)/libexec/blahp)`);
  }
  if (!st.isDirectory()) throw new Error(`${target} is not a directory`);
  return target;
}

/** The file's text when it exists, else undefined. */
function readIfThere(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

export function install(dir: string, opts: { force?: boolean; node?: string; entry?: string } = {}): { written: string[] } {
  const target = existingDir(dir);
  const node = opts.node ?? process.execPath;
  const entry = opts.entry ?? defaultEntry();
  if (!fs.existsSync(entry)) throw new Error(`the boinc-gahp entry ${entry} does not exist`);
  const files = scriptFiles(target);
  // Check all before writing any: a foreign file stops the install with nothing changed.
  if (!opts.force) {
    for (const f of files) {
      const text = readIfThere(f);
      if (text !== undefined && !text.includes(MARKER)) throw new Error(`${f} exists and was not written by boinc-gahp: not replaced (use --force)`);
    }
  }
  SCRIPT_ACTIONS.forEach((a, i) => {
    replaceFileSync(files[i]!, scriptText(a, node, entry), 0o755);
  });
  return { written: files };
}

/** Removes the scripts `install` wrote (those with its marker); other files of the same names stay. */
export function uninstall(dir: string): { removed: string[]; foreign: string[] } {
  const target = existingDir(dir);
  const removed: string[] = [];
  const foreign: string[] = [];
  for (const f of scriptFiles(target)) {
    const text = readIfThere(f);
    if (text === undefined) continue;
    if (!text.includes(MARKER)) {
      foreign.push(f);
      continue;
    }
    fs.rmSync(f);
    removed.push(f);
  }
  return { removed, foreign };
}
