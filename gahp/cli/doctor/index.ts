/**
 * `boinc-gahp doctor [--app <name>...] [--blahp <libexec dir>] [--json]`: checks a whole
 * set-up, in order, one line per check (report.ts): the BLAHP scripts where blahpd looks
 * (when that route is set up), the host, the project, its apps, uploads, HTCondor,
 * blah.config. Exit 0 when nothing failed, 1 otherwise.
 * Read-only on the host (one temporary file for the upload check, removed); on the project
 * one small file is left (uploads.ts). The authenticator is read, used, never printed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseSubmitDescription } from '../submit-file.js';
import { UsageError } from '../../settings.js';
import { EXIT_FAILED, EXIT_OK, type GlobalOptions } from '../options.js';
import { checkApps } from './apps.js';
import { blahpRouteConfigured, checkBlahConfig, checkBlahpScripts, findBlahp } from './blahp.js';
import { checkHtcondor } from './condor.js';
import { canCheckKeeping, checkKeeping, checkOutput3 } from './keeping.js';
import { readCondorSettings } from '../../condor-config.js';
import { condorConfigValue, onPath } from '../../blahp-location.js';
import type { DoctorContext, DoctorTarget } from './context.js';
import { checkAuthenticatorFile, checkNodeVersion, checkStateDir } from './host.js';
import { checkNetwork } from './network.js';
import { checkBoincProject, checkReachable, projectUrl } from './project.js';
import { Report } from './report.js';
import { checkLiveUpload, checkUploadLimits } from './uploads.js';

export interface DoctorOptions {
  app?: string[];
  blahp?: string;
  json?: boolean;
  /** A submit file: the project and authenticator file `boinc-gahp submit` would use for it. */
  submitFile?: string;
}

/**
 * The project and authenticator file `boinc-gahp submit` takes for a submit file: its
 * grid_resource URL unless --project-url is given, its boinc_authenticator_file else
 * --authenticator-file (submit-plan.ts); the fixes name the line's command in the file.
 */
function submitFileTarget(g: GlobalOptions, file: string): DoctorTarget {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const procs = parseSubmitDescription(text, { file, cwd: process.cwd(), cluster: 0 }).procs;
  const url = g.projectUrl ?? procs.find((p) => p.projectUrl)?.projectUrl;
  const auth = procs.find((p) => p.authenticatorFile)?.authenticatorFile ?? (g.authenticatorFile ? path.resolve(g.authenticatorFile) : undefined);
  return {
    ...(url !== undefined ? { url } : {}),
    ...(auth !== undefined ? { authenticatorFile: auth } : {}),
    urlSetting: g.projectUrl ? '--project-url (or BOINC_GAHP_PROJECT_URL)' : `grid_resource in ${file} ("boinc <url>")`,
    authSetting: procs.some((p) => p.authenticatorFile) ? `boinc_authenticator_file in ${file}` : '--authenticator-file (or BOINC_GAHP_AUTHENTICATOR_FILE)',
  };
}

/** Default time for one probe or RPC: a doctor should not hang for a minute on a dead host. */
const DEFAULT_TIMEOUT_S = 15;

function silentUrl(text: string | undefined): URL | undefined {
  try {
    return text ? new URL(text) : undefined;
  } catch {
    return undefined;
  }
}

/** Checks 1-4 for one project: the host's state dir, authenticator and network, then the project, its apps, uploads. */
async function projectRound(ctx: DoctorContext, report: Report, target: DoctorTarget): Promise<void> {
  checkStateDir(ctx, report, target);
  const authenticator = checkAuthenticatorFile(report, target);
  const net = checkNetwork(ctx, report, silentUrl(target.url));
  const url = projectUrl(report, target);
  if (!url) return;
  if (!(await checkReachable(ctx, report, url, net))) return;
  const findings = await checkBoincProject(ctx, report, url, net, authenticator, target.authenticatorFile ?? 'the authenticator file');
  const apps = await checkApps(ctx, report, url, findings);
  if (apps.size > 0 && canCheckKeeping(findings)) {
    const output3 = await checkOutput3(ctx, report, url, findings.authenticator);
    checkKeeping(ctx, report, url, target, apps, output3);
  }
  checkUploadLimits(ctx, report);
  await checkLiveUpload(ctx, report, url, findings);
}

const sameTarget = (a: DoctorTarget, b: DoctorTarget) =>
  silentUrl(a.url)?.href.replace(/\/?$/, '/') === silentUrl(b.url)?.href.replace(/\/?$/, '/') && a.authenticatorFile === b.authenticatorFile && (a.stateDir === undefined || a.stateDir === b.stateDir);

