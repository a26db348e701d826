/**
 * The apps' templates as BOINC_FETCH_OUTPUT keeps them, per app and project account
 * (docs/boinc-server.md, "Templates kept between fetches"). A fetch needs the app's output
 * template (the names of the job's output files, in order); the server reads it from the
 * app's template file, which does not change while a batch drains, and asking for it with
 * every fetch made one call in three of a cluster's fetches.
 *
 * An answer serves a job when it was asked after the job's batch was created and is younger
 * than the age bound; otherwise the app's templates are asked again. Fetches waiting for a
 * new answer share one get_templates.
 */
import type { AppTemplates, BoincRpc } from '../boinc-rpc/types.js';
import { untilAborted } from './util.js';

/** How long an answer is used: an operator's change to a template is seen within this. */
export const TEMPLATE_MAX_AGE_MS = 5 * 60 * 1000;

interface Answer {
  templates: AppTemplates;
  /** When its get_templates was sent (ms since epoch). */
  askedAt: number;
}

export class AppTemplateMemory {
  /** accountKey + app -> the newest answer. */
  private readonly answers = new Map<string, Answer>();
  /** accountKey + app -> the get_templates under way. */
  private readonly asking = new Map<string, { askedAt: number; answer: Promise<Answer> }>();

  constructor(private readonly maxAgeMs = TEMPLATE_MAX_AGE_MS) {}

  /**
   * The app's templates from an answer asked no earlier than `notBefore` (ms since epoch)
   * and within the age bound: the kept one, the one under way, or a new get_templates.
   * Resolves to the answer and when it was asked (the `notBefore` of asking again because
   * a job did not fit it).
   */
  async get(rpc: BoincRpc, accountKey: string, app: string, notBefore: number, signal: AbortSignal): Promise<Answer> {
    const key = `${accountKey}\n${app}`;
    const since = Math.max(notBefore, Date.now() - this.maxAgeMs);
    const kept = this.answers.get(key);
    if (kept && kept.askedAt >= since) return kept;
    let pending = this.asking.get(key);
    if (!pending || pending.askedAt < since) {
      const askedAt = Date.now();
      // Asked without any one fetch's signal: the others waiting for it must not lose it
      // when that fetch is cancelled (each stops waiting at its own signal below).
      const answer = rpc.getTemplates({ appName: app }).then((templates) => {
        const a = { templates, askedAt };
        if ((this.answers.get(key)?.askedAt ?? -1) <= askedAt) this.answers.set(key, a);
        return a;
      });
      const entry = { askedAt, answer };
      this.asking.set(key, entry);
      const done = () => {
        if (this.asking.get(key) === entry) this.asking.delete(key);
      };
      answer.then(done, done);
      pending = entry;
    }
    return untilAborted(pending.answer, signal);
  }
}
