/**
 * Waiting for a condition a test cannot be told of (a file the test server's assimilator
 * moves, a job a child process submits): polled every 50 ms, with a generous limit so that a
 * loaded machine is not a failure.
 */

/** Resolves once `cond` holds; throws `timed out waiting for <what>` after `ms` (30 s). */
export async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
