/**
 * Check family 5, HTCondor, when condor_config_val is on PATH: BOINC_GAHP (this
 * installation, serving batch boinc itself and the boinc grid type; undefined only when
 * blahpd and the scripts serve batch boinc), the batch boinc project settings and the
 * gridmanager's caps it then needs, and GRIDMANAGER_GAHP_CALL_TIMEOUT against --command-timeout.
 * condor_config_val runs with an argument list, no shell.
 */
import * as fs from 'node:fs';
import { condorConfigValue as configValue, onPath } from '../../blahp-location.js';
import { defaultEntry } from '../../blahp-scripts.js';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../../create-services.js';
import { readCondorSettings } from '../../condor-config.js';
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

/** HTCondor's defaults for the gridmanager's two caps on a large cluster (docs/blah-route.md, "Pacing"). */
const MAX_SUBMITTED_DEFAULT = 1000;
const PROBE_RATE_DEFAULT = 5;
/** Below these a cluster of the size BOINC projects take is held back or polled slowly. */
const MAX_SUBMITTED_WANTED = 10_000;
const PROBE_RATE_WANTED = 100;

/**
 * `blahpRoute`: the BLAHP scripts or blah.config's boinc entry were found (blahp.ts).
 * BOINC_GAHP defined is the route for HTCondor 23+ (batch boinc served by the GAHP) and for
 * HTCondor 10.0's boinc grid type alike; then the project settings the GAHP will read from
 * HTCondor's configuration and the gridmanager's caps are checked too.
 */
export async function checkHtcondor(ctx: DoctorContext, blahpRoute: boolean): Promise<void> {
  const { report, env } = ctx;
  const tool = onPath('condor_config_val', env);
  if (!tool) return;
  const entry = defaultEntry();
  const gahp = await configValue(tool, 'BOINC_GAHP', env);
  const setIt = `add "BOINC_GAHP = ${entry}" to the HTCondor configuration (e.g. /etc/condor/config.d/50-boinc.conf), then condor_reconfig`;
  if (gahp === undefined) {
    if (blahpRoute) report.ok('htcondor', 'BOINC_GAHP', 'not defined: batch boinc goes through blahpd and the scripts (the BOINC_GAHP route is faster: README, "The BOINC_GAHP route")');
    else report.warn('htcondor', 'BOINC_GAHP', 'not defined, and no BLAHP scripts were found: HTCondor cannot reach BOINC', setIt);
  } else if (!fs.existsSync(gahp)) {
    report.fail('htcondor', 'BOINC_GAHP', `set to ${gahp}, which does not exist`, setIt);
  } else if (!runsThisInstallation(gahp, entry)) {
    report.warn('htcondor', 'BOINC_GAHP', `set to ${gahp}, not this installation's ${entry}`, `${setIt}, unless ${gahp} is meant to run this one`);
  } else {
    report.ok('htcondor', 'BOINC_GAHP', `${gahp}: ${samePath(gahp, entry) ? 'this installation' : `runs this installation's ${entry}`}; it serves batch boinc (and the boinc grid type of HTCondor 10.0)${blahpRoute ? ': blahpd and the boinc_*.sh scripts are not used for batch boinc' : ''}`);
  }
  if (gahp !== undefined) await checkDirectRoute(ctx, tool);
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

/** The BOINC_GAHP route: the project it will read from HTCondor's configuration, and the gridmanager's caps. */
async function checkDirectRoute(ctx: DoctorContext, tool: string): Promise<void> {
  const { report, env } = ctx;
  const settings = readCondorSettings(env, tool);
  const url = settings.values.get('BOINC_GAHP_PROJECT_URL');
  const auth = settings.values.get('BOINC_GAHP_AUTHENTICATOR_FILE');
  const fix = 'add BOINC_GAHP_PROJECT_URL = <master URL> and BOINC_GAHP_AUTHENTICATOR_FILE = <file> to the HTCondor configuration (README, "The BOINC_GAHP route"), then condor_reconfig';
  if (url && auth) report.ok('htcondor', 'batch boinc project', `BOINC_GAHP_PROJECT_URL ${url}, BOINC_GAHP_AUTHENTICATOR_FILE ${auth} (checked above)`);
  else if (env.BOINC_GAHP_PROJECT_URL && env.BOINC_GAHP_AUTHENTICATOR_FILE) report.ok('htcondor', 'batch boinc project', 'from the environment (BOINC_GAHP_PROJECT_URL, BOINC_GAHP_AUTHENTICATOR_FILE), which the gridmanager must pass on; HTCondor\'s configuration names none');
  else report.warn('htcondor', 'batch boinc project', `${url ? '' : 'BOINC_GAHP_PROJECT_URL '}${!url && !auth ? 'and ' : ''}${auth ? '' : 'BOINC_GAHP_AUTHENTICATOR_FILE '}not in HTCondor's configuration: batch boinc jobs are held with "no BOINC project is configured"`, fix);

  const maxText = (await configValue(tool, 'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE_BATCH', env)) ?? (await configValue(tool, 'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE', env));
  const max = maxText !== undefined && Number.isFinite(Number(maxText)) ? Number(maxText) : MAX_SUBMITTED_DEFAULT;
  const maxSaid = `${max}${maxText === undefined ? ' (default)' : ''}`;
  if (max < MAX_SUBMITTED_WANTED) {
    report.warn('htcondor', 'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE', `${maxSaid}: jobs of a cluster past ${max} wait idle until others leave BOINC`,
      `set GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = 20000 (a BOINC project takes tens of thousands of jobs; each costs the gridmanager and the GAHP a little memory)`);
  } else {
    report.ok('htcondor', 'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE', `${maxSaid} jobs on BOINC at once`);
  }
  const rateText = (await configValue(tool, 'GRIDMANAGER_JOB_PROBE_RATE_BATCH', env)) ?? (await configValue(tool, 'GRIDMANAGER_JOB_PROBE_RATE', env));
  const rate = rateText !== undefined && Number(rateText) > 0 ? Number(rateText) : PROBE_RATE_DEFAULT;
  const rateSaid = `${rate} a second${rateText === undefined ? ' (default)' : ''}`;
  if (rate < PROBE_RATE_WANTED) {
    report.warn('htcondor', 'GRIDMANAGER_JOB_PROBE_RATE_BATCH', `${rateSaid}: each job's status is asked at most once every jobs/${rate} s, so ${Math.min(max, 2000)} jobs drain at about ${rate} a second`,
      'set GRIDMANAGER_JOB_PROBE_RATE_BATCH = 500: boinc-gahp answers statuses from memory, one BOINC query covers them all');
  } else {
    report.ok('htcondor', 'GRIDMANAGER_JOB_PROBE_RATE_BATCH', `${rateSaid}: statuses answered from memory`);
  }
}
