/**
 * A `batch boinc` job's standard files, as both BLAH routes keep them (docs/blah-route.md,
 * docs/blahp.md): Err emptied when a run starts, Out made when the job's outputs are in.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { errorMessage } from '../util.js';
import type { JobRequest } from './job-check.js';

/** A job's file name as HTCondor means it: relative to its Iwd unless absolute. (The output
 * modules load with the first fetch: commands/index.ts.) */
function resolveUnder(iwd: string, p: string): string {
  return path.isAbsolute(p) ? p : path.join(iwd, p);
}

/**
 * A new run starts with an empty Err, as HTCondor's own runs do (the job's stderr is
 * appended to it when the job ends): a resubmission's error file holds only its run's.
 * Undefined when fine, else why the file cannot be written (the job is refused). Both BLAH
 * routes call this, once the job passed its checks and before it is queued.
 */
export function startErrorFile(job: Pick<JobRequest, 'iwd' | 'stderr'>): string | undefined {
  if (!job.stderr || job.stderr === '/dev/null') return undefined;
  const file = resolveUnder(job.iwd, job.stderr);
  try {
    fs.writeFileSync(file, '', { mode: 0o644 });
    return undefined;
  } catch (err) {
    return `the job's error file ${file} cannot be written (${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}): fix its directory, or the error line of the submit file`;
  }
}

/** Out exists after the job (empty: a BOINC app has no standard output of its own). Both BLAH routes call this. */
export function ensureStdout(spec: Pick<JobRequest, 'iwd' | 'stdout' | 'stderr'>): void {
  if (!spec.stdout || spec.stdout === '/dev/null' || spec.stdout === spec.stderr) return;
  const file = resolveUnder(spec.iwd, spec.stdout);
  try {
    fs.closeSync(fs.openSync(file, 'a', 0o644));
  } catch (err) {
    throw new Error(`cannot create the job's standard output file ${file}: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
  }
}
