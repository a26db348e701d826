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
 * Known HTCondor commands that cannot be honoured on BOINC are errors naming the line; a
 * few that do not matter here are accepted with a warning.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export class SubmitFileError extends Error {
  override name = 'SubmitFileError';
  constructor(readonly file: string, readonly line: number, message: string) {
    super(`${file}:${line}: ${message}`);
  }
}

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
  warnings: string[];
}

export interface ParseOptions {
  /** Name shown in errors. */
  file: string;
  /** condor_submit's working directory: default iwd, base of relative initialdir and `queue from` files. */
  cwd: string;
  cluster: number;
  env?: NodeJS.ProcessEnv;
}

// Every other assignment is a macro: the supported commands (executable, arguments,
// transfer_input_files, input, transfer_output_files, transfer_output_remaps, output, error,
// initialdir, boinc_authenticator_file, grid_resource, universe) are read from the macros
// when the jobs are built, so no separate list of them is kept here.

/** Accepted, with a warning that they have no effect here. */
const IGNORED = new Set([
  'log', 'notification', 'notify_user', 'should_transfer_files', 'when_to_transfer_output',
  'batch_name', 'job_batch_name', 'description',
]);

/** HTCondor submit commands whose meaning boinc-gahp submit cannot honour. */
const UNSUPPORTED = new Set([
  'requirements', 'rank', 'environment', 'env', 'getenv', 'transfer_executable', 'stream_output',
  'stream_error', 'stream_input', 'periodic_hold', 'periodic_release', 'periodic_remove',
  'periodic_vacate', 'on_exit_hold', 'on_exit_remove', 'priority', 'hold', 'leave_in_queue',
  'max_retries', 'retry_until', 'success_exit_code', 'request_cpus', 'request_memory',
  'request_disk', 'request_gpus', 'accounting_group', 'accounting_group_user', 'x509userproxy',
  'use_x509userproxy', 'job_lease_duration', 'concurrency_limits', 'max_idle', 'max_materialize',
  'materialize_max_idle', 'next_job_start_delay', 'deferral_time', 'deferral_window',
  'deferral_prep_time', 'cron_minute', 'cron_hour', 'cron_day_of_month', 'cron_month',
  'cron_day_of_week', 'cron_window', 'cron_prep_time', 'run_as_owner', 'load_profile',
  'image_size', 'coresize', 'kill_sig', 'remove_kill_sig', 'hold_kill_sig',
  'want_graceful_removal', 'nice_user', 'copy_to_spool', 'transfer_output', 'transfer_input',
  'transfer_error', 'transfer_plugins', 'output_destination', 'preserve_relative_paths',
  'encrypt_input_files', 'encrypt_output_files', 'dont_encrypt_input_files',
  'dont_encrypt_output_files', 'docker_image', 'container_image', 'singularity_image',
  'vm_type', 'vm_memory', 'vm_disk', 'machine_count', 'jar_files', 'java_vm_args',
  'globus_rsl', 'nordugrid_rsl', 'batch_queue', 'allowed_execute_duration',
  'allowed_job_duration', 'job_max_vacate_time', 'want_remote_io', 'buffer_size',
  'buffer_block_size', 'match_list_length', 'skip_filechecks', 'job_machine_attrs',
  'append_files', 'local_files', 'fetch_files', 'compress_files', 'hold_reason',
  'hold_reason_code', 'hold_reason_subcode', 'keep_claim_idle', 'starter_log', 'dagman_log',
  'submit_event_notes', 'rendezvousdir', 'job_ad_information_attrs', 'cluster_id',
]);

interface Assignment {
  value: string;
  line: number;
}

type Statement =
  | { kind: 'assign'; name: string; value: string; line: number }
  | { kind: 'queue'; rest: string; line: number };

