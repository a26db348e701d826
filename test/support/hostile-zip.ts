/**
 * Zip archives for tests of output unpacking, including hostile ones. yazl refuses unsafe
 * entry names, so entries are written under a same-length harmless name and `rename` then
 * patches every occurrence (local header and central directory) in place.
 */
import * as yazl from 'yazl';

export interface ZipEntrySpec {
  name: string;
  data: string;
  /** Unix mode, e.g. 0o120777 for a symlink entry. */
  mode?: number;
}

export function makeZip(entries: ZipEntrySpec[], rename: Array<[string, string]> = [], compress = false): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const zip = new yazl.ZipFile();
    for (const e of entries) zip.addBuffer(Buffer.from(e.data), e.name, { compress, mode: e.mode ?? 0o100644 });
    const chunks: Buffer[] = [];
    zip.outputStream.on('data', (c: Buffer) => chunks.push(c));
    zip.outputStream.on('end', () => {
      const buf = Buffer.concat(chunks);
      for (const [from, to] of rename) {
        if (from.length !== to.length) throw new Error('rename must keep the length');
        let at = buf.indexOf(from);
        if (at < 0) throw new Error(`entry ${from} not found`);
        while (at >= 0) {
          buf.write(to, at, 'latin1');
          at = buf.indexOf(from, at + 1);
        }
      }
      resolve(buf);
    });
    zip.outputStream.on('error', reject);
    zip.end();
  });
}
