/** Upload planning: content-addressed physical names and bounded upload_files requests. */

/** BOINC physical name of a file with this MD5 (content-addressed: immutable on the server). */
export function physName(md5: string): string {
  return `condorv_${md5}`;
}

export interface PlannedFile {
  physName: string;
  path: string;
  size: number;
}

/**
 * Splits files into upload_files requests of at most maxBytes in total and maxFiles files
 * each (a single file larger than maxBytes goes alone). Largest first, next-fit.
 */
export function planUploads<T extends { size: number }>(files: readonly T[], maxBytes: number, maxFiles: number): T[][] {
  const sorted = [...files].sort((a, b) => b.size - a.size);
  const groups: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const f of sorted) {
    if (cur.length > 0 && (bytes + f.size > maxBytes || cur.length >= maxFiles)) {
      groups.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(f);
    bytes += f.size;
  }
  if (cur.length > 0) groups.push(cur);
  return groups;
}

/** Splits a list into consecutive pieces of at most n. */
export function chunks<T>(list: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += n) out.push(list.slice(i, i + n));
  return out;
}
