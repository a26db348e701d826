/**
 * The request ids of async commands: which are acceptable, and which are taken. An id is
 * taken from the moment its command is accepted until its result has been delivered by
 * RESULTS: the client matches results to requests by id, so a second request of the same
 * id before then would make one of the two results land on the wrong request.
 */

/** A request id: a non-zero integer (HTCondor sends 1..990000000 and reads ours back with atoi). */
const REQID = /^[+-]?[0-9]{1,18}$/;

/** The identity of a request id for the "still pending" check: `007` and `7` are one id to the client. */
function reqIdKey(reqId: string): string {
  const negative = reqId.startsWith('-');
  const digits = reqId.replace(/^[+-]/, '').replace(/^0+/, '');
  return digits === '' ? '0' : (negative ? '-' : '') + digits;
}

export class PendingRequestIds {
  /** Canonical keys of the ids in flight or with an undelivered result. */
  private readonly taken = new Set<string>();

  /**
   * The key of an id for a new request (to add() once the request is accepted, release()
   * once its result is delivered), or why the id cannot be used (`malformed`: not a non-zero
   * integer; `pending`: an earlier request still has it).
   */
  check(reqId: string | undefined): { key: string } | { refused: 'malformed' | 'pending' } {
    if (reqId === undefined || !REQID.test(reqId)) return { refused: 'malformed' };
    const key = reqIdKey(reqId);
    if (key === '0') return { refused: 'malformed' };
    return this.taken.has(key) ? { refused: 'pending' } : { key };
  }

  add(key: string): void {
    this.taken.add(key);
  }

  release(key: string): void {
    this.taken.delete(key);
  }
}
