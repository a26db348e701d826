/**
 * Async results waiting for RESULTS, and the `R` that announces them.
 *
 * A result waits here, escaped and joined into its line, from the moment its command
 * settles until the client asks with RESULTS: the gridmanager reads results only then. Its
 * request id stays taken until it is delivered (request-ids.ts).
 */
import { joinTokens } from './escape.js';
import type { PendingRequestIds } from './request-ids.js';

export class ResultQueue {
  /** Result lines (escaped, unprefixed), in completion order. */
  private results: Array<{ key: string; line: string }> = [];
  /** Whether an `R` was printed since the last RESULTS. */
  private notified = false;

  constructor(private readonly requestIds: PendingRequestIds) {}

  /** Queues the result of request `reqId` (id key `key`): its tokens after the request id. */
  push(key: string, reqId: string, tokens: string[]): void {
    this.results.push({ key, line: reqId + ' ' + joinTokens(tokens) });
  }

  /**
   * Whether to print an `R` now: in async mode, once results wait and none was printed
   * since the last RESULTS. True only once per RESULTS cycle.
   */
  notificationDue(asyncMode: boolean): boolean {
    if (!asyncMode || this.notified || this.results.length === 0) return false;
    this.notified = true;
    return true;
  }

  /**
   * The RESULTS reply: `S <n>` and the n results waiting, in completion order, each
   * delivered once. Their request ids are free again: the client has its answer.
   */
  deliver(): string[] {
    const delivered = this.results;
    this.results = [];
    this.notified = false;
    const lines = new Array<string>(delivered.length + 1);
    lines[0] = `S ${delivered.length}`;
    for (let i = 0; i < delivered.length; i++) {
      this.requestIds.release(delivered[i]!.key);
      lines[i + 1] = delivered[i]!.line;
    }
    return lines;
  }
}
