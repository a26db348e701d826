/**
 * BOINC_SUBMIT's failures name the step that failed: `<step>: <reason>`. The steps live
 * in several modules (gahp/commands/submit.ts and the batch and staging helpers here), so
 * the error class and the wrapper are shared.
 */
import { BoincRpcError } from '../../boinc-rpc/errors.js';
import { errorMessage } from '../util.js';

/** A failed step: the message says which step and why. */
export class SubmitError extends Error {
  override name = 'SubmitError';
}

/** Runs fn; a failure becomes `<step>: <reason>` (a SubmitError passes unchanged). */
export async function step<T>(what: string, fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw stepError(what, err);
  }
}

/**
 * The error step() would throw for this failure. A step named after the RPC it makes
 * (`get_templates`, `create_batch`, `submit_batch`) whose RPC failed takes the RPC
 * error's message as it is: that already begins `<rpc> failed: ` (boinc-rpc/errors.ts),
 * and the name once is enough.
 */
export function stepError(what: string, err: unknown): SubmitError {
  if (err instanceof SubmitError) return err;
  if (err instanceof BoincRpcError && err.rpc === what) return new SubmitError(err.message);
  return new SubmitError(`${what}: ${errorMessage(err)}`);
}
