/**
 * `npm run htcondor-check`: runs boinc-gahp under a real HTCondor (docs/htcondor-check.md).
 *
 * Given an HTCondor install in HTCONDOR_PREFIX, it starts a personal pool in a temporary
 * directory on 127.0.0.1 for each way this HTCondor reaches BOINC (the `boinc` grid type
 * when condor_submit knows it; `batch boinc` when the install has blahpd), against the
 * bundled test server or the project in HTCONDOR_CHECK_BOINC_URL, runs every check, prints
 * one line per check and `N passed, M failed`, and stops everything it started whatever
 * happens. Without HTCONDOR_PREFIX it says so and exits 0, having checked nothing.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BoincProject } from './boinc-project.js';
import { blahpPing, GRID_CHECKS, unreadableAuthenticatorAtStart, type Check } from './checks.js';
import type { CheckContext } from './jobs.js';
import { PersonalPool } from './pool.js';
import { run } from './processes.js';
import { batchRoute, directBatchRoute, gahpRoute, type Route, type RouteContext } from './routes.js';

const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Seconds per step of the bundled server's jobs (unsent, in progress, done). */
const STEP_SECONDS = 15;
/** The longest a single check may take (its own waits are shorter). */
const CHECK_LIMIT_MS = 30 * 60_000;

let passed = 0;
let failed = 0;

function report(ok: boolean, route: string, title: string, note: string, ms: number): void {
  if (ok) passed++;
  else failed++;
  const secs = `${Math.round(ms / 100) / 10} s`;
  process.stdout.write(`${ok ? 'pass' : 'FAIL'}  ${route}: ${title} (${secs})${note ? `: ${note}` : ''}\n`);
}

/** Runs one check under CHECK_LIMIT_MS and prints its line. */
async function runCheck(route: string, check: Check, ctx: CheckContext): Promise<void> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`gave up after ${CHECK_LIMIT_MS / 60_000} minutes`)), CHECK_LIMIT_MS);
    });
    const note = await Promise.race([check.run(ctx), limit]);
    report(true, route, check.title, note, Date.now() - t0);
  } catch (err) {
    report(false, route, check.title, (err as Error).message, Date.now() - t0);
  } finally {
    clearTimeout(timer);
  }
}

/** What to stop if the check is interrupted: the pools and the test server running now. */
const running = new Set<{ stop(): Promise<unknown> }>();

/** HTCONDOR_CHECK_ONLY: run only the checks whose title holds this text. */
function selected(check: Check): boolean {
  const only = process.env.HTCONDOR_CHECK_ONLY;
  return !only || check.title.includes(only);
}

/** One route: its pool started, its checks (those selected) run, the pool stopped and swept. */
async function runRoute(prefix: string, route: Route, routeDir: string, ctx: Omit<CheckContext, 'pool' | 'route'>, checks: Check[]): Promise<void> {
  if (!route.install && !checks.some(selected)) {
    process.stdout.write(`skip  ${route.name}: none of its checks chosen (HTCONDOR_CHECK_ONLY)\n`);
    return;
  }
  const pool = new PersonalPool(prefix, routeDir, route.config, route.env);
  const t0 = Date.now();
  running.add(pool);
  let installed = false;
  try {
    await pool.writeConfig();
    if (route.install) {
      const t = Date.now();
      installed = true;
      report(true, route.name, 'boinc-gahp blahp install (no directory) into blahpd\'s folder; doctor finds them there', await route.install(pool), Date.now() - t);
    }
    await pool.start();
    report(true, route.name, 'personal pool starts (master, collector, schedd, job router)', '', Date.now() - t0);
    const full: CheckContext = { ...ctx, pool, route };
    for (const check of checks) if (selected(check)) await runCheck(route.name, check, full);
  } catch (err) {
    report(false, route.name, 'personal pool starts', (err as Error).message, Date.now() - t0);
  } finally {
    const t1 = Date.now();
    const left = await pool.stop();
    running.delete(pool);
    const names = left.map((p) => `${p.name} (${p.pid})`).join(', ');
    report(left.length === 0, route.name, 'pool stopped, nothing left running', left.length ? `killed ${names}` : '', Date.now() - t1);
    if (installed && route.uninstall) {
      const t2 = Date.now();
      try {
        report(true, route.name, 'boinc-gahp blahp uninstall leaves blahpd\'s folder as before', await route.uninstall(pool), Date.now() - t2);
      } catch (err) {
        report(false, route.name, 'boinc-gahp blahp uninstall leaves blahpd\'s folder as before', (err as Error).message, Date.now() - t2);
      }
    }
  }
}

