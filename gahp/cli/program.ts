/**
 * The full command line, parsed with commander: the subcommands, --help, --version and
 * whatever gahp-args.ts leaves to it. Loaded by main.ts only when the command line is not
 * the GAHP's plain one.
 */
import { Command, CommanderError, Option } from 'commander';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../create-services.js';
import { GAHP_VERSION } from '../version.js';
import { EXIT_USAGE, type GahpCliOptions, type GlobalOptions } from './options.js';
import { parseYesNo, UsageError } from '../settings.js';
import { oneEditApart } from '../util.js';
import { abortCmd, fetchCmd, leaseCmd, pingCmd, queryCmd, retireCmd, statusCmd } from './subcommands.js';
import { SubmitFileError } from './submit-file.js';
import { parsePhpSize } from '../../boinc-rpc/upload-limits.js';
import { DEFAULT_LOG_LEVEL, DEFAULT_LOG_ROTATION, parseLogSize } from '../log.js';

/** A commander argParser for a number: `ok` says whether it is one, else a usage error says what was expected. */
function numberArg(what: string, expected: string, ok: (n: number, v: string) => boolean) {
  return (v: string): number => {
    const n = Number(v);
    if (!ok(n, v)) throw new UsageError(`${what} must be ${expected}, got "${v}"`);
    return n;
  };
}

const positiveNumber = (what: string) => numberArg(what, 'a positive number', (n) => Number.isFinite(n) && n > 0);
const nonNegativeNumber = (what: string) =>
  numberArg(what, 'a number of seconds (0: none)', (n, v) => v.trim() !== '' && Number.isFinite(n) && n >= 0);
const positiveInt = (what: string) => numberArg(what, 'a positive integer', (n) => Number.isInteger(n) && n > 0);

/** A commander argParser for yes/no (yes/no, true/false, on/off, 1/0). */
function yesNo(what: string) {
  return (v: string): boolean => {
    const b = parseYesNo(v);
    if (b === undefined) throw new UsageError(`${what} must be yes or no, got "${v}"`);
    return b;
  };
}

/** A size as php.ini says it (8M, 2M, 512K, 1G, bytes), read by `parse` (parsePhpSize, parseLogSize). */
function sizeArg(what: string, parse: (text: string) => number = parsePhpSize) {
  return (v: string): number => {
    try {
      return parse(v);
    } catch (err) {
      throw new UsageError(`${what}: ${(err as Error).message}`);
    }
  };
}

