/** Reading a child's memory and CPU from /proc (Linux). */
import * as fs from 'node:fs';

function statusField(pid: number, field: string): number | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) * 1024 : undefined;
}

/** Peak resident set (VmHWM) in bytes, or undefined when /proc is unavailable. */
export function peakRss(pid: number): number | undefined {
  return statusField(pid, 'VmHWM');
}

export function currentRss(pid: number): number | undefined {
  return statusField(pid, 'VmRSS');
}

/**
 * Resets the peak-RSS watermark to the current RSS (`echo 5 > /proc/pid/clear_refs`,
 * Linux >= 4.0, allowed for our own children). Returns false when not possible; then the
 * caller must rely on a fresh process or on polling.
 */
export function resetPeakRss(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** User+system CPU time of a process in clock ticks (for "has it gone idle?"). */
export function cpuTicks(pid: number): number | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/**
 * Polls VmRSS as well as reading VmHWM at the end: VmHWM is exact but only after a reset,
 * so the sampler reports max(polled VmRSS, VmHWM since reset).
 */
export class RssSampler {
  private maxSeen = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly hwmReset: boolean;

  constructor(private readonly pid: number, intervalMs = 20) {
    this.hwmReset = resetPeakRss(pid);
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private sample(): void {
    const rss = currentRss(this.pid);
    if (rss !== undefined && rss > this.maxSeen) this.maxSeen = rss;
  }

  /** Stops sampling; returns the peak in MiB. */
  stop(): number {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.sample();
    let peak = this.maxSeen;
    if (this.hwmReset) {
      const hwm = peakRss(this.pid);
      if (hwm !== undefined && hwm > peak) peak = hwm;
    }
    return peak / (1024 * 1024);
  }
}
