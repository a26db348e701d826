/**
 * The GAHP's own command line, read without commander. What HTCondor runs (no arguments,
 * or a wrapper's global options and BOINC_GAHP_* variables) is parsed with node's
 * util.parseArgs, so the gridmanager's GAHP never loads commander and the child_process,
 * net and dgram modules it pulls in: ~4 MiB of a process that idles most of its life
 * (docs/architecture.md, "Round trips and memory").
 *
 * Only plain cases qualify. Anything else (a subcommand, --help, --version, --interactive,
 * a value to reject, a terminal on stdin, a BOINC_GAHP_* variable this table does not
 * know) gives undefined, and program.ts parses the whole line with commander, which defines
 * every option and its message.
 */
import { parseArgs } from 'node:util';
import type { GlobalOptions } from './options.js';
import { parseLogSize } from '../log.js';
import { parseYesNo } from '../settings.js';
import { parsePhpSize } from '../../boinc-rpc/upload-limits.js';

type Kind = 'string' | 'boolean' | 'yesNo' | 'level' | 'positive' | 'nonNegative' | 'positiveInt' | 'phpSize' | 'logSize';

/** The global options of the GAHP itself: name, kind, environment variable (as in program.ts). */
const OPTIONS: ReadonlyArray<{ name: string; key: keyof GlobalOptions | 'protocol'; kind: Kind; env?: string }> = [
  { name: 'state-dir', key: 'stateDir', kind: 'string', env: 'BOINC_GAHP_STATE_DIR' },
  { name: 'log', key: 'log', kind: 'string', env: 'BOINC_GAHP_LOG' },
  { name: 'log-level', key: 'logLevel', kind: 'level', env: 'BOINC_GAHP_LOG_LEVEL' },
  { name: 'max-log', key: 'maxLog', kind: 'logSize', env: 'BOINC_GAHP_MAX_LOG' },
  { name: 'max-num-log', key: 'maxNumLog', kind: 'positiveInt', env: 'BOINC_GAHP_MAX_NUM_LOG' },
  { name: 'debug', key: 'debug', kind: 'boolean' },
  { name: 'project-url', key: 'projectUrl', kind: 'string', env: 'BOINC_GAHP_PROJECT_URL' },
  { name: 'authenticator-file', key: 'authenticatorFile', kind: 'string', env: 'BOINC_GAHP_AUTHENTICATOR_FILE' },
  { name: 'rpc-timeout', key: 'rpcTimeout', kind: 'positive', env: 'BOINC_GAHP_RPC_TIMEOUT' },
  { name: 'command-timeout', key: 'commandTimeout', kind: 'nonNegative', env: 'BOINC_GAHP_COMMAND_TIMEOUT' },
  { name: 'lease-hours', key: 'leaseHours', kind: 'positive', env: 'BOINC_GAHP_LEASE_HOURS' },
  { name: 'keep-files', key: 'keepFiles', kind: 'yesNo', env: 'BOINC_GAHP_KEEP_FILES' },
  { name: 'concurrency', key: 'concurrency', kind: 'positiveInt', env: 'BOINC_GAHP_CONCURRENCY' },
  { name: 'proxy', key: 'proxy', kind: 'string', env: 'BOINC_GAHP_PROXY' },
  { name: 'no-proxy', key: 'noProxy', kind: 'string', env: 'BOINC_GAHP_NO_PROXY' },
  { name: 'ca-file', key: 'caFile', kind: 'string', env: 'BOINC_GAHP_CA_FILE' },
  { name: 'max-file-uploads', key: 'maxFileUploads', kind: 'positiveInt', env: 'BOINC_GAHP_MAX_FILE_UPLOADS' },
  { name: 'post-max-size', key: 'postMaxSize', kind: 'phpSize', env: 'BOINC_GAHP_POST_MAX_SIZE' },
  { name: 'upload-max-filesize', key: 'uploadMaxFilesize', kind: 'phpSize', env: 'BOINC_GAHP_UPLOAD_MAX_FILESIZE' },
  { name: 'protocol', key: 'protocol', kind: 'boolean' },
];

const LEVELS: readonly string[] = ['error', 'warn', 'info', 'debug'];

/** The BOINC_GAHP_* variables the GAHP reads (HTCondor's configuration may set them too: condor-config.ts). */
export const GAHP_ENV_NAMES: readonly string[] = OPTIONS.flatMap((o) => (o.env ? [o.env] : []));

/** The value of a string-kind option, or undefined when it is not one program.ts would accept. */
function convert(kind: Kind, text: string): string | number | boolean | undefined {
  switch (kind) {
    case 'yesNo':
      return parseYesNo(text);
    case 'level':
      return LEVELS.includes(text) ? text : undefined;
    case 'nonNegative': {
      const n = Number(text);
      return text.trim() !== '' && Number.isFinite(n) && n >= 0 ? n : undefined;
    }
    case 'positive': {
      const n = Number(text);
      return Number.isFinite(n) && n > 0 ? n : undefined;
    }
    case 'positiveInt': {
      const n = Number(text);
      return Number.isInteger(n) && n > 0 ? n : undefined;
    }
    case 'phpSize':
    case 'logSize':
      try {
        return kind === 'phpSize' ? parsePhpSize(text) : parseLogSize(text);
      } catch {
        return undefined;
      }
    default:
      return text;
  }
}

/**
 * The options of a plain GAHP command line (the same values commander would give), or
 * undefined when program.ts must parse it with commander.
 */
export function plainGahpOptions(args: readonly string[], env: NodeJS.ProcessEnv, stdinIsTTY: boolean): (GlobalOptions & { protocol?: boolean }) | undefined {
  for (const name of Object.keys(env)) {
    if (name.startsWith('BOINC_GAHP_') && !OPTIONS.some((o) => o.env === name)) return undefined;
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: [...args],
      options: Object.fromEntries(OPTIONS.map((o) => [o.name, { type: o.kind === 'boolean' ? 'boolean' : 'string' }])),
      strict: true,
      allowPositionals: false,
    }).values;
  } catch {
    return undefined;
  }
  const out: Record<string, unknown> = {};
  for (const o of OPTIONS) {
    const given = values[o.name];
    if (o.kind === 'boolean') {
      if (given === true) out[o.key] = true;
      continue;
    }
    const text = typeof given === 'string' ? given : o.env !== undefined ? env[o.env] : undefined;
    if (text === undefined) continue;
    const v = convert(o.kind, text);
    if (v === undefined) return undefined;
    out[o.key] = v;
  }
  // On a terminal the GAHP is an interactive prompt unless --protocol says otherwise.
  if (stdinIsTTY && out.protocol !== true) return undefined;
  return out;
}
