/**
 * Check family 6, the BLAHP route (`grid_resource = batch boinc`), in the folder blahpd runs
 * batch scripts from (gahp/blahp-location.ts asks HTCondor, as blahpd finds it), or --blahp
 * <libexec dir>: the boinc_*.sh scripts `boinc-gahp blahp install` writes are there,
 * executable and run this installation's node and program; and blah.config has boinc in
 * supported_lrms and the boinc_project_url / boinc_authenticator_file keys (whose project
 * then goes through checks 1-4: index.ts). Everything is read as text; nothing is run but
 * condor_config_val.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { blahpdHomeFromEnv, locateBlahpd } from '../../blahp-location.js';
import { defaultEntry, MARKER, scriptText, SCRIPT_ACTIONS } from '../../blahp-scripts.js';
import { samePath } from './condor.js';
import type { DoctorTarget } from './context.js';
import { printableUrl, type Report } from './report.js';

export interface BlahpSetup {
  libexec: string;
  /** Why this folder: how blahpd finds it, or undefined for --blahp. */
  libexecFrom?: string;
  configFile: string;
  /** blah.config's values, or the reason it could not be read. */
  config: Map<string, string> | { error: string };
  /** blahp's default folder (where the packages put the scripts) when it holds them and blahpd looks elsewhere. */
  otherCopy?: string;
  /** With --blahp naming another folder than the one HTCondor's blahpd uses: that one, checked too. */
  blahpdFolder?: { libexec: string; libexecFrom: string };
}

const hasOurScript = (dir: string) => {
  try {
    return fs.readFileSync(path.join(dir, 'boinc_submit.sh'), 'utf8').includes(MARKER);
  } catch {
    return false;
  }
};

const supportedLrms = (s: Pick<BlahpSetup, 'config'>) => (s.config instanceof Map ? (s.config.get('supported_lrms') ?? '').split(/[\s,]+/).filter(Boolean) : []);

/**
 * The BLAHP set-up to check, or undefined when nothing says it is wanted: without --blahp,
 * it is when blah.config names boinc, or boinc_*.sh are in blahpd's folder or in blahp's
 * default one (the packages' /usr/libexec/blahp).
 */
export async function findBlahp(env: NodeJS.ProcessEnv, given: string | undefined): Promise<BlahpSetup | undefined> {
  const where = await locateBlahpd(env);
  const base = { configFile: where.config.file, config: where.values };
  if (given) {
    const differs = where.askedHtcondor && !samePath(given, where.libexec);
    return { ...base, libexec: path.resolve(given), ...(differs ? { blahpdFolder: { libexec: where.libexec, libexecFrom: where.libexecFrom } } : {}) };
  }
  const defaultFolder = path.join(blahpdHomeFromEnv({ GLITE_LOCATION: env.GLITE_LOCATION }).home, 'libexec', 'blahp');
  const otherCopy = !samePath(defaultFolder, where.libexec) && hasOurScript(defaultFolder) ? defaultFolder : undefined;
  const named = supportedLrms(base).includes('boinc') || (base.config instanceof Map && base.config.has('boinc_project_url'));
  const present = SCRIPT_ACTIONS.some((a) => fs.existsSync(path.join(where.libexec, `boinc_${a}.sh`)));
  if (!named && !present && !otherCopy) return undefined;
  return { ...base, libexec: where.libexec, libexecFrom: where.libexecFrom, ...(otherCopy ? { otherCopy } : {}) };
}

/** The BLAHP route is configured: our submit script is installed, or blah.config lists boinc. */
export function blahpRouteConfigured(s: BlahpSetup | undefined): boolean {
  if (!s) return false;
  return fs.existsSync(path.join(s.libexec, 'boinc_submit.sh')) || supportedLrms(s).includes('boinc');
}

/** `exec 'node' 'entry' blahp ...` of a script, unquoted. */
function execLine(text: string): { node: string; entry: string } | undefined {
  const m = /^exec ('(?:[^']|'\\'')*') ('(?:[^']|'\\'')*') blahp /m.exec(text);
  const unquote = (q: string) => q.slice(1, -1).replace(/'\\''/g, "'");
  return m ? { node: unquote(m[1]!), entry: unquote(m[2]!) } : undefined;
}

