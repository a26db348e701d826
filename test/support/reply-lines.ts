/**
 * Splits the GAHP's stdout into protocol lines the way HTCondor's client reads them: an
 * LF ends a line unless a backslash escapes it (a token may hold an escaped newline).
 */
export class ReplyLineSplitter {
  private partial = '';
  private escaped = false;

  push(chunk: string): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (this.escaped) {
        this.escaped = false;
      } else if (c === 92) {
        this.escaped = true;
      } else if (c === 10) {
        lines.push(this.partial + chunk.slice(start, i));
        this.partial = '';
        start = i + 1;
      }
    }
    this.partial += chunk.slice(start);
    return lines;
  }

  /** Text after the last line end (an unfinished line). */
  get rest(): string {
    return this.partial;
  }
}
