/**
 * The two ways HTCondor reaches BOINC through this project, as the check sets them up
 * (docs/htcondor-check.md; the README's set-up sections say the same for a site):
 *
 * - `boinc`: the `boinc` grid type of HTCondor up to 10.0; the gridmanager runs BOINC_GAHP,
 *   here a wrapper that execs bin/boinc-gahp with a log and a state directory.
 * - `batch boinc`: current HTCondor; the gridmanager runs blahpd, which runs the boinc_*.sh
 *   scripts of `boinc-gahp blahp install`. BOINC_GAHP must stay undefined. The check keeps
 *   the HTCondor install untouched: BLAHPD_LOCATION points at a directory of its own with
 *   etc/blah.config and libexec/blahp/ (blahp's stock scripts from the install, plus ours).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BoincProject } from './boinc-project.js';
import { runOk } from './processes.js';

export interface Route {
  /** What the report calls it: `boinc` or `batch boinc`. */
  name: string;
  /** Submit-file lines that send a grid-universe job this way. */
  submitLines: string[];
  /** Pool configuration: how the gridmanager reaches BOINC, and a job router route. */
  config: string[];
  /** The state directory whose ledger lists the batches this route created. */
  stateDir: string;
  /** The BOINC job (and its batch) a job's GridJobId names, once it names one. */
  boincJob(gridJobId: unknown): { batch: string; job: string } | undefined;
}

/** Paths of this checkout, for the wrapper and the scripts. */
export interface RouteContext {
  repoDir: string;
  workDir: string;
  project: BoincProject;
}

/** A path put into a shell script or a config file by us: no quote may end its quoting. */
function quotable(p: string): string {
  if (/['\n]/.test(p)) throw new Error(`path not usable in a script: ${JSON.stringify(p)}`);
  return p;
}

/** The `boinc` grid type: BOINC_GAHP is a wrapper giving the GAHP a log and a state directory. */
export function gahpRoute(ctx: RouteContext): Route {
  const { url, authenticatorFile, app } = ctx.project.settings;
  const stateDir = path.join(ctx.workDir, 'gahp-state');
  const wrapper = path.join(ctx.workDir, 'boinc-gahp-wrapper');
  const log = path.join(ctx.workDir, 'gahp-route/local/log/BoincGahpLog');
  fs.writeFileSync(
    wrapper,
    '#!/bin/sh\n' +
      `exec '${quotable(process.execPath)}' '${quotable(path.join(ctx.repoDir, 'bin/boinc-gahp'))}' ` +
      `--log '${quotable(log)}' --state-dir '${quotable(stateDir)}' "$@"\n`,
    { mode: 0o755 },
  );
  return {
    name: 'boinc',
    submitLines: [`grid_resource = boinc ${url}`, `boinc_authenticator_file = ${authenticatorFile}`],
    config: [
      `BOINC_GAHP = ${wrapper}`,
      // The route as the README gives it for releases with the `boinc` grid type.
      'JOB_ROUTER_ROUTE_NAMES = BOINC',
      'JOB_ROUTER_ROUTE_BOINC @=jrt',
      '  REQUIREMENTS WantBOINC =?= true',
      '  UNIVERSE GRID',
      `  GridResource = "boinc ${url}"`,
      `  SET BoincAuthenticatorFile "${authenticatorFile}"`,
      '  MaxJobs = 5000',
      '  MaxIdleJobs = 1000',
      '@jrt',
      `# the app of routed jobs is their executable (${app})`,
    ],
    stateDir,
    boincJob(gridJobId) {
      // "boinc <url> <batch> <job>"
      const words = typeof gridJobId === 'string' ? gridJobId.split(' ') : [];
      return words.length === 4 ? { batch: words[2]!, job: words[3]! } : undefined;
    },
  };
}

/**
 * `batch boinc`: blahpd's directory of our own (BLAHPD_LOCATION), holding blahp's stock
 * scripts copied from the install (`stockScripts`, which must hold blah_load_config.sh),
 * our boinc_*.sh written by `boinc-gahp blahp install`, and etc/blah.config.
 */
export async function batchRoute(ctx: RouteContext, stockScripts: string): Promise<Route> {
  const { url, authenticatorFile } = ctx.project.settings;
  const location = path.join(ctx.workDir, 'blahp');
  const libexec = path.join(location, 'libexec/blahp');
  const stateDir = path.join(ctx.workDir, 'blahp-state');
  fs.mkdirSync(libexec, { recursive: true });
  fs.mkdirSync(path.join(location, 'etc'), { recursive: true });
  fs.cpSync(stockScripts, libexec, { recursive: true });
  await runOk(process.execPath, [path.join(ctx.repoDir, 'bin/boinc-gahp'), 'blahp', 'install', libexec, '--force'], { timeoutMs: 60_000 });
  fs.writeFileSync(
    path.join(location, 'etc/blah.config'),
    [
      '# written by the boinc-gahp HTCondor check (docs/htcondor-check.md)',
      'supported_lrms=boinc',
      `boinc_project_url=${quotable(url)}`,
      `boinc_authenticator_file=${quotable(authenticatorFile)}`,
      `boinc_state_dir=${quotable(stateDir)}`,
      `boinc_log=${quotable(path.join(ctx.workDir, 'batch-route/local/log/BoincBlahpLog'))}`,
      'boinc_log_level=debug',
      '',
    ].join('\n'),
  );
  return {
    name: 'batch boinc',
    submitLines: ['grid_resource = batch boinc', `batch_queue = ${ctx.project.settings.app}`],
    config: [
      `BLAHPD_LOCATION = ${location}`,
      // The route as the README gives it for HTCondor 23+.
      'JOB_ROUTER_ROUTE_NAMES = BOINC',
      'JOB_ROUTER_ROUTE_BOINC @=jrt',
      '  REQUIREMENTS WantBOINC =?= true',
      '  GridResource = "batch boinc"',
      '  COPY BoincApp BatchQueue',
      '  MaxJobs = 5000',
      '  MaxIdleJobs = 1000',
      '@jrt',
    ],
    stateDir,
    boincJob(gridJobId) {
      // "batch boinc boinc/<batch>_<n>"
      const last = typeof gridJobId === 'string' ? gridJobId.split(' ').pop() ?? '' : '';
      const job = last.slice(last.lastIndexOf('/') + 1);
      const cut = job.lastIndexOf('_');
      return last.includes('/') && cut > 0 ? { batch: job.slice(0, cut), job } : undefined;
    },
  };
}

/** The libexec directory of the BLAHP scripts a route uses (for boinc_ping.sh). */
export function blahpLocation(workDir: string): string {
  return path.join(workDir, 'blahp');
}
