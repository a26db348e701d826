/**
 * A client that stops reading our output: the server stops writing (it waits for 'drain')
 * and stops reading requests, so neither replies nor new work pile up in its memory; once
 * the client reads again, every line arrives whole and in order, each result once.
 * In-process first (exact buffer sizes), then the real bin/boinc-gahp with a paused reader.
 */
import * as fs from 'node:fs';
import { splitTokens } from '../../gahp/protocol/escape.js';
import { expectArgCount, type AsyncCommand } from '../../gahp/protocol/commands.js';
import { InProcessGahp, TEST_BANNER, waitCommand } from '../support/in-process-gahp.js';
import { batchName, esc, jobName, sleep, startEnv, submitBatch, type Env } from '../commands/helpers.js';

/** TEST_BIG <reqid> <chars>: `NULL` and one token of that many characters. */
const bigCommand: AsyncCommand<number> = {
  kind: 'async',
  name: 'TEST_BIG',
  usage: '<reqid> <chars>',
  summary: 'test: a big result',
  parse(args) {
    expectArgCount(args, 1);
    return Number(args[0]);
  },
  run(chars, ctx) {
    return Promise.resolve(['NULL', ctx.reqId.repeat(Math.ceil(chars / ctx.reqId.length)).slice(0, chars)]);
  },
};

describe('in-process, the output not read', () => {
  test('a RESULTS reply of 20 MiB waits for the reader; no request is read meanwhile; an R comes after the reply, never inside it', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([bigCommand, w.command]);
    expect(await g.readLine()).toBe(TEST_BANNER);
    expect(await g.request('ASYNC_MODE_ON')).toBe('S');
    expect(await g.request('TEST_WAIT 1000')).toBe('S');
    const ids = Array.from({ length: 200 }, (_, i) => String(i + 1));
    for (const id of ids) g.send(`TEST_BIG ${id} ${100 * 1024}`);
    const accepted = await g.settle(20);
    expect(accepted.filter((l) => l !== 'R')).toEqual(ids.map(() => 'S'));
    expect(accepted.filter((l) => l === 'R')).toEqual(['R']);

    // The client stops reading, asks for the results, and goes on sending requests.
    g.output.pause();
    g.send('RESULTS');
    for (let i = 0; i < 1000; i++) g.send('VERSION');
    await g.settle(50);
    // A result completing now is announced after the RESULTS reply, not inside it.
    w.get('1000').resolve(['NULL']);
    await g.settle(50);
    // Held: a slice or two of the reply in the stream (not 20 MiB), the requests unread.
    expect(g.output.writableLength + g.output.readableLength).toBeLessThan(1 << 20);
    expect(g.input.readableLength).toBeGreaterThan(900 * 'VERSION\n'.length);

    g.output.resume();
    expect(await g.readLine()).toBe('S 200');
    for (const id of ids) {
      const tokens = splitTokens(await g.readLine());
      expect(tokens).toHaveLength(3);
      expect(tokens.slice(0, 2)).toEqual([id, 'NULL']);
      expect(tokens[2]).toBe(id.repeat(100 * 1024).slice(0, 100 * 1024));
    }
    expect(await g.readLine()).toBe('R');
    for (let i = 0; i < 1000; i++) expect(await g.readLine()).toBe('S ' + TEST_BANNER);
    expect(await g.request('RESULTS')).toBe('S 1');
    expect(await g.readLine()).toBe('1000 NULL');
    expect(await g.request('QUIT')).toBe('S');
    expect(await g.exited).toBe(0);
    expect(await g.settle(20)).toEqual([]);
  });
});

