/**
 * BOINC_SUBMIT through the real GAHP process against the test server (real-server quirks):
 * staging, deduplication, template order, argument checks, parameters, failures.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEnv, batchName, esc, jobName, type Env } from '../commands/helpers.js';
import { GahpProcess } from '../support/gahp-process.js';
import { submitLine, phys, writeInput, rpcNames, uploadedNames, expectOneCompleteBatch, type LineJob } from './support.js';

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

beforeEach(() => {
  env.server.clearFaults();
});

async function submit(line: string): Promise<string[]> {
  return env.gahp.call(`BOINC_SUBMIT ${line}`, 60_000);
}

/**
 * What the GAHP says of a job its BOINC_SUBMIT left out: a full status query reports it
 * DONE (so the gridmanager fetches it), and the fetch's error, its hold reason, is returned.
 */
async function refusalOf(batch: string, job: string): Promise<string> {
  const q = await env.gahp.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
  expect(q[0]).toBe('NULL');
  expect(q.slice(3)).toEqual(expect.arrayContaining([job, 'DONE']));
  const [msg, ...rest] = await env.gahp.call(`BOINC_FETCH_OUTPUT ${esc(job)} ${esc(env.dir)} /dev/null ALL 0`);
  expect(rest).toEqual([]);
  expect(msg).toMatch(/^job not sent to BOINC: /);
  return msg!;
}

describe('staging and deduplication', () => {
  test('50 jobs over 3 contents (one path twice in a job, one content under two paths) upload exactly 3 files', async () => {
    const dir = path.join(env.dir, 'dedup');
    const a = writeInput(dir, 'a.txt', 'alpha content\n');
    const b = writeInput(dir, 'b.txt', 'bravo content\n');
    const c = writeInput(dir, 'c.txt', 'charlie content\n');
    const a2 = writeInput(dir, 'sub/a-copy.txt', 'alpha content\n');
    const paths = [a, b, c, a2];
    const content: Record<string, string> = { [a]: 'alpha content\n', [b]: 'bravo content\n', [c]: 'charlie content\n', [a2]: 'alpha content\n' };
    const batch = batchName('concat');
    const jobs: LineJob[] = [];
    for (let i = 0; i < 50; i++) {
      const first = i === 0 ? a : paths[i % 4]!;
      const second = i === 0 ? a : paths[(i + 1) % 4]!;
      jobs.push({ name: jobName(batch, 100, i), inputs: [[first, 'a'], [second, 'b']] });
    }
    const since = env.server.rpcLog().length;
    expect(await submit(submitLine(batch, 'concat', jobs))).toEqual(['NULL']);

    const uploaded = uploadedNames(env.server, since);
    const expected = ['alpha content\n', 'bravo content\n', 'charlie content\n'].map(phys).sort();
    expect([...uploaded].sort()).toEqual(expected);
    expect(env.server.files().map((f) => f.name).filter((n) => expected.includes(n)).sort()).toEqual(expected);
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    // Every job got the physical names of its own contents, in template order.
    const byName = new Map(env.server.jobs(batch).map((j) => [j.name, j]));
    for (const j of jobs) {
      expect(byName.get(j.name)!.inputFiles).toEqual([phys(content[j.inputs[0]![0]]!), phys(content[j.inputs[1]![0]]!)]);
    }
    // RPC order: the two lookups, create_batch, then files, then submit_batch.
    const names = rpcNames(env.server, since);
    expect(names.slice(0, 2).sort()).toEqual(['get_templates', 'query_batch']);
    expect(names[2]).toBe('create_batch');
    expect(names[names.length - 1]).toBe('submit_batch');
    const createRaw = env.server.rpcLog().slice(since).find((e) => e.rpc === 'create_batch')!.raw;
    const expire = Number(/<expire_time>([0-9.]+)<\/expire_time>/.exec(createRaw)![1]);
    expect(Math.abs(expire - (Date.now() / 1000 + 6 * 3600))).toBeLessThan(120);

    // A second batch with the same files uploads nothing, and its files are linked to it.
    const batch2 = batchName('concat');
    const jobs2 = jobs.slice(0, 10).map((j, i) => ({ ...j, name: jobName(batch2, 200, i) }));
    const since2 = env.server.rpcLog().length;
    expect(await submit(submitLine(batch2, 'concat', jobs2))).toEqual(['NULL']);
    expect(rpcNames(env.server, since2)).not.toContain('upload_files');
    expectOneCompleteBatch(env.server, batch2, jobs2.map((j) => j.name));
  });

  test('a repeated BOINC_SUBMIT of a submitted batch succeeds without creating anything', async () => {
    const p = writeInput(env.dir, 'repeat.txt', 'repeat me\n');
    const batch = batchName('uppercase');
    const jobs = [0, 1, 2].map((i) => ({ name: jobName(batch, 300, i), inputs: [[p, 'in']] as Array<[string, string]> }));
    const line = submitLine(batch, 'uppercase', jobs);
    expect(await submit(line)).toEqual(['NULL']);
    const since = env.server.rpcLog().length;
    expect(await submit(line)).toEqual(['NULL']);
    const after = rpcNames(env.server, since);
    expect(after).not.toContain('create_batch');
    expect(after).not.toContain('submit_batch');
    expect(after).not.toContain('upload_files');
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  });

  test('the same BOINC_SUBMIT twice at once (two request ids): one batch, both succeed', async () => {
    const p = writeInput(env.dir, 'twice.txt', 'twice\n');
    const batch = batchName('uppercase');
    const jobs: LineJob[] = [
      { name: jobName(batch, 310, 0), inputs: [[p, 'in']] },
      { name: jobName(batch, 310, 1), inputs: [[p, 'in']] },
    ];
    const line = submitLine(batch, 'uppercase', jobs);
    const id1 = env.gahp.reqId();
    const id2 = env.gahp.reqId();
    expect(await env.gahp.request(`BOINC_SUBMIT ${id1} ${line}`)).toBe('S');
    expect(await env.gahp.request(`BOINC_SUBMIT ${id2} ${line}`)).toBe('S');
    expect(await env.gahp.waitResult(id1)).toEqual(['NULL']);
    expect(await env.gahp.waitResult(id2)).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
  });

  test('an empty input file is staged like any other', async () => {
    const empty = writeInput(env.dir, 'empty.txt', '');
    const batch = batchName('uppercase');
    const jobs: LineJob[] = [{ name: jobName(batch, 311, 0), inputs: [[empty, 'in']] }];
    expect(await submit(submitLine(batch, 'uppercase', jobs))).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    expect(env.server.files().find((f) => f.name === phys(''))!.size).toBe(0);
  });
});

