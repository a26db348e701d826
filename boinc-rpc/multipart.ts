/**
 * The multipart/form-data body of every BOINC RPC, built with the form-data package: the
 * text field `request`, then `file_0`, `file_1`, ... streamed from disk when the body
 * reaches them (one file open at a time, a chunk in memory at a time). Each file part is
 * announced with the size the file had when it was stat'ed, so the body has a known
 * Content-Length (what PHP compares with post_max_size; docs/boinc-server.md, "PHP's
 * limits on uploads"), and a file whose size changed meanwhile fails the request with
 * FileChangedError instead of sending a body of the wrong length.
 */
import type FormDataType from 'form-data';
import * as fsp from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { FileChangedError } from './http-errors.js';

export interface FilePart {
  /** Path of the content (opened when the body reaches it). */
  path: string;
  /** Size the part is announced with (the file is stat'ed just before). */
  size: number;
  /** The filename in its Content-Disposition. */
  name: string;
}

type FormDataClass = typeof FormDataType;

const require = createRequire(import.meta.url);
let formDataClass: FormDataClass | undefined;
/** form-data (CommonJS), loaded with the first body built or sized: an idle GAHP does without it. */
const FormData = (): FormDataClass => (formDataClass ??= require('form-data') as FormDataClass);

/** Bytes of file content read and sent at a time. */
const FILE_CHUNK = 64 * 1024;

/**
 * The filename as put in the part's header: form-data writes it between quotes as it is
 * (and keeps only what follows the last slash), so quotes, line breaks and backslashes
 * become `_` (physical names never have them; a test does).
 */
const partFilename = (name: string) => name.replace(/["\r\n\\/]/g, '_');

/** The file's bytes, exactly `f.size` of them, or FileChangedError. */
async function* fileContent(f: FilePart): AsyncGenerator<Buffer> {
  const fh = await fsp.open(f.path, 'r');
  try {
    let sent = 0;
    for (;;) {
      // One byte more than announced is asked for: getting it says the file grew.
      const buf = Buffer.allocUnsafe(Math.min(FILE_CHUNK, f.size - sent + 1));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      sent += bytesRead;
      if (sent > f.size) break;
      yield buf.subarray(0, bytesRead);
    }
    if (sent !== f.size) throw new FileChangedError(`${f.path} changed size while it was being sent (${f.size} bytes announced)`);
  } finally {
    await fh.close();
  }
}

/**
 * The body of an RPC: `request`, then the files as file_0, file_1, ... `close()` ends the
 * file streams (and closes their files) of a body that was not sent to its end.
 */
export function requestForm(request: string, files: readonly FilePart[]): { form: FormDataType; close: () => void } {
  const form = new (FormData())();
  form.append('request', request);
  const streams: Readable[] = [];
  files.forEach((f, i) => {
    const options = { filename: partFilename(f.name), contentType: 'application/octet-stream', knownLength: f.size };
    // An empty file is an empty part, as before (form-data cannot size a stream of knownLength 0).
    if (f.size === 0) return form.append(`file_${i}`, Buffer.alloc(0), options);
    const content = Readable.from(fileContent(f), { objectMode: false });
    streams.push(content);
    form.append(`file_${i}`, content, options);
  });
  return { form, close: () => streams.forEach((s) => s.destroy()) };
}

/**
 * The exact Content-Length requestForm's body has for this request field and these files
 * (form-data's boundaries are all of one length), computed by form-data itself.
 */
export function multipartLength(request: string, files: ReadonlyArray<{ name: string; size: number }>): number {
  const form = new (FormData())();
  form.append('request', request);
  files.forEach((f, i) => form.append(`file_${i}`, Buffer.alloc(0), { filename: partFilename(f.name), contentType: 'application/octet-stream', knownLength: f.size }));
  return form.getLengthSync();
}

/**
 * What each file part adds to that length (its head, its bytes and the line break after
 * them), as form-data computes it: multipartLength of n files = multipartLength of none +
 * the sizes of parts 0..n-1. One scratch form serves all the parts a sizer is asked about.
 */
export function filePartSizer(): (index: number, name: string, size: number) => number {
  let scratch: FormDataType | undefined;
  let parts = 0;
  let length = 0;
  return (index, name, size) => {
    // A fresh scratch form every 64 parts: what it holds of each part is kept until then.
    if (scratch === undefined || parts++ % 64 === 0) {
      scratch = new (FormData())();
      // A field first, so that the closing boundary is counted before the first part.
      scratch.append('request', '');
      length = scratch.getLengthSync();
    }
    scratch.append(`file_${index}`, Buffer.alloc(0), { filename: partFilename(name), contentType: 'application/octet-stream', knownLength: size });
    const before = length;
    length = scratch.getLengthSync();
    return length - before;
  };
}
