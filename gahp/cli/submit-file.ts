/**
 * A parser for the subset of HTCondor's submit description language that a BOINC grid
 * job uses, for `boinc-gahp submit job.sub`. It yields one entry per queued job (proc),
 * with macros expanded as condor_submit would, and the same facts HTCondor's gridmanager
 * would take from the job ad (app name, arguments, input files, output specs).
 *
 * Supported: executable (the BOINC app name), arguments, transfer_input_files, input,
 * transfer_output_files, transfer_output_remaps, output, error, initialdir,
 * boinc_authenticator_file, grid_resource = boinc <url>, universe = grid; `queue`,
 * `queue N`, `queue [N] <vars> in (...)`, `queue [N] <vars> from <file>|( ... )`;
 * `$(Cluster)`, `$(ClusterId)`, `$(Process)`, `$(ProcId)`, `$(Item)`, `$(Step)`,
 * `$(ItemIndex)`, `$(Row)`, `$(name:default)`, `$ENV(NAME)` and user macros.
 * Known HTCondor commands that cannot be honoured on BOINC are errors naming the line;
 * those that mean nothing for a BOINC job are accepted with a note, or silently when their
 * value asks for what BOINC does anyway (submit-macros.ts). A name one edit away from a
 * command, never used as a macro, is taken for a typo of it: an error with the suggestion.
 *
 * The steps: the text is split into statements (submit-syntax.ts); assignments become macros
 * (submit-macros.ts); each `queue` statement makes its jobs, each job's commands read from the
 * macros as they are at that statement, expanded with the job's own macros (buildProc).
 */
import * as path from 'node:path';
import { projectUrlProblem } from '../settings.js';
import { likelyMisspelt, MacroTable, type Assignment, type LocalMacros } from './submit-macros.js';
import { clip, parseArguments, parseQueue, parseRemaps, splitList, statements, SubmitFileError, type Statement } from './submit-syntax.js';

/** The error every step of reading a submit file throws (it names the file and line). */
export { SubmitFileError };

export interface SubmitInput {
  /** Absolute path on this machine. */
  src: string;
  /** Name the job sees (the basename). */
  dst: string;
}

export interface SubmitProc {
  proc: number;
  /** BOINC app name (`executable`). */
  app: string;
  args: string[];
  /** Absolute initial working directory. */
  iwd: string;
  inputs: SubmitInput[];
  /** `output` / `error` as written (relative paths are under iwd); undefined when unset. */
  output?: string;
  error?: string;
  /** `transfer_output_files`, or undefined when not given (then every output file comes back). */
  transferOutputFiles?: string[];
  /** `transfer_output_remaps`: source name -> destination. */
  outputRemaps: Record<string, string>;
  /** From `grid_resource = boinc <url>`. */
  projectUrl?: string;
  /** Absolute path from `boinc_authenticator_file`. */
  authenticatorFile?: string;
  /** Line of the queue statement that made this job. */
  queueLine: number;
}

export interface SubmitDescription {
  procs: SubmitProc[];
  /** What the user should know but need not change (commands with no effect here). */
  notes: string[];
}

export interface ParseOptions {
  /** Name shown in errors. */
  file: string;
  /** condor_submit's working directory: default iwd, base of relative initialdir and `queue from` files. */
  cwd: string;
  /** What `$(Cluster)` expands to: the cluster id, or a placeholder (a digest of the jobs that does not depend on it). */
  cluster: number | string;
  env?: NodeJS.ProcessEnv;
}

export function parseSubmitDescription(text: string, opts: ParseOptions): SubmitDescription {
  const macros = new MacroTable(opts.file, opts.env ?? process.env);
  const notes: string[] = [];
  const procs: SubmitProc[] = [];
  const stmts = statements(text, opts.file);
  // Names used as $(name) or $(name:default): macros of the user's, whatever they look like.
  const used = new Set([...text.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_.]*)[:)]/g)].map((m) => m[1]!.toLowerCase()));
  let sawQueue = false;
  for (const st of stmts) {
    if (st.kind === 'assign') {
      const meant = used.has(st.name.toLowerCase()) ? undefined : likelyMisspelt(st.name);
      if (meant) throw new SubmitFileError(opts.file, st.line, `unknown command "${st.name}": did you mean "${meant}"?`);
      macros.assign(st.name, st.value, st.line, notes);
      continue;
    }
    sawQueue = true;
    for (const job of queuedJobs(st, macros, opts, procs.length)) procs.push(buildProc(macros, opts, job, st.line));
  }
  if (!sawQueue) throw new SubmitFileError(opts.file, stmts.length ? stmts[stmts.length - 1]!.line : 1, 'no "queue" statement: nothing to submit');
  return { procs, notes };
}

/** A queued job before its commands are read: its number and its own macros. */
interface QueuedJob {
  proc: number;
  local: LocalMacros;
}

