/**
 * Check family 3 continued, what the project keeps (README, "What the project keeps";
 * docs/boinc-server.md, "The project's daemons" and "Batch-collect projects"): as far as
 * the RPCs show it. Once per project, whether get_output3.php (where a batch-collect
 * assimilator's outputs are served) takes the authenticator as its login cookie; then per
 * app checked, what its templates mark (`<no_delete/>`, `<gzip_when_done/>`), whether this
 * GAHP marks each job's files no_delete (--keep-files) and what that costs, what the
 * state directory learnt of the app's outputs (output-ways.json), and what it all means
 * for the jobs. A project's daemons are not visible through the RPCs: the lines say "if".
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincRpcError } from '../../../boinc-rpc/errors.js';
import type { AppTemplates } from '../../../boinc-rpc/types.js';
import { OutputWays, type OutputWay } from '../../output/collected.js';
import { defaultStateDir, parseYesNo } from '../../settings.js';
import type { DoctorContext, DoctorTarget, ProjectFindings } from './context.js';
import { clientFor } from './project.js';
import { reason, type Report } from './report.js';

/**
 * A batch id no project has: get_batch_zip of it changes nothing. check_auth() runs first:
 * not logged in is a 302 to login_form.php; logged in, `not owner` (or, for an account
 * with manage access, `no batch dir`).
 */
const NO_SUCH_BATCH = 2147483647;

/** What the probe of get_output3.php found. */
export type Output3Answer = 'cookie' | 'refused' | 'absent' | 'unknown';

