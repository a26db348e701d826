/**
 * `boinc-gahp doctor`'s findings: one check per line, a mark, what was checked, what was
 * found and, for a warn or FAIL, the fix in one sentence. Lines are printed as the checks
 * finish (a slow project shows where it is slow); --json prints the same checks as objects
 * at the end. Nothing put here may hold the authenticator or a proxy password: the checks
 * name files and settings, never their secret contents.
 */

import { describeProblem } from '../../settings.js';

export type Mark = 'ok' | 'warn' | 'FAIL';

/** The check families, in the order they run. */
export type Family = 'host' | 'project' | 'apps' | 'uploads' | 'htcondor' | 'blahp';

export interface Check {
  family: Family;
  mark: Mark;
  /** What was checked, e.g. `authenticator file /etc/boinc/auth`. */
  what: string;
  /** What was found. */
  found: string;
  /** For warn and FAIL: the fix in one sentence. */
  fix?: string;
}

export class Report {
  /**
   * `print` gets each line as its check is recorded (none with --json). `prefix` labels the
   * checks of a second project (blah.config's), e.g. `blah.config: `.
   */
  constructor(
    private readonly print?: (line: string) => void,
    readonly prefix = '',
    readonly checks: Check[] = [],
  ) {}

  /** The same report (same lines, same list), with `prefix` before each `what`. */
  labelled(prefix: string): Report {
    return new Report(this.print, prefix, this.checks);
  }

  ok(family: Family, what: string, found: string): void {
    this.add({ family, mark: 'ok', what, found });
  }

  warn(family: Family, what: string, found: string, fix: string): void {
    this.add({ family, mark: 'warn', what, found, fix });
  }

  fail(family: Family, what: string, found: string, fix: string): void {
    this.add({ family, mark: 'FAIL', what, found, fix });
  }

  private add(check: Check): void {
    // One line each: a multi-line error text (OpenSSL's, a server's) is joined.
    const oneLine = (t: string) => t.replace(/\s*[\r\n]+\s*/g, ' ').trim();
    const c: Check = { ...check, what: oneLine(this.prefix + check.what), found: oneLine(check.found) };
    if (check.fix) c.fix = oneLine(check.fix);
    this.checks.push(c);
    this.print?.(formatCheck(c));
  }

  get failed(): boolean {
    return this.checks.some((c) => c.mark === 'FAIL');
  }

  summary(): string {
    const count = (m: Mark) => this.checks.filter((c) => c.mark === m).length;
    return `${this.checks.length} checks: ${count('ok')} ok, ${count('warn')} warn, ${count('FAIL')} FAIL`;
  }
}

/** `ok    what: found`, and for warn and FAIL `  -> fix: ...` on the same line. */
export function formatCheck(c: Check): string {
  return `${c.mark.padEnd(4)}  ${c.fix ? describeProblem(c.what, c.found, c.fix) : `${c.what}: ${c.found}`}`;
}

/** A message for a finding: errors as their text, never a stack. */
export function reason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.code && typeof e.code === 'string' && !String(e.message).includes(e.code)) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(err);
}

/** A URL fit to print: a password in it (Basic auth for the project) replaced by `***`. */
export function printableUrl(u: URL | string): string {
  let url: URL;
  try {
    url = new URL(typeof u === 'string' ? u : u.href);
  } catch {
    return '(not a URL)';
  }
  if (url.password) url.password = '***';
  return url.href;
}
