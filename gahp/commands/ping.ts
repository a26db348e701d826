/** BOINC_PING <reqid>: is the selected project answering, and does it accept our account? */
import { expectArgCount, type AsyncCommand } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';
import { untilAborted } from '../util.js';

export function pingCommand(services: GahpServices): AsyncCommand<BoundRequest<Record<string, never>>> {
  return {
    kind: 'async',
    name: 'BOINC_PING',
    usage: '<reqid>',
    summary: 'Check that the selected BOINC project answers.',
    parse: parseBound(services, (args): Record<string, never> => {
      expectArgCount(args, 0);
      return {};
    }),
    async run(bound, ctx) {
      const { rpc } = projectOf(bound);
      // A ping holds nothing to clean up: on shutdown stop waiting for it at once.
      await untilAborted(rpc.ping({ signal: ctx.signal }), ctx.signal);
      return ['NULL'];
    },
  };
}
