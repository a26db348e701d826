/**
 * Check family 2, the project: the URL answers (DNS, TCP, TLS, HTTP; via the proxy when one
 * applies), it is a BOINC project (submit_rpc_handler.php answers ping), the account is
 * accepted, and which apps it may submit to. BOINC has no RPC listing a user's submit
 * access: the project's public app list (apps.php?xml=1) names the apps and get_templates
 * of each says whether this account may use it (BOINC checks submit access there first;
 * docs/boinc-server.md, "Submit access, and the public app list").
 */
import { BoincClient } from '../../../boinc-rpc/client.js';
import { BoincRpcError } from '../../../boinc-rpc/errors.js';
import type { AppTemplates } from '../../../boinc-rpc/types.js';
import { networkSettings } from '../options.js';
import { checkProjectUrl, ConfigError } from '../../settings.js';
import type { DoctorContext, DoctorTarget, ProjectFindings } from './context.js';
import type { NetworkPlan } from './network.js';
import { ProbeFailure, probeGet, type ProbeOptions } from './probe.js';
import { printableUrl, type Report } from './report.js';

const STEP_FIX: Record<string, string> = {
  dns: 'check the host name in the project URL, or this host\'s DNS resolver (/etc/resolv.conf)',
  tcp: 'check the URL\'s port, that the project\'s web server runs, and that no firewall blocks this host',
  proxy: 'check the proxy\'s address and credentials, and that it allows CONNECT to the project\'s port',
  tls: 'if the project\'s certificate is signed by a site CA, give that CA with --ca-file <PEM file> (BOINC_GAHP_CA_FILE); else ask the project to fix its certificate',
  http: 'check that the project\'s web server answers on this URL',
};