describe('the real GAHP, its stdout not read', () => {
  const JOBS = 4000;
  let env: Env;
  let batch: string;
  beforeAll(async () => {
    env = await startEnv();
    batch = batchName('uppercase');
    await submitBatch(env, batch, 'uppercase', Array.from({ length: JOBS }, (_, j) => ({ name: jobName(batch, 7, j), inputs: ['same input'] })));
  });
  afterAll(async () => {
    await env?.close();
  });

  /** The GAHP's resident memory now, from /proc (Linux). */
  const rssMiB = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

  test('queries and RESULTS sent without reading: the GAHP stops reading its stdin, its memory stays flat; then every line whole, in order, each result once', async () => {
    const g = env.gahp;
    const query = (id: string) => `BOINC_QUERY_BATCHES ${id} 0 1 ${esc(batch)}`;
    // One answer read normally: the code paths are warm, the answer's size is known.
    const one = await g.call(`BOINC_QUERY_BATCHES 0 1 ${esc(batch)}`);
    expect(one).toHaveLength(3 + 2 * JOBS);
    const answerBytes = one.join(' ').length;
    const baseline = rssMiB(g.child.pid!);

    // Each round: a query, RESULTS (which carries the answers finished so far) and a line of
    // 60 kB that is answered E: when the GAHP stops reading, its stdin pipe fills at once.
    g.child.stdout.pause();
    const PAD = `PADDING ${'p'.repeat(60_000)}`;
    const ROUNDS = 400; // ~110 MiB of answers, if they were all produced
    const sent: Array<{ query: string } | 'RESULTS' | 'PAD'> = [];
    let stalled = false;
    for (let round = 0; round < ROUNDS && !stalled; round++) {
      const id = g.reqId();
      sent.push({ query: id }, 'RESULTS', 'PAD');
      const taken = g.child.stdin.write(`${query(id)}\r\nRESULTS\r\n${PAD}\r\n`);
      await sleep(10); // time for the query to finish
      if (!taken) {
        // Not taken within 5 s: the GAHP has stopped reading.
        stalled = !(await Promise.race([
          new Promise<boolean>((resolve) => g.child.stdin.once('drain', () => resolve(true))),
          sleep(5000).then(() => false),
        ]));
      }
    }
    expect(stalled).toBe(true);
    const queries = sent.filter((s) => typeof s === 'object').length;
    const held = rssMiB(g.child.pid!);
    process.stdout.write(`[protocol] backpressure: the GAHP stopped reading after ${queries} of ${ROUNDS} rounds (answers of ${(answerBytes / 1024).toFixed(0)} KiB); RSS ${baseline.toFixed(0)} MiB before, ${held.toFixed(0)} MiB while held\n`);
    expect(queries).toBeLessThan(ROUNDS / 4);
    expect(held - baseline).toBeLessThan(64);

    // The client reads again: each request's reply in order, each RESULTS reply whole.
    g.child.stdout.resume();
    const results = new Map<string, string[]>();
    const readResults = async () => {
      const head = /^S (\d+)$/.exec(await g.readReply(30_000));
      expect(head).not.toBeNull();
      for (let i = 0; i < Number(head![1]); i++) {
        const tokens = splitTokens(await g.readReply(30_000));
        const id = tokens.shift()!;
        expect(results.has(id)).toBe(false);
        results.set(id, tokens);
      }
    };
    for (const s of sent) {
      if (s === 'RESULTS') await readResults();
      else if (s === 'PAD') expect(await g.readReply(30_000)).toMatch(/^E unknown\\ command\\ PADDING/);
      else expect(await g.readReply(30_000)).toBe('S');
    }
    for (let i = 0; i < 500 && results.size < queries; i++) {
      g.send('RESULTS');
      await readResults();
      if (results.size < queries) await sleep(20);
    }
    const ids = sent.flatMap((s) => (typeof s === 'object' ? [s.query] : []));
    expect([...results.keys()].sort()).toEqual([...ids].sort());
    for (const tokens of results.values()) expect(tokens).toEqual([one[0], expect.any(String), ...one.slice(2)]);
    expect(await g.request('VERSION')).toMatch(/^S \$GahpVersion/);
  }, 180_000);
});
