/**
 * The macros of a submit description: every assignment is one (after the checks of the
 * command it names), and values are expanded as condor_submit expands them: `$(name)`,
 * `$(name:default)`, `$ENV(NAME)`, nested, with the job's own macros (`$(Process)`,
 * `$(Item)`, ...) before the file's.
 */
import { clip, SubmitFileError } from './submit-syntax.js';
import { oneEditApart } from '../util.js';

/** The commands boinc-gahp submit reads (submit-file.ts reads them from the macros when it builds the jobs). */
const SUPPORTED = [
  'executable', 'arguments', 'transfer_input_files', 'input', 'transfer_output_files',
  'transfer_output_remaps', 'output', 'error', 'initialdir', 'boinc_authenticator_file',
  'grid_resource', 'universe',
];

/**
 * Accepted with one note each: they mean nothing for a BOINC job. HTCondor's own records
 * and mail; the resources a job asks for, which the project's app versions and the app
 * template's bounds decide (HTCondor's gridmanager sends none of them to BOINC either:
 * docs/boinc-server.md, "Memory bound"); HTCondor's accounting and ordering of the user's
 * jobs; HTCondor's grid credential and lease (BOINC takes the authenticator).
 */
const NO_EFFECT = new Set([
  'log', 'notification', 'notify_user', 'batch_name', 'job_batch_name', 'description',
  'request_cpus', 'request_memory', 'request_disk',
  'accounting_group', 'accounting_group_user', 'priority', 'skip_filechecks', 'copy_to_spool',
  'x509userproxy', 'use_x509userproxy', 'job_lease_duration',
]);

/**
 * Accepted without a note when the value asks for what a BOINC job does anyway (the lines
 * condor_submit needs for an app name as executable, or a vanilla job's file transfer);
 * any other value is refused with the reason.
 */
const AS_BOINC_DOES = new Map<string, { ok: RegExp; otherwise: string }>([
  ['transfer_executable', { ok: /^(false|no)$/i, otherwise: 'the project runs its own app versions, the executable is never sent (set it to false)' }],
  ['should_transfer_files', { ok: /^(yes|if_needed)$/i, otherwise: 'a BOINC job always gets its input files sent and its outputs fetched (YES)' }],
  ['when_to_transfer_output', { ok: /^on_exit(_or_evict)?$/i, otherwise: 'a BOINC job\'s outputs come back when it ends (ON_EXIT)' }],
  ['getenv', { ok: /^(false|no)$/i, otherwise: 'a BOINC job cannot be given environment variables' }],
  ['stream_output', { ok: /^(false|no)$/i, otherwise: 'BOINC returns outputs only when the job ends' }],
  ['stream_error', { ok: /^(false|no)$/i, otherwise: 'BOINC returns stderr only when the job ends' }],
]);

/** HTCondor submit commands whose meaning boinc-gahp submit cannot honour. */
const UNSUPPORTED = new Set([
  'requirements', 'rank', 'environment', 'env',
  'stream_input', 'periodic_hold', 'periodic_release', 'periodic_remove',
  'periodic_vacate', 'on_exit_hold', 'on_exit_remove', 'hold', 'leave_in_queue',
  'max_retries', 'retry_until', 'success_exit_code', 'request_gpus',
  'concurrency_limits', 'max_idle', 'max_materialize',
  'materialize_max_idle', 'next_job_start_delay', 'deferral_time', 'deferral_window',
  'deferral_prep_time', 'cron_minute', 'cron_hour', 'cron_day_of_month', 'cron_month',
  'cron_day_of_week', 'cron_window', 'cron_prep_time', 'run_as_owner', 'load_profile',
  'image_size', 'coresize', 'kill_sig', 'remove_kill_sig', 'hold_kill_sig',
  'want_graceful_removal', 'nice_user', 'transfer_output', 'transfer_input',
  'transfer_error', 'transfer_plugins', 'output_destination', 'preserve_relative_paths',
  'encrypt_input_files', 'encrypt_output_files', 'dont_encrypt_input_files',
  'dont_encrypt_output_files', 'docker_image', 'container_image', 'singularity_image',
  'vm_type', 'vm_memory', 'vm_disk', 'machine_count', 'jar_files', 'java_vm_args',
  'globus_rsl', 'nordugrid_rsl', 'batch_queue', 'allowed_execute_duration',
  'allowed_job_duration', 'job_max_vacate_time', 'want_remote_io', 'buffer_size',
  'buffer_block_size', 'match_list_length', 'job_machine_attrs',
  'append_files', 'local_files', 'fetch_files', 'compress_files', 'hold_reason',
  'hold_reason_code', 'hold_reason_subcode', 'keep_claim_idle', 'starter_log', 'dagman_log',
  'submit_event_notes', 'rendezvousdir', 'job_ad_information_attrs', 'cluster_id',
]);