/** The program with its global options (each also settable through a BOINC_GAHP_* variable). */
function programWithGlobalOptions(): Command {
  return new Command()
    .name('boinc-gahp')
    .description(
      'GAHP server that lets HTCondor run jobs on a BOINC project.\n\n' +
      'With no command it is the GAHP on stdin/stdout (what HTCondor runs: point BOINC_GAHP at it). ' +
      'On a terminal it is an interactive prompt over the same protocol.',
    )
    .addHelpText('after', '\nExit codes:\n' +
      '  0    success\n' +
      '  1    a failure reported by the GAHP or the BOINC project (submit: also a job that failed or timed out)\n' +
      '  2    a usage or configuration error\n' +
      '  70   an internal error (a bug; run as the GAHP, HTCondor starts it again)\n' +
      '  130  submit interrupted (Ctrl-C)\n' +
      'Every option can also be set through the environment variable shown next to it.\n' +
      '\nExamples:\n' +
      '  boinc-gahp --project-url URL --authenticator-file FILE doctor  check the set-up, with the fix for each problem\n' +
      '  boinc-gahp --project-url URL --authenticator-file FILE ping    does the project accept the account?\n' +
      '  boinc-gahp submit job.sub            submit, wait, fetch the outputs (the file names the project)\n' +
      '  boinc-gahp submit job.sub --no-wait  submit and return; the same command without --no-wait resumes\n' +
      '  boinc-gahp submit --cluster 7        resume cluster 7 by its id, whatever became of its file\n' +
      '  boinc-gahp status                    the batches submitted from here, their leases and jobs\n' +
      '  boinc-gahp blahp install             BOINC as a batch system for HTCondor 23+ and HTCondor-CE')
    .version(GAHP_VERSION, '-V, --version')
    .exitOverride()
    .showHelpAfterError('(add --help for usage)')
    .addOption(new Option('--state-dir <dir>', 'ledger, cluster ids and hash cache (default $XDG_STATE_HOME/boinc-gahp)').env('BOINC_GAHP_STATE_DIR'))
    .addOption(new Option('--log <file>', 'append a log to this file (rotated by size: --max-log, --max-num-log)').env('BOINC_GAHP_LOG'))
    .addOption(new Option('--log-level <level>', `log detail (default ${DEFAULT_LOG_LEVEL}; debug: every protocol line and RPC)`).choices(['error', 'warn', 'info', 'debug']).env('BOINC_GAHP_LOG_LEVEL'))
    .addOption(new Option('--max-log <size>', `rotate the log file past this size, e.g. 10M (0: never), like HTCondor's MAX_<SUBSYS>_LOG (default ${DEFAULT_LOG_ROTATION.maxBytes / 1024 ** 2}M)`).env('BOINC_GAHP_MAX_LOG').argParser(sizeArg('--max-log', parseLogSize)))
    .addOption(new Option('--max-num-log <n>', `rotated log files kept, like HTCondor's MAX_NUM_<SUBSYS>_LOG (default ${DEFAULT_LOG_ROTATION.keep})`).env('BOINC_GAHP_MAX_NUM_LOG').argParser(positiveInt('--max-num-log')))
    .addOption(new Option('--debug', 'without --log: write the log to stderr, at level debug unless --log-level is given'))
    .addOption(new Option('--project-url <url>', 'BOINC project URL (pre-selects it, like BOINC_SELECT_PROJECT)').env('BOINC_GAHP_PROJECT_URL'))
    .addOption(new Option('--authenticator-file <file>', 'file holding the account authenticator').env('BOINC_GAHP_AUTHENTICATOR_FILE'))
    .addOption(new Option('--rpc-timeout <seconds>', 'timeout of one BOINC RPC').env('BOINC_GAHP_RPC_TIMEOUT').argParser(positiveNumber('--rpc-timeout')))
    .addOption(new Option('--command-timeout <seconds>', `longest time to the result of one BOINC_* command, 0: none (default ${DEFAULT_COMMAND_TIMEOUT_MS / 1000}: under the gridmanager's 300 s call timeout; 'submit' has none)`).env('BOINC_GAHP_COMMAND_TIMEOUT').argParser(nonNegativeNumber('--command-timeout')))
    .addOption(new Option('--lease-hours <hours>', 'lease (BOINC expire_time) of the batches the GAHP creates, renewed for the batch boinc route while jobs are unfinished (default 6)').env('BOINC_GAHP_LEASE_HOURS').argParser(positiveNumber('--lease-hours')))
    .addOption(new Option('--keep-files <yes|no>', "mark each job's input and output files <no_delete/> so the project's file_deleter leaves them until the GAHP has them (default yes; no: the project keeps outputs its own way)").env('BOINC_GAHP_KEEP_FILES').argParser(yesNo('--keep-files')))
    .addOption(new Option('--concurrency <n>', 'BOINC RPCs in flight at once per project').env('BOINC_GAHP_CONCURRENCY').argParser(positiveInt('--concurrency')))
    .addOption(new Option('--proxy <url>', 'HTTP proxy of every RPC and download, overriding http_proxy, https_proxy and all_proxy; "" for none').env('BOINC_GAHP_PROXY'))
    .addOption(new Option('--no-proxy <list>', 'hosts reached without the proxy, overriding no_proxy (comma list: names and their subdomains, IPs, CIDR, host:port, *)').env('BOINC_GAHP_NO_PROXY'))
    .addOption(new Option('--ca-file <pem>', 'trust the CA certificates in this PEM file too (besides node\'s and the system\'s)').env('BOINC_GAHP_CA_FILE'))
    .addOption(new Option('--max-file-uploads <n>', "the project's PHP max_file_uploads: most files per upload request (default 20)").env('BOINC_GAHP_MAX_FILE_UPLOADS').argParser(positiveInt('--max-file-uploads')))
    .addOption(new Option('--post-max-size <size>', "the project's PHP post_max_size, e.g. 8M: largest upload request (default 8M)").env('BOINC_GAHP_POST_MAX_SIZE').argParser(sizeArg('--post-max-size')))
    .addOption(new Option('--upload-max-filesize <size>', "the project's PHP upload_max_filesize, e.g. 2M: largest input file (default 2M)").env('BOINC_GAHP_UPLOAD_MAX_FILESIZE').argParser(sizeArg('--upload-max-filesize')))
    .addOption(new Option('--protocol', 'speak the raw protocol even on a terminal (no interactive prompt)'))
    .addOption(new Option('--interactive', 'use the interactive prompt even when stdin is not a terminal'));
}

