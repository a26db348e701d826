/** Types shared by the hash pool and its worker threads. */

/** What identifies a file's content without reading it: decimal strings (bigint-safe). */
export interface FileKey {
  dev: string;
  ino: string;
  size: string;
  /** Modification time in nanoseconds since the epoch (as precise as the filesystem). */
  mtimeNs: string;
  /** Status change time in nanoseconds: moves on every write, even when mtime is put back. */
  ctimeNs: string;
}

export interface WorkerHashRequest {
  id: number;
  paths: string[];
}

export type WorkerHashResult =
  | { path: string; md5: string; key: FileKey; hashedAtMs: number; error?: undefined }
  | { path: string; error: string; md5?: undefined };

export interface WorkerHashReply {
  id: number;
  results: WorkerHashResult[];
}
