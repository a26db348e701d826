/**
 * The protocol server in-process (PassThrough streams, test-only commands): the built-in
 * commands, prefixes, the async framework and its failure modes.
 */
import fc from 'fast-check';
import { InProcessGahp, TEST_BANNER, failCommand, secretCommand, sleepCommand, waitCommand } from '../support/in-process-gahp.js';
import { cutMessage } from '../../gahp/protocol/messages.js';
import { splitTokens } from '../../gahp/protocol/escape.js';
import type { AsyncCommand } from '../../gahp/protocol/commands.js';

async function started(g: InProcessGahp): Promise<void> {
  expect(await g.readLine()).toBe(TEST_BANNER);
}

describe('protocol commands', () => {
  test('banner first, COMMANDS, VERSION, CONDOR_VERSION, RESPONSE_PREFIX, ASYNC_MODE, QUIT', async () => {
    const g = new InProcessGahp([sleepCommand, secretCommand]);
    await started(g);
    expect(await g.request('COMMANDS')).toBe(
      'S ASYNC_MODE_OFF ASYNC_MODE_ON COMMANDS CONDOR_VERSION QUIT RESPONSE_PREFIX RESULTS TEST_SECRET TEST_SLEEP VERSION');
    expect(await g.request('VERSION')).toBe('S ' + TEST_BANNER);
    const cv = await g.request('CONDOR_VERSION $CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $');
    expect(splitTokens(cv)).toEqual(['S', TEST_BANNER.replace(/\\ /g, ' ')]);
    expect(await g.request('CONDOR_VERSION')).toMatch(/^E /);
    expect(await g.request('RESPONSE_PREFIX GAHP:')).toBe('S');
    expect(await g.request('ASYNC_MODE_ON')).toBe('GAHP:S');
    expect(await g.request('ASYNC_MODE_OFF')).toBe('GAHP:S');
    expect(await g.request('async_mode_on')).toBe('GAHP:S');
    expect(await g.request('VERSION')).toBe('GAHP:S ' + TEST_BANNER);
    expect(await g.request('RESULTS')).toBe('GAHP:S 0');
    expect(await g.request('RESULTS extra')).toMatch(/^GAHP:E /);
    expect(await g.request('ASYNC_MODE_ON x')).toMatch(/^GAHP:E /);
    // A new prefix: its own S under the old one, everything after under the new one.
    expect(await g.request('RESPONSE_PREFIX X\\ Y:')).toBe('GAHP:S');
    // The prefix is printed escaped, so the client's first token is still prefix + S.
    expect(await g.request('VERSION')).toBe('X\\ Y:S ' + TEST_BANNER);
    expect(splitTokens(await g.request('RESULTS'))).toEqual(['X Y:S', '0']);
    expect(await g.request('RESPONSE_PREFIX bad\\\nprefix')).toMatch(/^X\\ Y:E /);
    expect(await g.request('RESPONSE_PREFIX')).toMatch(/^X\\ Y:E /);
    expect(await g.request('QUIT')).toBe('X\\ Y:S');
    expect(await g.exited).toBe(0);
  });

  test('E for unknown, empty and malformed requests; each gets exactly one line', async () => {
    const g = new InProcessGahp([sleepCommand]);
    await started(g);
    const bad = ['', '   ', 'NOPE', 'nope 1 2', 'TEST_SLEEP', 'TEST_SLEEP 0 5', 'TEST_SLEEP -0 5', 'TEST_SLEEP abc 5',
      'TEST_SLEEP 1.5 5', 'TEST_SLEEP 1', 'TEST_SLEEP 1 x', 'TEST_SLEEP 1 5 6', 'TEST_SLEEP 1234567890123456789 5',
      'TEST_SLEEP\\ 1 5', '\\\\', 'TEST_SLEEP 1 \\\r', '\u00a0VERSION', '\ufeffVERSION', 'VERSION\\ '];
    for (const line of bad) g.send(line);
    g.send('VERSION');
    const out = await g.settle(20);
    expect(out).toHaveLength(bad.length + 1);
    for (let i = 0; i < bad.length; i++) expect(out[i]).toMatch(/^E ./);
    expect(out[bad.length]).toBe('S ' + TEST_BANNER);
    // E messages are single escaped tokens.
    for (const l of out.slice(0, bad.length)) expect(splitTokens(l)).toHaveLength(2);
  });

  test('an escaped LF belongs to the line (HTCondor escapes newlines inside arguments)', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command, secretCommand]);
    await started(g);
    // A lone trailing backslash escapes the LF: the next line is part of this request.
    g.sendRaw('VERSION\\\nVERSION\r\n');
    expect(await g.readLine()).toMatch(/^E /);
    g.sendRaw('TEST_WAIT 5 x\\\ny\r\n');
    expect(await g.readLine()).toMatch(/^E .*expected\\ 0\\ arguments,\\ got\\ 1/);
    g.sendRaw('TEST_SECRET url a\\\nb\\\r\r\nVERSION\n');
    expect(await g.readLine()).toBe('S');
    expect(await g.readLine()).toBe('S ' + TEST_BANNER);
    expect(g.logLines.join('')).toContain('TEST_SECRET url ***');
  });

  test('CR before LF is ignored; LF-only and CRLF lines both work; a last line without LF is read at EOF', async () => {
    const g = new InProcessGahp([]);
    await started(g);
    g.sendRaw('VERSION\r\nRESULTS\nCOMMANDS\r\r\nQUIT');
    expect(await g.readLine()).toBe('S ' + TEST_BANNER);
    expect(await g.readLine()).toBe('S 0');
    expect(await g.readLine()).toMatch(/^E /); // 'COMMANDS\r': one CR only is dropped
    g.input.end();
    expect(await g.readLine()).toBe('S');
    expect(await g.exited).toBe(0);
  });

  test('EOF on stdin is QUIT', async () => {
    const g = new InProcessGahp([sleepCommand]);
    await started(g);
    g.send('TEST_SLEEP 1 100000');
    expect(await g.readLine()).toBe('S');
    const t0 = Date.now();
    g.input.end();
    expect(await g.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  test('nothing is read or answered after QUIT', async () => {
    const g = new InProcessGahp([]);
    await started(g);
    g.sendRaw('QUIT\nVERSION\nVERSION\n');
    expect(await g.exited).toBe(0);
    expect(await g.settle(10)).toEqual(['S']);
  });
});

describe('async framework', () => {
  test('S when queued, R once per RESULTS cycle, results delivered once', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command]);
    await started(g);
    expect(await g.request('RESPONSE_PREFIX GAHP:')).toBe('S');
    expect(await g.request('ASYNC_MODE_ON')).toBe('GAHP:S');
    for (const id of ['1', '2', '3']) expect(await g.request(`TEST_WAIT ${id}`)).toBe('GAHP:S');
    // A pending reqid is refused, also spelled differently.
    expect(await g.request('TEST_WAIT 2')).toMatch(/^GAHP:E /);
    expect(await g.request('TEST_WAIT 002')).toMatch(/^GAHP:E /);
    w.get('2').resolve(['NULL', 'two']);
    w.get('1').resolve(['NULL']);
    expect(await g.settle(5)).toEqual(['GAHP:R']);
    w.get('3').resolve(['NULL', 'x y']);
    expect(await g.settle(5)).toEqual([]); // no second R before RESULTS
    g.send('RESULTS');
    expect(await g.settle(5)).toEqual(['GAHP:S 3', 'GAHP:2 NULL two', 'GAHP:1 NULL', 'GAHP:3 NULL x\\ y']);
    expect(await g.request('RESULTS')).toBe('GAHP:S 0');
    // The delivered reqid can be reused.
    expect(await g.request('TEST_WAIT 2')).toBe('GAHP:S');
    w.get('2').resolve(['NULL']);
    expect(await g.settle(5)).toEqual(['GAHP:R']);
    g.send('RESULTS');
    expect(await g.settle(5)).toEqual(['GAHP:S 1', 'GAHP:2 NULL']);
  });

  test('no R in sync mode; turning async mode on with results waiting prints R after its S', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command]);
    await started(g);
    expect(await g.request('TEST_WAIT 7')).toBe('S');
    w.get('7').resolve(['NULL']);
    expect(await g.settle(5)).toEqual([]);
    g.send('ASYNC_MODE_ON');
    expect(await g.settle(5)).toEqual(['S', 'R']);
    g.send('RESULTS');
    expect(await g.settle(5)).toEqual(['S 1', '7 NULL']);
  });

  test('1,000 commands completing in random order: RESULTS gives each once, in completion order, one R per cycle', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command], { concurrency: 2000 });
    await started(g);
    expect(await g.request('RESPONSE_PREFIX GAHP:')).toBe('S');
    expect(await g.request('ASYNC_MODE_ON')).toBe('GAHP:S');
    const ids = Array.from({ length: 1000 }, (_, i) => String(i + 1));
    for (const id of ids) g.send(`TEST_WAIT ${id}`);
    const acks = await g.settle(10);
    expect(acks).toEqual(ids.map(() => 'GAHP:S'));
    // Seeded shuffle: the completion order.
    const order = fc.sample(fc.shuffledSubarray(ids, { minLength: ids.length, maxLength: ids.length }), { seed: 42, numRuns: 1 })[0]!;
    expect(new Set(order).size).toBe(1000);
    const delivered: string[] = [];
    // Release in uneven groups, a RESULTS cycle after each.
    let pos = 0;
    let cycles = 0;
    while (pos < order.length) {
      const n = 1 + ((pos * 7919) % 97);
      const group = order.slice(pos, pos + n);
      pos += group.length;
      for (const id of group) w.get(id).resolve(['NULL', `done-${id}`]);
      const before = await g.settle(1);
      expect(before).toEqual(['GAHP:R']);
      g.send('RESULTS');
      const out = await g.settle(1);
      expect(out[0]).toBe(`GAHP:S ${group.length}`);
      expect(out).toHaveLength(group.length + 1);
      for (const l of out.slice(1)) {
        expect(l.startsWith('GAHP:')).toBe(true);
        const [id, nul, tag] = splitTokens(l.slice(5));
        expect(nul).toBe('NULL');
        expect(tag).toBe(`done-${id}`);
        delivered.push(id!);
      }
      cycles++;
    }
    expect(delivered).toEqual(order);
    expect(cycles).toBeGreaterThan(10);
    expect(await g.request('RESULTS')).toBe('GAHP:S 0');
  });

  test('concurrency is bounded; the rest wait their turn', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command], { concurrency: 4 });
    await started(g);
    for (let i = 1; i <= 50; i++) g.send(`TEST_WAIT ${i}`);
    await g.settle(5);
    expect(w.stats.running).toBe(4);
    for (let i = 1; i <= 50; i++) w.get(String(i)).resolve(['NULL']);
    await g.settle(10);
    expect(w.stats.maxRunning).toBe(4);
    expect(w.stats.started).toBe(50);
    g.send('RESULTS');
    const out = await g.settle(5);
    expect(out[0]).toBe('S 50');
  });

  test('VERSION is answered at once while hundreds of commands sleep', async () => {
    const g = new InProcessGahp([sleepCommand], { concurrency: 1000 });
    await started(g);
    for (let i = 1; i <= 500; i++) g.send(`TEST_SLEEP ${i} 60000`);
    await g.settle(5);
    const t0 = Date.now();
    expect(await g.request('VERSION')).toBe('S ' + TEST_BANNER);
    expect(Date.now() - t0).toBeLessThan(200);
    const t1 = Date.now();
    g.send('QUIT');
    expect(await g.exited).toBe(0);
    expect(Date.now() - t1).toBeLessThan(2000);
  });

  test('a handler that throws (anything) becomes one escaped error token; the server carries on', async () => {
    const g = new InProcessGahp([failCommand], { maxMessageChars: 4096 });
    await started(g);
    const hows = ['throw', 'throw-string', 'throw-undefined', 'empty-message', 'long', 'empty-token', 'not-array', 'no-tokens', 'spaces', 'ok'];
    hows.forEach((h, i) => g.send(`TEST_FAIL ${i + 1} ${h}`));
    expect(await g.request('TEST_FAIL 99 parse-crash')).toBeDefined();
    await g.settle(20);
    g.send('RESULTS');
    const out = await g.settle(20);
    expect(out[0]).toBe(`S ${hows.length}`);
    const byId = new Map(out.slice(1).map((l) => { const t = splitTokens(l); return [t[0]!, t.slice(1)]; }));
    // The line break is kept, escaped on the wire as HTCondor's escapeGahpString() escapes it.
    expect(byId.get('1')).toEqual(['it broke\nacross lines']);
    expect(byId.get('2')).toEqual(['a string']);
    expect(byId.get('3')).toEqual(['undefined']);
    expect(byId.get('4')).toEqual(['unknown error']);
    const long = byId.get('5')!;
    expect(long).toHaveLength(1);
    expect(long[0]!.length).toBeLessThanOrEqual(4096);
    expect(long[0]).toMatch(/characters cut/);
    expect(long[0]!.endsWith('no batch named condor#x#y#1')).toBe(true);
    expect(byId.get('6')).toHaveLength(1); // empty token: an error, not a shifted result
    expect(byId.get('6')![0]).not.toBe('NULL');
    expect(byId.get('7')).toHaveLength(1);
    expect(byId.get('8')).toEqual(['NULL']);
    expect(byId.get('9')).toEqual(['NULL', 'a b\\c\r\nd']);
    expect(byId.get('10')).toEqual(['NULL']);
    // No unescaped CR or LF on the wire: the client would cut the line there.
    for (const l of out) expect(l.replace(/\\[\s\S]/g, '')).not.toMatch(/[\r\n]/);
    expect(await g.request('VERSION')).toBe('S ' + TEST_BANNER);
  });

  test('a parser that crashes gives E, not a dead process', async () => {
    const g = new InProcessGahp([failCommand]);
    await started(g);
    expect(await g.request('TEST_FAIL 1 parse-crash')).toMatch(/^E .*bad\\ arguments/);
    expect(await g.request('VERSION')).toBe('S ' + TEST_BANNER);
  });

  test('results completed after QUIT are never printed', async () => {
    const w = waitCommand();
    const g = new InProcessGahp([w.command], { shutdownGraceMs: 200 });
    await started(g);
    expect(await g.request('ASYNC_MODE_ON')).toBe('S');
    expect(await g.request('TEST_WAIT 1')).toBe('S');
    g.send('QUIT');
    expect(await g.readLine()).toBe('S');
    w.get('1').resolve(['NULL']);
    expect(await g.exited).toBe(0);
    expect(await g.settle(5)).toEqual([]);
  });
});

