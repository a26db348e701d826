/**
 * The protocol's output: whole lines, in order, handed to the stream only as fast as the
 * reader takes them.
 *
 * When the stream's write() returns false (the pipe is full and node holds the rest), the
 * writer waits for 'drain' before it writes more; what is written meanwhile waits in its
 * queue, in order. The server reads no request while the writer is busy (see `busy`), so
 * the queue holds at most the replies of the lines already read, an `R`, and RESULTS
 * replies, which are written a slice at a time from the results they deliver: each result
 * is released as it is written, and memory never holds a second, joined copy of a
 * RESULTS reply (one can be hundreds of MiB of BOINC_QUERY_BATCHES answers).
 *
 * One-line replies queued in one turn of the event loop go out together, in one write()
 * after it (setImmediate): the `S` replies to a chunk of requests, an `R`; a reply of
 * several lines (RESULTS) is written at once, with them. Each write to the pipe is a system call that wakes the reader;
 * with one per line, a fetch drain of 50 commands in flight spent ~6% of the GAHP's time
 * writing its three lines a job (issue 31).
 */
import type { Logger } from '../log.js';
import { clipRedacted } from './messages.js';

/** About how much text one write() carries when many lines are queued. */
const SLICE_CHARS = 64 * 1024;
/** One-line replies that may wait for the end of the event loop's turn, at most. */
const DEFERRED_REPLIES_MAX = 64;
/** Lines of one reply shown in the debug log (a RESULTS reply can have thousands). */
const LOGGED_LINES = 20;

interface QueuedLines {
  /** The lines, unprefixed and without LF; each entry is dropped once written. */
  lines: Array<string | undefined>;
  next: number;
  /** The response prefix when the lines were queued (RESPONSE_PREFIX may change it later). */
  prefix: string;
}

export class LineWriter {
  private readonly queue: QueuedLines[] = [];
  private waitingForDrain = false;
  /** A write after this turn of the event loop is scheduled. */
  private flushScheduled = false;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  /**
   * @param onDrained called when the writer was busy and is no longer: the server then
   *   handles the requests it held back.
   */
  constructor(
    private readonly output: NodeJS.WritableStream,
    private readonly log: Logger,
    private readonly onDrained: () => void,
  ) {}

  /** Whether output waits for the reader (nothing more should be produced than must be). */
  get busy(): boolean {
    // Lines queued otherwise are written by the end of this turn (flushScheduled) or at once.
    return this.waitingForDrain;
  }

  /**
   * Queues lines, each to be printed as prefix + line + LF. The array becomes the writer's:
   * its entries are released as they are written.
   */
  write(lines: Array<string | undefined>, prefix: string): void {
    if (this.closed || lines.length === 0) return;
    if (this.log.enabled) this.logLines(lines, prefix);
    this.queue.push({ lines, next: 0, prefix });
    if (this.waitingForDrain) return;
    // A reply of several lines (RESULTS) goes at once, with what waits before it: the
    // reader's pace then holds back the requests after it, as before.
    if (lines.length > 1 || this.queue.length >= DEFERRED_REPLIES_MAX) {
      this.pump();
      return;
    }
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (!this.waitingForDrain) this.pump();
      if (!this.busy) this.wakeIdleWaiters();
    });
  }

  /** Resolves when everything queued has been handed to the stream (at once once closed). */
  flushed(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.closed) resolve();
      else if (this.busy || this.flushScheduled) this.idleWaiters.push(resolve);
      else this.output.write('', () => resolve());
    }).then(() => undefined, () => undefined);
  }

  /** The stream is gone (EPIPE): drop what is queued and print nothing more. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.wakeIdleWaiters();
  }

  private pump(): void {
    while (this.queue.length > 0 && !this.closed) {
      let text = '';
      while (this.queue.length > 0 && text.length < SLICE_CHARS) {
        const item = this.queue[0]!;
        while (item.next < item.lines.length && text.length < SLICE_CHARS) {
          text += item.prefix + item.lines[item.next] + '\n';
          item.lines[item.next++] = undefined;
        }
        if (item.next >= item.lines.length) this.queue.shift();
      }
      if (!this.writeOut(text)) {
        this.waitingForDrain = true;
        this.output.once('drain', () => {
          this.waitingForDrain = false;
          this.pump();
          if (!this.busy) {
            this.wakeIdleWaiters();
            this.onDrained();
          }
        });
        return;
      }
    }
  }

  /** Writes a slice; false when the stream asks to wait for 'drain'. */
  private writeOut(text: string): boolean {
    try {
      return this.output.write(text) !== false;
    } catch (err) {
      this.log.error(`write failed: ${(err as Error).message}`);
      return true;
    }
  }

  private wakeIdleWaiters(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) {
      if (this.closed) w();
      else this.output.write('', () => w());
    }
  }

  private logLines(lines: Array<string | undefined>, prefix: string): void {
    const shown = Math.min(lines.length, LOGGED_LINES);
    for (let i = 0; i < shown; i++) this.log.debug(`> ${prefix}${clipRedacted(this.log, lines[i] ?? '')}`);
    if (lines.length > shown) this.log.debug(`> [${lines.length - shown} more lines]`);
  }
}