/** Asks get_output3.php for the zip of a batch that does not exist, logged in by the cookie; one line. */
export async function checkOutput3(ctx: DoctorContext, report: Report, url: URL, authenticator: string): Promise<Output3Answer> {
  const what = 'get_output3.php (batch-collect outputs)';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-gahp-doctor-'));
  const client = clientFor(ctx, url, authenticator);
  try {
    await client.fetchBatchZip({ batchId: NO_SUCH_BATCH, destPath: path.join(dir, 'probe.zip') });
    report.ok('apps', what, `answers with the cookie (get_batch_zip of batch ${NO_SUCH_BATCH}, which should not exist, sent a file)`);
    return 'cookie';
  } catch (err) {
    const e = err instanceof BoincRpcError ? err : undefined;
    const msg = e ? e.serverMessage : reason(err);
    if (e?.code === 'refused' && e.options.httpStatus !== undefined && e.options.httpStatus >= 300 && e.options.httpStatus < 400) {
      report.warn('apps', what, `refuses the cookie: get_batch_zip got ${msg}`,
        "if the project runs batch_collect_assimilator, its outputs cannot be fetched with this account: ask the project's administrators why its web login does not take the authenticator (a cookie auth=<authenticator>)");
      return 'refused';
    }
    if (msg === 'not owner' || msg === 'no batch dir') {
      report.ok('apps', what, `answers with the cookie (get_batch_zip of batch ${NO_SUCH_BATCH}, which does not exist, got "${msg}")`);
      return 'cookie';
    }
    if (e?.options.httpStatus === 404) {
      report.ok('apps', what, 'not on the project (HTTP 404): it serves no batch-collect outputs; outputs come from get_output.php');
      return 'absent';
    }
    report.warn('apps', what, `get_batch_zip of batch ${NO_SUCH_BATCH} got: ${msg}`,
      "if the project runs batch_collect_assimilator, see its web server's error log for get_output3.php");
    return 'unknown';
  } finally {
    client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The `<file_info>` elements of a template: how many, and how many say `<no_delete/>`. */
function noDeleteCount(template: string | undefined): { infos: number; marked: number } | undefined {
  if (template === undefined) return undefined;
  const infos = template.match(/<file_info\s*\/>|<file_info>[\s\S]*?<\/file_info>/g) ?? [];
  return { infos: infos.length, marked: infos.filter((i) => /<no_delete\s*\/>|<no_delete>\s*1?\s*<\/no_delete>/.test(i)).length };
}

/** "1 of 1 marked <no_delete/>" for one side, or that the reply had no template. */
function sideText(side: string, c: { infos: number; marked: number } | undefined): string {
  if (!c) return `${side}: no template in get_templates' reply`;
  if (c.infos === 0) return `${side}: none`;
  return `${side}: ${c.marked} of ${c.infos} marked <no_delete/>`;
}

/** Where the keep-files setting doctor sees came from, and its value. */
export function keepFilesSetting(ctx: DoctorContext, target: DoctorTarget): { keep: boolean; from: string } {
  if (ctx.g.keepFiles !== undefined) return { keep: ctx.g.keepFiles, from: 'from --keep-files (or BOINC_GAHP_KEEP_FILES)' };
  if (target.keepFiles !== undefined) return { keep: parseYesNo(target.keepFiles) ?? true, from: `from ${target.keepFilesSetting ?? 'the configuration'}` };
  return { keep: true, from: 'the default' };
}

/** The way the state directory learnt for an app of this project (output-ways.json), if any. */
function learntWay(stateDir: string, url: URL, app: string): OutputWay | undefined {
  const ways = new OutputWays(path.join(stateDir, 'output-ways.json'));
  const href = url.href;
  return ways.get(href, app) ?? ways.get(href.replace(/\/$/, ''), app);
}

const WHAT_IT_COSTS = 'outputs stay in the project\'s upload directory after they are fetched, until its administrator removes them (README, "What the project keeps")';

export function checkKeeping(ctx: DoctorContext, report: Report, url: URL, target: DoctorTarget, apps: Map<string, AppTemplates>, output3: Output3Answer): void {
  const setting = keepFilesSetting(ctx, target);
  const stateDir = path.resolve(target.stateDir ?? ctx.g.stateDir ?? defaultStateDir());
  for (const [app, t] of apps) {
    const what = `files kept of ${app}`;
    const inputs = noDeleteCount(t.inputTemplate);
    const outputs = noDeleteCount(t.outputTemplate);
    const gzipped = t.outputOpenNames.filter((_, i) => t.outputGzip?.[i]);
    const templates = `the app's templates: ${sideText('inputs', inputs)}, ${sideText('outputs', outputs)}${gzipped.length ? `; <gzip_when_done/>: ${gzipped.join(', ')} (gzipped by the volunteer's client, unpacked by the GAHP)` : ''}`;
    const way = learntWay(stateDir, url, app);
    const learnt = way === 'collect'
      ? 'output-ways.json: its outputs were fetched from get_output3.php (the project runs batch_collect_assimilator for it)'
      : way === 'upload'
        ? 'output-ways.json: its outputs were fetched from get_output.php (the upload hierarchy)'
        : 'output-ways.json: no fetch of its outputs learnt yet';
    const collectNote = output3 === 'refused'
      ? 'if the project runs batch_collect_assimilator they are moved out of it to get_output3.php, which refuses this account (above)'
      : output3 === 'absent'
        ? 'the project has no get_output3.php (no batch-collect outputs)'
        : 'if the project runs batch_collect_assimilator they are moved out of it and come from get_output3.php';
    const collectKeeps = output3 === 'refused'
      ? 'batch_collect_assimilator, whose get_output3.php refuses this account (above)'
      : output3 === 'absent'
        ? 'batch_collect_assimilator, though the project has no get_output3.php'
        : 'batch_collect_assimilator, whose outputs come from get_output3.php';
    const allOutputsMarked = outputs !== undefined && outputs.infos > 0 && outputs.marked === outputs.infos;
    if (setting.keep) {
      report.ok('apps', what, `${templates}; this GAHP marks each job's files <no_delete/> (--keep-files yes, ${setting.from}): ${WHAT_IT_COSTS}; ${learnt}. So: outputs are fetched from the upload hierarchy; ${collectNote}`);
    } else if (allOutputsMarked || way === 'collect') {
      const why = allOutputsMarked ? "the app's own templates mark every output <no_delete/>, so the file_deleter leaves them" : "the project moves them out of the upload hierarchy (batch_collect_assimilator) and get_output3.php serves them until the batch is retired";
      report.ok('apps', what, `${templates}; this GAHP does not mark jobs' files (--keep-files no, ${setting.from}); ${learnt}. So: ${why}`);
    } else {
      report.warn('apps', what,
        `${templates}; this GAHP does not mark jobs' files (--keep-files no, ${setting.from}); ${learnt}. So: outputs must be fetched before the project's file_deleter removes them, seconds after validation, unless the project keeps them its own way (file_deleter --preserve_result_files, a long <delete_delay_hours>, or ${collectKeeps}); an output deleted first is reported gone and its job fails`,
        `set --keep-files yes (BOINC_GAHP_KEEP_FILES=yes), or make sure the project keeps outputs until they are fetched (README, "What the project keeps")`);
    }
  }
}

/** The project's findings are enough for the keeping checks: the account was accepted. */
export const canCheckKeeping = (findings: ProjectFindings): findings is ProjectFindings & { authenticator: string } =>
  findings.accountAccepted && findings.authenticator !== undefined;
