/**
 * `boinc-gahp blahp install <libexec dir> [--force]`: writes boinc_submit.sh,
 * boinc_status.sh, boinc_cancel.sh, boinc_hold.sh, boinc_resume.sh and boinc_ping.sh into
 * blahp's script directory (docs/blahp.md, "Installing").
 *
 * Each script sources blahp's blah_load_config.sh when it is there (as blahp's own
 * scripts do; its output goes to stderr so a status stays one line), exports the
 * `boinc_*` blah.config values as the environment variables config.ts reads, and execs
 * this installation's node and bin/boinc-gahp by absolute path with "$@" untouched and
 * stdin from /dev/null (stdin is blahpd's command pipe). The shell never looks at job data.
 * bash, not sh: blah_load_config.sh uses bash syntax.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BLAH_CONFIG_KEYS } from './config.js';
import { writeFileAtomic } from './state.js';
import { shQuote } from '../util.js';

export const SCRIPT_ACTIONS = ['submit', 'status', 'cancel', 'hold', 'resume', 'ping'] as const;
export const MARKER = '# written by boinc-gahp blahp install';

/** bin/boinc-gahp of this installation (this file is dist/gahp/blahp/install.js). */
export function defaultEntry(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const entry = path.resolve(here, '..', '..', '..', 'bin', 'boinc-gahp');
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
fi
${exports}
exec ${shQuote(node)} ${shQuote(entry)} blahp ${action} "$@" </dev/null
`;
}

export interface InstallResult {
  written: string[];
}

export function install(dir: string, opts: { force?: boolean; node?: string; entry?: string } = {}): InstallResult {
  const target = path.resolve(dir);
  let st: fs.Stats;
  try {
    st = fs.statSync(target);
  } catch {
    throw new Error(`${target} does not exist (give blahp's libexec directory, e.g. /usr/libexec/blahp)`);
  }
  if (!st.isDirectory()) throw new Error(`${target} is not a directory`);
  const node = opts.node ?? process.execPath;
  const entry = opts.entry ?? defaultEntry();
  if (!fs.existsSync(entry)) throw new Error(`the boinc-gahp entry ${entry} does not exist`);
  const files = SCRIPT_ACTIONS.map((a) => path.join(target, `boinc_${a}.sh`));
  // Check all before writing any: a foreign file stops the install with nothing changed.
  if (!opts.force) {
    for (const f of files) {
      let text: string;
      try {
        text = fs.readFileSync(f, 'utf8');
      } catch {
        continue;
      }
      if (!text.includes(MARKER)) throw new Error(`${f} exists and was not written by boinc-gahp: not replaced (use --force)`);
    }
  }
  SCRIPT_ACTIONS.forEach((a, i) => {
    writeFileAtomic(files[i]!, scriptText(a, node, entry), 0o755);
  });
  return { written: files };
}