describe('command timeout (commandTimeoutMs)', () => {
  /** TEST_STOP <reqid> <ms>: resolves after ms, or rejects with the signal's reason when it fires. */
  const stopCommand: AsyncCommand<{ ms: number }> = {
    kind: 'async', name: 'TEST_STOP', usage: '<reqid> <ms>', summary: 'waits, stops on the signal',
    parse: (args) => ({ ms: Number(args[0]) }),
    run: (req, ctx) => new Promise<string[]>((resolve, reject) => {
      const t = setTimeout(() => resolve(['NULL', 'done']), req.ms);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(t);
        reject(new Error(`stopped: ${(ctx.signal.reason as Error).message}`));
      }, { once: true });
    }),
  };
  /** TEST_DEAF <reqid>: never settles and ignores the signal. */
  const deafCommand: AsyncCommand<Record<string, never>> = {
    kind: 'async', name: 'TEST_DEAF', usage: '<reqid>', summary: 'never ends',
    parse: () => ({}),
    run: () => new Promise<string[]>(() => undefined),
  };

  test('a command past its timeout is stopped through its signal; its result names the timeout; quick ones are untouched', async () => {
    const g = new InProcessGahp([stopCommand], { commandTimeoutMs: 200 });
    await started(g);
    expect(await g.request('ASYNC_MODE_ON')).toBe('S');
    const t0 = Date.now();
    expect(await g.request('TEST_STOP 1 10000')).toBe('S');
    expect(await g.request('TEST_STOP 2 20')).toBe('S');
    expect(await g.readLine()).toBe('R');
    expect(await g.request('RESULTS')).toBe('S 1');
    expect(await g.readLine()).toBe('2 NULL done');
    expect(await g.readLine(3000)).toBe('R');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(await g.request('RESULTS')).toBe('S 1');
    expect(await g.readLine()).toBe('1 stopped:\\ the\\ command\\ timeout\\ of\\ 0.2\\ s\\ passed');
    // The quick command's timer was cleared: nothing more comes.
    expect(await g.settle(400)).toEqual([]);
    g.send('QUIT');
    expect(await g.exited).toBe(0);
  });

  test('a handler that ignores the signal is abandoned after the grace; one waiting for its turn never starts', async () => {
    const g = new InProcessGahp([deafCommand, stopCommand], { commandTimeoutMs: 150, commandTimeoutGraceMs: 100, concurrency: 1 });
    await started(g);
    expect(await g.request('ASYNC_MODE_ON')).toBe('S');
    expect(await g.request('TEST_DEAF 1')).toBe('S');
    expect(await g.request('TEST_STOP 2 10')).toBe('S');
    expect(await g.readLine(3000)).toBe('R');
    await g.settle(50);
    g.send('RESULTS');
    const out = await g.settle(20);
    expect(out[0]).toBe('S 2');
    expect(splitTokens(out[1]!)).toEqual(['1', 'the command timeout of 0.15 s passed; the command did not stop, its result is dropped']);
    expect(splitTokens(out[2]!)).toEqual(['2', 'the command timeout of 0.15 s passed before the command could start']);
    // QUIT does not wait for the abandoned handler beyond the grace, nor for any timer.
    const t0 = Date.now();
    g.send('QUIT');
    expect(await g.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(4000);
  });

  test('QUIT with commands under a timeout: they stop as on any QUIT, and no timer keeps the server alive', async () => {
    const g = new InProcessGahp([stopCommand], { commandTimeoutMs: 60_000 });
    await started(g);
    for (let i = 1; i <= 20; i++) expect(await g.request(`TEST_STOP ${i} 60000`)).toBe('S');
    const t0 = Date.now();
    g.send('QUIT');
    expect(await g.readLine()).toBe('S');
    expect(await g.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe('secrets in the debug log and replies', () => {
  test('a secret argument is masked in the log, and redacted from E messages and results', async () => {
    const secret = 'sekrit0123456789abcdef';
    const g = new InProcessGahp([secretCommand, failCommand]);
    await started(g);
    expect(await g.request(`TEST_SECRET http://x/ ${secret}`)).toBe('S');
    const e = await g.request(`TEST_SECRET fail ${secret}`);
    expect(e).toMatch(/^E /);
    expect(e).not.toContain(secret);
    expect(e).toContain('***');
    // Malformed: the secret shifted to another position is still masked.
    expect(await g.request(`test_secret a b ${secret}`)).toMatch(/^E /);
    // Unknown word with the secret in it: the log redacts the registered secret.
    expect(await g.request(`TEST_SECRE http://x/ ${secret}`)).toMatch(/^E /);
    expect(await g.request(`NOPE ${'x'.repeat(1995)}${secret}`)).toMatch(/^E /);
    const log = g.logLines.join('');
    expect(log).not.toContain(secret);
    expect(log).not.toContain(secret.slice(0, 10));
    expect(log).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[\d+ \S+\] DEBUG < TEST_SECRET http:\/\/x\/ \*\*\*$/m);
    expect(log).toMatch(/DEBUG > S$/m);
    expect(g.transcript.join('\n')).not.toContain(secret);
  });
});

describe('cutMessage', () => {
  test('short messages are kept; long ones cut to the limit with a marker, keeping the end', () => {
    expect(cutMessage('abc', 10)).toBe('abc');
    fc.assert(
      fc.property(fc.string({ maxLength: 3000 }), fc.integer({ min: 1, max: 2000 }), (msg, max) => {
        const out = cutMessage(msg, max);
        expect(out.length).toBeLessThanOrEqual(Math.max(max, 0));
        if (msg.length <= max) expect(out).toBe(msg);
        else if (max >= 200) {
          expect(out).toContain('characters cut');
          expect(msg.endsWith(out.slice(out.lastIndexOf('...] ') + 5))).toBe(true);
          expect(out.length).toBe(max);
        }
      }),
      { seed: 1234, numRuns: 300 },
    );
  });
});

describe('async framework against a model', () => {
  type Op =
    | { kind: 'submit'; id: number }
    | { kind: 'complete'; k: number; fail: boolean }
    | { kind: 'results' }
    | { kind: 'asyncOn' }
    | { kind: 'asyncOff' }
    | { kind: 'version' };
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 8 }).map((id) => ({ kind: 'submit' as const, id })) },
    { weight: 4, arbitrary: fc.record({ k: fc.nat(), fail: fc.boolean() }).map((r) => ({ kind: 'complete' as const, ...r })) },
    { weight: 2, arbitrary: fc.constant({ kind: 'results' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'asyncOn' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'asyncOff' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'version' as const }) },
  );

  test('property: any interleaving of requests, completions, RESULTS and mode changes prints exactly what the model says', async () => {
    let cases = 0;
    await fc.assert(fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.boolean(), async (ops, withPrefix) => {
      cases++;
      const w = waitCommand();
      const g = new InProcessGahp([w.command], { concurrency: 100, shutdownGraceMs: 1 });
      await g.readLine();
      const p = withPrefix ? 'GAHP:' : '';
      if (withPrefix) expect(await g.request('RESPONSE_PREFIX GAHP:')).toBe('S');
      // The model.
      let asyncMode = false;
      let notified = false;
      const queue: string[] = [];
      const pending = new Set<number>();
      const inFlight: number[] = [];
      let tag = 0;
      for (const o of ops) {
        const expected: string[] = [];
        switch (o.kind) {
          case 'submit':
            g.send(`TEST_WAIT ${o.id}`);
            if (pending.has(o.id)) {
              expected.push(`${p}E request\\ id\\ ${o.id}\\ is\\ still\\ pending`);
            } else {
              expected.push(`${p}S`);
              pending.add(o.id);
              inFlight.push(o.id);
            }
            break;
          case 'complete': {
            if (inFlight.length === 0) continue;
            const [id] = inFlight.splice(o.k % inFlight.length, 1);
            const t = `t${tag++}`;
            if (o.fail) {
              w.get(String(id)).reject(new Error(`failed ${t}`));
              queue.push(`${id} failed\\ ${t}`);
            } else {
              w.get(String(id)).resolve(['NULL', t]);
              queue.push(`${id} NULL ${t}`);
            }
            if (asyncMode && !notified) {
              notified = true;
              expected.push(`${p}R`);
            }
            break;
          }
          case 'results':
            g.send('RESULTS');
            expected.push(`${p}S ${queue.length}`, ...queue.map((l) => p + l));
            for (const l of queue) pending.delete(Number(l.split(' ')[0]));
            queue.length = 0;
            notified = false;
            break;
          case 'asyncOn':
            g.send('ASYNC_MODE_ON');
            asyncMode = true;
            expected.push(`${p}S`);
            if (queue.length > 0 && !notified) {
              notified = true;
              expected.push(`${p}R`);
            }
            break;
          case 'asyncOff':
            g.send('ASYNC_MODE_OFF');
            asyncMode = false;
            expected.push(`${p}S`);
            break;
          case 'version':
            g.send('VERSION');
            expected.push(`${p}S ${TEST_BANNER}`);
            break;
        }
        expect(await g.settle()).toEqual(expected);
      }
      g.send('QUIT');
      await g.exited;
    }), { seed: 99, numRuns: process.env.SOAK ? 3000 : 150 });
    expect(cases).toBeGreaterThan(0);
  });
});
