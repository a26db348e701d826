/**
 * The log: lines to a file or stderr, each `<UTC time> [<pid> <user>] <LEVEL> <text>` (a
 * log may be shared by several processes and owners: every line says whose it is; a text
 * of several lines becomes as many log lines, each with the prefix). Every line passes through
 * redact(): registered secrets (the authenticator) become `***`, and so does whatever the
 * registered redactors hide (the BOINC layer's: `auth_str=` URL values and
 * `<authenticator>` elements, boinc-rpc/redact.ts).
 *
 * A file log is written asynchronously (the GAHP's reading loop never waits on disk);
 * flush() waits for it, and whatever is still buffered when the process exits is written
 * synchronously on the way out, so a log is never silently truncated.
 *
 * A file log rotates by size, as HTCondor's daemons' logs do (MAX_<SUBSYS>_LOG,
 * MAX_NUM_<SUBSYS>_LOG): see AsyncFileSink.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parsePhpSize } from '../boinc-rpc/upload-limits.js';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

/**
 * What a log records unless told otherwise: errors, warnings and the GAHP's life (start,
 * shutdown, failed commands). `debug` adds every protocol line and RPC (~760 bytes a job),
 * for chasing a problem rather than for a GAHP that runs for months.
 */
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

/** When a file log rotates: past `maxBytes` (0: never), keeping the newest `keep` old files. */
export interface LogRotation {
  maxBytes: number;
  keep: number;
}

export const DEFAULT_LOG_ROTATION: LogRotation = { maxBytes: 10 * 1024 * 1024, keep: 4 };

/** A log's size bound as an option gives it: `0` (never rotate), bytes, or 512K, 10M, 1G. */
export function parseLogSize(text: string): number {
  if (text.trim() === '0') return 0;
  return parsePhpSize(text);
}

export interface LogSink {
  write(line: string): void;
  /** Resolves when everything written so far has reached its destination. */
  flush?(): Promise<void>;
}

/**
 * Appends to a file without blocking the caller; bounded memory; rotates by size.
 *
 * Before each write the sink looks at the log's path: when it is no longer the file held
 * open (another process rotated it, or logrotate moved it), it opens the path anew; when the
 * next line would take the file past the bound, it renames the file to
 * `<log>.<UTC time>.<pid>` (a name no other process's rename can take), opens a new one and
 * removes the oldest such files beyond `keep`. Lines are written whole, each into one file,
 * so rotating loses none; a line larger than the bound gets a file of its own.
 *
 * Several processes may share one log (the BLAHP scripts: many short-lived processes,
 * docs/blahp.md), so there is no lock to leave behind: rename is atomic, and of two
 * processes that find the file full, the second finds the path is another file by now and
 * just reopens it. Only if it looked in the instant before the first renamed does it rename
 * too, moving the first's new, nearly empty file: one more old file, no line lost. A
 * process holding a rotated file writes into it at most the lines of one write (they stay
 * there), then follows the path.
 */
class AsyncFileSink implements LogSink {
  private fd: number;
  private pending: string[] = [];
  private pendingChars = 0;
  private dropped = 0;
  private writing = false;
  private failed = false;
  /** Set when a rotation failed (e.g. no right to rename in the directory): the log then just grows. */
  private rotationFailed = false;
  private lastRotationMs = 0;
  private idleWaiters: Array<() => void> = [];
  /** Beyond this much unwritten text, lines are dropped (and counted) rather than kept. */
  private static readonly MAX_PENDING_CHARS = 32 * 1024 * 1024;

  constructor(private readonly file: string, private readonly rotation: LogRotation, private readonly mode: number) {
    this.fd = this.open();
    process.on('exit', () => this.writeRestSync());
  }

