/**
 * One HTTP/1.x reply read from the bytes of its connection (post.ts): the head (status line
 * and header fields), then the body, framed as RFC 9112 section 6.3 says: chunked transfer
 * coding, else Content-Length, else the end of the connection (what BOINC's PHP replies
 * use: no Content-Length, `Connection: close`; docs/boinc-server.md). Interim 1xx replies
 * are skipped. No I/O here: the caller pushes what it reads and ends at EOF.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HttpFailure, ReplyTooLarge } from './http.js';

/** Longest reply head read (status line and header fields together). */
const MAX_HEAD_BYTES = 64 * 1024;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

const malformed = (what: string) => new HttpFailure('HPE_INVALID_REPLY', `malformed HTTP reply: ${what}`);

export class ReplyReader {
  status = 0;
  statusMessage = '';
  headers: IncomingHttpHeaders = {};
  private pending: Buffer = Buffer.alloc(0);
  private inHead = true;
  private framing: 'chunked' | 'length' | 'close' = 'close';
  /** Body bytes still expected: of the Content-Length, or of the current chunk. */
  private left = 0;
  /** Chunked coding: what comes next (a size line, chunk data, the CRLF after it, trailers). */
  private chunkState: 'size' | 'data' | 'data-end' | 'trailers' = 'size';
  private readonly chunks: Buffer[] = [];
  private bodyBytes = 0;
  done = false;

  constructor(private readonly maxBodyBytes: number) {}

  /** The body read so far (all of it once `done`). */
  body(): Buffer {
    return Buffer.concat(this.chunks, this.bodyBytes);
  }

  /** Takes bytes of the connection; true once the reply is complete (later bytes are ignored). */
  push(data: Buffer): boolean {
    if (this.done) return true;
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    while (!this.done && this.pending.length > 0) {
      if (this.inHead) {
        if (!this.readHead()) break;
      } else if (this.framing === 'chunked') {
        if (!this.readChunked()) break;
      } else {
        this.take(this.framing === 'length' ? Math.min(this.left, this.pending.length) : this.pending.length);
        if (this.framing === 'length' && this.left === 0) this.done = true;
      }
    }
    return this.done;
  }

  /**
   * The connection ended: true if the reply was complete. A body framed by the end of the
   * connection is complete now; one missing bytes of its Content-Length or chunks is not.
   */
  end(): boolean {
    if (!this.done && !this.inHead && this.framing === 'close') this.done = true;
    return this.done;
  }

  /** Whether the head has been read (the server answered). */
  get answered(): boolean {
    return !this.inHead;
  }

  private readHead(): boolean {
    const at = this.pending.indexOf(HEAD_END);
    if (at < 0) {
      if (this.pending.length > MAX_HEAD_BYTES) throw malformed(`head longer than ${MAX_HEAD_BYTES} bytes`);
      return false;
    }
    const lines = this.pending.subarray(0, at).toString('latin1').split('\r\n');
    this.pending = this.pending.subarray(at + HEAD_END.length);
    const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0]!);
    if (!m) throw malformed(`status line ${JSON.stringify(lines[0]!.slice(0, 80))}`);
    const status = Number(m[1]);
    if (status >= 100 && status < 200) return true; // interim (100 Continue): the real head follows
    const headers = Object.create(null) as Record<string, string>;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) throw malformed(`header line ${JSON.stringify(line.slice(0, 80))}`);
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    this.status = status;
    this.statusMessage = m[2] ?? '';
    this.headers = headers;
    this.inHead = false;
    if (/(?:^|,)\s*chunked\s*$/i.test(headers['transfer-encoding'] ?? '')) {
      this.framing = 'chunked';
    } else if (headers['content-length'] !== undefined) {
      if (!/^\d+$/.test(headers['content-length'])) throw malformed(`Content-Length ${JSON.stringify(headers['content-length'])}`);
      this.framing = 'length';
      this.left = Number(headers['content-length']);
      if (this.left > this.maxBodyBytes) throw new ReplyTooLarge(this.maxBodyBytes, status);
      if (this.left === 0) this.done = true;
    }
    return true;
  }

  /** Chunked transfer coding; false when more bytes are needed. */
  private readChunked(): boolean {
    switch (this.chunkState) {
      case 'size': {
        const at = this.pending.indexOf(CRLF);
        if (at < 0) return this.lineTooLong();
        const m = /^([0-9A-Fa-f]{1,15})(?:;.*)?$/.exec(this.pending.subarray(0, at).toString('latin1').trim());
        if (!m) throw malformed('chunk size line');
        this.pending = this.pending.subarray(at + CRLF.length);
        this.left = parseInt(m[1]!, 16);
        this.chunkState = this.left === 0 ? 'trailers' : 'data';
        return true;
      }
      case 'data':
        this.take(Math.min(this.left, this.pending.length));
        if (this.left === 0) this.chunkState = 'data-end';
        return true;
      case 'data-end':
        if (this.pending.length < CRLF.length) return false;
        if (!this.pending.subarray(0, CRLF.length).equals(CRLF)) throw malformed('chunk not followed by CRLF');
        this.pending = this.pending.subarray(CRLF.length);
        this.chunkState = 'size';
        return true;
      case 'trailers': {
        const at = this.pending.indexOf(CRLF);
        if (at < 0) return this.lineTooLong();
        this.pending = this.pending.subarray(at + CRLF.length);
        if (at === 0) this.done = true; // the empty line after the trailer fields
        return true;
      }
    }
  }

  private lineTooLong(): false {
    if (this.pending.length > MAX_HEAD_BYTES) throw malformed('chunk line too long');
    return false;
  }

  /** Moves n bytes of `pending` into the body, within the caller's limit. */
  private take(n: number): void {
    if (this.bodyBytes + n > this.maxBodyBytes) throw new ReplyTooLarge(this.maxBodyBytes, this.status);
    this.chunks.push(this.pending.subarray(0, n));
    this.bodyBytes += n;
    this.pending = this.pending.subarray(n);
    this.left -= n;
  }
}
