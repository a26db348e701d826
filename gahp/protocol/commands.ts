/**
 * What a GAHP command is, as the protocol server sees it. Command modules implement these
 * interfaces; they never touch stdin/stdout, and the server knows nothing of what they do.
 */
import type { Logger } from '../log.js';

/** A request line's arguments are wrong: the server answers `E <message>`. */
export class ArgumentError extends Error {
  override name = 'ArgumentError';
}

export interface SyncContext {
  log: Logger;
}

export interface HandlerContext {
  /** Aborted when the GAHP shuts down (QUIT/EOF): stop work and clean up temporary files. */
  signal: AbortSignal;
  reqId: string;
  log: Logger;
  /** True once the command's deadline has passed (its signal then fired for that, not for a shutdown). */
  deadlinePassed?: () => boolean;
}

interface CommandBase {
  /** Upper-case command word. */
  name: string;
  /** Argument synopsis for help texts, e.g. `<reqid> <batch_name> <unix_time>`. */
  usage: string;
  /** One line saying what the command does (interactive help). */
  summary: string;
  /** Argument positions (after the command word) never to be written to logs. */
  secretArgs?: number[];
}

/** Answered on the spot: `S` when run() returns, `E <message>` when it throws. */
export interface SyncCommand extends CommandBase {
  kind: 'sync';
  run(args: string[], ctx: SyncContext): void;
}

/**
 * Carries a request id as its first argument; answered `S` when queued, and later by a
 * result line `<reqid> <tokens...>` delivered through RESULTS.
 */
export interface AsyncCommand<Req = unknown> extends CommandBase {
  kind: 'async';
  /**
   * Arguments after the request id; throws ArgumentError when malformed (-> `E`). Called
   * synchronously when the line is read, before any later line is handled, however long
   * the command then waits for its turn to run: whatever state the command must see as it
   * was when it was issued (such as the selected project) is captured here, into Req.
   */
  parse(args: string[]): Req;
  /**
   * Does the work. Resolves to the result tokens after the reqid (success starts with
   * `NULL`); a rejection becomes the error result `<reqid> <message>`.
   */
  run(req: Req, ctx: HandlerContext): Promise<string[]>;
  /**
   * The result tokens after the reqid for a command that failed (a rejection, or the command
   * deadline passing). Default: the message alone, as the BOINC_* results have it. A family
   * whose client checks the number of tokens (the BLAH_* results, docs/gahp-protocol.md)
   * gives its own shape here: a result of another length aborts the gridmanager.
   */
  errorResult?(message: string): string[];
  /**
   * False: run() starts as soon as the request is accepted instead of waiting for one of the
   * server's concurrency slots. For commands that only wait on work bounded elsewhere (a
   * status answered from memory, a submit waiting for its batch): holding a slot while they
   * wait would keep the slots from the commands that need them.
   */
  queued?: boolean;
}

// A command's request type is its own business: the server only hands parse()'s result back to
// the same command's run(). (AsyncCommand<unknown> would not do: run's parameter is contravariant.)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Command = SyncCommand | AsyncCommand<any>;

/** Helpers for argument parsers. */
export function expectArgCount(args: string[], min: number, max = min): void {
  if (args.length < min || args.length > max) {
    const want = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} to ${max}`;
    throw new ArgumentError(`expected ${want} arguments, got ${args.length}`);
  }
}

/** A non-negative integer within the safe range, for counts in request lines. */
export function parseCount(text: string | undefined, what: string, max = 10_000_000): number {
  if (text === undefined || !/^[0-9]{1,9}$/.test(text)) throw new ArgumentError(`${what} must be a non-negative integer, got ${quote(text)}`);
  const n = Number(text);
  if (n > max) throw new ArgumentError(`${what} ${n} is larger than ${max}`);
  return n;
}

/** A finite number (integer or decimal) such as a unix time or a job parameter. */
export function parseNumber(text: string | undefined, what: string): number {
  if (text === undefined || !/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(text)) {
    throw new ArgumentError(`${what} must be a number, got ${quote(text)}`);
  }
  const n = Number(text);
  if (!Number.isFinite(n)) throw new ArgumentError(`${what} must be a finite number, got ${quote(text)}`);
  return n;
}

function quote(text: string | undefined): string {
  if (text === undefined) return 'nothing';
  return JSON.stringify(text.length > 40 ? text.slice(0, 40) + '...' : text);
}
