/**
 * The debug log: timestamped lines to a file or stderr. Every line passes through
 * redact(): registered secrets (the authenticator) become `***`, and so does whatever the
 * registered redactors hide (the BOINC layer's: `auth_str=` URL values and
 * `<authenticator>` elements, boinc-rpc/redact.ts).
 *
 * A file log is written asynchronously (the GAHP's reading loop never waits on disk);
 * flush() waits for it, and whatever is still buffered when the process exits is written
 * synchronously on the way out, so a log is never silently truncated.
 */
import * as fs from 'node:fs';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

export interface LogSink {
  write(line: string): void;
  /** Resolves when everything written so far has reached its destination. */
  flush?(): Promise<void>;
}

/** Appends to a file descriptor without blocking the caller; bounded memory. */
class AsyncFileSink implements LogSink {
  private pending: string[] = [];
  private pendingChars = 0;
  private dropped = 0;
  private writing = false;
  private failed = false;
  private idleWaiters: Array<() => void> = [];
  /** Beyond this much unwritten text, lines are dropped (and counted) rather than kept. */
  private static readonly MAX_PENDING_CHARS = 32 * 1024 * 1024;

  constructor(private readonly fd: number) {
    process.on('exit', () => this.writeRestSync());
  }

  write(line: string): void {
    if (this.failed) return;
    if (this.pendingChars + line.length > AsyncFileSink.MAX_PENDING_CHARS) {
      this.dropped++;
      return;
    }
    this.pending.push(line);
    this.pendingChars += line.length;
    if (!this.writing) this.pump();
  }

  flush(): Promise<void> {
    if (!this.writing || this.failed) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private take(): Buffer {
    if (this.dropped > 0) {
      this.pending.push(`${new Date().toISOString()} WARN [${this.dropped} log lines dropped: the disk is too slow]\n`);
      this.dropped = 0;
    }
    const data = Buffer.from(this.pending.join(''), 'utf8');
    this.pending = [];
    this.pendingChars = 0;
    return data;
  }

  private pump(): void {
    this.writing = true;
    const data = this.take();
    const writeFrom = (offset: number): void => {
      fs.write(this.fd, data, offset, data.length - offset, null, (err, written) => {
        if (err) {
          this.failed = true;
          this.pending = [];
          process.stderr.write(`boinc-gahp: debug log write failed: ${err.message}\n`);
        } else if (offset + written < data.length) {
          writeFrom(offset + written);
          return;
        }
        if (this.pending.length > 0 && !this.failed) {
          this.pump();
          return;
        }
        this.writing = false;
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      });
    };
    writeFrom(0);
  }

  private writeRestSync(): void {
    if (this.failed || (this.pending.length === 0 && this.dropped === 0)) return;
    try {
      fs.writeSync(this.fd, this.take());
    } catch {
      // Exiting anyway.
    }
  }
}

export class Logger {
  private readonly secrets = new Set<string>();
  /** Rules for secrets known by where they appear rather than by value (addRedactor). */
  private readonly redactors: Array<(text: string) => string> = [];
  private readonly threshold: number;

  /** Whether the lines go to stderr (--debug): a warning for the user is then printed once, by the log. */
  writesToStderr = false;

  constructor(private readonly sink: LogSink | null = null, level: LogLevel = 'debug') {
    this.threshold = LEVELS[level];
  }

  /** A logger that writes nowhere (still redacts, for callers that format messages). */
  static silent(): Logger {
    return new Logger(null);
  }

  /** Appends to a file (created 0600: logs can hold job names and paths). Opening fails at once. */
  static toFile(path: string, level: LogLevel = 'debug'): Logger {
    const fd = fs.openSync(path, 'a', 0o600);
    return new Logger(new AsyncFileSink(fd), level);
  }

  static toStderr(level: LogLevel = 'debug'): Logger {
    // A closed stderr must not become an unhandled 'error' event (a crash).
    if (process.stderr.listenerCount('error') === 0) process.stderr.on('error', () => undefined);
    const log = new Logger({ write: (line) => process.stderr.write(line) }, level);
    log.writesToStderr = true;
    return log;
  }

  get enabled(): boolean {
    return this.sink !== null;
  }

  addSecret(secret: string): void {
    // Very short strings would redact half the log and protect nothing.
    if (secret.length >= 4) this.secrets.add(secret);
  }

  /**
   * A rule that hides secrets by where they appear (e.g. a URL parameter), for the layer
   * that knows its wire format to register: this logger knows no format of its own.
   */
  addRedactor(redactor: (text: string) => string): void {
    if (!this.redactors.includes(redactor)) this.redactors.push(redactor);
  }

  redact(text: string): string {
    let out = text;
    for (const r of this.redactors) out = r(out);
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('***');
    return out;
  }

  /** Waits until the lines logged so far are written (no-op for stderr and silent logs). */
  flush(): Promise<void> {
    return this.sink?.flush?.() ?? Promise.resolve();
  }

  error(msg: string): void { this.emit('error', msg); }
  warn(msg: string): void { this.emit('warn', msg); }
  info(msg: string): void { this.emit('info', msg); }
  debug(msg: string): void { this.emit('debug', msg); }

  private emit(level: LogLevel, msg: string): void {
    if (this.sink === null || LEVELS[level] > this.threshold) return;
    try {
      this.sink.write(`${new Date().toISOString()} ${level.toUpperCase()} ${this.redact(msg)}\n`);
    } catch {
      // A broken log never breaks the GAHP.
    }
  }
}