describe('input order and parameters', () => {
  test('inputs go in template order when the dst_names are the open_names, else keep their order', async () => {
    const a = writeInput(env.dir, 'order/a', 'AAA\n');
    const b = writeInput(env.dir, 'order/b', 'BBB\n');
    const batch = batchName('concat');
    const jobs: LineJob[] = [
      { name: jobName(batch, 400, 0), inputs: [[b, 'b'], [a, 'a']] },
      { name: jobName(batch, 400, 1), inputs: [[a, 'a'], [b, 'b']] },
    ];
    expect(await submit(submitLine(batch, 'concat', jobs))).toEqual(['NULL']);
    for (const j of env.server.jobs(batch)) expect(j.inputFiles).toEqual([phys('AAA\n'), phys('BBB\n')]);

    const batch2 = batchName('concat');
    const jobs2: LineJob[] = [{ name: jobName(batch2, 401, 0), inputs: [[b, 'x'], [a, 'y']] }];
    expect(await submit(submitLine(batch2, 'concat', jobs2))).toEqual(['NULL']);
    expect(env.server.jobs(batch2)[0]!.inputFiles).toEqual([phys('BBB\n'), phys('AAA\n')]);
  });

  test('NULL parameters are left out; numbers and app_version_num are sent; the older form works', async () => {
    const p = writeInput(env.dir, 'params.txt', 'params\n');
    const run = async (params: string[] | null) => {
      const batch = batchName('uppercase');
      const since = env.server.rpcLog().length;
      expect(await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 500, 0), inputs: [[p, 'in']] }], params))).toEqual(['NULL']);
      expect(env.server.jobs(batch)).toHaveLength(1);
      // The batch's own fields: each job's templates (the app's, kept no_delete) hold the app's parameters.
      return env.server.rpcLog().slice(since).find((e) => e.rpc === 'submit_batch')!.raw.replace(/<(input|output)_template>[\s\S]*?<\/\1_template>/g, '');
    };
    const nulls = await run(['NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL']);
    for (const tag of ['job_params', 'rsc_fpops_est', 'rsc_fpops_bound', 'rsc_memory_bound', 'rsc_disk_bound', 'delay_bound', 'app_version_num']) {
      expect(nulls).not.toContain(`<${tag}>`);
    }
    expect(nulls).toContain('<batch_name>');

    const set = await run(['1e12', '2e13', '536870912', '1073741824', '86400', '7']);
    expect(Number(/<rsc_fpops_est>([^<]*)</.exec(set)![1])).toBe(1e12);
    expect(Number(/<rsc_fpops_bound>([^<]*)</.exec(set)![1])).toBe(2e13);
    expect(Number(/<rsc_memory_bound>([^<]*)</.exec(set)![1])).toBe(536870912);
    expect(Number(/<rsc_disk_bound>([^<]*)</.exec(set)![1])).toBe(1073741824);
    expect(Number(/<delay_bound>([^<]*)</.exec(set)![1])).toBe(86400);
    expect(Number(/<app_version_num>([^<]*)</.exec(set)![1])).toBe(7);

    await run(null);
  });

  test('arguments BOINC can carry arrive intact', async () => {
    const p = writeInput(env.dir, 'args.txt', 'args\n');
    const batch = batchName('concat');
    const args = ['-n', '5', '--mode=fast,x', 'a.b/c:d', '100%', 'x+y=z', '@file', '#hash', 'caf\u00e9', '(paren)', '[1]', '*', '~user', 'semi;colon', 'pipe|bar', '$HOME', '`id`', '$(id)'];
    expect(await submit(submitLine(batch, 'concat', [{ name: jobName(batch, 600, 0), args, inputs: [[p, 'a'], [p, 'b']] }]))).toEqual(['NULL']);
    expect(env.server.jobs(batch)[0]!.commandLine).toBe(args.join(' '));
  });

  test("an app named by a path (HTCondor 10.0 sends `executable = /usr/local/bin/uppercase` as written) is the app of the path's last name", async () => {
    const p = writeInput(env.dir, 'apppath.txt', 'app path\n');
    // The gridmanager puts the app, as it has it, into the batch name too.
    const batch = batchName('/usr/local/bin/uppercase');
    expect(await submit(submitLine(batch, '/usr/local/bin/uppercase', [{ name: jobName(batch, 610, 0), inputs: [[p, 'in']] }]))).toEqual(['NULL']);
    expect(env.server.batches().find((b) => b.name === batch)!.app).toBe('uppercase');
    expect(env.server.jobs(batch)).toHaveLength(1);
  });
});

