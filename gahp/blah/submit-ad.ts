/**
 * The job a BLAH_JOB_SUBMIT ad describes (docs/blah-route.md, "The submit ad"). The ad is
 * what the gridmanager's INFNBatchJob::buildSubmitAd writes from the job ad: Cmd, Iwd,
 * Queue (the job's batch_queue), Arguments (V2) or Args (V1), Environment or Env, In, Out,
 * Err, TransferInput, TransferOutput, TransferOutputRemaps, RequestMemory, JobDirectory
 * (the gridmanager's sandbox id for this submission) and others we ignore (GridResource,
 * StageCmd, gridtype, the MPI and GPU counts, the proxy: BOINC decides those or uses the
 * authenticator).
 *
 * Unlike blahpd, nothing here goes through a shell or wordexp: arguments, remaps and names
 * reach BOINC exactly as the ad holds them (`$HOME` stays `$HOME`).
 */
import * as path from 'node:path';
import { SubmitCheckError } from '../staging/validate.js';
import { ClassAd, ClassAdSyntaxError } from './classad.js';
import { show, type JobRequest, type OutputSpec } from '../batch-boinc/job-check.js';

export interface SubmitAdJob {
  job: JobRequest;
  /**
   * The gridmanager's JobDirectory (`home_bl_<sandbox id>`): the same for every repeat of
   * one submission (the sandbox id is saved in the job queue before the submit is sent),
   * so a repeat after a crash finds the job it already has. Absent in a hand-made ad.
   */
  submissionKey?: string;
}

/** Reads the job from the ad; throws SubmitCheckError (or ClassAdSyntaxError) naming what is wrong. */
export function jobFromSubmitAd(ad: ClassAd): SubmitAdJob {
  const cmd = ad.string('Cmd') ?? '';
  const iwd = ad.string('Iwd');
  if (!iwd) throw new SubmitCheckError('the submit ad has no Iwd (the job\'s directory)');
  if (!path.isAbsolute(iwd)) throw new SubmitCheckError(`the job's directory (Iwd) ${show(iwd)} is not an absolute path`);
  const queue = ad.string('Queue')?.trim();
  const app = queue ? queue : path.basename(cmd);
  if (!app) throw new SubmitCheckError('the job names no BOINC app: set batch_queue = <app> (or an executable named like the app)');

  const env = ad.string('Environment') ?? ad.string('Env') ?? '';
  if (env.trim() !== '') {
    throw new SubmitCheckError('the job sets environment variables, which a BOINC job cannot be given (remove environment and getenv from the job)');
  }
  const stdin = ad.string('In');
  if (stdin !== undefined && stdin !== '' && stdin !== '/dev/null') {
    throw new SubmitCheckError(`the job reads standard input from ${show(stdin)}, which a BOINC app cannot be given (pass it as an input file instead)`);
  }

  const v2 = ad.string('Arguments');
  const args = v2 !== undefined ? splitArgumentsV2(v2) : splitArgumentsV1(ad.string('Args') ?? '');

  const inputPaths = listAttribute(ad.string('TransferInput')).map((name) => {
    if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(name)) {
      throw new SubmitCheckError(`input ${show(name)} is a URL: the GAHP sends BOINC only files from the submit host (transfer the file first)`);
    }
    return path.isAbsolute(name) ? name : path.join(iwd, name);
  });
  const outputNames = ad.string('TransferOutput');
  const remaps = parseRemaps(ad.string('TransferOutputRemaps') ?? '');
  let outputs: OutputSpec[] | null = null;
  if (outputNames !== undefined) {
    outputs = listAttribute(outputNames).map((src) => ({ src, dst: remaps.get(src) ?? src }));
    for (const from of remaps.keys()) {
      if (!outputs.some((o) => o.src === from)) {
        throw new SubmitCheckError(`transfer_output_remaps names ${show(from)}, which is not in transfer_output_files`);
      }
    }
  } else if (remaps.size > 0) {
    outputs = [...remaps].map(([src, dst]) => ({ src, dst }));
  }

  const mem = ad.number('RequestMemory');
  const job: JobRequest = { app, iwd, cmd, args, inputPaths, outputs };
  if (mem !== undefined && Number.isFinite(mem) && mem > 0) job.memoryMb = Math.ceil(mem);
  const out = ad.string('Out');
  const err = ad.string('Err');
  if (out) job.stdout = out;
  if (err) job.stderr = err;
  const key = ad.string('JobDirectory');
  return key ? { job, submissionKey: key } : { job };
}

/** A comma-separated file list (HTCondor's transfer lists): blanks around names dropped, empty items skipped. */
function listAttribute(text: string | undefined): string[] {
  if (!text) return [];
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * TransferOutputRemaps: `name = dest; name2 = dest2`. As HTCondor's own file transfer reads
 * it, blanks around `=` and `;` do not count and a backslash escapes `;`, `=` or itself
 * (blahpd's reader drops an entry with blanks; docs/blahp.md).
 */
export function parseRemaps(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const entries: string[] = [];
  let cur = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      cur += c + text[++i];
    } else if (c === ';') {
      entries.push(cur);
      cur = '';
    } else {
      cur += c;
    }
  }
  entries.push(cur);
  for (const entry of entries) {
    if (entry.trim() === '') continue;
    const eq = unescapedIndex(entry, '=');
    if (eq < 0) throw new SubmitCheckError(`transfer_output_remaps entry ${show(entry.trim())} has no '='`);
    const from = unescape(entry.slice(0, eq).trim());
    const to = unescape(entry.slice(eq + 1).trim());
    if (from === '' || to === '') throw new SubmitCheckError(`transfer_output_remaps entry ${show(entry.trim())} lacks a name on one side of '='`);
    out.set(from, to);
  }
  return out;
}

function unescapedIndex(text: string, ch: string): number {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === ch) return i;
  }
  return -1;
}

function unescape(text: string): string {
  return text.replace(/\\(.)/g, '$1');
}

/**
 * HTCondor's V2 argument syntax (the Arguments attribute): blanks separate arguments; a
 * single quote starts and ends a quoted part in which blanks are kept and `''` is one
 * quote; every other character (double quotes, backslashes, `$`) is itself.
 */
export function splitArgumentsV2(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inArg = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'") {
      inArg = true;
      for (i++; ; i++) {
        if (i >= text.length) throw new SubmitCheckError(`the arguments ${show(text)} end inside a single-quoted part`);
        if (text[i] === "'") {
          if (text[i + 1] === "'") {
            cur += "'";
            i++;
            continue;
          }
          break;
        }
        cur += text[i];
      }
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inArg) out.push(cur);
      cur = '';
      inArg = false;
      continue;
    }
    cur += c;
    inArg = true;
  }
  if (inArg) out.push(cur);
  return out;
}

/** The old V1 syntax (Args): arguments separated by blanks, no quoting. */
export function splitArgumentsV1(text: string): string[] {
  return text.split(/[ \t\r\n]+/).filter((a) => a !== '');
}

export { ClassAdSyntaxError };