export async function doctorCmd(g: GlobalOptions, o: DoctorOptions): Promise<number> {
  const report = new Report(o.json ? undefined : (line) => process.stdout.write(line + '\n'));
  const ctx: DoctorContext = { g, report, apps: o.app ?? [], timeoutMs: (g.rpcTimeout ?? DEFAULT_TIMEOUT_S) * 1000, env: process.env };
  let blahp = await findBlahp(ctx.env, o.blahp);
  // The project as the GAHP will have it: the options (and BOINC_GAHP_* variables), else
  // HTCondor's configuration, where the BOINC_GAHP route keeps it (condor-config.ts).
  const fromFile = o.submitFile !== undefined ? submitFileTarget(g, o.submitFile) : undefined;
  const site = g.projectUrl || fromFile ? undefined : readCondorSettings(ctx.env);
  const siteUrl = site?.values.get('BOINC_GAHP_PROJECT_URL');
  const siteAuth = site?.values.get('BOINC_GAHP_AUTHENTICATOR_FILE');
  // The state directory as the GAHP will have it: --state-dir or BOINC_GAHP_STATE_DIR in the
  // environment, else HTCondor's configuration's.
  const siteStateDir = g.stateDir === undefined ? site?.values.get('BOINC_GAHP_STATE_DIR') : undefined;
  const siteKeep = site?.values.get('BOINC_GAHP_KEEP_FILES');
  const stateDir = {
    ...(siteStateDir ? { stateDir: siteStateDir, stateDirSetting: "BOINC_GAHP_STATE_DIR in HTCondor's configuration" } : {}),
    ...(siteKeep ? { keepFiles: siteKeep, keepFilesSetting: "BOINC_GAHP_KEEP_FILES in HTCondor's configuration" } : {}),
  };
  const options: DoctorTarget = fromFile ?? (siteUrl
    ? {
        ...stateDir,
        url: siteUrl,
        ...(g.authenticatorFile ?? siteAuth ? { authenticatorFile: path.resolve((g.authenticatorFile ?? siteAuth)!) } : {}),
        urlSetting: "BOINC_GAHP_PROJECT_URL in HTCondor's configuration",
        authSetting: g.authenticatorFile ? '--authenticator-file (or BOINC_GAHP_AUTHENTICATOR_FILE)' : "BOINC_GAHP_AUTHENTICATOR_FILE in HTCondor's configuration",
      }
    : {
        ...stateDir,
        ...(g.projectUrl ? { url: g.projectUrl } : {}),
        ...(g.authenticatorFile ? { authenticatorFile: path.resolve(g.authenticatorFile) } : {}),
        urlSetting: '--project-url (or BOINC_GAHP_PROJECT_URL)',
        authSetting: '--authenticator-file (or BOINC_GAHP_AUTHENTICATOR_FILE)',
      });
  // A pool whose BOINC_GAHP is defined serves batch boinc with boinc-gahp itself: blahpd's
  // scripts and blah.config are not used, so nothing there is a failure (unless --blahp asks).
  const tool = onPath('condor_config_val', ctx.env);
  const boincGahp = tool ? await condorConfigValue(tool, 'BOINC_GAHP', ctx.env) : undefined;
  const blahpUnused = blahp !== undefined && boincGahp !== undefined && o.blahp === undefined;
  if (blahpUnused) {
    report.ok('blahp', 'blahp scripts and blah.config', `not used: BOINC_GAHP is defined (${boincGahp}), so batch boinc is served by boinc-gahp itself, not by blahpd`);
    blahp = undefined;
  }
  // First: scripts missing where blahpd looks leave batch boinc "down" with nothing else to show for it.
  if (blahp?.blahpdFolder) checkBlahpScripts(report, { ...blahp, ...blahp.blahpdFolder });
  if (blahp) checkBlahpScripts(report, blahp);
  checkNodeVersion(report);
  // Quietly read first: with no project on the command line, blah.config's is the one.
  const blahTarget = blahp ? checkBlahConfig(new Report(), blahp) : undefined;
  const first = !options.url && !options.authenticatorFile && blahTarget ? blahTarget : options;
  await projectRound(ctx, report, first);
  await checkHtcondor(ctx, blahpUnused || blahpRouteConfigured(blahp));
  if (blahp) {
    const target = checkBlahConfig(report, blahp);
    if (target && target !== first) {
      if (sameTarget(target, first)) report.ok('blahp', 'blah.config project', 'the same project URL and authenticator file as checked above');
      else await projectRound(ctx, report.labelled('blah.config: '), target);
    }
  }
  if (o.json) process.stdout.write(JSON.stringify({ ok: !report.failed, checks: report.checks }, null, 2) + '\n');
  else process.stdout.write(`${report.summary()}\n`);
  return report.failed ? EXIT_FAILED : EXIT_OK;
}