describe('checks before anything is created', () => {
  const bad: Array<[string, string]> = [
    ['space', 'two words'],
    ['double quote', 'say"hi'],
    ['single quote', "it's"],
    ['backslash', 'back\\slash'],
    ['less-than', 'a<b'],
    ['greater-than', 'a>b'],
    ['ampersand', 'a&b'],
    ['tab', 'a\tb'],
    ['newline', 'a\nb'],
  ];
  // This used to fail the whole batch; the gridmanager then held the fine job too, with
  // the bad job's reason (issue 38). Now the bad job alone is left out, with its reason.
  test.each(bad)('an argument with a %s is refused naming the job and argument, and never sent; the fine job of the batch is submitted', async (_what, arg) => {
    const p = writeInput(env.dir, 'bad-arg.txt', 'x\n');
    const batch = batchName('uppercase');
    const job = jobName(batch, 700, 0);
    expect(await submit(submitLine(batch, 'uppercase', [
      { name: jobName(batch, 700, 1), args: ['fine'], inputs: [[p, 'in']] },
      { name: job, args: ['ok', arg], inputs: [[p, 'in']] },
    ]))).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, [jobName(batch, 700, 1)]);
    const msg = await refusalOf(batch, job);
    expect(msg).toContain(`job ${job}: argument 2 ${JSON.stringify(arg)}`);
    // Alone in its batch, it fails the submit before any RPC.
    const alone = batchName('uppercase');
    env.server.clearRpcLog();
    const [m2] = await submit(submitLine(alone, 'uppercase', [{ name: jobName(alone, 701, 0), args: [arg], inputs: [[p, 'in']] }]));
    expect(m2).toContain(`job ${jobName(alone, 701, 0)}: argument 1 ${JSON.stringify(arg)}`);
    expect(env.server.rpcLog()).toEqual([]);
  });

  test('a batch whose every job is refused fails naming each job and its reason, as many as fit a hold reason (1023 characters), the rest counted', async () => {
    const p = writeInput(env.dir, 'all-refused.txt', 'x\n');
    const batch = batchName('uppercase');
    const jobs = Array.from({ length: 30 }, (_, i) => ({ name: jobName(batch, 710, i), args: [`word ${i}`], inputs: [[p, 'in']] as Array<[string, string]> }));
    env.server.clearRpcLog();
    const [msg] = await submit(submitLine(batch, 'uppercase', jobs));
    expect(msg).toMatch(new RegExp(`^no job was sent to BOINC: checking names and arguments: job ${jobName(batch, 710, 0)}: argument 1 "word 0"`));
    const named = jobs.filter((j) => msg!.includes(`job ${j.name}: argument 1 "word ${j.name.split('.').pop()}"`)).length;
    expect(named).toBeGreaterThanOrEqual(3);
    expect(msg).toMatch(new RegExp(`; and ${30 - named} more jobs refused \\(the GAHP's log has each reason\\)$`));
    expect(msg!.length).toBeLessThanOrEqual(1023);
    expect(env.server.rpcLog()).toEqual([]);
  });

  test('a bad job name or batch name is refused before any RPC', async () => {
    const p = writeInput(env.dir, 'bad-name.txt', 'x\n');
    const batch = batchName('uppercase');
    env.server.clearRpcLog();
    const [m1] = await submit(submitLine(batch, 'uppercase', [{ name: `${batch}#it's.0`, inputs: [[p, 'in']] }]));
    expect(m1).toContain('job name');
    const [m2] = await submit(submitLine(`${batch}<x>`, 'uppercase', [{ name: jobName(batch, 1, 0), inputs: [[p, 'in']] }]));
    expect(m2).toContain('batch name');
    const [m3] = await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 1, 0), inputs: [[p, 'in']] }, { name: jobName(batch, 1, 0), inputs: [[p, 'in']] }]));
    expect(m3).toContain('twice');
    expect(env.server.rpcLog()).toEqual([]);
  });

  test('a missing, unreadable or non-regular input file refuses its job naming the job and path, before anything is created or uploaded for it', async () => {
    const ok = writeInput(env.dir, 'present.txt', 'x\n');
    const missing = path.join(env.dir, 'no such dir', 'missing file.txt');
    // The job whose file is missing is left out; the other is submitted (this used to fail
    // the whole batch, and the gridmanager held both jobs with that one reason: issue 38).
    const mixed = batchName('uppercase');
    expect(await submit(submitLine(mixed, 'uppercase', [
      { name: jobName(mixed, 800, 0), inputs: [[ok, 'in']] },
      { name: jobName(mixed, 800, 1), inputs: [[missing, 'in']] },
    ]))).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, mixed, [jobName(mixed, 800, 0)]);
    expect(await refusalOf(mixed, jobName(mixed, 800, 1))).toContain(`job ${jobName(mixed, 800, 1)}: input file ${missing} does not exist`);
    // A batch with no job left fails, and nothing is created.
    const batch = batchName('uppercase');
    env.server.clearRpcLog();
    const [m2] = await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 800, 0), inputs: [[env.dir, 'in']] }]));
    expect(m2).toContain(`${env.dir} is not a regular file`);
    if (process.getuid?.() !== 0) {
      const locked = writeInput(env.dir, 'locked.txt', 'secret\n');
      fs.chmodSync(locked, 0o000);
      const [m3] = await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 800, 0), inputs: [[locked, 'in']] }]));
      expect(m3).toContain(locked);
      expect(m3).toContain('not readable');
    }
    // Only the read-only lookups sent alongside the file checks (and cancelled by their failure).
    expect(env.server.rpcLog().map((e) => e.rpc).filter((n) => !['get_templates', 'query_batch', 'query_batch2'].includes(n))).toEqual([]);
    expect(env.server.batches().filter((b) => b.name === batch)).toEqual([]);
  });

  test('an input count that does not match the template seen before refuses that job alone, naming it; the other is submitted', async () => {
    const p = writeInput(env.dir, 'count.txt', 'x\n');
    // The GAHP has seen concat's template (with none seen, the batch is created while
    // get_templates is answered: test/submit/round-trips).
    const seen = batchName('concat');
    expect(await submit(submitLine(seen, 'concat', [{ name: jobName(seen, 899, 0), inputs: [[p, 'a'], [p, 'b']] }]))).toEqual(['NULL']);
    const batch = batchName('concat');
    const bad = jobName(batch, 900, 1);
    // This used to fail the whole batch (issue 38): now the good job goes.
    expect(await submit(submitLine(batch, 'concat', [
      { name: jobName(batch, 900, 0), inputs: [[p, 'a'], [p, 'b']] },
      { name: bad, inputs: [[p, 'a']] },
    ]))).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, [jobName(batch, 900, 0)]);
    expect(await refusalOf(batch, bad)).toContain(`job ${bad} has 1 input files, but the app's input template has 2 (a, b)`);
    // Alone in its batch: nothing is created.
    const alone = batchName('concat');
    const since = env.server.rpcLog().length;
    const [msg] = await submit(submitLine(alone, 'concat', [{ name: jobName(alone, 901, 0), inputs: [[p, 'a']] }]));
    expect(msg).toContain(`job ${jobName(alone, 901, 0)} has 1 input files`);
    const names = rpcNames(env.server, since);
    expect(names).not.toContain('create_batch');
    expect(names).not.toContain('query_files');
    expect(names).not.toContain('upload_files');
  });

  test('an unknown app fails at get_templates; no project selected fails at once', async () => {
    const p = writeInput(env.dir, 'noapp.txt', 'x\n');
    const batch = batchName('nosuchapp');
    const since = env.server.rpcLog().length;
    const [m1] = await submit(submitLine(batch, 'nosuchapp', [{ name: jobName(batch, 1, 0), inputs: [[p, 'in']] }]));
    expect(m1).toMatch(/^get_templates failed: .*nosuchapp/);
    // Only the two lookups went out: nothing is created.
    expect(rpcNames(env.server, since).sort()).toEqual(['get_templates', 'query_batch']);
    expect(env.server.batches().filter((b) => b.name === batch)).toEqual([]);

    const fresh = await GahpProcess.start();
    try {
      await fresh.startup();
      const [m2] = await fresh.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', [{ name: jobName(batch, 1, 0), inputs: [[p, 'in']] }])}`);
      expect(m2).toContain('no project selected');
    } finally {
      await fresh.close();
    }
  });

  test('malformed lines get E', async () => {
    const p = writeInput(env.dir, 'malformed.txt', 'x\n');
    const b = batchName('uppercase');
    const j = jobName(b, 1, 0);
    const lines = [
      `BOINC_SUBMIT 91 ${b} uppercase`,
      `BOINC_SUBMIT 92 ${b} uppercase 2 ${j} 0 1 ${p} in NULL NULL NULL NULL NULL NULL`,
      `BOINC_SUBMIT 93 ${b} uppercase 1 ${j} 0 1 ${p} in NULL NULL NULL NULL NULL`,
      `BOINC_SUBMIT 95 ${b} uppercase 1 ${j} x 1 ${p} in`,
      `BOINC_SUBMIT 96 ${b} uppercase 1 ${j} 3 a b 1 ${p} in`,
      `BOINC_SUBMIT 97 ${b} uppercase 1 ${j} 0 2 ${p} in`,
      `BOINC_SUBMIT 98 ${b} uppercase 0`,
    ];
    for (const line of lines) expect((await env.gahp.request(line)).startsWith('E')).toBe(true);
    // A job parameter is a string attribute of the job ad, sent as it is: a bad one is the
    // submit's error result (an E would make the gridmanager EXCEPT), and nothing is created.
    expect(await env.gahp.call(`BOINC_SUBMIT ${b} uppercase 1 ${j} 0 1 ${p} in NULL NULL abc NULL NULL NULL`)).toEqual([
      'checking names and arguments: job parameter rsc_memory_bound must be a number, got "abc"',
    ]);
    expect(env.server.batches().some((x) => x.name === b)).toBe(false);
    // The GAHP is still fine.
    expect(await env.gahp.request('COMMANDS')).toContain('BOINC_SUBMIT');
  });

  test('a batch name already on the server with other jobs fails with a clear message', async () => {
    const p = writeInput(env.dir, 'other.txt', 'other\n');
    const batch = batchName('uppercase');
    expect(await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 1000, 0), inputs: [[p, 'in']] }]))).toEqual(['NULL']);
    const since = env.server.rpcLog().length;
    const [msg] = await submit(submitLine(batch, 'uppercase', [{ name: jobName(batch, 1001, 0), inputs: [[p, 'in']] }]));
    expect(msg).toContain('already exists');
    expect(rpcNames(env.server, since)).not.toContain('create_batch');
    expect(env.server.batches().filter((b) => b.name === batch)).toHaveLength(1);
  });
});
