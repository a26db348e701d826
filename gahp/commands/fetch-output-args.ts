/**
 * BOINC_FETCH_OUTPUT's request line, read without loading the command itself (fetch-output.ts
 * and the output modules it brings load with the first fetch: commands/index.ts). What the
 * specs mean, and the gridmanager's stdout and stderr pairs, is in fetch-output.ts.
 */
import * as path from 'node:path';
import { ArgumentError, expectArgCount, parseCount } from '../protocol/commands.js';

/** The command's word and help texts. */
export const FETCH_OUTPUT_SYNOPSIS = {
  name: 'BOINC_FETCH_OUTPUT',
  usage: '<reqid> <job_name> <iwd> <stderr_path> <ALL|SOME> <nspecs> (<src_name> <dst>)...',
  summary: "Fetch a finished job's output files and stderr into its directory.",
};

export interface FetchSpec {
  src: string;
  dst: string;
}

export interface FetchOutputRequest {
  jobName: string;
  iwd: string;
  stderrPath: string;
  mode: 'ALL' | 'SOME';
  specs: FetchSpec[];
  /** The gridmanager's stdout pair (fetch-output.ts), fetched only when the job has that output. */
  stdoutSpec?: FetchSpec;
}

/** Splits off the stdout and stderr pairs the gridmanager appends to SOME's specs (fetch-output.ts). */
function gridmanagerPairs(specs: FetchSpec[], stderrPath: string): { specs: FetchSpec[]; stdoutSpec?: FetchSpec } {
  const isPair = (s: FetchSpec | undefined) => s !== undefined && s.src === path.posix.basename(s.dst);
  const last = specs[specs.length - 1];
  if (!isPair(last) || last!.dst !== stderrPath) return { specs };
  const before = specs[specs.length - 2];
  if (!isPair(before)) return { specs: specs.slice(0, -1) };
  return { specs: specs.slice(0, -2), stdoutSpec: before! };
}

export function parseFetchOutput(args: string[]): FetchOutputRequest {
  expectArgCount(args, 5, Infinity);
  const [jobName, iwd, stderrPath, modeWord, countText] = args as [string, string, string, string, string];
  if (jobName.length === 0) throw new ArgumentError('job name is empty');
  if (!path.isAbsolute(iwd)) throw new ArgumentError(`iwd must be an absolute path, got ${JSON.stringify(iwd.slice(0, 100))}`);
  const mode = modeWord.toUpperCase();
  if (mode !== 'ALL' && mode !== 'SOME') throw new ArgumentError(`expected ALL or SOME, got ${JSON.stringify(modeWord.slice(0, 20))}`);
  const n = parseCount(countText, 'number of file specs', 1_000_000);
  if (args.length !== 5 + 2 * n) throw new ArgumentError(`${n} file specs need ${2 * n} names after the count, got ${args.length - 5}`);
  const specs: FetchSpec[] = [];
  for (let i = 0; i < n; i++) {
    // An empty name (a remap to "", a `dir/` entry) fails when the command runs: an E here
    // would make the gridmanager EXCEPT.
    specs.push({ src: args[5 + 2 * i]!, dst: args[6 + 2 * i]! });
  }
  if (mode === 'ALL') return { jobName, iwd, stderrPath, mode, specs };
  return { jobName, iwd, stderrPath, mode, ...gridmanagerPairs(specs, stderrPath) };
}
