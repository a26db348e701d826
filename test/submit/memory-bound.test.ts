/**
 * What a memory request means for a BOINC job (gahp/staging/memory-bound.ts): the app
 * template's rsc_memory_bound (the test server's apps say 1e8 bytes, as the measured
 * project's do) is a floor. BOINC_SUBMIT's rsc_memory_bound below or at it is not sent,
 * above it is; the template's bound is read by get_templates' parser.
 */
import { parseTemplates } from '../../boinc-rpc/replies.js';
import { withTemplateMemoryFloor } from '../../gahp/staging/memory-bound.js';
import { startEnv, batchName, jobName, type Env } from '../commands/helpers.js';
import { submitLine, writeInput } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

/** The rsc_memory_bound of the last submit_batch of this batch, or undefined when none was sent. */
function sentBound(batch: string): string | undefined {
  const calls = env.server.rpcLog().filter((e) => e.rpc === 'submit_batch' && e.raw.includes(`<batch_name>${batch}</batch_name>`));
  expect(calls).toHaveLength(1);
  // The batch's job_params, not the app's template each job carries (kept no_delete).
  const batchPart = calls[0]!.raw.replace(/<input_template>[\s\S]*?<\/input_template>/g, '');
  return /<rsc_memory_bound>([^<]*)<\/rsc_memory_bound>/.exec(batchPart)?.[1];
}

async function submitWithBound(bound: string): Promise<string> {
  const batch = batchName('uppercase');
  const p = writeInput(env.dir, `mem-${bound}.txt`, `memory ${bound}\n`);
  const line = submitLine(batch, 'uppercase', [{ name: jobName(batch, 1, 0), inputs: [[p, 'in']] }], ['NULL', 'NULL', bound, 'NULL', 'NULL', 'NULL']);
  expect(await env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000)).toEqual(['NULL']);
  return batch;
}

test('a bound below the template (HTCondor 128 MB default vs a 1 GB template, here 5e7 vs 1e8) is left out: the template applies', async () => {
  expect(sentBound(await submitWithBound('50000000'))).toBeUndefined();
  expect(sentBound(await submitWithBound('100000000'))).toBeUndefined();
});

test('a bound above the template raises it', async () => {
  expect(Number(sentBound(await submitWithBound('4294967296')))).toBe(4294967296);
});

test('the rule and the template parser', () => {
  expect(withTemplateMemoryFloor({ rscMemoryBound: 128 * 2 ** 20, rscDiskBound: 5 }, 1e9)).toMatchObject({ params: { rscDiskBound: 5 } });
  expect(withTemplateMemoryFloor({ rscMemoryBound: 128 * 2 ** 20 }, 1e9).note).toMatch(/not above the app template's 1000000000/);
  expect(withTemplateMemoryFloor({ rscMemoryBound: 2e9 }, 1e9)).toEqual({ params: { rscMemoryBound: 2e9 } });
  // No bound in the template: the request is all there is.
  expect(withTemplateMemoryFloor({ rscMemoryBound: 1e6 }, undefined)).toEqual({ params: { rscMemoryBound: 1e6 } });
  const xml = (wu: string) => `<get_templates><templates><input_template><workunit><file_ref><open_name>in</open_name></file_ref>${wu}</workunit></input_template>` +
    '<output_template><result><file_ref><open_name>out</open_name></file_ref><rsc_memory_bound>7</rsc_memory_bound></result></output_template></templates></get_templates>';
  expect(parseTemplates('get_templates', xml('<rsc_memory_bound>1e9</rsc_memory_bound>')).rscMemoryBound).toBe(1e9);
  // Only the input template's counts.
  expect(parseTemplates('get_templates', xml('')).rscMemoryBound).toBeUndefined();
});
