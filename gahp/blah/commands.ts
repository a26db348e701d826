/**
 * The BLAH commands HTCondor's gridmanager sends for `grid_resource = batch boinc` when
 * BOINC_GAHP names this program (docs/blah-route.md): BLAH_PING, BLAH_JOB_SUBMIT,
 * BLAH_JOB_STATUS, BLAH_JOB_CANCEL, BLAH_JOB_REFRESH_PROXY. What they do is in route.ts;
 * this module is their protocol shape.
 *
 * The gridmanager asserts the number of tokens of each result (gahp-client.cpp): ping and
 * cancel `<reqid> <rc> <message>`, submit `<reqid> <rc> <message> <job id>`, status
 * `<reqid> <rc> <message> <JobStatus> <ad>`; any other count aborts it, with every job of
 * every user. So every outcome, a failure or the command deadline included, has the
 * command's own shape (errorResult), and a parser never throws for what a request says
 * (an `E` reply aborts the gridmanager too): a bad submit ad is the submit's error result.
 */
import { ArgumentError, expectArgCount, type AsyncCommand, type Command } from '../protocol/commands.js';
import { SubmitCheckError } from '../staging/validate.js';
import { errorMessage } from '../util.js';
import { blahpJobId, jobNameFromId, LRMS, notSentReason, type ParsedJobName } from '../batch-boinc/names.js';
import { parseClassAd, writeClassAd } from './classad.js';
import { jobFromSubmitAd } from './submit-ad.js';
import type { BlahRoute, SubmitTicket } from './route.js';

const OK = 'No error';

type Parsed<T> = { ok: T } | { problem: string };

function ping(route: BlahRoute): AsyncCommand<string> {
  return {
    kind: 'async',
    name: 'BLAH_PING',
    usage: '<reqid> <lrms>',
    summary: 'Checks that the configured BOINC project answers (batch boinc).',
    parse(args) {
      expectArgCount(args, 0, 1);
      return args[0] ?? LRMS;
    },
    async run(_lrms, ctx) {
      await route.ping(ctx.signal);
      return ['0', OK];
    },
    errorResult: (m) => ['1', m],
  };
}

function submit(route: BlahRoute): AsyncCommand<Parsed<SubmitTicket>> {
  return {
    kind: 'async',
    name: 'BLAH_JOB_SUBMIT',
    usage: '<reqid> <submit ClassAd>',
    summary: 'Submits one HTCondor job to the configured BOINC project (batch boinc).',
    queued: false,
    parse(args) {
      expectArgCount(args, 1);
      try {
        const { job, submissionKey } = jobFromSubmitAd(parseClassAd(args[0]!));
        return { ok: submissionKey ? { job, submissionKey } : { job } };
      } catch (err) {
        return { problem: errorMessage(err) };
      }
    },
    async run(req, ctx) {
      try {
        if ('problem' in req) throw new SubmitCheckError(req.problem);
        const name = await route.submit(req.ok, ctx.signal);
        return ['0', OK, blahpJobId(name)];
      } catch (err) {
        // Every failed submit leaves the job out of BOINC: its hold reason says so in one
        // shape on both BLAH routes (docs/blah-route.md, "Refused jobs").
        throw new SubmitCheckError(notSentReason(errorMessage(err)));
      }
    },
    errorResult: (m) => ['1', m, 'N/A'],
  };
}

function jobIdArg(args: string[]): Parsed<ParsedJobName> {
  const id = args[0]!;
  const job = jobNameFromId(id);
  return job ? { ok: job } : { problem: `${JSON.stringify(id.slice(0, 100))} is not a job id of batch boinc (boinc/<job name>)` };
}

function status(route: BlahRoute): AsyncCommand<Parsed<ParsedJobName>> {
  return {
    kind: 'async',
    name: 'BLAH_JOB_STATUS',
    usage: '<reqid> <job id>',
    summary: "A batch boinc job's state as an HTCondor status ad.",
    queued: false,
    parse(args) {
      expectArgCount(args, 1);
      return jobIdArg(args);
    },
    async run(req, ctx) {
      if ('problem' in req) throw new ArgumentError(req.problem);
      const answer = await route.status(req.ok, ctx.signal);
      const ad = writeClassAd([['BatchjobId', req.ok.jobName], ['JobStatus', answer.jobStatus], ...answer.extra]);
      return ['0', OK, String(answer.jobStatus), ad];
    },
    errorResult: (m) => ['1', m, '0', 'N/A'],
  };
}

function cancel(route: BlahRoute): AsyncCommand<Parsed<ParsedJobName>> {
  return {
    kind: 'async',
    name: 'BLAH_JOB_CANCEL',
    usage: '<reqid> <job id>',
    summary: 'Aborts a batch boinc job on BOINC (condor_rm, condor_hold).',
    queued: false,
    parse(args) {
      expectArgCount(args, 1);
      return jobIdArg(args);
    },
    async run(req) {
      if ('problem' in req) throw new ArgumentError(req.problem);
      await route.cancel(req.ok);
      return ['0', OK];
    },
    errorResult: (m) => ['1', m],
  };
}

/** BOINC authenticates with the account's authenticator: a job's proxy is not used, so refreshing it is a success. */
function refreshProxy(): AsyncCommand<null> {
  return {
    kind: 'async',
    name: 'BLAH_JOB_REFRESH_PROXY',
    usage: '<reqid> <job id> <proxy file>',
    summary: 'Accepted and ignored: BOINC uses the account authenticator, not a proxy.',
    parse(args) {
      expectArgCount(args, 2);
      return null;
    },
    run: async () => ['0', OK],
    errorResult: (m) => ['1', m],
  };
}

export function blahCommands(route: BlahRoute): Command[] {
  return [ping(route), submit(route), status(route), cancel(route), refreshProxy()];
}