/**
 * Issue 44's authenticator case on the BOINC_GAHP route, in a pool of its own: the GAHP must
 * start with the file unreadable, and the gridmanager keeps one GAHP per job owner for as
 * long as it has jobs. The pool's BOINC_GAHP_AUTHENTICATOR_FILE names a copy of the
 * project's file, the user's own, made mode 0000 before the pool starts.
 * GRIDMANAGER_COLLECTOR_UPDATE_INTERVAL = 10 sends the resource's ad (with its unavailable
 * reason) every 10 s instead of every 300 s; it changes nothing of when the resource is
 * pinged. HTCONDOR_CHECK_RESOURCE_PROBE_INTERVAL (seconds) sets
 * GRIDMANAGER_RESOURCE_PROBE_INTERVAL; unset, HTCondor's own (300 s), as a site runs it.
 */
async function runUnreadableAuthenticator(prefix: string, routeCtx: RouteContext, waitMs: number): Promise<void> {
  const file = path.join(routeCtx.workDir, 'unreadable.auth');
  const check = unreadableAuthenticatorAtStart(file);
  if (!selected(check)) return;
  fs.writeFileSync(file, fs.readFileSync(routeCtx.project.settings.authenticatorFile), { mode: 0o600 });
  fs.chmodSync(file, 0o000);
  const probe = process.env.HTCONDOR_CHECK_RESOURCE_PROBE_INTERVAL;
  if (probe !== undefined && !/^\d+$/.test(probe)) throw new Error(`HTCONDOR_CHECK_RESOURCE_PROBE_INTERVAL must be a number of seconds, not ${JSON.stringify(probe)}`);
  const route = directBatchRoute(routeCtx, {
    dir: 'direct-auth-route',
    name: 'authenticator unreadable at start',
    authenticatorFile: file,
    config: ['GRIDMANAGER_COLLECTOR_UPDATE_INTERVAL = 10', ...(probe ? [`GRIDMANAGER_RESOURCE_PROBE_INTERVAL = ${probe}`] : [])],
  });
  const dir = path.join(routeCtx.workDir, 'direct-auth-route');
  await runRoute(prefix, route, dir, { project: routeCtx.project, jobsDir: path.join(dir, 'jobs'), waitMs }, [check]);
}

/** Does this HTCondor's condor_submit know the `boinc` grid type? (10.0 and older do.) */
async function knowsBoincGridType(prefix: string, dir: string): Promise<{ yes: boolean; why: string }> {
  fs.mkdirSync(dir, { recursive: true });
  const pool = new PersonalPool(prefix, dir, []);
  await pool.writeConfig();
  fs.writeFileSync(path.join(dir, 'auth'), 'x\n', { mode: 0o600 });
  fs.writeFileSync(
    path.join(dir, 'probe.sub'),
    'universe = grid\ngrid_resource = boinc http://127.0.0.1:9/\nboinc_authenticator_file = auth\nexecutable = probe\ntransfer_executable = false\nqueue\n',
  );
  const r = await pool.tool('condor_submit', ['-dry-run', 'probe.ads', 'probe.sub'], dir);
  const said = (r.stderr + r.stdout).trim().split('\n').find((l) => /error/i.test(l)) ?? `exit ${r.code}`;
  return { yes: r.code === 0, why: r.code === 0 ? '' : `condor_submit -dry-run: ${said}` };
}

/** blahp's stock scripts are in the install's libexec/blahp, where blahpd looks (blah_load_config.sh among them). */
function hasStockBlahpScripts(prefix: string): boolean {
  return fs.existsSync(path.join(prefix, 'libexec/blahp/blah_load_config.sh'));
}

async function startProject(workDir: string): Promise<BoincProject> {
  const url = process.env.HTCONDOR_CHECK_BOINC_URL;
  if (!url) return BoincProject.startBundled(REPO_DIR, workDir, STEP_SECONDS);
  const auth = process.env.HTCONDOR_CHECK_AUTHENTICATOR_FILE;
  if (!auth) throw new Error('HTCONDOR_CHECK_BOINC_URL is set but HTCONDOR_CHECK_AUTHENTICATOR_FILE is not');
  return BoincProject.external(url, path.resolve(auth), process.env.HTCONDOR_CHECK_APP ?? 'uppercase');
}

