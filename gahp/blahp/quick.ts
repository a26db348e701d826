/**
 * Status answers that boinc_status.sh prints without starting node (docs/blahp.md, "Status
 * without node"; issue 36, item 2).
 *
 * Why: blahpd runs boinc_status.sh once per job and per poll, and a node process costs
 * about 0.18 s of CPU (test/bench/README.md, "Issue 36 item 2"): a 2,000-job cluster
 * through blahpd drained at 4.6 jobs/s with up to 50 node processes at once, mostly status
 * calls whose answer was already on disk (an idle or running job of a fresh snapshot, or a
 * job with a final record). So those answers are also kept as ready-made lines that the
 * script reads with bash's `read` and prints as they are; anything else (no fresh line, a
 * DONE job whose outputs are not in place yet, an id that is not one of ours) still goes
 * to node.
 *
 * blahpd's own status cache (/var/tmp/<lrms>_cache_<user>/blahp_results_cache, job_status.c)
 * would not do: its answer is `[JobStatus=n;BatchJobId="..."]`, not node's line, also for
 * status 5 (a held job would lose its HoldReason); it is fresh for a fixed 60 s by the
 * file's mtime, whatever boinc_status_max_age says; it is one file for all of blahpd's
 * user's jobs (rewritten whole at each snapshot); and its folder in the shared /var/tmp can
 * be made first by any local user (blahpd checks neither owner nor mode).
 *
 * Files, each written to a temp file and renamed into place (a reader sees a whole file or
 * none), beside the job's records in `jobs/<batch>/`:
 * - `<n>.final`: the job's final line (what `finalLine` makes of `finalRecord`), one line.
 *   Written after the final record itself, by whoever writes that record, and re-checked
 *   after the rename (two final records written at once, e.g. a cancel and a fetch, end with
 *   the line of the record that wins, cancelled first). Never stale: a final state stays.
 * - `<n>.snap`: two lines, an epoch and the job's idle or running line: the job is in that
 *   state in status.json. Valid only while `status.stamp` names the same epoch.
 * - `status.stamp` (in blahp/): three lines, status.json's fetchedAt (ms; the script judges
 *   freshness by it), its project URL and the epoch of the valid `.snap` lines.
 *
 * The rule that keeps a `.snap` line equal to node's answer: while a stamp exists, status.json
 * has its fetchedAt and the `.snap` files of its epoch are the idle and running jobs of
 * status.json, each in its state there (a job with a final record may have none: its
 * `.final` comes first anyway). A refresh takes the stamp down first, changes the `.snap` files, writes
 * status.json, and puts the stamp up last. So it need not rewrite every line: when the stamp
 * it found matches the snapshot it replaces, the files already match that snapshot, and only
 * the jobs whose state changed are written (or their `.snap` removed: DONE now, batch gone).
 * Otherwise (no stamp: the first refresh, or one that died half-way) it starts a new epoch
 * and writes every line; lines of older epochs are ignored, never trusted.
 *
 * These are a cache of what node would answer: they are not fsync'd. A file torn by a power
 * loss lacks its last newline or its shape, and the script then asks node.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { BlahpContext } from './context.js';
import { statusLine, type AdValue } from './classad.js';
import { jobName, parseJobName, type ParsedJobName } from '../batch-boinc/names.js';
import { cancelledFile, doneFile, finalRecord, heldFile, type FinalRecord, type StatusSnapshot } from './records.js';
import { ensureDir, writeJsonAtomic } from './state.js';

/** The JobStatus of a BOINC job state that a snapshot answers by itself (status.ts): idle or running; else undefined. */
export function snapshotState(word: string): 1 | 2 | undefined {
  switch (word) {
    case 'NOT_STARTED':
    case 'UNSENT':
      return 1;
    case 'IN_PROGRESS':
      return 2;
    default:
      return undefined;
  }
}

/** The status line of a final record. */
export function finalLine(job: ParsedJobName, rec: FinalRecord): string {
  switch (rec.kind) {
    case 'done': {
      const extra: Array<[string, AdValue]> = [['ExitCode', rec.exitCode], ['RemoteWallClockTime', rec.wallClock], ['RemoteUserCpu', rec.cpu]];
      return statusLine(job.jobName, 4, extra);
    }
    case 'cancelled':
      return statusLine(job.jobName, 3);
    case 'held':
      return statusLine(job.jobName, 5, [['HoldReason', rec.reason], ['HoldReasonCode', rec.code], ['HoldReasonSubCode', 0]]);
  }
}

