/**
 * The BOINC_* commands, one module each.
 *
 * A command whose module brings much that most GAHPs never use is deferred: its request line
 * is parsed by a light parser loaded here (the protocol server parses synchronously when the
 * line is read), and the module itself loads when the first such request runs. Only
 * BOINC_FETCH_OUTPUT is (the output staging, stderr and zip modules): a GAHP's first fetch
 * comes long after start-up and is not waited for by anything. BOINC_SUBMIT is not: its
 * first request is what a user waits for (test/bench, small_submit_overhead_ms), and
 * loading its modules then would add their compile time to it.
 */
import type { AsyncCommand, Command, HandlerContext } from '../protocol/commands.js';
import { parseBound, type BoundRequest, type GahpServices } from '../services.js';
import { selectProjectCommand } from './select-project.js';
import { pingCommand } from './ping.js';
import { queryBatchesCommand } from './query-batches.js';
import { FETCH_OUTPUT_SYNOPSIS, parseFetchOutput, type FetchOutputRequest } from './fetch-output-args.js';
import { abortJobsCommand } from './abort-jobs.js';
import { retireBatchCommand } from './retire-batch.js';
import { setLeaseCommand } from './set-lease.js';
import { submitCommand } from './submit.js';

type Synopsis = Pick<AsyncCommand, 'name' | 'usage' | 'summary' | 'secretArgs'>;

/**
 * A command whose module loads on its first run. `parse` must be the loaded command's own
 * parser (it is used instead of it); a module that fails to load fails that request.
 */
function deferred<Req>(
  synopsis: Synopsis,
  parse: (args: string[]) => Req,
  load: () => Promise<AsyncCommand<Req>>,
): AsyncCommand<Req> {
  let command: Promise<AsyncCommand<Req>> | undefined;
  return {
    kind: 'async',
    ...synopsis,
    parse,
    async run(req: Req, ctx: HandlerContext) {
      command ??= load().catch((err: unknown) => {
        command = undefined; // the next request tries again
        throw err;
      });
      return (await command).run(req, ctx);
    },
  };
}

export function boincCommands(services: GahpServices): Command[] {
  return [
    selectProjectCommand(services),
    pingCommand(services),
    queryBatchesCommand(services),
    deferred<BoundRequest<FetchOutputRequest>>(FETCH_OUTPUT_SYNOPSIS, parseBound(services, parseFetchOutput), async () =>
      (await import('./fetch-output.js')).fetchOutputCommand(services)),
    abortJobsCommand(services),
    retireBatchCommand(services),
    setLeaseCommand(services),
    submitCommand(services),
  ];
}