  /** Opens for appending; a file it creates gets exactly `mode`, whatever the umask. */
  private open(): number {
    try {
      const fd = fs.openSync(this.file, 'ax', this.mode);
      fs.fchmodSync(fd, this.mode);
      return fd;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      return fs.openSync(this.file, 'a');
    }
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

  /** The next lines to write, as many as fit in `room` bytes (at least one). */
  private take(room: number): Buffer {
    if (this.dropped > 0) {
      this.pending.push(`${linePrefix('warn')}[${this.dropped} log lines dropped: the disk is too slow]\n`);
      this.dropped = 0;
    }
    let bytes = 0;
    let n = 0;
    for (; n < this.pending.length; n++) {
      const lineBytes = Buffer.byteLength(this.pending[n]!, 'utf8');
      if (n > 0 && bytes + lineBytes > room) break;
      bytes += lineBytes;
    }
    const lines = this.pending.splice(0, n);
    this.pendingChars -= lines.reduce((sum, l) => sum + l.length, 0);
    return Buffer.from(lines.join(''), 'utf8');
  }

  /**
   * Follows the path and rotates when the next line does not fit; returns the room left
   * before the bound. `canSwitch` false (a write is in flight on the open file): no reopening.
   */
  private prepare(canSwitch: boolean): number {
    if (this.rotation.maxBytes <= 0 || !canSwitch || this.rotationFailed) return Infinity;
    try {
      let size = this.followPath();
      if (size > 0 && size + Buffer.byteLength(this.pending[0] ?? '', 'utf8') > this.rotation.maxBytes) {
        this.rotate();
        size = 0;
      }
      return this.rotation.maxBytes - size;
    } catch (err) {
      // E.g. no right to rename in the log's directory: say so once, then keep appending to the file held.
      this.rotationFailed = true;
      this.pending.unshift(`${linePrefix('warn')}[log rotation failed, the log now grows without bound: ${(err as Error).message}]\n`);
      return Infinity;
    }
  }

  /** Holds the file at the path again if another process rotated (or logrotate moved) it; returns its size. */
  private followPath(): number {
    const held = fs.fstatSync(this.fd);
    const current = statOrNull(this.file);
    if (current !== null && current.ino === held.ino && current.dev === held.dev) return held.size;
    this.reopen();
    return fs.fstatSync(this.fd).size;
  }

  private reopen(): void {
    const fd = this.open();
    fs.closeSync(this.fd);
    this.fd = fd;
  }

  /**
   * Moves the file at the path (ours a moment ago: followPath) aside, opens a new one, prunes old ones.
   * If another process moved it in between, the rename finds nothing or moves that
   * process's new file: either way no line is lost.
   */
  private rotate(): void {
    this.lastRotationMs = Math.max(Date.now(), this.lastRotationMs + 1);
    const stamp = new Date(this.lastRotationMs).toISOString().replace(/[-:]/g, '');
    try {
      fs.renameSync(this.file, `${this.file}.${stamp}.${process.pid}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    this.reopen();
    this.pruneOldFiles();
  }

  /** Removes the oldest rotated files beyond `keep` (another process may remove them first). */
  private pruneOldFiles(): void {
    const dir = path.dirname(this.file);
    const prefix = `${path.basename(this.file)}.`;
    const old = fs.readdirSync(dir)
      .filter((name) => name.startsWith(prefix) && ROTATED_SUFFIX.test(name.slice(prefix.length)))
      .sort();
    for (const name of old.slice(0, Math.max(0, old.length - this.rotation.keep))) {
      try {
        fs.unlinkSync(path.join(dir, name));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }

  private pump(): void {
    this.writing = true;
    const data = this.take(this.prepare(true));
    const writeFrom = (offset: number): void => {
      fs.write(this.fd, data, offset, data.length - offset, null, (err, written) => {
        if (err) {
          this.failed = true;
          this.pending = [];
          process.stderr.write(`boinc-gahp: log write failed: ${err.message}\n`);
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
    if (this.failed) return;
    try {
      // A write still in flight holds the open file: then no rotating (nothing is lost, the file just runs over).
      while (this.pending.length > 0 || this.dropped > 0) fs.writeSync(this.fd, this.take(this.prepare(!this.writing)));
    } catch {
      // Exiting anyway.
    }
  }
}

/**
 * Who writes: `[<pid> <user>]`. One log may be shared by several processes (the BLAHP
 * scripts; GAHPs of several job owners whose `$(USERNAME)` expands alike when the schedd runs
 * them as one uid), so every line names its process and the user it runs as. Worked out once:
 * neither changes while the process runs.
 */
let writer: string | undefined;
function writerTag(): string {
  if (writer === undefined) {
    let user: string;
    try {
      user = os.userInfo().username;
    } catch {
      // A uid with no passwd entry (a container's): the number is what there is.
      user = typeof process.getuid === 'function' ? `uid ${process.getuid()}` : 'unknown user';
    }
    writer = `[${process.pid} ${user.replace(/[^\x21-\x7e]/g, '?')}]`;
  }
  return writer;
}

/** The start of every log line: time, writer, level. */
function linePrefix(level: LogLevel): string {
  return `${new Date().toISOString()} ${writerTag()} ${level.toUpperCase()} `;
}

/** A rotated file's suffix after `<log>.`: UTC time to the millisecond, then the pid. */
const ROTATED_SUFFIX = /^\d{8}T\d{6}\.\d{3}Z\.\d+$/;

function statOrNull(file: string): fs.Stats | null {
  try {
    return fs.statSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export class Logger {
  private readonly secrets = new Set<string>();
  /** Rules for secrets known by where they appear rather than by value (addRedactor). */
  private readonly redactors: Array<(text: string) => string> = [];
  private readonly threshold: number;

  /** Whether the lines go to stderr (--debug): a warning for the user is then printed once, by the log. */
  writesToStderr = false;

  constructor(private readonly sink: LogSink | null = null, level: LogLevel = DEFAULT_LOG_LEVEL) {
    this.threshold = LEVELS[level];
  }

  /** A logger that writes nowhere (still redacts, for callers that format messages). */
  static silent(): Logger {
    return new Logger(null);
  }

  /**
   * Appends to a file, rotated by size. Files it creates get `mode`: 0600 by default, as
   * logs can hold job names and paths. Opening fails at once.
   */
  static toFile(file: string, level: LogLevel = DEFAULT_LOG_LEVEL, rotation: LogRotation = DEFAULT_LOG_ROTATION, mode = 0o600): Logger {
    return new Logger(new AsyncFileSink(file, rotation, mode), level);
  }

  static toStderr(level: LogLevel = DEFAULT_LOG_LEVEL): Logger {
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
      // A message of several lines (a stack) is written as several log lines in one write:
      // each carries the prefix, so every line says when, who and how bad, and they stay together.
      const prefix = linePrefix(level);
      this.sink.write(prefix + this.redact(msg).split(/\r?\n/).join(`\n${prefix}`) + '\n');
    } catch {
      // A broken log never breaks the GAHP.
    }
  }
}