export function checkBlahpScripts(report: Report, s: BlahpSetup): void {
  const node = process.execPath;
  const entry = defaultEntry();
  // Without --blahp the folder is blahpd's, where `blahp install` with no directory writes.
  const install = s.libexecFrom === undefined ? `boinc-gahp blahp install ${s.libexec}` : 'boinc-gahp blahp install';
  const missing: string[] = [];
  const foreign: string[] = [];
  const notExecutable: string[] = [];
  const stale: string[] = [];
  const outdated: string[] = [];
  for (const action of SCRIPT_ACTIONS) {
    const name = `boinc_${action}.sh`;
    const file = path.join(s.libexec, name);
    let text: string;
    let mode: number;
    try {
      text = fs.readFileSync(file, 'utf8');
      mode = fs.statSync(file).mode;
    } catch {
      missing.push(name);
      continue;
    }
    const runs = execLine(text);
    if (!text.includes(MARKER)) foreign.push(name);
    else if (!runs || text !== scriptText(action, runs.node, runs.entry)) outdated.push(name);
    // Paths compared resolved: a package's /usr/bin/node may be a link to the node running now.
    else if (!samePath(runs.node, node) || !samePath(runs.entry, entry)) stale.push(`${name} runs ${runs.node} ${runs.entry}`);
    if ((mode & 0o111) === 0) notExecutable.push(name);
  }
  const what = `blahp scripts in ${s.libexec}${s.libexecFrom ? ` (blahpd's folder: ${s.libexecFrom})` : ''}`;
  if (missing.length) {
    // What the user sees of it is only an idle job and "Detected Down Grid Resource" in job.log.
    const down = missing.includes('boinc_ping.sh') ? ': blahpd cannot run boinc_ping.sh, so HTCondor takes batch boinc for down (job.log: Detected Down Grid Resource) and its jobs stay idle' : '';
    const elsewhere = s.otherCopy ? `; ${s.otherCopy} has them, but this blahpd does not look there` : '';
    report.fail('blahp', what, `${missing.join(', ')} missing${down}${elsewhere}`, `run ${install}${s.libexecFrom ? ` (it writes them into ${s.libexec})` : ''}`);
  }
  if (foreign.length) report.fail('blahp', what, `${foreign.join(', ')} not written by boinc-gahp`, `run ${install} --force (it replaces them)`);
  if (stale.length) report.fail('blahp', what, `${stale.join('; ')}: not this installation's ${node} ${entry}`, `run ${install} again from this installation`);
  if (outdated.length) report.fail('blahp', what, `${outdated.join(', ')} differ from what this boinc-gahp writes (edited, or an older version)`, `run ${install} again`);
  if (notExecutable.length) report.fail('blahp', what, `${notExecutable.join(', ')} not executable`, `chmod 755 ${notExecutable.map((n) => path.join(s.libexec, n)).join(' ')}`);
  if (!missing.length && !foreign.length && !stale.length && !outdated.length && !notExecutable.length) {
    report.ok('blahp', what, `${SCRIPT_ACTIONS.map((a) => `boinc_${a}.sh`).join(', ')} installed, executable, run ${node} ${entry}`);
  }
}

/** blah.config's keys; returns its project for checks 1-4 when both keys are there. */
export function checkBlahConfig(report: Report, s: BlahpSetup): DoctorTarget | undefined {
  const what = `blah.config ${s.configFile}`;
  if (!(s.config instanceof Map)) {
    report.fail('blahp', what, `cannot be read (${s.config.error})`,
      `create ${s.configFile} with supported_lrms=boinc, boinc_project_url and boinc_authenticator_file (BLAHPD_CONFIG_LOCATION names another file)`);
    return undefined;
  }
  const lrms = supportedLrms(s);
  if (!lrms.includes('boinc')) {
    report.fail('blahp', what, `supported_lrms is ${lrms.length ? lrms.join(',') : 'not set'}: no boinc`,
      `add boinc to supported_lrms in ${s.configFile} (e.g. supported_lrms=${[...lrms, 'boinc'].join(',')}), then restart blahpd (condor_restart)`);
  }
  const url = s.config.get('boinc_project_url');
  const auth = s.config.get('boinc_authenticator_file');
  const absent = [url ? '' : 'boinc_project_url', auth ? '' : 'boinc_authenticator_file'].filter(Boolean);
  if (absent.length) {
    report.fail('blahp', what, `${absent.join(' and ')} not set`, `add ${absent.map((k) => `${k}=<${k === 'boinc_project_url' ? 'project master URL' : 'file holding the authenticator'}>`).join(' and ')} to ${s.configFile}`);
  } else if (lrms.includes('boinc')) {
    report.ok('blahp', what, `supported_lrms has boinc; boinc_project_url=${printableUrl(url!)}; boinc_authenticator_file=${auth}`);
  }
  if (!url && !auth) return undefined;
  return {
    ...(url ? { url } : {}),
    ...(auth ? { authenticatorFile: auth } : {}),
    urlSetting: `boinc_project_url in ${s.configFile}`,
    authSetting: `boinc_authenticator_file in ${s.configFile}`,
    ...(s.config.get('boinc_state_dir') ? { stateDir: s.config.get('boinc_state_dir') } : {}),
    ...(s.config.get('boinc_keep_files') ? { keepFiles: s.config.get('boinc_keep_files'), keepFilesSetting: `boinc_keep_files in ${s.configFile}` } : {}),
  };
}
