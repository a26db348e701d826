/**
 * `boinc-gahp blahp <action> ...`: the Node side of the BLAHP scripts (docs/blahp.md).
 * bin/boinc-gahp hands over here before the CLI's option parsing (blahpd's submit options
 * such as -V must not meet the CLI's). Output contracts, per action:
 * - submit: `BLAHP_JOBID_PREFIXboinc/<job>` and exit 0; or a message on stderr and exit 1.
 * - status: exactly one line per id, `0[...]` or `1<error>`, and exit 0.
 * - cancel: ` 0 No\ error` (one id; `.<i> 0 No\ error` per id for several) and exit 0; or a
 *   message on stderr and exit 1. A batch whose last unfinished job was cancelled is
 *   retired right away. A job held with its result kept is not aborted (fetch.ts).
 * - hold, resume: BOINC has neither: a message on stderr, exit 1.
 * - ping: `0 No error` when the project answers, else `1 <reason>`; exit 0.
 * - install [dir] [--force], uninstall [dir]: write or remove the scripts, by default in
 *   the folder blahpd runs them from. where: that folder, and how it was found, on two
 *   lines (the packages' post-install note compares it with theirs). fetch: the background
 *   worker (outputs, leases, retirements).
 */
import { BlahpConfigError, loadConfig } from './config.js';
import { openContext, type BlahpContext } from './context.js';
import { errorLine } from './classad.js';
import { blahpJobId, jobNameFromId, notSentReason } from '../batch-boinc/names.js';
import { writeFinalRecord } from './quick.js';
import { resultKept } from './records.js';
import { statusLines } from './status.js';
import { errorMessage, oneEditApart } from '../util.js';
import { makeDirs } from '../dirs.js';

const USAGE = 'usage: boinc-gahp blahp <submit|status|cancel|hold|resume|ping|fetch> ... | boinc-gahp blahp install [<libexec dir>] [--force] | boinc-gahp blahp uninstall [<libexec dir>] | boinc-gahp blahp where';

function write(stream: NodeJS.WriteStream, text: string): Promise<void> {
  return new Promise((resolve) => {
    if (text === '') return resolve();
    stream.write(text, () => resolve());
  });
}

/** blahpd's escaping for a result token: spaces (and backslashes) escaped. */
function escapeToken(text: string): string {
  return text.replace(/[\r\n]+/g, ' ').replace(/\\/g, '\\\\').replace(/ /g, '\\ ');
}

export async function blahpMain(args: readonly string[]): Promise<number> {
  const [action, ...rest] = args;
  switch (action) {
    case 'install':
    case 'uninstall':
      return scriptsAction(action, rest);
    case 'where':
      return whereAction();
    case 'submit':
      return submitAction(rest);
    case 'status':
      return statusAction(rest);
    case 'cancel':
      return cancelAction(rest);
    case 'hold':
    case 'resume':
      await write(process.stderr, `boinc_${action}.sh: BOINC cannot ${action} a job (it has no such operation); remove the job instead\n`);
      return 1;
    case 'ping':
      return pingAction();
    case 'fetch':
      return fetchAction();
    default: {
      const actions = ['install', 'uninstall', 'where', 'submit', 'status', 'cancel', 'hold', 'resume', 'ping', 'fetch'];
      const meant = action === undefined ? undefined : actions.find((a) => oneEditApart(action, a));
      if (meant) await write(process.stderr, `boinc-gahp blahp: unknown action "${action}": did you mean "${meant}"?\n`);
      await write(process.stderr, `${USAGE}\n`);
      return 2;
    }
  }
}