/** The jobs a `queue` statement makes, numbered from firstProc. */
function queuedJobs(st: Statement & { kind: 'queue' }, macros: MacroTable, opts: ParseOptions, firstProc: number): QueuedJob[] {
  const base: LocalMacros = new Map([
    ['cluster', String(opts.cluster)],
    ['clusterid', String(opts.cluster)],
  ]);
  const spec = parseQueue(st.rest, opts, st.line, (s) => macros.expand(s, base, st.line));
  const jobs: QueuedJob[] = [];
  spec.items.forEach((fields, itemIndex) => {
    for (let step = 0; step < spec.count; step++) {
      const proc = firstProc + jobs.length;
      const local = new Map(base);
      local.set('process', String(proc));
      local.set('procid', String(proc));
      local.set('step', String(step));
      local.set('itemindex', String(itemIndex));
      local.set('row', String(itemIndex));
      spec.vars.forEach((v, k) => local.set(v.toLowerCase(), fields[k] ?? ''));
      jobs.push({ proc, local });
    }
  });
  return jobs;
}

/** One job's facts, from the macros as they are at its queue statement. */
function buildProc(macros: MacroTable, opts: ParseOptions, { proc, local }: QueuedJob, queueLine: number): SubmitProc {
  const get = (name: string) => macros.get(name, local);
  const fail = (line: number, msg: string): never => {
    throw new SubmitFileError(opts.file, line, msg);
  };
  /** A command's value read by `parse` (a parse error names the command's line); fallback when unset. */
  const parsed = <T>(name: string, parse: (value: string) => T, fallback: T): T => {
    const a = get(name);
    if (!a) return fallback;
    try {
      return parse(a.value);
    } catch (err) {
      return fail(a.line, (err as Error).message);
    }
  };

  const universe = get('universe');
  if (universe && universe.value.toLowerCase() !== 'grid') {
    fail(universe.line, `universe "${universe.value}" is not supported: use "universe = grid" with "grid_resource = boinc <project_url>"`);
  }
  const projectUrl = gridResourceUrl(get('grid_resource'), fail);
  const exe = get('executable');
  if (!exe || exe.value === '') fail(queueLine, 'no "executable": set it to the BOINC app name');
  const app = exe!.value;
  if (!/^[A-Za-z0-9_.-]+$/.test(app)) fail(exe!.line, `executable must be a BOINC app name (letters, digits, "_", "-", "."), got "${clip(app)}"`);

  const initialdir = get('initialdir');
  const iwd = initialdir && initialdir.value ? path.resolve(opts.cwd, initialdir.value) : opts.cwd;
  const args = parsed('arguments', parseArguments, []);

  const inputs: SubmitInput[] = [];
  const tif = get('transfer_input_files');
  const names = tif ? splitList(tif.value) : [];
  const stdin = get('input');
  if (stdin && stdin.value && stdin.value !== '/dev/null' && !names.includes(stdin.value)) names.push(stdin.value);
  for (const n of names) {
    if (n.endsWith('/')) fail(tif?.line ?? queueLine, `transfer_input_files: "${n}" is a directory; BOINC jobs take single files`);
    inputs.push({ src: path.isAbsolute(n) ? n : path.join(iwd, n), dst: path.basename(n) });
  }

  const output = get('output');
  const error = get('error');
  const tof = get('transfer_output_files');
  const outputRemaps = parsed('transfer_output_remaps', parseRemaps, {});
  const auth = get('boinc_authenticator_file');
  return {
    proc,
    app,
    args,
    iwd,
    inputs,
    output: output && output.value ? output.value : undefined,
    error: error && error.value ? error.value : undefined,
    // An empty value (e.g. `transfer_output_files =` to undo an earlier one) means unset.
    transferOutputFiles: tof && tof.value ? splitList(tof.value) : undefined,
    outputRemaps,
    projectUrl,
    authenticatorFile: auth && auth.value ? path.resolve(opts.cwd, auth.value) : undefined,
    queueLine,
  };
}

/** `grid_resource = boinc <url>`: the URL, or undefined when unset. */
function gridResourceUrl(gr: Assignment | undefined, fail: (line: number, msg: string) => never): string | undefined {
  if (!gr) return undefined;
  const parts = gr.value.split(/\s+/);
  if (parts[0]!.toLowerCase() !== 'boinc') fail(gr.line, `grid_resource must be "boinc <project_url>", got "${clip(gr.value)}"`);
  if (parts.length !== 2) fail(gr.line, 'grid_resource must be "boinc <project_url>" (one URL)');
  const url = parts[1]!;
  const problem = projectUrlProblem(url);
  if (problem) fail(gr.line, `grid_resource: project URL ${problem}`);
  return url;
}

/**
 * The output arguments HTCondor's gridmanager sends in BOINC_FETCH_OUTPUT for a job
 * (boincjob.cpp BuildOutputInfo): stderr path, ALL or SOME, and (src, dst) specs.
 */
export function fetchOutputSpec(p: SubmitProc): { iwd: string; stderrPath: string; mode: 'ALL' | 'SOME'; specs: Array<[string, string]> } {
  const stderrPath = p.error ?? '/dev/null';
  if (p.transferOutputFiles === undefined) return { iwd: p.iwd, stderrPath, mode: 'ALL', specs: [] };
  const specs: Array<[string, string]> = p.transferOutputFiles.map((f) => [f, p.outputRemaps[f] ?? path.basename(f)]);
  if (p.output && p.output !== '/dev/null') {
    specs.push([path.basename(p.output), p.output]);
    // (HTCondor also asks for basename(/dev/null) when there is no error file; that name is never an output.)
    if (stderrPath !== p.output && stderrPath !== '/dev/null') specs.push([path.basename(stderrPath), stderrPath]);
  }
  return { iwd: p.iwd, stderrPath, mode: 'SOME', specs };
}
