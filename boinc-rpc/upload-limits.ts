/**
 * What one upload_files request may hold on a BOINC project: the project runs PHP, which
 * refuses what exceeds its php.ini limits before BOINC's handler sees the request
 * (docs/boinc-server.md, "PHP's limits on uploads"):
 * - max_file_uploads (default 20): files beyond it are dropped;
 * - post_max_size (default 8M): a bigger body (multipart framing included) arrives empty;
 * - upload_max_filesize (default 2M): a bigger file arrives as a failed upload.
 */

export interface PhpUploadLimits {
  /** Most files in one request. */
  maxFileUploads: number;
  /** Largest request body in bytes, multipart framing included. */
  postMaxSize: number;
  /** Largest single file in bytes. */
  uploadMaxFilesize: number;
}

/** PHP's own defaults, which a project has unless it raised them. */
export const PHP_DEFAULT_UPLOAD_LIMITS: Readonly<PhpUploadLimits> = {
  maxFileUploads: 20,
  postMaxSize: 8 * 1024 * 1024,
  uploadMaxFilesize: 2 * 1024 * 1024,
};

/** A php.ini size (`8M`, `2M`, `512K`, `1G`, or plain bytes) in bytes, as PHP reads it. */
export function parsePhpSize(text: string): number {
  const m = /^\s*(\d+)\s*([KMG]?)\s*$/i.exec(text);
  if (!m) throw new Error(`"${text}" is not a php.ini size (e.g. 8M, 2M, 512K, 1G, or bytes)`);
  const unit = m[2]!.toUpperCase();
  const n = Number(m[1]) * (unit === 'G' ? 1024 ** 3 : unit === 'M' ? 1024 ** 2 : unit === 'K' ? 1024 : 1);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`"${text}" is not a positive size`);
  return n;
}

/** Bytes as php.ini would say it, when exact (`8M`), else plain bytes. */
export function formatPhpSize(bytes: number): string {
  for (const [unit, f] of [['G', 1024 ** 3], ['M', 1024 ** 2], ['K', 1024]] as const) {
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${unit}`;
  }
  return String(bytes);
}
