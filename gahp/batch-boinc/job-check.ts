/**
 * One BLAH job checked alone, before it joins a batch (docs/blahp.md, "Jobs"): the rules
 * both BLAH routes apply, whether the job came as blahpd's submit options (the scripts,
 * gahp/blahp/submit.ts) or as the gridmanager's submit ad (the GAHP's own BLAH_JOB_SUBMIT,
 * gahp/blah/). A job that fails a check is refused with its own reason and nothing is
 * sent or queued for it; the jobs submitted beside it are not affected.
 */
import * as path from 'node:path';
import type { AppTemplates } from '../../boinc-rpc/types.js';
import { argumentProblem, checkInputFiles, orderInputs, SubmitCheckError } from '../staging/validate.js';
import { appProblem } from './names.js';

export interface OutputSpec {
  /** The output's name, relative to the job's working directory. */
  src: string;
  /** Where it goes: relative to Iwd unless absolute. */
  dst: string;
}

/** A job as the front end read it, before any check that needs the file system or the server. */
export interface JobRequest {
  app: string;
  iwd: string;
  cmd: string;
  args: string[];
  /** Absolute paths of the input files, in the order given. */
  inputPaths: string[];
  /** Outputs and their destinations; null: every output of the app. */
  outputs: OutputSpec[] | null;
  stdout?: string;
  stderr?: string;
  /** RequestMemory in MB (0 or absent: none). */
  memoryMb?: number;
}

/** The checks that need nothing but the request (app name, arguments). */
export function checkRequestAlone(req: JobRequest): void {
  const ap = appProblem(req.app);
  if (ap) throw new SubmitCheckError(ap);
  req.args.forEach((a, k) => {
    const p = argumentProblem(a);
    if (p) throw new SubmitCheckError(`argument ${k + 1} ${show(a)} ${p}; BOINC passes arguments through its XML job description unchanged only without these characters (put such a value in an input file instead)`);
  });
}

/**
 * Every check of one job: its inputs exist and are readable, their number fits the app's
 * input template (they come back in template order) and its output names are the app's.
 * `templates` answers the app's templates (a failure there refuses the job: an unknown app).
 */
export async function checkJob(req: JobRequest, templates: (app: string) => Promise<AppTemplates>): Promise<{ inputs: Array<{ src: string; dst: string }>; templates: AppTemplates }> {
  checkRequestAlone(req);
  const inputs = req.inputPaths.map((src) => ({ src, dst: path.basename(src) }));
  await checkInputFiles(req.inputPaths);
  const t = await templates(req.app);
  let ordered: Array<{ src: string; dst: string }>;
  try {
    ordered = orderInputs([{ name: 'job', args: req.args, inputs }], t.inputOpenNames).jobs[0]!.inputs;
  } catch (err) {
    // orderInputs names jobs of a BOINC_SUBMIT; here there is one, the job itself.
    if (err instanceof SubmitCheckError) throw new SubmitCheckError(err.message.replace(/^job job /, 'the job '));
    throw err;
  }
  const outs = t.outputOpenNames;
  const zipped = outs.length === 1 && outs[0]!.toLowerCase().endsWith('.zip');
  if (req.outputs && !zipped) {
    for (const o of req.outputs) {
      if (!outs.includes(o.src)) throw new SubmitCheckError(`output file ${show(o.src)} is not an output of BOINC app ${req.app} (its outputs: ${outs.join(', ') || 'none'})`);
    }
  }
  return { inputs: ordered, templates: t };
}

export function show(text: string): string {
  return JSON.stringify(text.length > 80 ? text.slice(0, 80) + '...' : text);
}
