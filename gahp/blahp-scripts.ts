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
 * stdin from /dev/null (stdin is blahpd's command pipe). The shell never looks at job data.
 * bash, not sh: blah_load_config.sh uses bash syntax.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BLAH_CONFIG_KEYS, LOADED_CONFIG_ENV } from './blahp-location.js';
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

/** One script's text; packaging/stage.mjs calls it too, for the scripts the RPM and the .deb ship. */
export function scriptText(action: string, node: string, entry: string): string {
  const exports = BLAH_CONFIG_KEYS.map(([key, env]) => `if [ -n "\${${key}:-}" ]; then ${env}=$${key}; export ${env}; fi`).join('\n');
  return `#!/bin/bash
# boinc_${action}.sh: BOINC as a BLAHP batch system (boinc-gahp, docs/blahp.md).
${MARKER}; run it again rather than editing this file.
# bash only because blahp's blah_load_config.sh is bash; nothing below needs more than sh.
# No job data passes through this shell: "$@" reaches node as blahpd gave it.
blah_script_dir=$(dirname "$0")
if [ -r "$blah_script_dir/blah_load_config.sh" ]; then
  . "$blah_script_dir/blah_load_config.sh" >&2
  # Without blahp's loader, boinc-gahp reads blah.config itself, in blahpd's order.
  ${LOADED_CONFIG_ENV}=\${config_file:-blah.config}; export ${LOADED_CONFIG_ENV}
fi
${exports}
exec ${shQuote(node)} ${shQuote(entry)} blahp ${action} "$@" </dev/null
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
