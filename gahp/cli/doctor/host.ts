/**
 * Check family 1, the host: node's version, the state directory, the authenticator file
 * (and, in network.ts, the proxy and trust sources). Nothing is left behind (the state
 * directory's probe removes what it makes), and the authenticator is read but never printed.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { errnoText, nearestExisting } from '../../dirs.js';
import { fallbackStateDir, probeWrite } from '../../state-dir.js';
import { authenticatorExposure, ConfigError, defaultStateDir, groupName, noAuthenticatorFile, readAuthenticatorFile, type AuthenticatorFile } from '../../settings.js';
import type { DoctorContext, DoctorTarget } from './context.js';
import type { Report } from './report.js';

const MIN_NODE_MAJOR = 20;
/** Below this much free space a submit may fail to write its ledger (ledger and hash cache are small). */
const LOW_FREE_BYTES = 100 * 1024 * 1024;

export function checkNodeVersion(report: Report): void {
  const major = Number(process.versions.node.split('.')[0]);
  const what = 'node version';
  if (major >= MIN_NODE_MAJOR) report.ok('host', what, `${process.version} (${process.execPath})`);
  else report.fail('host', what, `${process.version} (${process.execPath}); boinc-gahp needs ${MIN_NODE_MAJOR} or later`, `install Node.js ${MIN_NODE_MAJOR} or later and run boinc-gahp with it`);
}

function freeSpace(dir: string): string {
  try {
    const s = fs.statfsSync(dir);
    return `${(Number(s.bavail) * Number(s.bsize) / 2 ** 30).toFixed(1)} GiB free`;
  } catch {
    return 'free space unknown';
  }
}

function freeBytes(dir: string): number {
  try {
    const s = fs.statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return Infinity;
  }
}

/**
 * The configured state directory: its problem is reported as it is (a FAIL with the fix)
 * whatever fallback the GAHP may use, since a fallback loses the ledger between runs.
 */
export function checkStateDir(ctx: DoctorContext, report: Report, target: DoctorTarget): void {
  const given = target.stateDir ?? ctx.g.stateDir;
  const dir = path.resolve(given ?? defaultStateDir());
  const source = target.stateDir !== undefined ? (target.stateDirSetting ?? 'boinc_state_dir') : given !== undefined ? '--state-dir / BOINC_GAHP_STATE_DIR' : 'the default ($XDG_STATE_HOME/boinc-gahp)';
  const what = `state directory ${dir}`;
  const setting = target.stateDir !== undefined ? (target.stateDirSetting ?? target.authSetting.replace('boinc_authenticator_file', 'boinc_state_dir')) : '--state-dir (or BOINC_GAHP_STATE_DIR)';
  // The GAHP would still start (gahp/state-dir.ts), but its ledger would not last; submit
  // and the BLAHP scripts stop (docs/storage.md, "Making directories"): say so.
  const fix = `give ${setting} a directory this user can create or write, e.g. ~/.local/state/boinc-gahp (meanwhile the GAHP falls back to ${fallbackStateDir()}, which the temp dir's cleaning empties, and submit and the BLAHP scripts stop with this error)`;
  const near = nearestExisting(dir);
  if ('error' in near) {
    report.fail('host', what, `cannot be used: ${near.at}: ${errnoText(near.error)} (from ${source})`, fix);
    return;
  }
  const { existing, stat } = near;
  if (!stat.isDirectory()) {
    const found = existing === dir ? 'is not a directory' : `cannot be created: ${existing} is a file, not a directory`;
    report.fail('host', what, `${found} (from ${source})`, fix);
    return;
  }
  // Tried, not guessed from modes (root may write where nothing can be made: /proc, /sys,
  // a read-only mount): what the GAHP does first, a file written in the directory or a
  // directory made in the nearest existing one, then removed.
  try {
    if (existing === dir) probeWrite(dir);
    else probeMkdir(existing);
  } catch (err) {
    const found = existing === dir ? `a file cannot be written in it: ${errnoText(err)}` : `cannot be created: a directory cannot be made in ${existing}: ${errnoText(err)}`;
    report.fail('host', what, `${found} (from ${source})`, fix);
    return;
  }
  const state = existing === dir ? 'exists and is writable' : `does not exist yet, will be created in ${existing}`;
  const free = freeBytes(existing);
  if (free < LOW_FREE_BYTES) {
    report.warn('host', what, `${state}; only ${freeSpace(existing)} (from ${source})`, `free space on that file system or give --state-dir a directory on another one`);
  } else {
    report.ok('host', what, `${state}; ${freeSpace(existing)} (from ${source})`);
  }
}

/** Makes and removes a directory of a name of its own in `parent`. */
function probeMkdir(parent: string): void {
  const probe = path.join(parent, `.boinc-gahp-doctor.${process.pid}.${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(probe, { mode: 0o700 });
  fs.rmdirSync(probe);
}

/**
 * The authenticator file: there, readable, one line, not readable by other users.
 * Returns the authenticator when it could be read (kept in memory, never printed).
 */
export function checkAuthenticatorFile(report: Report, target: DoctorTarget): string | undefined {
  const given = target.authenticatorFile;
  let read: AuthenticatorFile;
  try {
    if (!given) throw noAuthenticatorFile(target.authSetting);
    read = readAuthenticatorFile(given);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    report.fail('host', err.what, err.found, err.fix);
    return undefined;
  }
  const file = path.resolve(given);
  const what = `authenticator file ${file}`;
  const { lines, mode, gid } = read;
  const shape = lines === 1 ? 'one line' : `${lines} lines (the first is used)`;
  const perms = (mode & 0o777).toString(8).padStart(4, '0');
  // The README's shared file (0640, the job owners' group) is what it should be; only more is warned of.
  const exposure = authenticatorExposure(file, mode, gid);
  const group = (mode & 0o040) !== 0 ? `, group ${groupName(gid)}` : '';
  if (exposure) {
    report.warn('host', what, `${shape}, mode ${perms}${group}: ${exposure.found}`, exposure.fix);
  } else if (lines > 1) {
    report.warn('host', what, `${shape}, mode ${perms}${group}`, `keep only the authenticator in ${file}, on one line`);
  } else {
    report.ok('host', what, `${shape}, mode ${perms}${group ? `${group} (readable by the job owners' group, as the README sets it up)` : ''}`);
  }
  return read.authenticator;
}