/** Splits the text into statements: comments dropped, `\` continuations joined, multi-line `queue ... (` lists gathered. */
function statements(text: string, file: string): Statement[] {
  const raw = text.split(/\r?\n/);
  const out: Statement[] = [];
  for (let i = 0; i < raw.length; i++) {
    const startLine = i + 1;
    let line = raw[i]!;
    while (/\\\s*$/.test(line) && i + 1 < raw.length) {
      line = line.replace(/\\\s*$/, '') + raw[++i]!.trimStart();
    }
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    if (/^queue(\s|$)/i.test(trimmed)) {
      let rest = trimmed.slice(5).trim();
      // `queue x in (` / `queue x from (` with the items on the following lines.
      if (/\(\s*$/.test(rest) || (/\((?![^)]*\))/.test(rest) && !rest.includes(')'))) {
        const items: string[] = [];
        let closed = false;
        while (++i < raw.length) {
          const l = raw[i]!.trim();
          if (l.startsWith(')')) {
            closed = true;
            break;
          }
          if (l === '' || l.startsWith('#')) continue;
          items.push(l);
        }
        if (!closed) throw new SubmitFileError(file, startLine, 'queue item list opened with "(" is never closed with ")"');
        rest = rest + '\n' + items.join('\n') + '\n)';
      }
      out.push({ kind: 'queue', rest, line: startLine });
      continue;
    }
    const m = /^([+A-Za-z_][A-Za-z0-9_.+]*)\s*=\s*(.*)$/s.exec(trimmed);
    if (m) {
      out.push({ kind: 'assign', name: m[1]!, value: m[2]!.trim(), line: startLine });
      continue;
    }
    const word = trimmed.split(/\s+/)[0]!;
    if (/^(if|elif|else|endif|include|error|warning)\b/i.test(word) || /^(include|use)\s*:/i.test(trimmed)) {
      throw new SubmitFileError(file, startLine, `"${word}" statements are not supported by boinc-gahp submit`);
    }
    throw new SubmitFileError(file, startLine, `cannot parse "${clip(trimmed)}": expected "name = value" or "queue ..."`);
  }
  return out;
}

function clip(s: string, n = 60): string {
  return s.length > n ? s.slice(0, n) + '...' : s;
}

