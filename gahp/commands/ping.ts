/** BOINC_PING <reqid>: is the selected project answering, and does it accept our account? */
import { expectArgCount, type AsyncCommand } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';

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

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error('shutting down'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Error('shutting down'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e: unknown) => { signal.removeEventListener('abort', onAbort); reject(e); },
    );
  });
}
