/**
 * Line framing for the GAHP stdin stream. Knows bytes, backslashes and lines only.
 * - Lines end at an LF that is not escaped. HTCondor's client escapes LF inside an
 *   argument as backslash + LF, so an LF preceded by an odd run of backslashes belongs to
 *   the line (the tokenizer later turns `\<LF>` into a literal LF).
 * - One unescaped CR right before the terminating LF is dropped (the client ends lines
 *   with CR LF).
 * - A line longer than `maxLineBytes` is reported as overlong once and its bytes are
 *   discarded as they arrive (never buffered whole), up to the next line end.
 * - Bytes are decoded as strict UTF-8; a line that is not valid UTF-8 is reported as such
 *   (so the caller answers `E`) instead of being silently mangled.
 */

export type LineEvent =
  | { kind: 'line'; text: string }
  | { kind: 'overlong'; bytes: number }
  | { kind: 'invalid-utf8' };

export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

const LF = 10;
const CR = 13;
const BACKSLASH = 92;

export class LineFramer {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private discarding = false;
  private discarded = 0;
  /** Length of the run of backslashes that ends the current line so far. */
  private trailingBackslashes = 0;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  constructor(private readonly maxLineBytes = DEFAULT_MAX_LINE_BYTES) {
    if (!(maxLineBytes > 0)) throw new RangeError('maxLineBytes must be positive');
  }

  /** Bytes of the current, unfinished line held in memory (never more than maxLineBytes). */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Feeds a chunk; returns the complete line events it finished, in order. */
  push(chunk: Buffer): LineEvent[] {
    const events: LineEvent[] = [];
    let start = 0;
    let search = 0;
    while (search < chunk.length) {
      const lf = chunk.indexOf(LF, search);
      if (lf < 0) break;
      // Is this LF escaped? Count the backslashes right before it (into earlier chunks).
      let run = 0;
      let i = lf - 1;
      while (i >= start && chunk[i] === BACKSLASH) { run++; i--; }
      if (i < start) run += this.trailingBackslashes;
      if (run % 2 === 1) {
        // Escaped: part of the line.
        search = lf + 1;
        continue;
      }
      this.append(chunk.subarray(start, lf));
      events.push(this.finishLine());
      start = search = lf + 1;
    }
    if (start < chunk.length) this.append(chunk.subarray(start));
    return events;
  }

  /** At EOF: a last line without LF still counts as a line (if anything was pending). */
  end(): LineEvent[] {
    if (this.buffered === 0 && !this.discarding) return [];
    return [this.finishLine()];
  }

  private append(part: Buffer): void {
    if (part.length === 0) return;
    let run = 0;
    for (let i = part.length - 1; i >= 0 && part[i] === BACKSLASH; i--) run++;
    this.trailingBackslashes = run === part.length ? this.trailingBackslashes + run : run;
    if (this.discarding) {
      this.discarded += part.length;
      return;
    }
    if (this.buffered + part.length > this.maxLineBytes) {
      this.discarding = true;
      this.discarded = this.buffered + part.length;
      this.chunks = [];
      this.buffered = 0;
      return;
    }
    // Copy: the caller's chunk buffer may be reused by the stream.
    this.chunks.push(Buffer.from(part));
    this.buffered += part.length;
  }

  private finishLine(): LineEvent {
    this.trailingBackslashes = 0;
    if (this.discarding) {
      const bytes = this.discarded;
      this.discarding = false;
      this.discarded = 0;
      return { kind: 'overlong', bytes };
    }
    let line = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    if (line.length > 0 && line[line.length - 1] === CR) {
      // Drop the CR unless it is escaped (an argument ending in a CR, then the line end).
      let run = 0;
      for (let i = line.length - 2; i >= 0 && line[i] === BACKSLASH; i--) run++;
      if (run % 2 === 0) line = line.subarray(0, line.length - 1);
    }
    try {
      return { kind: 'line', text: this.decoder.decode(line) };
    } catch {
      return { kind: 'invalid-utf8' };
    }
  }
}
