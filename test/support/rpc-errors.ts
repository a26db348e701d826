/**
 * The BoincRpcError a call or a reply check fails with, for tests that look at its kind,
 * flags, code and message. Each fails the test when nothing is thrown, or something else.
 */
import { BoincRpcError } from '../../boinc-rpc/errors.js';

function asRpcError(e: unknown): BoincRpcError {
  expect(e).toBeInstanceOf(BoincRpcError);
  return e as BoincRpcError;
}

/** What the promise (an RPC) rejects with. */
export async function rejection(p: Promise<unknown>): Promise<BoincRpcError> {
  try {
    await p;
  } catch (e) {
    return asRpcError(e);
  }
  throw new Error('expected the call to fail');
}

/** What f (a synchronous reply check or parser) throws. */
export function rejectOf(f: () => unknown): BoincRpcError {
  try {
    f();
  } catch (e) {
    return asRpcError(e);
  }
  throw new Error('expected a BoincRpcError');
}
