/** BOINC_ABORT_JOBS <reqid> <job_name>...: abort jobs on the server (abort_jobs). */
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
      const { rpc } = projectOf(bound);
      await rpc.abortJobs(bound.request.jobNames, { signal: ctx.signal });
      return ['NULL'];
    },
  };
}
