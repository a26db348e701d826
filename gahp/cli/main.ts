/** The boinc-gahp command line. With no subcommand it is the GAHP on stdio. */
import * as fs from 'node:fs';
import { Command, Option } from 'commander';
import { Logger } from '../log.js';
import { runGahp } from './run-gahp.js';
import { GAHP_VERSION } from '../version.js';

export async function main(argv: string[]): Promise<number> {
  const program = new Command();
  program
    .name('boinc-gahp')
    .description('GAHP server that lets HTCondor run jobs on a BOINC project')
    .version(GAHP_VERSION)
    .addOption(new Option('--state-dir <dir>', 'ledger and hash cache directory').env('BOINC_GAHP_STATE_DIR'))
    .addOption(new Option('--log <file>', 'write a debug log to this file').env('BOINC_GAHP_LOG'))
    .addOption(new Option('--debug', 'write the debug log to stderr'))
    .addOption(new Option('--project-url <url>', 'select this project at start').env('BOINC_GAHP_PROJECT_URL'))
    .addOption(new Option('--authenticator-file <file>', 'file holding the account authenticator').env('BOINC_GAHP_AUTHENTICATOR_FILE'))
    .addOption(new Option('--rpc-timeout <seconds>', 'timeout of one RPC').env('BOINC_GAHP_RPC_TIMEOUT').argParser(Number))
    .addOption(new Option('--concurrency <n>', 'RPCs in flight per project').env('BOINC_GAHP_CONCURRENCY').argParser(Number));

  let code = 0;
  program.action(async (opts) => {
    const log = opts.log ? Logger.toFile(opts.log) : opts.debug ? Logger.toStderr() : Logger.silent();
    const authenticator = opts.authenticatorFile ? fs.readFileSync(opts.authenticatorFile, 'utf8').trim() : undefined;
    code = await runGahp({
      stateDir: opts.stateDir,
      log,
      projectUrl: opts.projectUrl,
      authenticator,
      rpcTimeoutMs: opts.rpcTimeout ? opts.rpcTimeout * 1000 : undefined,
      rpcConcurrency: opts.concurrency,
    });
  });
  await program.parseAsync(argv);
  return code;
}
