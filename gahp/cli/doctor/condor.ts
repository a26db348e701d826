/**
 * Check family 5, HTCondor, when condor_config_val is on PATH: BOINC_GAHP (set and pointing
 * at this installation for the `boinc` grid type; left undefined when the BLAHP route,
 * `batch boinc`, is used) and GRIDMANAGER_GAHP_CALL_TIMEOUT against --command-timeout.
 * condor_config_val runs with an argument list, no shell.
 */
import * as fs from 'node:fs';
import { condorConfigValue as configValue, onPath } from '../../blahp-location.js';
import { defaultEntry } from '../../blahp-scripts.js';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../../create-services.js';
import type { DoctorContext } from './context.js';

/** HTCondor's default for GRIDMANAGER_GAHP_CALL_TIMEOUT, in seconds. */
const GAHP_CALL_TIMEOUT_DEFAULT = 300;

/** Two paths name the same file once links are resolved (false when either is missing). */
export function samePath(a: string, b: string): boolean {
  try {
    return fs.realpathSync(a) === fs.realpathSync(b);
  } catch {
    return false;
  }
}

/** `gahp` is this installation's entry, or a small launcher that runs it (the packages' /usr/bin/boinc-gahp). */
function runsThisInstallation(gahp: string, entry: string): boolean {
  if (samePath(gahp, entry)) return true;
  try {
    return fs.statSync(gahp).size <= 4096 && fs.readFileSync(gahp, 'utf8').includes(entry);
  } catch {
    return false;
  }
}

/** `blahpRoute`: the BLAHP scripts or blah.config's boinc entry were found (blahp.ts). */
export async function checkHtcondor(ctx: DoctorContext, blahpRoute: boolean): Promise<void> {
  const { report, env } = ctx;
  const tool = onPath('condor_config_val', env);
  if (!tool) return;
  const entry = defaultEntry();
  const gahp = await configValue(tool, 'BOINC_GAHP', env);
  const setIt = `add "BOINC_GAHP = ${entry}" to the HTCondor configuration (e.g. /etc/condor/config.d/50-boinc.conf), then condor_reconfig`;
  if (gahp === undefined) {
    if (blahpRoute) report.ok('htcondor', 'BOINC_GAHP', 'not defined, as it should be for the BLAHP route (grid_resource = batch boinc); the boinc grid type (HTCondor before 10) would need it');
    else report.warn('htcondor', 'BOINC_GAHP', 'not defined, and no BLAHP scripts were found: HTCondor cannot reach BOINC either way', `${setIt}; or for HTCondor 10+ run boinc-gahp blahp install`);
  } else if (blahpRoute) {
    report.warn('htcondor', 'BOINC_GAHP', `set to ${gahp} while the BLAHP route (batch boinc) is configured: two routes, and HTCondor 10+ has no boinc grid type to use it`,
      'remove BOINC_GAHP from the HTCondor configuration (condor_config_val -config shows the file), then condor_reconfig');
  } else if (!fs.existsSync(gahp)) {
    report.fail('htcondor', 'BOINC_GAHP', `set to ${gahp}, which does not exist`, setIt);
  } else if (!runsThisInstallation(gahp, entry)) {
    report.warn('htcondor', 'BOINC_GAHP', `set to ${gahp}, not this installation's ${entry}`, `${setIt}, unless ${gahp} is meant to run this one`);
  } else {
    report.ok('htcondor', 'BOINC_GAHP', `${gahp}: ${samePath(gahp, entry) ? 'this installation' : `runs this installation's ${entry}`}`);
  }
  if (gahp === undefined) return;
  const callText = await configValue(tool, 'GRIDMANAGER_GAHP_CALL_TIMEOUT', env);
  const call = callText !== undefined && Number.isFinite(Number(callText)) ? Number(callText) : GAHP_CALL_TIMEOUT_DEFAULT;
  const mine = ctx.g.commandTimeout ?? DEFAULT_COMMAND_TIMEOUT_MS / 1000;
  const what = 'GRIDMANAGER_GAHP_CALL_TIMEOUT';
  const found = `${call} s${callText === undefined ? ' (default)' : ''}; --command-timeout ${mine === 0 ? 'none' : `${mine} s`}`;
  if (mine === 0 || mine >= call) {
    report.warn('htcondor', what, `${found}: a slow BOINC_* command outlives the gridmanager's wait, and the gridmanager then kills the GAHP`,
      `set --command-timeout (BOINC_GAHP_COMMAND_TIMEOUT) below ${call}, e.g. ${Math.max(call - 10, 1)}, or raise GRIDMANAGER_GAHP_CALL_TIMEOUT`);
  } else {
    report.ok('htcondor', what, `${found}: commands give their result before the gridmanager gives up`);
  }
}