/** Splits HTCondor `arguments`: new syntax when the value is wrapped in double quotes, else old syntax. */
export function parseArguments(value: string): string[] {
  const v = value.trim();
  if (v.startsWith('"')) {
    if (!v.endsWith('"') || v.length < 2) throw new Error('arguments: a value that starts with " must end with "');
    const inner = v.slice(1, -1);
    const args: string[] = [];
    let cur = '';
    let have = false;
    for (let i = 0; i < inner.length; i++) {
      const c = inner[i]!;
      if (c === '"') {
        if (inner[i + 1] === '"') {
          cur += '"';
          have = true;
          i++;
          continue;
        }
        throw new Error('arguments: a double quote inside the new syntax must be doubled ("")');
      }
      if (c === "'") {
        have = true;
        for (;;) {
          i++;
          if (i >= inner.length) throw new Error("arguments: unterminated single quote");
          const d = inner[i]!;
          if (d === "'") {
            if (inner[i + 1] === "'") {
              cur += "'";
              i++;
              continue;
            }
            break;
          }
          cur += d;
        }
        continue;
      }
      if (/\s/.test(c)) {
        if (have) args.push(cur);
        cur = '';
        have = false;
        continue;
      }
      cur += c;
      have = true;
    }
    if (have) args.push(cur);
    return args;
  }
  // Old syntax: whitespace separates; \" is a literal double quote.
  return v.split(/\s+/).filter((a) => a.length > 0).map((a) => a.replace(/\\"/g, '"'));
}

/** `transfer_output_remaps = "a = b; c = d"` */
export function parseRemaps(value: string): Record<string, string> {
  let v = value.trim();
  if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1);
  const out: Record<string, string> = {};
  for (const part of v.split(';')) {
    const p = part.trim();
    if (p === '') continue;
    const eq = p.indexOf('=');
    if (eq <= 0) throw new Error(`transfer_output_remaps: "${clip(p)}" is not "name = new_name"`);
    const from = p.slice(0, eq).trim();
    const to = p.slice(eq + 1).trim();
    if (!from || !to) throw new Error(`transfer_output_remaps: "${clip(p)}" is not "name = new_name"`);
    out[from] = to;
  }
  return out;
}

function splitList(value: string): string[] {
  return value.split(/[,\s]+/).map((s) => s.trim()).filter((s) => s.length > 0);
}

interface QueueSpec {
  count: number;
  vars: string[];
  /** Each item's field values (one per var); one empty item when there is no list. */
  items: string[][];
}

function parseQueue(rest: string, opts: ParseOptions, line: number, expand: (s: string) => string): QueueSpec {
  const fail = (msg: string): never => {
    throw new SubmitFileError(opts.file, line, msg);
  };
  let text = expand(rest).trim();
  let count = 1;
  const countMatch = /^([0-9]+)(\s+|$)/.exec(text);
  if (countMatch) {
    count = Number(countMatch[1]);
    text = text.slice(countMatch[0].length).trim();
  }
  if (text === '') return { count, vars: [], items: [[]] };
  const m = /^([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)?\s*\b(in|from|matching)\b\s*([\s\S]*)$/i.exec(text);
  if (!m) return fail(`cannot parse "queue ${clip(rest)}": expected queue [N] [<var>[,<var>...]] in (...) | from <file>`);
  const keyword = m[2]!.toLowerCase();
  const vars = m[1] ? m[1].split(/\s*,\s*/) : ['Item'];
  let body = m[3]!.trim();
  if (keyword === 'matching') return fail('"queue ... matching" is not supported by boinc-gahp submit (list the items with "in" or "from")');
  let lines: string[];
  if (body.startsWith('(')) {
    if (!body.endsWith(')')) return fail('queue item list must end with ")"');
    body = body.slice(1, -1);
    lines = keyword === 'in'
      ? body.split(/[\n,]/).map((s) => s.trim()).filter((s) => s.length > 0)
      : body.split('\n').map((s) => s.trim()).filter((s) => s.length > 0 && !s.startsWith('#'));
  } else if (keyword === 'in') {
    // `queue x in a, b, c` (no parentheses) is accepted too.
    lines = body.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  } else {
    const file = path.resolve(opts.cwd, body);
    let content: string;
    try {
      content = fs.readFileSync(file, 'utf8');
    } catch (err) {
      return fail(`queue from: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    lines = content.split(/\r?\n/).map((s) => s.trim()).filter((s) => s.length > 0 && !s.startsWith('#'));
  }
  const items = lines.map((l) => {
    if (vars.length === 1) return [l];
    // Fields separated by commas and/or whitespace; the last variable takes the rest.
    const fields: string[] = [];
    let restText = l;
    for (let v = 0; v < vars.length - 1; v++) {
      const fm = /^([^,\s]*)[,\s]+/.exec(restText);
      if (!fm) {
        fields.push(restText);
        restText = '';
        continue;
      }
      fields.push(fm[1]!);
      restText = restText.slice(fm[0].length);
    }
    fields.push(restText.trim());
    return fields;
  });
  return { count, vars, items };
}

export function parseSubmitDescription(text: string, opts: ParseOptions): SubmitDescription {
  const env = opts.env ?? process.env;
  const macros = new Map<string, Assignment>();
  const warnings: string[] = [];
  const procs: SubmitProc[] = [];
  const warned = new Set<string>();

  const lookup = (name: string, local: Map<string, string>): string | undefined => {
    const key = name.toLowerCase();
    if (local.has(key)) return local.get(key);
    return macros.get(key)?.value;
  };

  const expandWith = (value: string, local: Map<string, string>, line: number, depth = 0): string => {
    if (depth > 32) throw new SubmitFileError(opts.file, line, 'macro expansion nests too deeply (a macro refers to itself?)');
    let out = '';
    for (let i = 0; i < value.length; i++) {
      const c = value[i]!;
      if (c !== '$') {
        out += c;
        continue;
      }
      if (value[i + 1] === '$') {
        throw new SubmitFileError(opts.file, line, '"$$(...)" (values from the execute machine) is not supported by boinc-gahp submit');
      }
      const fm = /^\$([A-Za-z]*)\(/.exec(value.slice(i));
      if (!fm) {
        out += c;
        continue;
      }
      // Find the matching parenthesis.
      let depthP = 0;
      let j = i + fm[0].length - 1;
      for (; j < value.length; j++) {
        if (value[j] === '(') depthP++;
        else if (value[j] === ')' && --depthP === 0) break;
      }
      if (j >= value.length) throw new SubmitFileError(opts.file, line, `unterminated macro reference "${clip(value.slice(i), 30)}"`);
      const fn = fm[1]!;
      const inner = value.slice(i + fm[0].length, j);
      if (fn === '') {
        const colon = inner.indexOf(':');
        const name = colon < 0 ? inner : inner.slice(0, colon);
        const def = colon < 0 ? '' : inner.slice(colon + 1);
        const v = lookup(name.trim(), local);
        out += v !== undefined ? expandWith(v, local, line, depth + 1) : expandWith(def, local, line, depth + 1);
      } else if (fn.toUpperCase() === 'ENV') {
        out += env[inner.trim()] ?? '';
      } else {
        throw new SubmitFileError(opts.file, line, `macro function "$${fn}(...)" is not supported by boinc-gahp submit`);
      }
      i = j;
    }
    return out;
  };

  const stmts = statements(text, opts.file);
  let nextProc = 0;
  let sawQueue = false;
  for (const st of stmts) {
    if (st.kind === 'assign') {
      const name = st.name;
      const key = name.toLowerCase();
      if (name.startsWith('+') || key.startsWith('my.')) {
        warnings.push(`${opts.file}:${st.line}: custom job attribute "${name}" has no effect with boinc-gahp submit (ignored)`);
        continue;
      }
      if (UNSUPPORTED.has(key)) {
        throw new SubmitFileError(opts.file, st.line, `"${name}" is not supported by boinc-gahp submit: BOINC cannot honour it (remove it, or submit through HTCondor)`);
      }
      if (IGNORED.has(key) && !warned.has(key)) {
        warned.add(key);
        warnings.push(`${opts.file}:${st.line}: "${name}" has no effect with boinc-gahp submit (ignored)`);
      }
      macros.set(key, { value: st.value, line: st.line });
      continue;
    }
    sawQueue = true;
    const base = new Map<string, string>([
      ['cluster', String(opts.cluster)],
      ['clusterid', String(opts.cluster)],
    ]);
    const spec = parseQueue(st.rest, opts, st.line, (s) => expandWith(s, base, st.line));
    if (spec.count === 0) continue;
    spec.items.forEach((fields, itemIndex) => {
      for (let step = 0; step < spec.count; step++) {
        const proc = nextProc++;
        const local = new Map(base);
        local.set('process', String(proc));
        local.set('procid', String(proc));
        local.set('step', String(step));
        local.set('itemindex', String(itemIndex));
        local.set('row', String(itemIndex));
        spec.vars.forEach((v, k) => local.set(v.toLowerCase(), fields[k] ?? ''));
        procs.push(buildProc(proc, local, st.line));
      }
    });
  }
  if (!sawQueue) throw new SubmitFileError(opts.file, stmts.length ? stmts[stmts.length - 1]!.line : 1, 'no "queue" statement: nothing to submit');
  return { procs, warnings };

  function buildProc(proc: number, local: Map<string, string>, queueLine: number): SubmitProc {
    const get = (name: string): { value: string; line: number } | undefined => {
      const a = macros.get(name);
      if (!a) return undefined;
      return { value: expandWith(a.value, local, a.line).trim(), line: a.line };
    };
    const fail = (line: number, msg: string): never => {
      throw new SubmitFileError(opts.file, line, msg);
    };

    const universe = get('universe');
    if (universe && universe.value.toLowerCase() !== 'grid') {
      fail(universe.line, `universe "${universe.value}" is not supported: use "universe = grid" with "grid_resource = boinc <project_url>"`);
    }
    let projectUrl: string | undefined;
    const gr = get('grid_resource');
    if (gr) {
      const parts = gr.value.split(/\s+/);
      if (parts[0]!.toLowerCase() !== 'boinc') fail(gr.line, `grid_resource must be "boinc <project_url>", got "${clip(gr.value)}"`);
      if (parts.length !== 2) fail(gr.line, 'grid_resource must be "boinc <project_url>" (one URL)');
      projectUrl = parts[1]!;
      if (!/^https?:\/\//i.test(projectUrl)) fail(gr.line, `grid_resource: "${clip(projectUrl)}" is not an http(s) URL`);
    }
    const exe = get('executable');
    if (!exe || exe.value === '') fail(queueLine, 'no "executable": set it to the BOINC app name');
    const app = exe!.value;
    if (!/^[A-Za-z0-9_.-]+$/.test(app)) fail(exe!.line, `executable must be a BOINC app name (letters, digits, "_", "-", "."), got "${clip(app)}"`);

    const initialdir = get('initialdir');
    const iwd = initialdir && initialdir.value ? path.resolve(opts.cwd, initialdir.value) : opts.cwd;

    let args: string[] = [];
    const a = get('arguments');
    if (a) {
      try {
        args = parseArguments(a.value);
      } catch (err) {
        fail(a.line, (err as Error).message);
      }
    }

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
    let outputRemaps: Record<string, string> = {};
    const remaps = get('transfer_output_remaps');
    if (remaps) {
      try {
        outputRemaps = parseRemaps(remaps.value);
      } catch (err) {
        fail(remaps.line, (err as Error).message);
      }
    }
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