async function withContext<T>(fn: (ctx: BlahpContext) => Promise<T>, needProject = true): Promise<T> {
  const cfg = loadConfig(process.env, needProject);
  // The BLAHP's own files have no fallback (docs/storage.md, "Making directories"): a state
  // directory that cannot be made is a configuration error, said before anything is sent.
  try {
    makeDirs(cfg.paths.root, 'the BLAHP state directory');
  } catch (err) {
    throw new BlahpConfigError(`${errorMessage(err)}; set boinc_state_dir in blah.config to a directory this user can create and write`);
  }
  const ctx = openContext(cfg);
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/** install / uninstall [dir]: without a directory, the folder blahpd runs scripts from (gahp/blahp-location.ts), said first. */
async function scriptsAction(action: 'install' | 'uninstall', rest: string[]): Promise<number> {
  const force = action === 'install' && rest.includes('--force');
  const dirs = rest.filter((a) => !(force && a === '--force'));
  if (dirs.length > 1 || dirs.some((d) => d.startsWith('-'))) {
    await write(process.stderr, `${USAGE}\n`);
    return 2;
  }
  try {
    let dir = dirs[0];
    if (dir === undefined) {
      const { locateBlahpd } = await import('../blahp-location.js');
      const where = await locateBlahpd(process.env);
      // Without HTCondor's answer and without a blahp/ folder, blahp's bare default (/usr/libexec) is a guess, not a place to write.
      if (!where.askedHtcondor && !where.blahpFolder) {
        throw new Error(`condor_config_val is not on PATH and ${where.home}/libexec/blahp does not exist: put HTCondor's bin/ on PATH, or give the folder (boinc-gahp blahp ${action} <libexec dir>)`);
      }
      dir = where.libexec;
      await write(process.stdout, `blahpd runs batch scripts from ${dir} (${where.libexecFrom})\n`);
    }
    const scripts = await import('../blahp-scripts.js');
    if (action === 'install') {
      const { written } = scripts.install(dir, { force });
      await write(process.stdout, written.map((f) => `wrote ${f}\n`).join(''));
      return 0;
    }
    const { removed, foreign } = scripts.uninstall(dir);
    const lines = [...removed.map((f) => `removed ${f}`), ...foreign.map((f) => `left ${f}: not written by boinc-gahp`)];
    if (removed.length === 0) lines.push(`no boinc_*.sh written by boinc-gahp in ${dir}`);
    await write(process.stdout, lines.map((l) => `${l}\n`).join(''));
    return 0;
  } catch (err) {
    await write(process.stderr, `boinc-gahp blahp ${action}: ${errorMessage(err)}\n`);
    return 1;
  }
}

async function whereAction(): Promise<number> {
  const { locateBlahpd } = await import('../blahp-location.js');
  const where = await locateBlahpd(process.env);
  await write(process.stdout, `${where.libexec}\n${where.libexecFrom}; blah.config: ${where.config.file}\n`);
  return 0;
}

async function submitAction(rest: string[]): Promise<number> {
  try {
    const { submitJob } = await import('./submit.js');
    const name = await withContext((ctx) => submitJob(ctx, rest, (line) => process.stderr.write(`${line}\n`)));
    await write(process.stdout, `BLAHP_JOBID_PREFIX${blahpJobId(name)}\n`);
    return 0;
  } catch (err) {
    // What blahpd puts into the job's hold reason: the same shape as the BOINC_GAHP route's.
    await write(process.stderr, `${notSentReason(errorMessage(err))}\n`);
    return err instanceof BlahpConfigError ? 2 : 1;
  }
}

async function statusAction(rest: string[]): Promise<number> {
  const ids = rest.filter((a) => a !== '-w' && a !== '-n' && a !== '--');
  let lines: string[];
  try {
    lines = await withContext((ctx) => statusLines(ctx, ids));
  } catch (err) {
    lines = ids.map(() => errorLine(errorMessage(err)));
  }
  await write(process.stdout, lines.map((l) => `${l}\n`).join(''));
  return 0;
}

async function cancelAction(rest: string[]): Promise<number> {
  if (rest.length === 0) {
    await write(process.stderr, 'boinc_cancel.sh: no job id given\n');
    return 1;
  }
  let out = '';
  let failed: string | undefined;
  try {
    const { abortJobsCommand } = await import('../commands/abort-jobs.js');
    await withContext(async (ctx) => {
      const batches = new Set<string>();
      for (let i = 0; i < rest.length; i++) {
        const prefix = rest.length === 1 ? '' : `.${i}`;
        const job = jobNameFromId(rest[i]!);
        try {
          if (!job) throw new Error(`malformed BOINC job id ${rest[i]}`);
          // The gridmanager cancels every job it holds, this one too: its result stays on
          // BOINC for the job's return after a release, or until its batch's lease runs out.
          if (resultKept(ctx, job)) {
            ctx.log.info(`blahp cancel: ${job.jobName}: its result is kept on BOINC for the job's release; nothing aborted`);
            out += `${prefix} 0 No\\ error\n`;
            continue;
          }
          await abortJobsCommand(await ctx.services()).run(await ctx.bound({ jobNames: [job.jobName] }), ctx.handler(`cancel ${job.jobName}`, 25_000));
          writeFinalRecord(ctx, job, { kind: 'cancelled', at: Date.now() });
          ctx.log.info(`blahp cancel: ${job.jobName}: aborted on BOINC`);
          batches.add(job.batch);
          out += `${prefix} 0 No\\ error\n`;
        } catch (err) {
          ctx.log.warn(`blahp cancel: ${rest[i]}: ${errorMessage(err)}`);
          if (rest.length === 1) throw err;
          out += `${prefix} 1 ${escapeToken(errorMessage(err))}\n`;
        }
      }
      // The last unfinished job of a batch cancelled: the batch is closed now, not at
      // some later status call (its failure only logged: the cancel itself succeeded).
      if (batches.size > 0) {
        const { retireIfFinished } = await import('./fetch.js');
        for (const batch of batches) await retireIfFinished(ctx, batch);
      }
    });
  } catch (err) {
    failed = errorMessage(err);
  }
  if (failed !== undefined) {
    await write(process.stderr, `boinc_cancel.sh: ${failed}\n`);
    return 1;
  }
  await write(process.stdout, out);
  return 0;
}

async function pingAction(): Promise<number> {
  let line: string;
  try {
    const { pingCommand } = await import('../commands/ping.js');
    await withContext(async (ctx) => pingCommand(await ctx.services()).run(await ctx.bound({}), ctx.handler('ping', 25_000)));
    line = '0 No error';
  } catch (err) {
    line = `1 ${errorMessage(err).replace(/[\r\n]+/g, ' ')}`;
  }
  await write(process.stdout, `${line}\n`);
  return 0;
}

async function fetchAction(): Promise<number> {
  try {
    const { runFetcher } = await import('./fetch.js');
    await withContext((ctx) => runFetcher(ctx));
    return 0;
  } catch {
    return 1;
  }
}
