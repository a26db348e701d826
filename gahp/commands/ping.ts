/** BOINC_PING <reqid>: is the selected project answering, and does it accept our account? */
import { expectArgCount, type AsyncCommand } from '../protocol/commands.js';
import type { GahpServices } from '../services.js';

export function pingCommand(services: GahpServices): AsyncCommand<Record<string, never>> {
  return {
    kind: 'async',
    name: 'BOINC_PING',
    usage: '<reqid>',
    summary: 'Check that the selected BOINC project answers.',
    parse(args) {
      expectArgCount(args, 0);
      return {};
    },
    async run() {
      const { rpc } = services.session.rpc();
      await rpc.ping();
      return ['NULL'];
    },
  };
}
