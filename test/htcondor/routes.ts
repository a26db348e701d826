/**
 * The two ways HTCondor reaches BOINC through this project, as the check sets them up
 * (docs/htcondor-check.md; the README's set-up sections say the same for a site):
 *
 * - `boinc`: the `boinc` grid type of HTCondor up to 10.0; the gridmanager runs BOINC_GAHP,
 *   here a wrapper that execs bin/boinc-gahp with a log and a state directory.
 * - `batch boinc (BOINC_GAHP)`: current HTCondor with BOINC_GAHP defined: the gridmanager
 *   runs bin/boinc-gahp itself and speaks BLAH to it (docs/blah-route.md); the project, the
 *   account, the log and the state directory are BOINC_GAHP_* lines of the pool's
 *   configuration, read by the GAHP through condor_config_val, as the README tells a site.
 * - `batch boinc (blahpd)`: current HTCondor; the gridmanager runs blahpd, which runs the boinc_*.sh
 *   scripts from $(RELEASE_DIR)/libexec/blahp. BOINC_GAHP must stay undefined. The scripts
 *   get there as the README tells an administrator: `boinc-gahp blahp install` with no
 *   directory and the pool's condor_config_val on PATH; `blahp uninstall` removes them when
 *   the pool has stopped, and the folder must then be as it was. blah.config is a file of
 *   the check's own, named by BLAHPD_CONFIG_LOCATION in the pool's environment.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BoincProject } from './boinc-project.js';
import type { PersonalPool } from './pool.js';
import { run } from './processes.js';

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
  /** Environment variables of the pool's processes (the master passes them on). */
  env?: Record<string, string>;
  /** Set-up steps once the pool's configuration is written, and clean-up once it has stopped: a pass note each, or a throw. */
  install?(pool: PersonalPool): Promise<string>;
  uninstall?(pool: PersonalPool): Promise<string>;
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
      `--log '${quotable(log)}' --log-level debug --state-dir '${quotable(stateDir)}' "$@"\n`,
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
 * A pool of its own for one check on the BOINC_GAHP route: its directory under the work
 * directory (the pool's and its state directory's names), what the report calls it, the
 * authenticator file the configuration names, and configuration lines added at the end.
 */
export interface DirectRouteVariant {
  dir: string;
  name: string;
  authenticatorFile: string;
  config: string[];
}

/** `batch boinc` served by the GAHP itself: BOINC_GAHP and its settings in the pool's configuration, nothing else. */
export function directBatchRoute(ctx: RouteContext, variant?: DirectRouteVariant): Route {
  const { url, app } = ctx.project.settings;
  const authenticatorFile = variant?.authenticatorFile ?? ctx.project.settings.authenticatorFile;
  const dir = variant?.dir ?? 'direct-route';
  const stateDir = path.join(ctx.workDir, variant ? `${dir}-state` : 'direct-state');
  return {
    name: variant ? `batch boinc (BOINC_GAHP, ${variant.name})` : 'batch boinc (BOINC_GAHP)',
    submitLines: ['grid_resource = batch boinc', `batch_queue = ${app}`],
    config: [
      // The set-up as the README gives it for HTCondor 23+.
      `BOINC_GAHP = ${path.join(ctx.repoDir, 'bin/boinc-gahp')}`,
      `BOINC_GAHP_PROJECT_URL = ${url}`,
      `BOINC_GAHP_AUTHENTICATOR_FILE = ${authenticatorFile}`,
      `BOINC_GAHP_STATE_DIR = ${stateDir}`,
      `BOINC_GAHP_LOG = ${path.join(ctx.workDir, dir, 'local/log/BoincGahpLog')}`,
      'BOINC_GAHP_LOG_LEVEL = debug',
      'GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = 20000',
      'GRIDMANAGER_JOB_PROBE_RATE_BATCH = 1000',
      'BOINC_GAHP_CONCURRENCY = 16',
      'JOB_ROUTER_ROUTE_NAMES = BOINC',
      'JOB_ROUTER_ROUTE_BOINC @=jrt',
      '  REQUIREMENTS WantBOINC =?= true',
      '  GridResource = "batch boinc"',
      '  COPY BoincApp BatchQueue',
      '  MaxJobs = 5000',
      '  MaxIdleJobs = 1000',
      '@jrt',
      ...(variant?.config ?? []),
    ],
    stateDir,
    boincJob: batchJobOf,
  };
}

