/**
 * The command timeout of one async command (GahpServerOptions.commandTimeoutMs): when it
 * passes, the command's signal is aborted (its RPCs, uploads included, stop at once), and a
 * handler that has not settled a grace period later is abandoned.
 */
import { setMaxListeners } from 'node:events';

export interface CommandDeadline {
  /** The command's signal: aborted when the timeout passes or the GAHP stops (`stop`). */
  signal: AbortSignal;
  readonly expired: boolean;
  /** `the command timeout of <n> s passed`, for the error result. */
  reason: string;
  /** Rejects the grace period after the timeout, for a handler that does not stop. */
  abandon: Promise<never>;
  /** Stops the timers and the listener on `stop` (the command has settled). */
  dispose(): void;
}

/** The deadline of a command started now, or undefined when `timeoutMs` is unset or 0 (no limit). */
export function commandDeadline(timeoutMs: number | undefined, graceMs: number, stop: AbortSignal): CommandDeadline | undefined {
  if (!timeoutMs || timeoutMs <= 0) return undefined;
  const reason = `the command timeout of ${+(timeoutMs / 1000).toFixed(3)} s passed`;
  const ctl = new AbortController();
  // Every upload and RPC of the command may listen: many listeners are normal, not a leak.
  setMaxListeners(0, ctl.signal);
  let expired = false;
  let graceTimer: NodeJS.Timeout | undefined;
  let giveUp: (err: Error) => void = () => undefined;
  const abandon = new Promise<never>((_, reject) => { giveUp = reject; });
  abandon.catch(() => undefined);
  const timer = setTimeout(() => {
    expired = true;
    ctl.abort(new Error(reason));
    graceTimer = setTimeout(() => giveUp(new Error(`${reason}; the command did not stop, its result is dropped`)), graceMs);
    graceTimer.unref();
  }, timeoutMs);
  timer.unref();
  const dispose = () => {
    clearTimeout(timer);
    clearTimeout(graceTimer);
    stop.removeEventListener('abort', onStop);
  };
  const onStop = () => {
    dispose();
    ctl.abort(stop.reason);
  };
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  return { signal: ctl.signal, get expired() { return expired; }, reason, abandon, dispose };
}