/** The URL parsed, or a FAIL saying how to give it. */
export function projectUrl(report: Report, target: DoctorTarget): URL | undefined {
  let url: URL;
  try {
    url = new URL(checkProjectUrl(target.url, target.urlSetting));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    report.fail('project', err.what, err.found, err.fix);
    return undefined;
  }
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

/** The probe takes the GAHP's own route and trust (and the proxy network.ts found, to look its host up). */
function probeOptions(ctx: DoctorContext, net: NetworkPlan): ProbeOptions {
  return { timeoutMs: ctx.timeoutMs, network: { ...networkSettings(ctx.g), env: ctx.env }, ...(net.proxy ? { proxy: net.proxy } : {}) };
}

/** The URL answers, rung by rung. */
export async function checkReachable(ctx: DoctorContext, report: Report, url: URL, net: NetworkPlan): Promise<boolean> {
  const opts = probeOptions(ctx, net);
  const what = `project URL ${printableUrl(url)}`;
  try {
    const r = await probeGet(url, opts);
    const found = r.steps.join(', ');
    if (r.status === 407) report.fail('project', what, `${found}: the proxy wants credentials it did not get or refused them`, 'put the proxy\'s user and password into its URL (--proxy http://user:password@host:port, or the proxy variable)');
    else if (r.status >= 500) report.fail('project', what, `${found}: the web server fails`, 'see the project web server\'s error log (PHP or database down?)');
    else if (r.status >= 400) report.warn('project', what, `${found}: no home page here`, 'check that this is the master URL the project\'s web site gives (it ends with /)');
    else report.ok('project', what, found);
    return true;
  } catch (err) {
    if (!(err instanceof ProbeFailure)) throw err;
    const before = err.steps.length ? `${err.steps.join(', ')}, then ` : '';
    // A plain-HTTP answer to TLS is the URL's scheme, not a certificate (probe.ts names it).
    const fix = err.step === 'tls' && /wrong version number|an http:\/\/ URL\?/.test(err.message)
      ? `write the project URL with http:// instead of https:// (the server answers plain HTTP on ${url.host})` : STEP_FIX[err.step]!;
    report.fail('project', what, `${before}${err.step.toUpperCase()} failed: ${err.message}`, fix);
    return false;
  }
}

/** The apps apps.php?xml=1 lists, or undefined when the project does not list them. */
async function listedApps(ctx: DoctorContext, url: URL, net: NetworkPlan): Promise<string[] | undefined> {
  try {
    const r = await probeGet(new URL('apps.php?xml=1', url), probeOptions(ctx, net));
    if (r.status !== 200 || !r.body.includes('<app_versions>')) return undefined;
    return [...r.body.matchAll(/<application>[\s\S]*?<name>([^<]*)<\/name>/g)].map((m) => m[1]!.trim());
  } catch {
    return undefined;
  }
}

export function clientFor(ctx: DoctorContext, url: URL, authenticator: string): BoincClient {
  return new BoincClient({ projectUrl: url.href, authenticator, timeoutMs: ctx.timeoutMs, retries: 1, network: { ...networkSettings(ctx.g), env: ctx.env } });
}

const isRefusal = (err: unknown, text: string) => err instanceof BoincRpcError && err.kind === 'server' && err.serverMessage === text;
const noAccess = (err: unknown) => isRefusal(err, 'no submit access') || isRefusal(err, 'no file access');

/** Is it BOINC (ping), is the account accepted, to which apps may it submit. */
export async function checkBoincProject(ctx: DoctorContext, report: Report, url: URL, net: NetworkPlan, authenticator: string | undefined, authFile: string): Promise<ProjectFindings> {
  const findings: ProjectFindings = { accountAccepted: false, submitApps: new Map(), ...(authenticator ? { authenticator } : {}) };
  const client = clientFor(ctx, url, authenticator ?? '');
  try {
    try {
      await client.ping();
      report.ok('project', 'BOINC project', `${printableUrl(url)}submit_rpc_handler.php answers ping`);
    } catch (err) {
      const e = err as BoincRpcError;
      const notBoinc = e.kind === 'protocol';
      const answer = /^HTTP \d/.test(e.serverMessage) ? `answers ${e.serverMessage}` : `answers, but not as BOINC does (${e.serverMessage})`;
      report.fail('project', 'BOINC project', notBoinc ? `not a BOINC project: ${printableUrl(url)}submit_rpc_handler.php ${answer}` : `ping failed: ${e.serverMessage}`,
        notBoinc ? 'give the project\'s master URL (its web site shows it; submit_rpc_handler.php is right under it), and check the project enables remote job submission'
          : 'check the project\'s web server and database (BOINC answers ping only when both work)');
      return findings;
    }
    if (!authenticator) return findings;
    try {
      await client.queryBatch2('0', [`boinc-gahp-doctor#${process.pid}#${Date.now()}`]);
    } catch (err) {
      if (isRefusal(err, 'bad authenticator') || isRefusal(err, 'no authenticator')) {
        report.fail('project', 'account', `refused: ${(err as BoincRpcError).serverMessage}`,
          `put this project's authenticator for the account (its web site's account keys page) into ${authFile}`);
        return findings;
      }
      if (noAccess(err)) {
        findings.accountAccepted = true;
        report.ok('project', 'account', 'accepted');
        report.fail('project', 'submit access', `none: ${(err as BoincRpcError).serverMessage}`, 'ask the project\'s administrators to give this account remote job submission access (BOINC\'s "manage submitters" page)');
        return findings;
      }
      if (!(err instanceof BoincRpcError && err.code === 'no-such-batch')) {
        report.fail('project', 'account', `the check failed: ${(err as Error).message}`, 'run again; if it persists, see the project web server\'s error log');
        return findings;
      }
    }
    findings.accountAccepted = true;
    report.ok('project', 'account', 'accepted (a status query for a batch that does not exist got "no batch named")');
    await checkSubmitAccess(ctx, report, url, net, client, findings);
    return findings;
  } finally {
    client.close();
  }
}

async function checkSubmitAccess(ctx: DoctorContext, report: Report, url: URL, net: NetworkPlan, client: BoincClient, findings: ProjectFindings): Promise<void> {
  const apps = await listedApps(ctx, url, net);
  if (apps) findings.projectApps = apps;
  const asked = ctx.apps.length ? ctx.apps : apps;
  if (!asked) {
    report.warn('project', 'submit access', 'the account may use the submit RPCs; the project does not list its apps (apps.php?xml=1), so which apps was not checked',
      'give --app <name> for each app your jobs use');
    return;
  }
  const refused: string[] = [];
  for (const app of asked) {
    try {
      const t: AppTemplates = await client.getTemplates({ appName: app });
      findings.submitApps.set(app, t);
    } catch (err) {
      if (noAccess(err)) refused.push(app);
    }
  }
  const allowed = [...findings.submitApps.keys()];
  const of = ctx.apps.length ? `of the ${asked.length} app(s) given with --app` : `of the project's ${asked.length} app(s)`;
  if (allowed.length === 0 && refused.length > 0) {
    report.fail('project', 'submit access', `to none ${of} (${refused.join(', ')}: no submit access)`,
      'ask the project\'s administrators to give this account submit access to the apps your jobs use (BOINC\'s "manage submitters" page)');
  } else if (refused.length > 0) {
    report.ok('project', 'submit access', `to ${allowed.join(', ')}; not to ${refused.join(', ')}`);
  } else if (allowed.length > 0) {
    report.ok('project', 'submit access', `to ${allowed.join(', ')} (${allowed.length} ${of})`);
  } else {
    report.ok('project', 'submit access', `the account may use the submit RPCs (${of}: see below)`);
  }
}