/**
 * Parses argv with commander and runs what it names. `gahpOrPrompt` runs the GAHP (no
 * subcommand); `failure` reports an error on stderr and gives its exit code.
 */
export async function runCommandLine(
  argv: string[],
  gahpOrPrompt: (opts: GahpCliOptions) => Promise<number>,
  failure: (err: unknown) => number,
): Promise<number> {
  let code = 0;
  const program = programWithGlobalOptions();

  const globals = (cmd: Command): GlobalOptions => cmd.optsWithGlobals<GlobalOptions>();

  program
    .command('ping')
    .description('check that the project answers and accepts the account (BOINC_PING)')
    .action(async (_o, cmd: Command) => {
      code = await pingCmd(globals(cmd));
    });

  program
    .command('doctor')
    .description('check the whole set-up (host, project, apps, uploads, HTCondor, BLAHP), one line per check with the fix for each problem')
    .option('--app <name...>', 'check these apps (default: those the account may submit to)')
    .option('--blahp <libexec dir>', 'check the BLAHP scripts there (default: the folder HTCondor\'s blahpd runs them from)')
    .option('--json', 'the checks as JSON objects')
    .argument('[submit_file]', "check the project and authenticator file this submit file names (grid_resource, boinc_authenticator_file), as 'submit' would use them")
    .action(async (submitFile: string | undefined, o: { app?: string[]; blahp?: string; json?: boolean }, cmd: Command) => {
      const { doctorCmd } = await import('./doctor/index.js');
      code = await doctorCmd(globals(cmd), { ...o, submitFile });
    });

  program
    .command('status')
    .description("batches this machine submitted, from the ledger in the state directory: submit's clusters and files, lease expiry, job counts per status")
    .option('--json', 'machine-readable output')
    .option('--all', 'include retired batches')
    .option('--server', 'ask the server for the job counts of each batch not retired')
    .argument('[cluster]', "only this cluster (its id) and its batches, retired ones too", positiveInt('cluster'))
    .option('--account', "instead: every batch the account has on the server (query_batches: all but retired ones), its state and counts, and its cluster and submit file if this machine knows it")
    .action(async (cluster: number | undefined, o: { json?: boolean; all?: boolean; server?: boolean; account?: boolean }, cmd: Command) => {
      code = await statusCmd(globals(cmd), o, cluster);
    });

  program
    .command('cancel')
    .description("give up a cluster 'submit' made: abort its unfinished jobs, retire its batches (the server may delete their files), say what was given up")
    .argument('<submit_file_or_cluster>', 'the submit file (its newest cluster) or a cluster id')
    .action(async (which: string, _o, cmd: Command) => {
      const { cancelCmd } = await import('./submit-cancel.js');
      code = await cancelCmd(globals(cmd), which);
    });

  program
    .command('query')
    .description("the server's view of batches: every job's status (BOINC_QUERY_BATCHES)")
    .argument('<batch_name...>', 'batch names')
    .option('--json', 'machine-readable output')
    .action(async (names: string[], o: { json?: boolean }, cmd: Command) => {
      code = await queryCmd(globals(cmd), names, o);
    });

  program
    .command('fetch')
    .description('fetch the output files of a finished job (BOINC_FETCH_OUTPUT)')
    .argument('<job_name>', 'the BOINC job name, e.g. condor#schedd#app#1796204752#12.0')
    .option('-d, --dir <dir>', 'where outputs go (the job\'s iwd)', '.')
    .option('--stderr <path>', "append the job's stderr to this file", '/dev/null')
    .option('-f, --file <spec...>', 'fetch only these output files (SOME); a spec is <name> or <name>=<destination>')
    .action(async (jobName: string, o: { dir?: string; stderr?: string; file?: string[] }, cmd: Command) => {
      code = await fetchCmd(globals(cmd), jobName, o);
    });

  program
    .command('abort')
    .description('abort jobs (BOINC_ABORT_JOBS)')
    .argument('<job_name...>', 'job names')
    .action(async (names: string[], _o, cmd: Command) => {
      code = await abortCmd(globals(cmd), names);
    });

  program
    .command('retire')
    .description('retire a batch: the server may delete its files (BOINC_RETIRE_BATCH)')
    .argument('<batch_name>', 'batch name')
    .action(async (name: string, _o, cmd: Command) => {
      code = await retireCmd(globals(cmd), name);
    });

  program
    .command('lease')
    .description('set how long the server keeps a batch (BOINC_SET_LEASE)')
    .argument('<batch_name>', 'batch name')
    .option('--hours <h>', 'lease from now, in hours (default 6)', positiveNumber('--hours'))
    .option('--until <unix_time>', 'lease until this unix time', positiveNumber('--until'))
    .action(async (name: string, o: { hours?: number; until?: number }, cmd: Command) => {
      code = await leaseCmd(globals(cmd), name, o);
    });

  program
    .command('submit')
    .description('submit an HTCondor submit description to BOINC through the GAHP, wait, and fetch outputs as HTCondor would; on a terminal, progress bars show the hashing and uploading of the inputs')
    .argument('[submit_file]', 'HTCondor submit description (universe = grid, grid_resource = boinc <url>); running it again resumes the cluster its jobs match')
    .option('--cluster <id>', 'resume this cluster by its id instead (status lists them): its jobs as they were submitted, whatever became of the file since', positiveInt('--cluster'))
    .option('--no-wait', 'return once the jobs are submitted')
    .option('--new', 'submit the file as a new cluster even when one of its clusters matches it (the older ones stay: --cluster <id> finishes each)')
    .option('--resubmit-vanished', 'submit again the unfinished jobs of batches that vanished from the server before their lease ended (without it they are only reported)')
    .option('--rerun-failed', "run just the failed jobs of a finished cluster (the file's, or --cluster <id>) again, as a new cluster; their outputs go where the first run's would have")
    .option('--poll <seconds>', 'seconds between status queries', positiveNumber('--poll'), 10)
    .option('--timeout <seconds>', 'give up waiting after this long (exit 1)', positiveNumber('--timeout'))
    .option('--spawn', 'run the GAHP as a child process (bin/boinc-gahp) instead of in-process; no hashing and upload progress bars then (those need the in-process GAHP: a child GAHP speaks only the protocol)')
    .action(async (file: string | undefined, o: { wait: boolean; new?: boolean; cluster?: number; resubmitVanished?: boolean; rerunFailed?: boolean; poll: number; timeout?: number; spawn?: boolean }, cmd: Command) => {
      const { submitCmd } = await import('./submit.js');
      code = await submitCmd(globals(cmd), file, o);
    });

  // bin/boinc-gahp hands `boinc-gahp blahp ...` to the BLAHP entry before this parser; the
  // command is here so that --help shows it (and for global options written before it).
  program
    .command('blahp')
    .description("install [<libexec dir>] [--force]: write the scripts boinc_*.sh where blahpd runs them (default: the folder HTCondor's blahpd uses, found with condor_config_val), so HTCondor 23+ and HTCondor-CE run jobs on BOINC with grid_resource = batch boinc (docs/blahp.md); uninstall [<libexec dir>]: remove them again; where: the folder blahpd runs them from and its blah.config; blahpd runs the other actions through them")
    .argument('<action>', 'install, uninstall or where (the scripts run submit, status, cancel, ...)')
    .argument('[args...]', 'the action\'s arguments')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (action: string, args: string[]) => {
      const { blahpMain } = await import('../blahp/main.js');
      code = await blahpMain([action, ...args]);
    });

  try {
    // A program with subcommands and no action of its own answers an unknown word with
    // commander's suggestion ("unknown command 'submitt' (Did you mean submit?)"); with an
    // action it would take the word for an argument ("too many arguments"). So the GAHP
    // (the program's action) is only set when the command line names no command.
    const { operands } = program.parseOptions(argv.slice(2));
    // `help <typo>`: commander would print the whole help; name the command meant instead.
    if (operands[0] === 'help' && operands[1] !== undefined && !program.commands.some((c) => c.name() === operands[1])) {
      const meant = program.commands.map((c) => c.name()).find((n) => oneEditApart(operands[1]!, n));
      process.stderr.write(`boinc-gahp: no command "${operands[1]}"${meant ? `: did you mean "${meant}"? (boinc-gahp help ${meant})` : ' (boinc-gahp --help lists them)'}\n`);
      return EXIT_USAGE;
    }
    if (operands.length === 0) {
      program.action(async (opts: GahpCliOptions) => {
        code = await gahpOrPrompt(opts);
      });
    } else {
      // A subcommand's reader that stops early (`boinc-gahp query ... | head -1`) is no
      // error: the command ends quietly, as cat does, instead of as an internal error.
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EPIPE') throw err;
        process.exit(0);
      });
    }
    await program.parseAsync(argv);
  } catch (err) {
    // --help and --version exit 0; any other command-line mistake is a usage error.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
    if (err instanceof SubmitFileError) return failure(new UsageError(err.message));
    return failure(err);
  }
  return code;
}