const quickFile = (ctx: BlahpContext, job: ParsedJobName, kind: 'final' | 'snap') => path.join(ctx.cfg.paths.jobs, job.batch, `${job.n}.${kind}`);

/**
 * The job under the name it was given (`<batch>_<n>`). The files are per job number, and the
 * script reads them only for that name: node, asked for `<batch>_06`, names job 6 so in its
 * line, which must not become job 6's quick line.
 */
const canonical = (job: ParsedJobName): ParsedJobName => ({ ...job, jobName: jobName(job.batch, job.n) });

/**
 * Writes a quick-answer file whole (temp file, rename), without fsync: it is a cache.
 * `unlinkFirst` removes the old file before the rename, for the `.snap` lines a refresh
 * rewrites by the thousand: on ext4 a rename over an existing file (as a truncation) makes
 * the kernel start writing the new file's data at once (auto_da_alloc), and 1,000 of them
 * took 2.5-2.8 s here against 0.15-0.25 s after an unlink. No script trusts a `.snap` while
 * the refresh writes them (the stamp is down), so the moment without a file costs nothing.
 */
function writeQuick(file: string, text: string, unlinkFirst = false): void {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    fs.writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    ensureDir(path.dirname(file));
    fs.writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' });
  }
  try {
    if (unlinkFirst) fs.rmSync(file, { force: true });
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/** The names in a directory (none when it does not exist). */
function namesIn(dir: string): Set<string> {
  try {
    return new Set(fs.readdirSync(dir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Makes `<n>.final` say what the job's final records say now. After its rename the records
 * are read again: a record written meanwhile by another process (whose own line may have
 * landed before ours) makes us write again, so the last line written is the winner's.
 */
export function syncFinalLine(ctx: BlahpContext, given: ParsedJobName): void {
  const job = canonical(given);
  const file = quickFile(ctx, job, 'final');
  let rec = finalRecord(ctx, job);
  for (let attempt = 0; rec && attempt < 5; attempt++) {
    const text = `${finalLine(job, rec)}\n`;
    if (readText(file) !== text) writeQuick(file, text);
    const again = finalRecord(ctx, job);
    if (again && finalLine(job, again) === finalLine(job, rec)) return;
    rec = again;
  }
}

/** Records a job's final state (`jobs/<batch>/<n>.<kind>.json`), then its quick line. */
export function writeFinalRecord(ctx: BlahpContext, job: ParsedJobName, rec: FinalRecord): void {
  const file = rec.kind === 'done' ? doneFile(ctx, job) : rec.kind === 'cancelled' ? cancelledFile(ctx, job) : heldFile(ctx, job);
  writeJsonAtomic(file, rec);
  try {
    syncFinalLine(ctx, job);
  } catch (err) {
    // The record is what counts; without its line the script asks node.
    ctx.log.warn(`blahp: quick status line of ${job.jobName} not written: ${(err as Error).message}`);
  }
}

/**
 * Removes the job's `.final` line, after its final records were removed (a kept result taken
 * back on release, submit.ts): the job is not final any more. In that order, so that a status
 * call between the two cannot write the line again from a record.
 */
export function dropFinalLine(ctx: BlahpContext, job: ParsedJobName): void {
  fs.rmSync(quickFile(ctx, canonical(job), 'final'), { force: true });
}

/**
 * Node answered from a final record: its `.final` is written if missing or different (a
 * record written before this version, or a crash between the record and its line).
 */
export function ensureFinalLine(ctx: BlahpContext, given: ParsedJobName, rec: FinalRecord): void {
  const job = canonical(given);
  if (readText(quickFile(ctx, job, 'final')) === `${finalLine(job, rec)}\n`) return;
  try {
    syncFinalLine(ctx, job);
  } catch (err) {
    ctx.log.debug(`blahp: quick status line of ${job.jobName} not written: ${(err as Error).message}`);
  }
}

interface Stamp {
  fetchedAt: number;
  projectUrl: string;
  epoch: string;
}

function readStamp(ctx: BlahpContext): Stamp | undefined {
  const m = /^(\d{1,16})\n(\S+)\n([0-9a-z]{1,40})\n$/.exec(readText(ctx.cfg.paths.statusStamp) ?? '');
  return m ? { fetchedAt: Number(m[1]), projectUrl: m[2]!, epoch: m[3]! } : undefined;
}

/** Makes every `.snap` invalid at once (the refresh failed with no snapshot left to answer from). */
export function dropStamp(ctx: BlahpContext): void {
  fs.rmSync(ctx.cfg.paths.statusStamp, { force: true });
}

/** What a refresh did to the quick lines. */
export interface SnapshotLines {
  /** The epoch to stamp once status.json is written (writeStamp). */
  epoch: string;
  /** Every line written (a new epoch) rather than the changes only. */
  full: boolean;
  written: number;
  removed: number;
}

/**
 * The refresh's part before status.json is written (refresh.ts): takes the stamp down, then
 * brings the `.snap` files from `old` (status.json now) to `snap`: a line for each job that is
 * idle or running in `snap` and has no final record (a job with one gets its `.final` checked
 * instead), and none for the others. Only what changed, when the stamp matched `old`.
 */
export function writeSnapshotLines(ctx: BlahpContext, old: StatusSnapshot | undefined, snap: StatusSnapshot): SnapshotLines {
  const stamp = readStamp(ctx);
  const same = old !== undefined && stamp !== undefined && stamp.fetchedAt === old.fetchedAt && stamp.projectUrl === snap.projectUrl && old.projectUrl === snap.projectUrl;
  const prior = same ? old : undefined;
  const epoch = same ? stamp.epoch : `${snap.fetchedAt.toString(36)}${randomBytes(4).toString('hex')}`;
  dropStamp(ctx);
  const was = (batch: string, name: string) => (prior && Object.hasOwn(prior.batches, batch) ? snapshotState(prior.batches[batch]![name] ?? '') : undefined);
  let written = 0;
  let removed = 0;
  for (const [batch, jobs] of Object.entries(snap.batches)) {
    // Which jobs have a final record: one listing of the batch's folder (a failed open per
    // record and job costs more). A record written after it gets its `.final` from its
    // writer, and the script reads `.final` first.
    let names: Set<string> | undefined;
    for (const [name, word] of Object.entries(jobs)) {
      const state = snapshotState(word);
      const job = parseJobName(name);
      if (state === undefined || !job || job.batch !== batch || name !== jobName(batch, job.n) || was(batch, name) === state) continue;
      names ??= namesIn(path.join(ctx.cfg.paths.jobs, batch));
      const recorded = ['cancelled', 'done', 'held'].some((kind) => names!.has(`${job.n}.${kind}.json`));
      const fin = recorded ? finalRecord(ctx, job) : undefined;
      if (fin) {
        // Its `.final` answers; an older line of this epoch must not, should that fail.
        ensureFinalLine(ctx, job, fin);
        fs.rmSync(quickFile(ctx, job, 'snap'), { force: true });
        continue;
      }
      writeQuick(quickFile(ctx, job, 'snap'), `${epoch}\n${statusLine(job.jobName, state)}\n`, true);
      written++;
    }
  }
  // Jobs idle or running before and not now (DONE or ERROR, batch gone or not asked): no line.
  for (const [batch, jobs] of Object.entries(prior?.batches ?? {})) {
    const now = Object.hasOwn(snap.batches, batch) ? snap.batches[batch]! : {};
    for (const [name, word] of Object.entries(jobs)) {
      const job = parseJobName(name);
      if (!job || job.batch !== batch || snapshotState(word) === undefined || snapshotState(now[name] ?? '') !== undefined) continue;
      fs.rmSync(quickFile(ctx, job, 'snap'), { force: true });
      removed++;
    }
  }
  return { epoch, full: !same, written, removed };
}

/** After status.json: the stamp that makes the `.snap` lines of this epoch valid. */
export function writeStamp(ctx: BlahpContext, snap: StatusSnapshot, epoch: string): void {
  writeQuick(ctx.cfg.paths.statusStamp, `${snap.fetchedAt}\n${snap.projectUrl}\n${epoch}\n`);
}
