/**
 * The GAHP's settings from HTCondor's own configuration (docs/blah-route.md,
 * "Configuration"). For `grid_resource = batch boinc` the gridmanager starts BOINC_GAHP
 * with no arguments, names no project, and passes its own environment: the project, the
 * account and the rest are settings of the site, so they live where the administrator
 * keeps the site's other HTCondor settings, as `BOINC_GAHP_<NAME>` lines (the names of the
 * GAHP's environment variables: BOINC_GAHP_PROJECT_URL, BOINC_GAHP_AUTHENTICATOR_FILE, ...).
 * A variable set in the GAHP's environment comes first, a command-line option before both.
 *
 * Asked with one `condor_config_val -dump -expanded ^BOINC_GAHP_` (an argument list, no
 * shell), found on PATH or beside the gridmanager that started us (HTCondor's daemons may
 * run with a PATH that lacks HTCondor's bin/).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { onPath } from './blahp-location.js';

/** Where condor_config_val is: PATH, else the bin/ of the HTCondor whose daemon is our parent. */
export function findCondorConfigVal(env: NodeJS.ProcessEnv, parentPid = process.ppid): string | undefined {
  const found = onPath('condor_config_val', env);
  if (found) return found;
  try {
    const exe = fs.readlinkSync(`/proc/${parentPid}/exe`);
    if (!/condor_/.test(path.basename(exe))) return undefined;
    for (const dir of [path.dirname(exe), path.join(path.dirname(exe), '..', 'bin')]) {
      const p = path.join(dir, 'condor_config_val');
      try {
        fs.accessSync(p, fs.constants.X_OK);
        return p;
      } catch {
        // not there
      }
    }
  } catch {
    // no /proc, or the parent is gone
  }
  return undefined;
}

export interface CondorSettings {
  /** `BOINC_GAHP_<NAME>` -> value, as HTCondor's configuration has them (expanded). */
  values: Map<string, string>;
  /** The condor_config_val asked, if any. */
  tool?: string;
  /** Why nothing could be read (no tool, it failed). */
  problem?: string;
}

/** Reads every BOINC_GAHP_* setting of HTCondor's configuration (synchronously: once, at start-up). */
export function readCondorSettings(env: NodeJS.ProcessEnv, tool = findCondorConfigVal(env)): CondorSettings {
  const values = new Map<string, string>();
  if (!tool) return { values, problem: 'condor_config_val was not found (neither on PATH nor beside the HTCondor daemon that started this GAHP)' };
  const run = spawnSync(tool, ['-dump', '-expanded', '^BOINC_GAHP_'], { env, encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (run.error || run.status !== 0) {
    return { values, tool, problem: `${tool} -dump failed: ${run.error?.message ?? (run.stderr || `exit ${run.status}`).trim().slice(0, 300)}` };
  }
  for (const line of run.stdout.split('\n')) {
    const m = /^(BOINC_GAHP_[A-Za-z0-9_]+)\s*=\s?(.*)$/i.exec(line);
    if (m) values.set(m[1]!.toUpperCase(), m[2]!.trim());
  }
  return { values, tool };
}

/**
 * The environment the GAHP reads its settings from: HTCondor's BOINC_GAHP_* values of the
 * names the GAHP knows (`known`), under the variables already set.
 */
export function withCondorSettings(env: NodeJS.ProcessEnv, settings: CondorSettings, known: readonly string[]): NodeJS.ProcessEnv {
  const merged: NodeJS.ProcessEnv = {};
  for (const [name, value] of settings.values) {
    if (known.includes(name) && value !== '') merged[name] = value;
  }
  return { ...merged, ...env };
}