const KNOWN = [...SUPPORTED, ...NO_EFFECT, ...AS_BOINC_DOES.keys(), ...UNSUPPORTED];

/**
 * The command a name not known as one is likely a typo of (`transfer_input_file`), or
 * undefined. condor_submit keeps any name as a macro, so a typo would be taken silently.
 */
export function likelyMisspelt(name: string): string | undefined {
  const key = name.toLowerCase();
  if (key.length < 4 || KNOWN.includes(key)) return undefined;
  return KNOWN.find((k) => oneEditApart(key, k));
}

/** A macro's value as written, and the line that set it (for errors). */
export interface Assignment {
  value: string;
  line: number;
}

/** The job's own macros (cluster, process, queue variables), by lower-case name. */
export type LocalMacros = Map<string, string>;

export class MacroTable {
  private readonly macros = new Map<string, Assignment>();
  /** NO_EFFECT commands already noted (once each). */
  private readonly noted = new Set<string>();

  constructor(private readonly file: string, private readonly env: NodeJS.ProcessEnv) {}

  /**
   * `name = value`: kept as a macro. A custom job attribute (`+Name`, `My.Name`) is dropped
   * with a note, a NO_EFFECT command kept with one, an AS_BOINC_DOES command kept when its
   * value is what BOINC does; an UNSUPPORTED command (or another value) is an error.
   */
  assign(name: string, value: string, line: number, notes: string[]): void {
    const key = name.toLowerCase();
    if (name.startsWith('+') || key.startsWith('my.')) {
      notes.push(`${this.file}:${line}: custom job attribute "${name}" has no effect with boinc-gahp submit (ignored)`);
      return;
    }
    if (UNSUPPORTED.has(key)) {
      throw new SubmitFileError(this.file, line, `"${name}" is not supported by boinc-gahp submit: BOINC cannot honour it (remove it, or submit through HTCondor)`);
    }
    const boinc = AS_BOINC_DOES.get(key);
    if (boinc && !boinc.ok.test(value)) {
      throw new SubmitFileError(this.file, line, `"${name} = ${clip(value, 30)}" is not supported by boinc-gahp submit: ${boinc.otherwise}`);
    }
    if (NO_EFFECT.has(key) && !this.noted.has(key)) {
      this.noted.add(key);
      notes.push(`${this.file}:${line}: "${name}" has no effect with boinc-gahp submit (ignored)`);
    }
    this.macros.set(key, { value, line });
  }

  /** The value of a command as a job sees it (expanded with its macros, trimmed); undefined when never set. */
  get(name: string, local: LocalMacros): Assignment | undefined {
    const a = this.macros.get(name);
    if (!a) return undefined;
    return { value: this.expand(a.value, local, a.line).trim(), line: a.line };
  }

  private lookup(name: string, local: LocalMacros): string | undefined {
    const key = name.toLowerCase();
    if (local.has(key)) return local.get(key);
    return this.macros.get(key)?.value;
  }

  /** Expands every macro reference in value; `line` is named in errors. */
  expand(value: string, local: LocalMacros, line: number, depth = 0): string {
    if (depth > 32) throw new SubmitFileError(this.file, line, 'macro expansion nests too deeply (a macro refers to itself?)');
    let out = '';
    for (let i = 0; i < value.length; i++) {
      const c = value[i]!;
      if (c !== '$') {
        out += c;
        continue;
      }
      if (value[i + 1] === '$') {
        throw new SubmitFileError(this.file, line, '"$$(...)" (values from the execute machine) is not supported by boinc-gahp submit');
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
      if (j >= value.length) throw new SubmitFileError(this.file, line, `unterminated macro reference "${clip(value.slice(i), 30)}"`);
      const fn = fm[1]!;
      const inner = value.slice(i + fm[0].length, j);
      if (fn === '') {
        const colon = inner.indexOf(':');
        const name = colon < 0 ? inner : inner.slice(0, colon);
        const def = colon < 0 ? '' : inner.slice(colon + 1);
        const v = this.lookup(name.trim(), local);
        out += v !== undefined ? this.expand(v, local, line, depth + 1) : this.expand(def, local, line, depth + 1);
      } else if (fn.toUpperCase() === 'ENV') {
        out += this.env[inner.trim()] ?? '';
      } else {
        throw new SubmitFileError(this.file, line, `macro function "$${fn}(...)" is not supported by boinc-gahp submit`);
      }
      i = j;
    }
    return out;
  }
}
