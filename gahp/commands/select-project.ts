/** BOINC_SELECT_PROJECT <project_url> <authenticator>: synchronous; stores the project. */
import { ArgumentError, expectArgCount, type SyncCommand } from '../protocol/commands.js';
import type { GahpServices } from '../services.js';

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
      let url: URL;
      try {
        url = new URL(rawUrl);
      } catch {
        throw new ArgumentError('project URL is not a valid URL');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ArgumentError('project URL must be http or https');
      // Script names are appended to the URL: a query or fragment would swallow them.
      if (url.search !== '' || url.hash !== '' || /[?#]/.test(rawUrl)) throw new ArgumentError('project URL must not have a query or fragment');
      if (!/^[\x21-\x7e]+$/.test(authenticator)) throw new ArgumentError('authenticator must be printable ASCII without spaces');
      ctx.log.addSecret(authenticator);
      // RPC URLs are formed by appending script names, so the base must end with '/'.
      const base = rawUrl.endsWith('/') ? rawUrl : rawUrl + '/';
      services.session.select({ url: base, authenticator });
    },
  };
}
