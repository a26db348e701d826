/**
 * Errors from the BOINC RPC client. The message is always `<rpc> failed: <reason>` with the
 * server's own text unchanged at the end (HTCondor looks for `no batch named <name>` there).
 * Messages never contain the authenticator.
 */

export type RpcErrorKind =
  /** The server answered with an <error> element. */
  | 'server'
  /** A PHP fatal error cut the reply short (e.g. a duplicate-entry database error). */
  | 'fatal'
  /** No usable HTTP answer: connection refused/reset, timeout, 5xx. */
  | 'transport'
  /** An HTTP answer that is not the expected reply (bad XML, `ERROR: ` body, 4xx). */
  | 'protocol'
  /**
   * A local problem (unreadable input file, invalid argument): nothing was sent. Or the
   * caller's AbortSignal fired: then `uncertain` says whether the request may have reached
   * the server (an aborted non-idempotent call may have taken effect).
   */
  | 'local';

export class BoincRpcError extends Error {
  override name = 'BoincRpcError';

  constructor(
    /** The RPC's name, e.g. `query_batch2`, `upload_files`, `get_output`. */
    readonly rpc: string,
    readonly kind: RpcErrorKind,
    /** The server's (or transport's) text, unchanged but for redaction. */
    readonly serverMessage: string,
    readonly options: {
      errorNum?: number;
      httpStatus?: number;
      /**
       * True when the request may have reached the server and taken effect although we
       * saw no success (timeout or dropped connection after sending, a fatal reply):
       * callers of non-idempotent RPCs must find out what happened before repeating.
       */
      uncertain?: boolean;
      /** The call failed because an attempt got no answer within the timeout. */
      timedOut?: boolean;
      /** The caller's AbortSignal stopped the call. */
      aborted?: boolean;
    } = {},
  ) {
    super(`${rpc} failed: ${serverMessage}`);
  }

  get errorNum(): number | undefined {
    return this.options.errorNum;
  }

  get uncertain(): boolean {
    return this.options.uncertain ?? false;
  }

  get timedOut(): boolean {
    return this.options.timedOut ?? false;
  }

  get aborted(): boolean {
    return this.options.aborted ?? false;
  }
}
