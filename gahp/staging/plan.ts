/** Physical names and request sizing helpers for staging (upload groups: upload.ts, UploadGrouper). */

/** BOINC physical name of a file with this MD5 (content-addressed: immutable on the server). */
export function physName(md5: string): string {
  return `condorv_${md5}`;
}

/** Splits a list into consecutive pieces of at most n. */
export function chunks<T>(list: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += n) out.push(list.slice(i, i + n));
  return out;
}
