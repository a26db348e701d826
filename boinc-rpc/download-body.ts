/**
 * What a download's body is checked with on its way to the file (transport.ts): get_output.php
 * answers its errors with HTTP 200 and a body beginning `ERROR: ` (docs/boinc-server.md),
 * which must not end up in the user's output file; and the helpers for bodies of failed
 * downloads and for redirects.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { decodeServerText } from './xml.js';

/** Passes a download through unless it starts with `ERROR: ` (get_output.php's HTTP-200 errors). */
export class ErrorBodyCheck extends Transform {
  private head: Buffer[] = [];
  private headLen = 0;
  private decided: 'pass' | 'error' | undefined;
  private errorText: Buffer[] = [];
  private errorLen = 0;
  bytes = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.decided === 'pass') {
      this.bytes += chunk.length;
      cb(null, chunk);
      return;
    }
    if (this.decided === 'error') {
      this.keepError(chunk);
      cb();
      return;
    }
    this.head.push(chunk);
    this.headLen += chunk.length;
    if (this.headLen >= 7) this.decide();
    cb();
  }

  private keepError(chunk: Buffer): void {
    if (this.errorLen < 1024 * 1024) {
      this.errorText.push(chunk);
      this.errorLen += chunk.length;
    }
  }

  private decide(): void {
    const all = Buffer.concat(this.head);
    this.head = [];
    if (all.subarray(0, 7).toString('latin1') === 'ERROR: ') {
      this.decided = 'error';
      this.keepError(all);
    } else {
      this.decided = 'pass';
      this.bytes += all.length;
      this.push(all);
    }
  }

  override _flush(cb: TransformCallback): void {
    if (this.decided === undefined) {
      // Shorter than 7 bytes: only a bare `ERROR:` counts.
      const all = Buffer.concat(this.head);
      if (all.toString('latin1').trimEnd() === 'ERROR:') {
        this.decided = 'error';
        this.keepError(all);
      } else {
        this.bytes += all.length;
        if (all.length) this.push(all);
        this.decided = 'pass';
      }
    }
    if (this.decided === 'error') {
      cb(new ErrorBodyFound(decodeServerText(Buffer.concat(this.errorText)).trim()));
      return;
    }
    cb();
  }
}

/** The download's body was an `ERROR: ` text (the message). */
export class ErrorBodyFound extends Error {}

/** Redirect statuses a download follows (within its origin), and how many in a row. */
export const REDIRECTS = new Set([301, 302, 303, 307, 308]);
export const MAX_REDIRECTS = 10;

/** Where a redirect points (Location resolved against the URL it answered), if anywhere valid. */
export function redirectTarget(location: string | undefined, from: string): URL | undefined {
  if (!location) return undefined;
  try {
    return new URL(location, from);
  } catch {
    return undefined;
  }
}

export function stripTags(s: string): string {
  return s.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 2000);
}

export async function readSome(stream: NodeJS.ReadableStream, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (n < max) {
      chunks.push(chunk);
      n += chunk.length;
    }
  }
  return decodeServerText(Buffer.concat(chunks).subarray(0, max));
}
