/**
 * Settings every front end (the CLI, the BLAHP scripts) reads the same way: the default
 * state directory, the project URL and the authenticator file, and the words of their
 * problems (doctor's). Below both front ends, so neither imports the other. Kept free of heavy imports: the BLAHP scripts' status calls start a process
 * per job and load only this much before answering from the shared snapshot.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { errnoText } from './dirs.js';
import { shellWord } from './util.js';

/** A usage or configuration problem: exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A finding in the words of `boinc-gahp doctor`: what was checked, what was found, the fix. */
export function describeProblem(what: string, found: string, fix: string): string {
  return `${what}: ${found}  -> fix: ${fix}`;
}

/**
 * A configuration problem (exit code 2), worded as `boinc-gahp doctor` reports it: every
 * front end and doctor take the wording of a bad project URL or authenticator file from
 * the functions below, so a message reads the same wherever it appears.
 */
export class ConfigError extends UsageError {
  override name = 'ConfigError';
  constructor(readonly what: string, readonly found: string, readonly fix: string) {
    super(describeProblem(what, found, fix));
  }
}

/** Where the command line takes the project (for the fixes). */
export const CLI_SETTING = {
  url: '--project-url (or BOINC_GAHP_PROJECT_URL)',
  authenticatorFile: '--authenticator-file (or BOINC_GAHP_AUTHENTICATOR_FILE)',
} as const;

/** A yes/no setting as people write it (yes/no, true/false, on/off, 1/0), or undefined when it is none of them. */
export function parseYesNo(text: string): boolean | undefined {
  const t = text.trim().toLowerCase();
  if (['yes', 'true', 'on', '1'].includes(t)) return true;
  if (['no', 'false', 'off', '0'].includes(t)) return false;
  return undefined;
}

/** The state directory: --state-dir, else $XDG_STATE_HOME/boinc-gahp, else ~/.local/state/boinc-gahp. */
export function defaultStateDir(): string {
  const base = process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'boinc-gahp');
}

/** Why the GAHP cannot use this project URL, or undefined when it can. */
export function projectUrlProblem(raw: string): string | undefined {
  const shown = JSON.stringify(raw.slice(0, 200));
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${shown} is not an http(s) URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${shown} is not an http(s) URL`;
  // Script names are appended to the URL: a query or fragment would swallow them.
  if (url.search !== '' || url.hash !== '' || /[?#]/.test(raw)) return `${shown} has a query or fragment (the RPCs' script names are appended to it)`;
  return undefined;
}

/** The project URL given through `setting`, checked; a ConfigError when there is none or it cannot be used. */
export function checkProjectUrl(raw: string | undefined, setting: string): string {
  const problem = raw ? projectUrlProblem(raw) : 'none given';
  if (problem) throw new ConfigError('project URL', problem, `give ${setting} the project's master URL, e.g. https://boinc.example.org/project/`);
  return raw!;
}

/** No authenticator file given through `setting`. */
export function noAuthenticatorFile(setting: string): ConfigError {
  return new ConfigError('authenticator file', 'none given', `give ${setting} the file holding the account's authenticator`);
}

export interface AuthenticatorFile {
  /** The first non-empty line, trimmed. Never printed. */
  authenticator: string;
  /** Non-empty lines in the file. */
  lines: number;
  mode: number;
  /** The file's group (gid). */
  gid: number;
}

/** Reads an authenticator file; a ConfigError when it cannot be read or is empty. */
export function readAuthenticatorFile(file: string): AuthenticatorFile {
  const abs = path.resolve(file);
  const what = `authenticator file ${abs}`;
  let text: string;
  let mode: number;
  let gid: number;
  try {
    const st = fs.statSync(abs);
    if (st.isDirectory()) throw new ConfigError(what, 'is a directory', `name the file that holds the account's authenticator (in ${abs}?), not its directory`);
    mode = st.mode;
    gid = st.gid;
    text = fs.readFileSync(abs, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EACCES' || e.code === 'EPERM') {
      const why = accessProblem(abs);
      throw new ConfigError(what, `cannot be read by ${currentUser()}: ${errnoText(e)}; ${why.found}`, why.fix);
    }
    const fix = e.code === 'ENOENT'
      ? `write the account's authenticator (the project web site's account keys page) into ${abs} as one line, then chmod 600 ${abs}`
      : e.code === 'ENOTDIR'
        ? `a part of the path ${abs} is a file, not a directory: name the file that holds the account's authenticator`
        : `make ${abs} a file holding the account's authenticator that ${currentUser()} can read`;
    throw new ConfigError(what, `cannot be read: ${errnoText(e)}`, fix);
  }
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l.length > 0);
  if (lines.length === 0) throw new ConfigError(what, 'is empty', `write the account's authenticator into ${abs} as one line`);
  // (The line itself is never shown: it may be the authenticator with a typo.)
  if (/\s/.test(lines[0]!) || lines[0]!.startsWith('#')) {
    throw new ConfigError(what, 'its first line is not an authenticator (it holds a blank or begins with "#")', `put the account's authenticator alone on the first line of ${abs}`);
  }
  return { authenticator: lines[0]!, lines: lines.length, mode, gid };
}

