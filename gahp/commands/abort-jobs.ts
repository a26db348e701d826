/**
 * BOINC_ABORT_JOBS <reqid> <job_name>...: abort jobs on the server (abort_jobs). A job its
 * BOINC_SUBMIT left out of the batch (the ledger's refused jobs) is not on the server, which
 * would fail the whole call with `no job <name>`: there is nothing to abort, so it succeeds
 * without being sent (docs/gahp-protocol.md, "A job refused alone").
 */
import { ArgumentError, expectArgCount, type AsyncCommand } from '../protocol/commands.js';
import { parseBound, projectOf, type BoundRequest, type GahpServices } from '../services.js';

export interface AbortJobsRequest {
  jobNames: string[];
}

export function abortJobsCommand(services: GahpServices): AsyncCommand<BoundRequest<AbortJobsRequest>> {
  return {
    kind: 'async',
    name: 'BOINC_ABORT_JOBS',
    usage: '<reqid> <job_name>...',
    summary: 'Abort jobs on the BOINC server.',
    parse: parseBound(services, (args): AbortJobsRequest => {
      expectArgCount(args, 1, Infinity);
      if (args.some((a) => a.length === 0)) throw new ArgumentError('empty job name');
      return { jobNames: [...new Set(args)] };
    }),
    async run(bound, ctx) {
      const { project, rpc } = projectOf(bound);
      const onServer = bound.request.jobNames.filter((name) => services.ledger.refusal(project.url, name) === undefined);
      if (onServer.length > 0) await rpc.abortJobs(onServer, { signal: ctx.signal });
      return ['NULL'];
    },
  };
}
