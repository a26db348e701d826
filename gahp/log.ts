/**
 * The debug log: timestamped lines to a file or stderr. Every line passes through
 * redact(): registered secrets (the authenticator) and `auth_str=` URL values become `***`.
 */
import * as fs from 'node:fs';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

export interface LogSink {
  write(line: string): void;
}

export class Logger {
  private readonly secrets = new Set<string>();
  private readonly threshold: number;

  constructor(private readonly sink: LogSink | null = null, level: LogLevel = 'debug') {
    this.threshold = LEVELS[level];
  }

  /** A logger that writes nowhere (still redacts, for callers that format messages). */
  static silent(): Logger {
    return new Logger(null);
  }

  /** Appends to a file (created 0600: logs can hold job names and paths). */
  static toFile(path: string, level: LogLevel = 'debug'): Logger {
    const fd = fs.openSync(path, 'a', 0o600);
    return new Logger({ write: (line) => fs.writeSync(fd, line) }, level);
  }

  static toStderr(level: LogLevel = 'debug'): Logger {
    return new Logger({ write: (line) => process.stderr.write(line) }, level);
  }

  get enabled(): boolean {
    return this.sink !== null;
  }

  addSecret(secret: string): void {
    // Very short strings would redact half the log and protect nothing.
    if (secret.length >= 4) this.secrets.add(secret);
  }

  redact(text: string): string {
    let out = text.replace(/(auth_str=)[^&\s]*/g, '$1***');
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('***');
    return out;
  }

  error(msg: string): void { this.emit('error', msg); }
  warn(msg: string): void { this.emit('warn', msg); }
  info(msg: string): void { this.emit('info', msg); }
  debug(msg: string): void { this.emit('debug', msg); }

  private emit(level: LogLevel, msg: string): void {
    if (this.sink === null || LEVELS[level] > this.threshold) return;
    this.sink.write(`${new Date().toISOString()} ${level.toUpperCase()} ${this.redact(msg)}\n`);
  }
}
