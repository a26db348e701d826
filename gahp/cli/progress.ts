/**
 * A one-line progress display for people: on a terminal, a spinner (or a bar when a total
 * is known) with the elapsed time, redrawn in place; elsewhere, a plain line each time the
 * text changes (no control characters in logs and pipes), but a count (a text with a
 * done/total pair) at most every PLAIN_COUNT_INTERVAL_MS and when it is complete: a log of a
 * 300-job run holds a few count lines, not one per step.
 */

/** Off a terminal, the least time between two printed counts. */
const PLAIN_COUNT_INTERVAL_MS = 30_000;

const FRAMES = ['|', '/', '-', '\\'];

export function formatDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const m = Math.floor(s / 60);
  const h = Math.floor(m / 60);
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m % 60)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`;
}

export function bar(done: number, total: number, width = 24): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(frac * width);
  return '[' + '#'.repeat(full) + '-'.repeat(width - full) + ']';
}

export class ProgressLine {
  private readonly started = Date.now();
  private frame = 0;
  private text = '';
  private lastPrinted = '';
  /** When a count was last printed off a terminal (ms since epoch). */
  private lastCountAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private done?: number;
  private total?: number;

  constructor(private readonly out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number } = process.stderr, private readonly enabled = true) {
    if (this.tty) {
      this.timer = setInterval(() => this.draw(), 200);
      this.timer.unref();
    }
  }

  get tty(): boolean {
    return this.enabled && Boolean(this.out.isTTY);
  }

  /** Sets the text (and optionally a done/total pair drawn as a bar). */
  update(text: string, done?: number, total?: number): void {
    this.text = text;
    this.done = done;
    this.total = total;
    if (this.tty) this.draw();
    else if (this.enabled && text !== this.lastPrinted) {
      if (total !== undefined && done !== undefined && done < total) {
        if (Date.now() - this.lastCountAt < PLAIN_COUNT_INTERVAL_MS) return;
        this.lastCountAt = Date.now();
      }
      this.lastPrinted = text;
      this.out.write(`${text}\n`);
    }
  }

  /** Prints a line above the progress line. */
  log(line: string): void {
    if (this.tty) {
      this.out.write('\r\x1b[K' + line + '\n');
      this.draw();
    } else if (this.enabled) {
      this.out.write(line + '\n');
    }
  }

  private draw(): void {
    if (!this.tty) return;
    this.frame = (this.frame + 1) % FRAMES.length;
    const elapsed = formatDuration(Date.now() - this.started);
    const b = this.total !== undefined && this.done !== undefined ? bar(this.done, this.total) + ' ' : FRAMES[this.frame] + ' ';
    let line = `${b}${this.text}  ${elapsed}`;
    const cols = this.out.columns ?? 100;
    if (line.length > cols - 1) line = line.slice(0, cols - 2);
    this.out.write('\r\x1b[K' + line);
  }

  /** Clears the line (terminal) and stops redrawing. */
  stop(finalText?: string): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty) this.out.write('\r\x1b[K');
    if (finalText !== undefined && this.enabled) this.out.write(finalText + '\n');
  }
}

/** Bytes for people: B, KiB, MiB or GiB with one decimal. */
export function formatBytes(n: number): string {
  const [v, unit] = scaled(n, n);
  return unit === 'B' ? `${n} B` : `${v} ${unit}`;
}

/** `done/total unit` in the total's unit, e.g. `12.5/480.0 MiB`. */
export function formatBytePair(done: number, total: number): string {
  const [d] = scaled(done, total);
  const [t, unit] = scaled(total, total);
  return unit === 'B' ? `${done}/${total} B` : `${d}/${t} ${unit}`;
}

function scaled(n: number, by: number): [string, string] {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  let div = 1;
  while (by / div >= 1024 && u < units.length - 1) {
    div *= 1024;
    u++;
  }
  return [(n / div).toFixed(1), units[u]!];
}

/** One BOINC_SUBMIT progress event (gahp/staging/progress.ts), as the view needs it. */
export interface SubmitProgress {
  phase: 'hash' | 'upload';
  doneBytes: number;
  totalBytes: number;
  doneFiles: number;
  totalFiles: number;
}

/**
 * Turns BOINC_SUBMIT's hashing and upload events into the progress line: a bar over the
 * hashing while it runs, then over the uploads (which overlap it; their count is shown
 * meanwhile). `label` says what is being submitted.
 */
export class SubmitProgressView {
  private hash: SubmitProgress | undefined;
  private upload: SubmitProgress | undefined;

  constructor(private readonly line: ProgressLine, private readonly label: string) {}

  event(e: SubmitProgress): void {
    if (e.phase === 'hash') this.hash = e;
    else this.upload = e;
    const h = this.hash;
    const u = this.upload;
    const files = (p: SubmitProgress) => `${p.doneFiles}/${p.totalFiles} file${p.totalFiles === 1 ? '' : 's'}`;
    if (h && (h.doneFiles < h.totalFiles || !u)) {
      const also = u ? `, ${u.doneFiles} on the server` : '';
      this.line.update(`${this.label}: hashing ${formatBytePair(h.doneBytes, h.totalBytes)} (${files(h)})${also}`, h.doneBytes, h.totalBytes);
    } else if (u && u.doneFiles < u.totalFiles) {
      this.line.update(`${this.label}: uploading ${formatBytePair(u.doneBytes, u.totalBytes)} (${files(u)})`, u.doneBytes, u.totalBytes);
    } else {
      this.line.update(`${this.label}: inputs staged, creating the jobs`);
    }
  }
}