/** "batch boinc <sandbox id> boinc/<batch>_<n>": the BOINC job a batch boinc GridJobId names. */
function batchJobOf(gridJobId: unknown): { batch: string; job: string } | undefined {
  const last = typeof gridJobId === 'string' ? gridJobId.split(' ').pop() ?? '' : '';
  const job = last.slice(last.lastIndexOf('/') + 1);
  const cut = job.lastIndexOf('_');
  return last.includes('/') && cut > 0 ? { batch: job.slice(0, cut), job } : undefined;
}

/** Every file of a folder with its mode and content, to compare before and after. */
function folderState(dir: string): string {
  return fs.readdirSync(dir).sort().map((n) => {
    const st = fs.lstatSync(path.join(dir, n));
    return `${n} ${st.mode.toString(8)} ${st.isFile() ? fs.readFileSync(path.join(dir, n), 'utf8') : ''}`;
  }).join('\n');
}

/** `boinc-gahp <args>` run as an administrator would, with the pool's HTCondor tools on PATH. */
async function boincGahp(ctx: RouteContext, pool: PersonalPool, args: string[]): Promise<string> {
  const r = await run(process.execPath, [path.join(ctx.repoDir, 'bin/boinc-gahp'), ...args], { env: pool.toolEnv(), timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`boinc-gahp ${args.join(' ')}: exit ${r.code}: ${(r.stdout + r.stderr).trim()}`);
  return r.stdout;
}

/**
 * `batch boinc`: blahpd (BLAHPD_LOCATION left at its default, $(RELEASE_DIR)) runs the
 * scripts from the install's libexec/blahp, which holds blahp's stock scripts
 * (blah_load_config.sh among them); ours are put there by `boinc-gahp blahp install` with
 * no directory, and taken away again by `blahp uninstall`. blah.config is the check's own.
 */
export function batchRoute(ctx: RouteContext, prefix: string): Route {
  const { url, authenticatorFile } = ctx.project.settings;
  const folder = path.join(prefix, 'libexec/blahp');
  const stateDir = path.join(ctx.workDir, 'blahp-state');
  const configFile = path.join(ctx.workDir, 'blah.config');
  fs.writeFileSync(
    configFile,
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
  let before: string | undefined;
  return {
    name: 'batch boinc (blahpd)',
    submitLines: ['grid_resource = batch boinc', `batch_queue = ${ctx.project.settings.app}`],
    config: [
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
    env: { BLAHPD_CONFIG_LOCATION: configFile },
    async install(pool) {
      before = folderState(folder);
      const said = await boincGahp(ctx, pool, ['blahp', 'install']);
      const first = said.split('\n')[0] ?? '';
      if (!first.startsWith(`blahpd runs batch scripts from ${folder} `)) throw new Error(`not installed into ${folder}: ${said.trim()}`);
      // The README's check of the set-up: doctor's line for the folder blahpd uses.
      const doctor = await run(process.execPath, [path.join(ctx.repoDir, 'bin/boinc-gahp'), '--state-dir', stateDir, 'doctor'], { env: pool.toolEnv(), timeoutMs: 180_000 });
      const line = doctor.stdout.split('\n').find((l) => l.slice(6).startsWith('blahp scripts in '));
      if (!line?.startsWith(`ok    blahp scripts in ${folder} `)) throw new Error(`doctor: ${line ?? doctor.stdout.trim()}`);
      return first;
    },
    async uninstall(pool) {
      const said = await boincGahp(ctx, pool, ['blahp', 'uninstall']);
      const removed = said.split('\n').filter((l) => l.startsWith('removed ')).length;
      if (before !== undefined && folderState(folder) !== before) throw new Error(`${folder} differs from before the install: ${said.trim()}`);
      return `${removed} scripts removed, ${folder} as before`;
    },
    stateDir,
    boincJob: batchJobOf,
  };
}
