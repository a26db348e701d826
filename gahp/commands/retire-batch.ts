/**
 * BOINC_RETIRE_BATCH <reqid> <batch_name>: retire a batch (the server may then delete its
 * files and records). The ledger marks the batch retired; the batch's zip of collected
 * outputs, if one is kept, goes (gahp/output/collected.ts: the server removes its batch
 * directory at retirement, so no later fetch can need it).
 */
import { ArgumentError, expectArgCount, type AsyncCommand } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';

export interface RetireBatchRequest {
  batchName: string;
}

export function retireBatchCommand(services: GahpServices): AsyncCommand<BoundRequest<RetireBatchRequest>> {
  return {
    kind: 'async',
    name: 'BOINC_RETIRE_BATCH',
    usage: '<reqid> <batch_name>',
    summary: 'Retire a batch whose jobs are all finished and fetched.',
    parse: parseBound(services, (args): RetireBatchRequest => {
      expectArgCount(args, 1);
      if (args[0]!.length === 0) throw new ArgumentError('empty batch name');
      return { batchName: args[0]! };
    }),
    async run(bound, ctx) {
      const req = bound.request;
      const { project, rpc } = projectOf(bound);
      await rpc.retireBatch({ batchName: req.batchName, signal: ctx.signal });
      if (services.ledger.get(project.url, req.batchName)) {
        try {
          await services.ledger.upsert(project.url, req.batchName, { state: 'retired' });
        } catch (err) {
          ctx.log.error(`ledger: could not record the retirement of ${req.batchName}: ${(err as Error).message}`);
        }
      }
      const { collectedStores } = await import('../output/collected.js');
      await collectedStores(services.config.stateDir).zips.forget(project.url, req.batchName).catch((err: unknown) => {
        ctx.log.warn(`could not remove the kept zip of batch ${req.batchName}: ${(err as Error).message}`);
      });
      return ['NULL'];
    },
  };
}