/** The authenticator in a file (never printed); a ConfigError when it cannot be had. */
export function readAuthenticator(file: string): string {
  return readAuthenticatorFile(file).authenticator;
}

/** The user this process runs as, by name (its uid when it has no name). */
export function currentUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** The name of a uid or gid from /etc/passwd or /etc/group (the number when it has none there). */
function idName(table: '/etc/passwd' | '/etc/group', id: number): string {
  try {
    for (const line of fs.readFileSync(table, 'utf8').split('\n')) {
      const f = line.split(':');
      if (f.length > 2 && Number(f[2]) === id && f[2] !== '') return f[0]!;
    }
  } catch {
    // no such table here
  }
  return String(id);
}

/**
 * What keeps this user from reading `abs` (permission denied) and a fix that gives it
 * access without taking it from anyone else: the file is shared by every job owner
 * (README, "The BOINC_GAHP route", step 2: mode 0640, the job owners' group, a 0750
 * directory of that group), so a fix never makes it private to one user.
 */
function accessProblem(abs: string): { found: string; fix: string } {
  const user = currentUser();
  const setUp = 'as the README sets it up ("The BOINC_GAHP route", step 2)';
  let st: fs.Stats;
  try {
    st = fs.statSync(abs);
  } catch {
    const dir = path.dirname(abs);
    return {
      found: `a directory on its path does not let ${user} through`,
      fix: `let the job owners through without opening it to others, ${setUp}: the directory mode 0750 and the file mode 0640, both of the job owners' group, with ${user} in that group (ls -ld ${shellWord(dir)} ${shellWord(abs)} shows them now)`,
    };
  }
  const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
  const group = idName('/etc/group', st.gid);
  const uid = process.getuid?.();
  const inGroup = process.getgid?.() === st.gid || (process.getgroups?.() ?? []).includes(st.gid);
  const found = `it is mode ${mode}, owner ${idName('/etc/passwd', st.uid)}, group ${group}, and ${user} is ${inGroup ? '' : 'not '}in group ${group}`;
  if (st.uid === uid || (inGroup && (st.mode & 0o040) === 0)) {
    return { found, fix: `let its owner and group read it, nobody else, ${setUp}: chmod 0640 ${shellWord(abs)}` };
  }
  if (inGroup) {
    return { found, fix: `its mode lets group ${group} read it: look for what else denies it (an ACL: getfacl ${shellWord(abs)}; SELinux: ls -Z ${shellWord(abs)})` };
  }
  return {
    found,
    fix: `give it to the job owners' group with read for that group only, ${setUp}: e.g. chgrp boincusers ${shellWord(abs)}; chmod 0640 ${shellWord(abs)}, with ${user} and every other job owner in that group (a group a user joined since the GAHP started counts once HTCondor starts it again)`,
  };
}

/**
 * Who besides its owner can read an authenticator file, when that is more than the
 * README's set-up gives (step 2 of "The BOINC_GAHP route": mode 0640, the group of the job
 * owners, this user among them); undefined when it is no more. Read by other users: any of
 * them could submit as the account. Read by a group this user is not in: not the job
 * owners' group. The fix takes read from those only, never from the job owners.
 */
export function authenticatorExposure(file: string, mode: number, gid: number): { found: string; fix: string } | undefined {
  const abs = path.resolve(file);
  if ((mode & 0o004) !== 0) {
    return {
      found: 'readable by other users, who could submit as this account',
      fix: (mode & 0o040) !== 0 ? `chmod o-rwx ${shellWord(abs)} (its group keeps read, as the README sets it up for the job owners)` : `chmod o-rwx ${shellWord(abs)}`,
    };
  }
  if ((mode & 0o040) === 0) return undefined;
  const inGroup = process.getgid?.() === gid || (process.getgroups?.() ?? []).includes(gid);
  if (inGroup) return undefined;
  const group = idName('/etc/group', gid);
  return {
    found: `readable by group ${group}, which ${currentUser()} is not in: not the job owners' group the README sets it up with, and its members could submit as this account`,
    fix: `give it the job owners' group (e.g. chgrp boincusers ${shellWord(abs)}, with every job owner in it), or take the group's read away (chmod g-r ${shellWord(abs)}) if only its owner uses it`,
  };
}

/** The file's group by name, for the findings. */
export function groupName(gid: number): string {
  return idName('/etc/group', gid);
}
