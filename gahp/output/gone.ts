/**
 * An output the project deleted or moved before the GAHP fetched it (get_output.php's
 * `ERROR: no such file`, and not kept by a batch-collect assimilator either): it is gone
 * for good, so no front end tries again or tells anyone that a repeat fetches it
 * (docs/boinc-server.md, "The project's daemons"; README, "What the project keeps").
 */
import { BoincRpcError } from '../../boinc-rpc/errors.js';

/** The words every message of a gone output holds (the CLI sees the error only as text, through the protocol). */
export const GONE_WORDS = 'is gone from the BOINC server';

/** What the project's administrator (or the GAHP's user) can set so that outputs wait until they are fetched. */
export const KEEP_OUTPUTS_HINT =
  "outputs wait on the server until fetched with this GAHP's --keep-files yes (the default: each job's files are marked <no_delete/>), " +
  "or the project's file_deleter run with --preserve_result_files, a <delete_delay_hours> in its config.xml longer than the GAHP can be away, or its batch-collect assimilator";

/** The message of output `open` of `jobName` gone; `evidence`: what the pages answered. */
export function outputGoneMessage(open: string, jobName: string, evidence: string): string {
  return (
    `output ${open} of job ${jobName} ${GONE_WORDS}: the project deleted or moved it before it was fetched (${evidence}). ` +
    `It cannot be fetched any more: the job has to run again. So that this does not happen again: ${KEEP_OUTPUTS_HINT}`
  );
}

/** Whether a fetch failed because an output is gone (an error of this process, or the text of one from a GAHP). */
export function isOutputGone(err: unknown): boolean {
  const text = typeof err === 'string' ? err : err instanceof Error ? err.message : '';
  return (err instanceof BoincRpcError ? err.code === 'no-such-file' : true) && text.includes(GONE_WORDS);
}
