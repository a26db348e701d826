/**
 * The connection for the next RPC, opened while the calls of a burst are under way.
 *
 * Every RPC POST has a connection of its own (post.ts: BOINC's server closes each after its
 * reply). Opening one costs the client a turn of its event loop before the request can be
 * written, the server an accept, and over a network a round trip. Commands make their calls
 * in bursts, one waiting for another (a BOINC_SUBMIT: create_batch with its lookups, then
 * upload_files, then submit_batch), so while one call is answered the next one's connection
 * can be opened: once two calls start within `burstMs`, every call that starts leaves one
 * connection to its host and port open for the next (opened once its own request is
 * written, so never before it), which takes it if it is usable:
 * connected, and silent (a server that sent anything on it or closed it has dropped it; it
 * is discarded at once). Nobody takes it after `maxIdleMs`: it is closed, so a burst costs
 * the server one connection more than it has calls, held idle for at most that long (far
 * below the servers' own limits for a request to begin: Apache's mod_reqtimeout 20 s,
 * nginx 60 s). A call now and then (the gridmanager's status polls) opens none.
 *
 * Spares are plain TCP: for https the TLS handshake runs on the spare once it is taken
 * (post.ts), so TLS still loads with the first https call.
 */
import * as net from 'node:net';

export interface SpareLimits {
  /** Calls starting at most this far apart make a burst (ms). */
  burstMs: number;
  /** A spare nobody took is closed after this long (ms). */
  maxIdleMs: number;
}

/** How long a connection opened ahead may wait for its call (BoincClientOptions.connectAheadMs). */
export const DEFAULT_CONNECT_AHEAD_MS = 2000;
export const DEFAULT_SPARE_LIMITS: SpareLimits = { burstMs: 1000, maxIdleMs: DEFAULT_CONNECT_AHEAD_MS };

interface Spare {
  socket: net.Socket;
  origin: string;
  connected: boolean;
  timer: NodeJS.Timeout;
  drop: () => void;
}

const origin = (target: { host: string; port: number }) => `${target.host}\n${target.port}`;

export class SpareConnections {
  private spare: Spare | undefined;
  private lastStart = -Infinity;
  /** A call of a burst started since the last spare was opened. */
  private wanted = false;
  private closed = false;
  /** Spares opened and spares taken (read by the tests; each call's log line says whether it took one). */
  readonly counts = { opened: 0, taken: 0 };

  /** With `maxIdleMs` 0 none is ever opened. */
  constructor(private readonly limits: SpareLimits = DEFAULT_SPARE_LIMITS) {}

  /**
   * A POST to `target` starts now: returns a connected spare to it (the POST's connection
   * from now on), or undefined (the POST connects itself).
   */
  take(target: { host: string; port: number }): net.Socket | undefined {
    const now = Date.now();
    if (now - this.lastStart <= this.limits.burstMs) this.wanted = true;
    this.lastStart = now;
    const s = this.spare;
    if (!s) return undefined;
    if (s.origin !== origin(target)) {
      this.discard(s);
      return undefined;
    }
    if (!s.connected) return undefined;
    this.release(s);
    this.counts.taken++;
    this.wanted = true;
    return s.socket;
  }

  /** A POST's request to `target` is written: in a burst, the spare for the next call is opened. */
  requestWritten(target: { host: string; port: number }): void {
    if (!this.wanted || this.spare || this.closed || this.limits.maxIdleMs <= 0) return;
    this.wanted = false;
    this.open(target);
  }

  /** Closes the spare, and opens no other. */
  destroy(): void {
    this.closed = true;
    if (this.spare) this.discard(this.spare);
  }

  private open(target: { host: string; port: number }): void {
    const socket = net.connect({ host: target.host, port: target.port });
    // As post.ts sets it on its own connections: each write goes out at once.
    socket.setNoDelay(true);
    const s: Spare = {
      socket,
      origin: origin(target),
      connected: false,
      timer: setTimeout(() => this.discard(s), this.limits.maxIdleMs),
      drop: () => this.discard(s),
    };
    // An idle spare must not keep a client's process alive.
    s.timer.unref();
    socket.unref();
    socket.once('connect', () => (s.connected = true));
    socket.on('data', s.drop).on('end', s.drop).on('error', s.drop).on('close', s.drop);
    this.spare = s;
    this.counts.opened++;
  }

  /** Hands the spare over: none of its watching stays on it. */
  private release(s: Spare): void {
    if (this.spare === s) this.spare = undefined;
    clearTimeout(s.timer);
    s.socket.off('data', s.drop).off('end', s.drop).off('error', s.drop).off('close', s.drop);
    s.socket.ref();
  }

  private discard(s: Spare): void {
    this.release(s);
    // A spare that failed may emit its error again while being destroyed: nobody listens.
    s.socket.on('error', () => undefined);
    s.socket.destroy();
  }
}
