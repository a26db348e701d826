/**
 * Line framing for the GAHP stdin stream. Knows bytes and lines only.
 * - Lines end at LF; one CR right before the LF is dropped.
 * - A line longer than `maxLineBytes` is reported as overlong once and its bytes are
 *   discarded as they arrive (never buffered whole), up to the next LF.
 * - Bytes are decoded as strict UTF-8; a line that is not valid UTF-8 is reported as such
 *   (so the caller answers `E`) instead of being silently mangled.
 */

export type LineEvent =
  | { kind: 'line'; text: string }
  | { kind: 'overlong'; bytes: number }
  | { kind: 'invalid-utf8' };

export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

export class LineFramer {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private discarding = false;
  private discarded = 0;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly maxLineBytes = DEFAULT_MAX_LINE_BYTES) {}

  /** Feeds a chunk; returns the complete line events it finished, in order. */
  push(chunk: Buffer): LineEvent[] {
    const events: LineEvent[] = [];
    let start = 0;
    while (start < chunk.length) {
      const lf = chunk.indexOf(10, start);
      const end = lf < 0 ? chunk.length : lf;
      this.append(chunk.subarray(start, end));
      if (lf < 0) break;
      events.push(this.finishLine());
      start = lf + 1;
    }
    return events;
  }

  /** At EOF: a last line without LF still counts as a line (if anything was pending). */
  end(): LineEvent[] {
    if (this.buffered === 0 && !this.discarding) return [];
    return [this.finishLine()];
  }

  private append(part: Buffer): void {
    if (part.length === 0) return;
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
    if (this.discarding) {
      const bytes = this.discarded;
      this.discarding = false;
      this.discarded = 0;
      return { kind: 'overlong', bytes };
    }
    let line = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    try {
      return { kind: 'line', text: this.decoder.decode(line) };
    } catch {
      return { kind: 'invalid-utf8' };
    }
  }
}
