/**
 * The node primitives under every BOINC_* command, run once before the GAHP prints its
 * banner. A fresh GAHP otherwise runs them for the first time on the gridmanager's first
 * command, on its critical path: node's timer list and abort-signal code for the command's
 * deadline and each call's timeout, its event-target listeners, the random multipart
 * boundary, and node's check of the project's host (net.connect compiles its IP address
 * patterns on first use). Measured on a cold BOINC_SUBMIT (test/bench/README.md, issue 12
 * round 6): its first call reaches the server 1.2-1.6 ms sooner, for 0.15 MiB more idle
 * memory. No I/O: nothing is opened, sent or written, and nothing is left pending (no
 * timer, no listener).
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { isIP } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';

export async function warmUpNodePrimitives(): Promise<void> {
  const listener = (): void => undefined;
  // Twice: the second round runs with what the first taught V8.
  for (let round = 0; round < 2; round++) {
    // A command's deadline and its lookups' signal (protocol/command-deadline.ts, commands/submit.ts).
    const own = new AbortController();
    setMaxListeners(0, own.signal);
    const either = AbortSignal.any([own.signal, new AbortController().signal]);
    either.addEventListener('abort', listener, { once: true });
    own.signal.addEventListener('abort', listener, { once: true });
    either.removeEventListener('abort', listener);
    own.signal.removeEventListener('abort', listener);
    // A deadline or call timeout, armed and disarmed (boinc-rpc/http.ts, armTimeouts).
    const timer = setTimeout(listener, 3_600_000 + round);
    timer.unref();
    clearTimeout(timer);
    // A POST's boundary and request head (boinc-rpc/post.ts).
    randomBytes(12).toString('hex');
    Buffer.concat([Buffer.from('POST / HTTP/1.1\r\n', 'latin1'), Buffer.from('<request/>', 'utf8')]);
    // net.connect's look at the host, as far as an IPv4 address goes. node's IPv6 pattern,
    // which a host name is tried against too, is left to the first call to such a host: it
    // would cost every idle GAHP 0.3 MiB.
    isIP('127.0.0.1');
    // A turn of the event loop (util.ts, yieldNow).
    await nextTurn();
  }
}
