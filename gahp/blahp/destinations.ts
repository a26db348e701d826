/**
 * Output destinations in use (issue 38, item 5). blahpd drops a remap written with blanks
 * around `=` (`out = out.$(Process)`: docs/blahp.md, "Submit"), so every job of a cluster
 * would write one `out` in the same directory, each over the one before. A submit therefore
 * claims each of its job's output destinations (absolute paths) in
 * `destinations/<sha256 of the path>`, and a job whose destination is claimed by another job
 * of this state directory that has no final record yet is refused.
 *
 * Crash-safe as the other files here: the check and the claims of one job are made under
 * `destinations.lock` (a pid lock file, taken over from a dead holder), each claim written
 * whole and renamed into place. A claim names the job's submit key and its submit call's
 * pid: its owner is still live when the key has a claim (`claims/<key>`) in a batch that did
 * not fail and the job has no final record, or, before that, while the submit call runs. A
 * claim whose owner is not live is simply replaced; the claims of a retired batch's jobs
 * are removed with it.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BlahpContext } from './context.js';
import { jobName } from '../batch-boinc/names.js';
import { readJson, writeJsonAtomic } from './state.js';
import { batchFile, finalRecord, jobSpecFile, type BatchRecord, type Claim, type JobSpec } from './records.js';
import { tryLockFile, unlockFile } from '../state-files.js';
import { resolveUnder } from '../output/staging.js';
import { pidAlive, sleep } from '../util.js';

interface DestinationClaim {
  dest: string;
  key: string;
  pid: number;
}

const LOCK_WAIT_MS = 10_000;

/** The job's output destinations, absolute (none known before the fetch without an -O list). */
export function destinationsOf(spec: JobSpec): string[] {
  return [...new Set((spec.outputs ?? []).map((o) => path.resolve(resolveUnder(spec.iwd, o.dst))))];
}

const claimFile = (ctx: BlahpContext, dest: string) => path.join(ctx.cfg.paths.root, 'destinations', crypto.createHash('sha256').update(dest).digest('hex').slice(0, 40));
const lockFile = (ctx: BlahpContext) => path.join(ctx.cfg.paths.root, 'destinations.lock');

/** The job of another submit that still is to write there, or undefined. */
function liveOwner(ctx: BlahpContext, c: DestinationClaim): string | undefined {
  const claim = readJson<Claim>(path.join(ctx.cfg.paths.claims, c.key));
  if (!claim) return pidAlive(c.pid) ? 'a job being submitted' : undefined;
  const rec = readJson<BatchRecord>(batchFile(ctx, claim.batch));
  if (!rec || rec.state === 'failed') return undefined;
  const job = { jobName: jobName(claim.batch, claim.n), batch: claim.batch, n: claim.n };
  return finalRecord(ctx, job) ? undefined : `BOINC job ${job.jobName}`;
}

/**
 * Claims the job's output destinations; returns why the job is refused when another
 * unfinished job of this state directory has one of them (nothing claimed then).
 */
export async function claimDestinations(ctx: BlahpContext, spec: JobSpec): Promise<string | undefined> {
  const dests = destinationsOf(spec);
  if (dests.length === 0) return undefined;
  const lock = lockFile(ctx);
  for (const until = Date.now() + LOCK_WAIT_MS; !tryLockFile(lock); ) {
    if (Date.now() > until) throw new Error(`the lock ${lock} is held for too long`);
    await sleep(20);
  }
  try {
    for (const dest of dests) {
      const c = readJson<DestinationClaim>(claimFile(ctx, dest));
      if (!c || c.key === spec.key || c.dest !== dest) continue;
      const owner = liveOwner(ctx, c);
      if (owner) {
        return `the job's output ${dest} is also the output of ${owner} of this BOINC state directory, not finished yet: one would overwrite the other. ` +
          `If the submit file remaps outputs with blanks around '=' (transfer_output_remaps = "out = out.$(Process)"), blahpd dropped the remap: ` +
          `write it without blanks ("out=out.$(Process)"), or give each job its own initialdir`;
      }
    }
    for (const dest of dests) writeJsonAtomic(claimFile(ctx, dest), { dest, key: spec.key, pid: process.pid } satisfies DestinationClaim);
    return undefined;
  } finally {
    unlockFile(lock);
  }
}

/** Removes the destination claims of a retired batch's jobs (those that still name them). */
export function releaseDestinations(ctx: BlahpContext, rec: BatchRecord): void {
  // Best effort, under the lock (a claim replaced meanwhile must stay): a later retirement
  // of another batch does not come back for these, but a claim left is only replaced.
  const lock = lockFile(ctx);
  if (!tryLockFile(lock)) return;
  try {
    releaseUnlocked(ctx, rec);
  } finally {
    unlockFile(lock);
  }
}

function releaseUnlocked(ctx: BlahpContext, rec: BatchRecord): void {
  rec.keys.forEach((key, n) => {
    const spec = readJson<JobSpec>(jobSpecFile(ctx, rec.batch, n));
    if (!spec) return;
    for (const dest of destinationsOf(spec)) {
      const file = claimFile(ctx, dest);
      if (readJson<DestinationClaim>(file)?.key === key) fs.rmSync(file, { force: true });
    }
  });
}
