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

/** Counts the bytes of a download that is passed on as it is (get_output3.php's files). */
export class ByteCount extends Transform {
  bytes = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    cb(null, chunk);
  }
}

/**
 * The messages of get_output3.php's error pages (error_page(): a whole HTML page, the
 * message amid the project's header and footer), and what each means.
 */
const WEB_PAGE_ERRORS: ReadonlyArray<readonly [text: string, code: 'bad-name' | 'no-such-file' | 'refused' | undefined]> = [
  ['bad WU name', 'bad-name'],
  ['bad logical name', 'bad-name'],
  ['no batch dir', 'no-such-file'],
  ['not owner', 'refused'],
  ['no result', undefined],
  ['no workunit', undefined],
  ['bad index', undefined],
  ['Zip failed', undefined],
];

/**
 * What a page of BOINC's web code that is not a file says (docs/boinc-server.md,
 * "get_output3.php"): one of error_page()'s known messages, or PHP's complaint of a file
 * that is not there (`filesize(): stat failed`, printed before the download's headers),
 * else the start of the page's text.
 */
export function webPageError(html: string): { message: string; code?: 'bad-name' | 'no-such-file' | 'refused' } {
  const text = stripTags(html);
  if (/filesize\(\): stat failed|readfile\(.*(No such file|Failed to open)/.test(text)) return { message: 'the file is not on the server', code: 'no-such-file' };
  for (const [known, code] of WEB_PAGE_ERRORS) {
    if (text.includes(known)) return code ? { message: known, code } : { message: known };
  }
  return { message: (text || '(an empty page)').slice(0, 200) };
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
