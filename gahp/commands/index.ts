/** The BOINC_* commands, one module each. */
import type { Command } from '../protocol/commands.js';
import type { GahpServices } from '../services.js';
import { selectProjectCommand } from './select-project.js';
import { pingCommand } from './ping.js';
import { queryBatchesCommand } from './query-batches.js';
import { fetchOutputCommand } from './fetch-output.js';
import { abortJobsCommand } from './abort-jobs.js';
import { retireBatchCommand } from './retire-batch.js';
import { setLeaseCommand } from './set-lease.js';
import { submitCommand } from './submit.js';

export function boincCommands(services: GahpServices): Command[] {
  return [
    selectProjectCommand(services),
    pingCommand(services),
    queryBatchesCommand(services),
    fetchOutputCommand(services),
    abortJobsCommand(services),
    retireBatchCommand(services),
    setLeaseCommand(services),
    submitCommand(services),
  ];
}
