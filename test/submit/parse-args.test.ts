/**
 * BOINC_SUBMIT's argument list as the gridmanager builds it (gahp/staging/parse.ts): jobs
 * with and without arguments and inputs, the six trailing parameters or none, and a clear
 * ArgumentError (the `E` the client gets) for each way the line can be cut or miscounted.
 */
import { parseSubmitArgs } from '../../gahp/staging/parse.js';
import { ArgumentError } from '../../gahp/protocol/commands.js';

const errorOf = (args: string[]): string => {
  try {
    parseSubmitArgs(args);
  } catch (err) {
    expect(err).toBeInstanceOf(ArgumentError);
    return (err as Error).message;
  }
  throw new Error('parsed without an error');
};

test('jobs with and without arguments and inputs; the trailing parameters or none', () => {
  const line = ['b', 'app', '2', 'j1', '2', '-v', 'x y', '1', '/in/a', 'a', 'j2', '0', '0'];
  expect(parseSubmitArgs(line)).toEqual({
    batchName: 'b',
    appName: 'app',
    jobs: [
      { name: 'j1', args: ['-v', 'x y'], inputs: [{ src: '/in/a', dst: 'a' }] },
      { name: 'j2', args: [], inputs: [] },
    ],
    jobParams: {},
  });
  const withParams = parseSubmitArgs([...line, '1e9', 'NULL', '2000000', 'NULL', '3600', '3']);
  expect(withParams.jobParams).toEqual({ rscFpopsEst: 1e9, rscMemoryBound: 2000000, delayBound: 3600 });
  expect(withParams.appVersionNum).toBe(3);
  expect(withParams.paramProblem).toBeUndefined();
  // A bad parameter is the submit's error result, not an `E`.
  expect(parseSubmitArgs([...line, 'lots', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL']).paramProblem).toMatch(/^job parameter rsc_fpops_est/);
});

test('a line cut short or miscounted is an ArgumentError naming what is missing or wrong', () => {
  expect(errorOf([])).toBe('missing batch_name (the line ends after 0 arguments)');
  expect(errorOf(['b'])).toBe('missing app_name (the line ends after 1 arguments)');
  expect(errorOf(['b', 'app'])).toBe('missing njobs (the line ends after 2 arguments)');
  expect(errorOf(['b', 'app', 'two'])).toMatch(/^njobs must be a non-negative integer/);
  expect(errorOf(['b', 'app', '0'])).toBe('njobs must be at least 1');
  expect(errorOf(['b', 'app', '2', 'j1', '0', '0'])).toBe('2 jobs announced, but only 3 arguments follow');
  // Jobs with arguments use up what the count check let through.
  expect(errorOf(['b', 'app', '2', 'j1', '3', 'x', 'y', 'z', '0'])).toBe('missing job_name of job 2 (the line ends after 9 arguments)');
  expect(errorOf(['b', 'app', '2', 'j1', '3', 'x', 'y', 'z', '0', 'j2'])).toBe('missing nargs of job j2 (the line ends after 10 arguments)');
  expect(errorOf(['b', 'app', '2', 'j1', '3', 'x', 'y', 'z', '0', 'j2', '0'])).toBe('missing ninputs of job j2 (the line ends after 11 arguments)');
  expect(errorOf(['b', 'app', '1', 'j1', 'x', '0'])).toMatch(/^nargs of job j1 must be a non-negative integer/);
  expect(errorOf(['b', 'app', '1', 'j1', '5', '0', '0'])).toBe('job j1: 5 arguments announced, only 2 follow');
  expect(errorOf(['b', 'app', '1', 'j1', '0', '2', '/a', 'a', '/b'])).toBe('job j1: 2 input files announced, only 3 arguments follow');
  expect(errorOf(['b', 'app', '1', 'j1', '0', '-1'])).toMatch(/^ninputs of job j1 must be a non-negative integer/);
  expect(errorOf(['b', 'app', '1', 'j1', '0', '0', 'extra'])).toBe('expected 6 job parameters (or none) after the 1 jobs, got 1 more arguments');
});
