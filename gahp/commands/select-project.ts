/**
 * BOINC_SELECT_PROJECT <project_url> <authenticator>: synchronous; stores the project.
 *
 * Any two arguments are answered `S`. The gridmanager sends this line, from a job's
 * grid_resource and authenticator file, right before a command for that resource, and
 * EXCEPTs (taking every job of every resource with it) when the reply is not `S`
 * (docs/gahp-protocol.md). So a URL or authenticator we cannot use selects an unusable
 * project: each command issued for it fails with the reason, and the gridmanager holds
 * that resource's jobs with the message. Only a wrong number of arguments gets `E`.
 */
import { expectArgCount, type SyncCommand } from '../protocol/commands.js';
import type { GahpServices } from '../services.js';
import { projectUrlProblem } from '../settings.js';

export function selectProjectCommand(services: GahpServices): SyncCommand {
  return {
    kind: 'sync',
    name: 'BOINC_SELECT_PROJECT',
    usage: '<project_url> <authenticator>',
    summary: 'Choose the BOINC project and account that later commands use.',
    secretArgs: [1],
    run(args, ctx) {
      expectArgCount(args, 2);
      const [rawUrl, authenticator] = args as [string, string];
      // A secret whatever it holds: redacted from logs and messages from now on.
      if (authenticator.length > 0) ctx.log.addSecret(authenticator);
      const urlProblem = projectUrlProblem(rawUrl);
      const problem =
        (urlProblem && `project URL ${urlProblem}`) ??
        (/^[\x21-\x7e]+$/.test(authenticator) ? undefined : 'the authenticator must be printable ASCII without spaces (check the authenticator file)');
      if (problem) {
        ctx.log.warn(`BOINC_SELECT_PROJECT: ${problem}; commands for this project will fail`);
        services.session.selectUnusable(problem);
        return;
      }
      // RPC URLs are formed by appending script names, so the base must end with '/'.
      const base = rawUrl.endsWith('/') ? rawUrl : rawUrl + '/';
      services.session.select({ url: base, authenticator });
    },
  };
}
