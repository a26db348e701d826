/**
 * RequestMemory through blahpd (`-m <MB>`, 128 by default on a routed vanilla job): the
 * app template's rsc_memory_bound (1e8 bytes on the test server) is a floor, as on the
 * GAHP route (gahp/staging/memory-bound.ts): a smaller request is not sent, a larger one is.
 */
import { jobDir, nameOf, blahpEnvForFile } from './support.js';

const LONG = 120_000;
const env = blahpEnvForFile();

async function boundSentFor(tag: string, requestMemoryMb: number): Promise<string | undefined> {
  const iwd = jobDir(env(), tag, `${tag}\n`);
  const sub = await env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', JobDirectory: iwd, RequestMemory: requestMemoryMb });
  expect(sub.run?.stderr ?? '').not.toMatch(/failed/);
  const batch = nameOf(sub.jobId!).replace(/_\d+$/, '');
  const calls = env().server.rpcLog().filter((e) => e.rpc === 'submit_batch' && e.raw.includes(`<batch_name>${batch}</batch_name>`));
  expect(calls).toHaveLength(1);
  // The batch's job_params, not the app's template each job carries (kept no_delete).
  const batchPart = calls[0]!.raw.replace(/<input_template>[\s\S]*?<\/input_template>/g, '');
  return /<rsc_memory_bound>([^<]*)<\/rsc_memory_bound>/.exec(batchPart)?.[1];
}

test('RequestMemory 64 (below the template) leaves the bound to the template; 4096 raises it', async () => {
  expect(await boundSentFor('small', 64)).toBeUndefined();
  expect(Number(await boundSentFor('large', 4096))).toBe(4096 * 1024 * 1024);
}, LONG);
