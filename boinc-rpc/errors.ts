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

/**
 * What a failure is, for code that decides what to do next (the message is for people and
 * for HTCondor). Set where the reply is read (xml.ts checkReply, http.ts); none when the
 * failure is none of these.
 */
export type RpcErrorCode =
  /** The reply ended before its closing tag without a PHP error: the connection was cut (uncertain). */
  | 'cut-short'
  /**
   * The database refused a row that exists already (`Duplicate entry ... for key 'K'`, a
   * PHP fatal or inside an <error> text); `duplicateOf` says which row.
   */
  | 'duplicate-entry'
  /** The server has no batch of that id or name (`no such batch`, `no batch named NAME`); `batchName` when it names one. */
  | 'no-such-batch'
  /** A refusal repeating cannot change: bad or missing authenticator, no submit access, not the owner, file immutability. */
  | 'refused'
  /** The reply was longer than the client's maxReplyBytes: not read, the connection discarded. */
  | 'reply-too-large'
  /**
   * The proxy failed, not the project: it refused the connection, asked for credentials
   * (httpStatus 407), could not reach the project (its CONNECT answer in httpStatus), or
   * its setting cannot be used. The message names the proxy, never its credentials.
   */
  | 'proxy'
  /** The project's certificate could not be verified: the message names the problem and the trust sources. */
  | 'certificate'
  /**
   * The output is not where it was asked for: get_output.php's `ERROR: no such file` (not in
   * the upload hierarchy: deleted, or moved by a batch-collect assimilator), get_output3.php's
   * missing file or batch directory.
   */
  | 'no-such-file'
  /** get_output3.php refused the job's name (`bad WU name`: not `^[\w\-. ]+$`), or an output's open name. */
  | 'bad-name';

/**
 * Which existing row a `duplicate-entry` hit, from the database key it names:
 * - `file`: a file of that physical name is registered (key `jf_name`; `md5` on older
 *   schemas): upload_files of a name the server has;
 * - `link`: the file is already linked to the batch (key `job_file_id`): query_files with a
 *   batch_id repeated;
 * - `other`: any other key (a job name in create_work, ...).
 */
export type DuplicateOf = 'file' | 'link' | 'other';

export interface RpcErrorOptions {
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
  code?: RpcErrorCode;
  /** With code `duplicate-entry`. */
  duplicateOf?: DuplicateOf;
  /** With code `no-such-batch`, when the server named the batch. */
  batchName?: string;
  /**
   * With kind `local`: the file system's error as `<errno>: <text>` (e.g. `ENOSPC: no space
   * left on device`), for callers that report it under another file name than ours.
   */
  fileError?: string;
}

export class BoincRpcError extends Error {
  override name = 'BoincRpcError';

  constructor(
    /** The RPC's name, e.g. `query_batch2`, `upload_files`, `get_output`. */
    readonly rpc: string,
    readonly kind: RpcErrorKind,
    /** The server's (or transport's) text, unchanged but for redaction. */
    readonly serverMessage: string,
    readonly options: RpcErrorOptions = {},
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

  get code(): RpcErrorCode | undefined {
    return this.options.code;
  }

  get duplicateOf(): DuplicateOf | undefined {
    return this.options.duplicateOf;
  }

  get batchName(): string | undefined {
    return this.options.batchName;
  }
}