async function checkAll(prefix: string, workDir: string): Promise<void> {
  const project = await startProject(workDir);
  running.add(project);
  try {
    const routeCtx: RouteContext = { repoDir: REPO_DIR, workDir, project };
    const waitMs = Number(process.env.HTCONDOR_CHECK_WAIT ?? 300) * 1000;
    process.stdout.write(`BOINC project: ${project.settings.url} (${project.settings.bundled ? 'bundled test server' : 'from the environment'}), app ${project.settings.app}\n`);

    // HTCONDOR_CHECK_ROUTES: a comma-separated choice among boinc, direct, blahpd (default: all this HTCondor has).
    const chosen = (process.env.HTCONDOR_CHECK_ROUTES ?? 'boinc,direct,blahpd').split(',').map((r) => r.trim());
    const probe = await knowsBoincGridType(prefix, path.join(workDir, 'probe'));
    if (probe.yes && chosen.includes('boinc')) {
      const dir = path.join(workDir, 'gahp-route');
      await runRoute(prefix, gahpRoute(routeCtx), dir, { project, jobsDir: path.join(dir, 'jobs'), waitMs }, GRID_CHECKS);
    } else {
      process.stdout.write(probe.yes ? 'skip  boinc: not chosen (HTCONDOR_CHECK_ROUTES)\n' : `skip  boinc: this HTCondor has no \`boinc\` grid type (${probe.why})\n`);
    }

    const hasBlahpd = fs.existsSync(path.join(prefix, 'bin/blahpd'));
    if (!probe.yes && chosen.includes('direct')) {
      // Current HTCondor: batch boinc served by the GAHP itself (BOINC_GAHP defined).
      const dir = path.join(workDir, 'direct-route');
      await runRoute(prefix, directBatchRoute(routeCtx), dir, { project, jobsDir: path.join(dir, 'jobs'), waitMs }, GRID_CHECKS);
      await runUnreadableAuthenticator(prefix, routeCtx, waitMs);
    }
    if (!chosen.includes('blahpd')) {
      process.stdout.write('skip  batch boinc (blahpd): not chosen (HTCONDOR_CHECK_ROUTES)\n');
    } else if (!hasBlahpd) {
      process.stdout.write('skip  batch boinc: this HTCondor has no bin/blahpd\n');
    } else if (!hasStockBlahpScripts(prefix)) {
      report(false, 'batch boinc', 'set-up', `no blah_load_config.sh in ${prefix}/libexec/blahp (copy blahp's stock scripts, src/blahp/src/scripts, there)`, 0);
    } else {
      const dir = path.join(workDir, 'batch-route');
      await runRoute(prefix, batchRoute(routeCtx, prefix), dir, { project, jobsDir: path.join(dir, 'jobs'), waitMs }, [blahpPing, ...GRID_CHECKS]);
    }
  } finally {
    running.delete(project);
    await project.stop();
  }
}

/** The install's `$CondorVersion: ... $` line, for the record. */
async function condorVersion(prefix: string): Promise<string> {
  const lib = path.join(prefix, 'lib');
  const env = { ...process.env, LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH ? `${lib}:${process.env.LD_LIBRARY_PATH}` : lib };
  const r = await run(path.join(prefix, 'bin/condor_config_val'), ['-version'], { env, timeoutMs: 30_000 });
  return r.stdout.split('\n')[0]?.trim() || `condor_config_val -version: exit ${r.code}`;
}

async function main(): Promise<number> {
  const prefix = process.env.HTCONDOR_PREFIX;
  if (!prefix) {
    process.stdout.write('htcondor-check: HTCONDOR_PREFIX is not set, so there is no HTCondor to run: nothing was checked (docs/htcondor-check.md says how to build one)\n');
    return 0;
  }
  if (!fs.existsSync(path.join(prefix, 'sbin/condor_master'))) {
    process.stderr.write(`htcondor-check: ${prefix}/sbin/condor_master not found: HTCONDOR_PREFIX must name an HTCondor install\n`);
    return 2;
  }
  if (process.getuid?.() === 0) {
    process.stderr.write('htcondor-check: run it as an ordinary user (HTCondor refuses jobs submitted by root)\n');
    return 2;
  }
  const started = Date.now();
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-htcondor-check-'));
  process.stdout.write(`HTCondor: ${prefix} (${await condorVersion(prefix)})\nwork directory: ${workDir}\n`);
  const interrupted = async (): Promise<void> => {
    process.stdout.write('interrupted: stopping what the check started\n');
    await Promise.all([...running].map((r) => r.stop()));
    process.exit(130);
  };
  process.once('SIGINT', () => void interrupted());
  process.once('SIGTERM', () => void interrupted());
  try {
    await checkAll(prefix, workDir);
  } catch (err) {
    report(false, 'set-up', 'the check itself', (err as Error).message, 0);
  }
  process.stdout.write(`${passed} passed, ${failed} failed (${Math.round((Date.now() - started) / 1000)} s)\n`);
  if (failed === 0 && !process.env.HTCONDOR_CHECK_KEEP) fs.rmSync(workDir, { recursive: true, force: true });
  else process.stdout.write(`logs and job directories kept in ${workDir}\n`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`htcondor-check: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(70);
  },
);
