/**
 * The boinc-gahp command line. With no subcommand it is the GAHP on stdio, what HTCondor's
 * gridmanager runs (BOINC_GAHP points at bin/boinc-gahp); on a terminal it becomes an
 * interactive prompt over the same protocol. Subcommands (ping, status, fetch, abort,
 * retire, lease, submit) drive an in-process GAHP through the same protocol.
 *
 * This module is only the GAHP's path: a plain command line (gahp-args.ts) starts the GAHP
 * without loading commander, the subcommands or their client (program.ts, loaded for any
 * other command line), which keeps the gridmanager's GAHP small (docs/architecture.md,
 * "Round trips and memory").
 *
 * Exit codes: 0 success; 1 failure reported by the GAHP/BOINC; 2 usage or configuration error;
 * 70 an internal error (an uncaught exception or unhandled rejection: run-gahp.ts); 130
 * `submit` interrupted (--help and README list them).
 */
import { runGahp } from './run-gahp.js';
import { GAHP_ENV_NAMES, plainGahpOptions } from './gahp-args.js';
import { readCondorSettings, withCondorSettings } from '../condor-config.js';
import { EXIT_FAILED, EXIT_USAGE, runOptions, type GahpCliOptions } from './options.js';
import { checkProjectUrl, CLI_SETTING, readAuthenticator, UsageError } from '../settings.js';

/** The GAHP on stdio (or the interactive prompt): what runs with no subcommand. */
async function gahpOrPrompt(given: GahpCliOptions): Promise<number> {
  let opts = withSiteSettings(given);
  const fromCondor = opts !== given;
  if (fromCondor) {
    // Settings of the site that cannot be used must not keep the gridmanager's GAHP from
    // starting: it starts without a project, and each batch boinc command says why.
    try {
      if (opts.projectUrl) checkProjectUrl(opts.projectUrl, "BOINC_GAHP_PROJECT_URL in HTCondor's configuration");
    } catch (err) {
      process.stderr.write(`boinc-gahp: warning: ${(err as Error).message}; starting without a project\n`);
      opts = given;
    }
  }
  if (opts.projectUrl) checkProjectUrl(opts.projectUrl, CLI_SETTING.url);
  if (opts.authenticatorFile && !opts.projectUrl) throw new UsageError('--authenticator-file needs --project-url too');
  const prompt = opts.interactive || (!opts.protocol && process.stdin.isTTY);
  if (prompt) {
    // A person at the prompt is told at once.
    const authenticator = opts.authenticatorFile ? readAuthenticator(opts.authenticatorFile) : undefined;
    // The prompt's modules (readline) load only when a person uses it: the gridmanager's
    // GAHP stays small (docs/architecture.md).
    const { runInteractive } = await import('./interactive.js');
    return runInteractive({ ...runOptions(opts), projectUrl: opts.projectUrl, authenticator: opts.projectUrl ? authenticator : undefined });
  }
  // A GAHP on a pipe never exits for its authenticator file (what HTCondor would show is
  // only that the GAHP failed): it starts, batch boinc's commands say what is wrong with the
  // file, and the file is read again until it can be used (gahp/site-project.ts).
  const siteProject = opts.projectUrl && opts.authenticatorFile
    ? { url: opts.projectUrl, authenticatorFile: opts.authenticatorFile, setting: fromCondor && !given.authenticatorFile ? "BOINC_GAHP_AUTHENTICATOR_FILE in HTCondor's configuration" : CLI_SETTING.authenticatorFile }
    : undefined;
  return runGahp({ ...runOptions(opts), ...(siteProject ? { siteProject } : {}) });
}

export async function main(argv: string[]): Promise<number> {
  try {
    // What HTCondor runs needs no commander (gahp-args.ts). Started by the gridmanager (no
    // arguments, stdin a pipe, no project in the environment), the GAHP takes the site's
    // settings from HTCondor's configuration (condor-config.ts).
    const plain = plainGahpOptions(argv.slice(2), process.env, Boolean(process.stdin.isTTY));
    if (plain) return await gahpOrPrompt(plain);
    const { runCommandLine } = await import('./program.js');
    return await runCommandLine(argv, gahpOrPrompt, failure);
  } catch (err) {
    return failure(err);
  }
}

/**
 * A GAHP on a pipe given no project (what the gridmanager starts for batch boinc, whatever
 * its environment holds): HTCondor's BOINC_GAHP_* settings fill in what the command line
 * and the environment leave unset (condor-config.ts).
 */
function withSiteSettings(opts: GahpCliOptions): GahpCliOptions {
  if (opts.projectUrl || opts.interactive || process.stdin.isTTY) return opts;
  const settings = readCondorSettings(process.env);
  if (settings.values.size === 0) return opts;
  const fromCondor = plainGahpOptions([], withCondorSettings({}, settings, GAHP_ENV_NAMES), false) ?? {};
  const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
  return { ...fromCondor, ...given };
}

/** Reports a failure on stderr; returns the exit code. */
function failure(err: unknown): number {
  if (err instanceof UsageError) {
    process.stderr.write(`boinc-gahp: ${err.message}\n`);
    return EXIT_USAGE;
  }
  process.stderr.write(`boinc-gahp: ${(err as Error)?.message ?? String(err)}\n`);
  return EXIT_FAILED;
}
