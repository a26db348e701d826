/**
 * BOINC_SET_LEASE <reqid> <batch_name> <unix_time>: set the batch's expire time (its
 * lease) to the given time with set_expire_time; the ledger records it.
 */
import { ArgumentError, expectArgCount, parseNumber, type AsyncCommand } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';

export interface SetLeaseRequest {
  batchName: string;
  expireTime: number;
}

export function setLeaseCommand(services: GahpServices): AsyncCommand<BoundRequest<SetLeaseRequest>> {
  return {
    kind: 'async',
    name: 'BOINC_SET_LEASE',
    usage: '<reqid> <batch_name> <unix_time>',
    summary: "Set a batch's lease: the time after which the server may delete it.",
    parse: parseBound(services, (args): SetLeaseRequest => {
      expectArgCount(args, 2);
      const [batchName, timeText] = args as [string, string];
      if (batchName.length === 0) throw new ArgumentError('empty batch name');
      const expireTime = parseNumber(timeText, 'unix_time');
      if (expireTime < 0) throw new ArgumentError('unix_time must not be negative');
      return { batchName, expireTime };
    }),
    async run(bound, ctx) {
      const req = bound.request;
      const { project, rpc } = projectOf(bound);
      await rpc.setExpireTime(req.batchName, req.expireTime, { signal: ctx.signal });
      if (services.ledger.get(project.url, req.batchName)) {
        try {
          await services.ledger.upsert(project.url, req.batchName, { leaseExpiresAt: req.expireTime });
        } catch (err) {
          ctx.log.error(`ledger: could not record the lease of ${req.batchName}: ${(err as Error).message}`);
        }
      }
      return ['NULL'];
    },
  };
}
