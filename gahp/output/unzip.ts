/**
 * Unpacking a job's .zip output with a zip library (no shell, no `unzip`). The archive is
 * checked as a whole before anything is written: an entry whose path is absolute, holds a
 * `..` or a backslash, is a symlink (or any other special file), is encrypted, or appears
 * twice makes the whole archive refused. Entry sizes are validated while reading.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type yauzl from 'yauzl';
import { isSafeRelativePath } from './staging.js';

export class ZipRefusedError extends Error {
  override name = 'ZipRefusedError';
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const MADE_BY_UNIX = 3;

export class SafeZip {
  /** Regular file entries by name. */
  private readonly entries = new Map<string, yauzl.Entry>();
  /** Directory entries (names without the trailing `/`). */
  readonly dirs: string[] = [];

  private constructor(private readonly zip: yauzl.ZipFile) {}

  /** Opens and checks every entry; throws ZipRefusedError for an unsafe archive. */
  static async open(file: string): Promise<SafeZip> {
    let zip: yauzl.ZipFile;
    try {
      // Loaded on the first zip output: most GAHPs never see one (~8 MiB of RSS otherwise).
      const { default: lib } = await import('yauzl');
      zip = await lib.openPromise(file, { lazyEntries: true, autoClose: false, strictFileNames: true, validateEntrySizes: true });
    } catch (err) {
      throw new ZipRefusedError(`not a readable zip archive: ${(err as Error).message}`);
    }
    const safe = new SafeZip(zip);
    try {
      for await (const entry of zip.eachEntry()) safe.check(entry);
    } catch (err) {
      zip.close();
      if (err instanceof ZipRefusedError) throw err;
      // yauzl itself refuses absolute and `..` names while listing.
      throw new ZipRefusedError(`unsafe or damaged zip archive: ${(err as Error).message}`);
    }
    return safe;
  }

  private check(entry: yauzl.Entry): void {
    const name = entry.fileName;
    const isDir = name.endsWith('/');
    const bare = isDir ? name.slice(0, -1) : name;
    if (!isSafeRelativePath(bare)) throw new ZipRefusedError(`zip entry ${JSON.stringify(name)} would land outside the job's directory`);
    const madeBy = entry.versionMadeBy >> 8;
    const mode = (entry.externalFileAttributes >>> 16) & S_IFMT;
    if (madeBy === MADE_BY_UNIX && mode !== 0) {
      if (mode !== S_IFREG && mode !== S_IFDIR) {
        const what = mode === 0o120000 ? 'a symbolic link' : 'a special file';
        throw new ZipRefusedError(`zip entry ${JSON.stringify(name)} is ${what}`);
      }
      if ((mode === S_IFDIR) !== isDir) throw new ZipRefusedError(`zip entry ${JSON.stringify(name)} has an inconsistent type`);
    }
    if (entry.isEncrypted()) throw new ZipRefusedError(`zip entry ${JSON.stringify(name)} is encrypted`);
    const normal = path.posix.normalize(bare);
    if (isDir) {
      this.dirs.push(normal);
      return;
    }
    if (this.entries.has(normal)) throw new ZipRefusedError(`zip entry ${JSON.stringify(name)} appears twice`);
    this.entries.set(normal, entry);
  }

  /** Names of the regular files in the archive (normalised relative paths). */
  get files(): string[] {
    return [...this.entries.keys()];
  }

  /** The uncompressed size the archive declares for a file entry (checked while extracting). */
  size(name: string): number {
    return this.entries.get(path.posix.normalize(name))?.uncompressedSize ?? 0;
  }

  has(name: string): boolean {
    return this.entries.has(path.posix.normalize(name));
  }

  /** Writes one file entry to dest (a temp path the caller renames later). */
  async extract(name: string, dest: string, signal?: AbortSignal): Promise<void> {
    const entry = this.entries.get(path.posix.normalize(name));
    if (!entry) throw new Error(`no file ${JSON.stringify(name)} in the zip archive`);
    const input = await this.zip.openReadStreamPromise(entry);
    await pipeline(input, fs.createWriteStream(dest, { flags: 'wx', mode: 0o644 }), { signal });
    const fh = await fsp.open(dest, 'r+');
    try { await fh.sync(); } finally { await fh.close(); }
  }

  close(): void {
    this.zip.close();
  }
}
