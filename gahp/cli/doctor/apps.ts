/**
 * Check family 3, the apps (--app, else those the account may submit to): get_templates
 * works, and what a submit file must name: as many transfer_input_files as the input
 * template has inputs (the app reads them under the template's open_names; files of those
 * names go to them, others in the order given), and the output template's open_names as
 * transfer_output_files.
 */
import { BoincRpcError } from '../../../boinc-rpc/errors.js';
import type { AppTemplates } from '../../../boinc-rpc/types.js';
import type { DoctorContext, ProjectFindings } from './context.js';
import { clientFor } from './project.js';
import type { Report } from './report.js';

const list = (names: string[]) => (names.length ? names.join(', ') : '(none)');

/** The input rule (README, "Input and output files"): one file per template input, read by the app under the template's name. */
export function describeTemplates(t: AppTemplates): string {
  const n = t.inputOpenNames.length;
  const inputs = n === 0
    ? 'transfer_input_files: none'
    : `transfer_input_files: ${n} file${n > 1 ? 's' : ''}, read by the app as ${list(t.inputOpenNames)}${n > 1 ? ' (a file of one of these names goes there, else in this order)' : ''}`;
  return `${inputs}; transfer_output_files = ${list(t.outputOpenNames)}`;
}

/** The apps whose templates get_templates gave, with them (for keeping.ts). */
export async function checkApps(ctx: DoctorContext, report: Report, url: URL, findings: ProjectFindings): Promise<Map<string, AppTemplates>> {
  const checked = new Map<string, AppTemplates>();
  if (!findings.accountAccepted || !findings.authenticator) return checked;
  const apps = ctx.apps.length ? ctx.apps : [...findings.submitApps.keys()];
  if (apps.length === 0) return checked;
  const client = clientFor(ctx, url, findings.authenticator);
  try {
    for (const app of apps) {
      const what = `app ${app}`;
      let t = findings.submitApps.get(app);
      if (!t) {
        try {
          t = await client.getTemplates({ appName: app });
        } catch (err) {
          const msg = err instanceof BoincRpcError ? err.serverMessage : (err as Error).message;
          if (/^app not found/.test(msg)) {
            const known = findings.projectApps ? ` (the project's apps: ${list(findings.projectApps)})` : '';
            report.fail('apps', what, `get_templates: ${msg}`, `check the app's name in your submit file (batch_queue, or the executable's name)${known}`);
          } else if (msg === 'no submit access' || msg === 'no file access') {
            report.fail('apps', what, `get_templates: ${msg}`, `ask the project's administrators to give this account submit access to ${app}`);
          } else {
            report.fail('apps', what, `get_templates failed: ${msg}`, `ask the project's administrators to check ${app}'s templates (templates/${app}_in and ${app}_out)`);
          }
          continue;
        }
      }
      report.ok('apps', what, `get_templates works; ${describeTemplates(t)}`);
      checked.set(app, t);
    }
  } finally {
    client.close();
  }
  return checked;
}
