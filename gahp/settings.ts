/**
 * Settings every front end (the CLI, the BLAHP scripts) reads the same way: the default
 * state directory and the authenticator file. Below both front ends, so neither imports
 * the other. Kept free of heavy imports: the BLAHP scripts' status calls start a process
 * per job and load only this much before answering from the shared snapshot.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A usage or configuration problem: exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The state directory: --state-dir, else $XDG_STATE_HOME/boinc-gahp, else ~/.local/state/boinc-gahp. */
export function defaultStateDir(): string {
  const base = process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'boinc-gahp');
}

/** Reads an authenticator file: the first non-empty line, trimmed. Never prints it. */
export function readAuthenticator(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the authenticator file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const auth = text.split(/\r?\n/).map((l) => l.trim()).find((l) => l.length > 0);
  if (!auth) throw new UsageError(`the authenticator file ${file} is empty`);
  return auth;
}
