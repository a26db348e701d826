/**
 * The failures of the HTTP layer (http.ts, routes.ts, multipart.ts), before transport.ts
 * turns them into BoincRpcErrors.
 */

/** A timeout; `event` is the phase it struck in (see above). */
export class HttpTimeout extends Error {
  override name = 'HttpTimeout';
  readonly code = 'ETIMEDOUT';
  constructor(readonly event: 'connect' | 'request' | 'response' | 'socket', ms: number) {
    super(`timeout after ${ms} ms (${event})`);
  }
}

/**
 * A failure of the connection or the exchange (not of a local file): `code` as node gives
 * it. `hop`: the failure is the proxy's (it refused the connection, answered its CONNECT
 * with an error, asked for authentication) or the certificate's, not the project's.
 */
export class HttpFailure extends Error {
  override name = 'HttpFailure';
  constructor(readonly code: string | undefined, message: string, readonly hop?: 'proxy' | 'tls', readonly proxyStatus?: number) {
    super(message);
  }
}

/**
 * A reply body longer than the caller's limit (or announced so by its Content-Length): it is
 * not read further and its connection is destroyed, never reused.
 */
export class ReplyTooLarge extends Error {
  override name = 'ReplyTooLarge';
  constructor(readonly limit: number, readonly status: number) {
    super(`reply larger than ${limit} bytes, not read (the client's maxReplyBytes)`);
  }
}

/** A file part whose content differed in size from what it was announced with. */
export class FileChangedError extends Error {
  override name = 'FileChangedError';
}
