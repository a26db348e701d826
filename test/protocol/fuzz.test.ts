/**
 * Hostile input (issue 8): property-based fuzzing with fixed seeds, bounded in CI, more
 * with SOAK=1.
 * - the line layer in-process: random bytes, escaped line ends, random chunking: never a
 *   crash, exactly one reply line per request line, the server keeps answering;
 * - every command's argument parser in-process: random tokens and mutations of valid
 *   requests (missing and extra tokens, huge counts, negative and non-numeric numbers):
 *   it returns or throws ArgumentError, quickly, never anything else;
 * - the real process, by command word (so commands added later are covered too).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { ArgumentError, type Command } from '../../gahp/protocol/commands.js';
import { joinTokens } from '../../gahp/protocol/escape.js';
import { Logger } from '../../gahp/log.js';
import { boincCommands } from '../../gahp/commands/index.js';
import { createServices } from '../../gahp/create-services.js';
import type { GahpServices } from '../../gahp/services.js';
import { GahpProcess, makeTempDir } from '../support/gahp-process.js';
import { InProcessGahp, TEST_BANNER, failCommand, secretCommand, sleepCommand, waitCommand } from '../support/in-process-gahp.js';

const SOAK = !!process.env.SOAK;
const SEED = Number(process.env.FUZZ_SEED ?? 20261202);

/** How many cases each fuzz ran (printed at the end, for the report). */
const counts: Record<string, number> = {};
afterAll(() => {
  console.log(`fuzz cases (seed ${SEED}${SOAK ? ', SOAK' : ''}): ` + Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(', '));
});

// ---------------------------------------------------------------------------------------
// Generators

const NASTY_NUMBERS = [
  '0', '1', '-1', '00', '+1', '-0', '1.5', '-1.5', '.5', '5.', '1e3', '1e999', '-1e999', '1e-999', 'NaN', 'nan',
  'Infinity', '-Infinity', '0x10', '0b1', '0o7', '1_000', '９', '٣', '9'.repeat(30), '-9999999999', '4294967296',
  '2147483648', '2147483647', '-2147483649', '9007199254740993', '18446744073709551616', '999999999', '99999999',
  '10000001', '1 ', ' 1', 'NULL', 'null', 'ALL', 'SOME', 'all',
];
const NASTY_WORDS = [
  'condor#s#app#1', 'condor#s#app#1#1.0', 'a#b', '#', '##', 'in', 'out', '-n', '.', '..', '../..', '/', '\\', ' ', '\r', '\n',
  'x\ny', '$', '%s%n', '\u0000', '\u202e', '😀', 'é', 'A'.repeat(5000), '<xml>', '&amp;', "'", '"', '*', 'no batch named x',
];

function pathPool(tmp: string): string[] {
  return [path.join(tmp, 'data.txt'), path.join(tmp, 'iwd'), path.join(tmp, 'missing', 'f'), path.join(tmp, 'iwd', 'sub'), '/dev/null', 'rel/path', 'job.err'];
}

const nastyChar = fc.oneof(
  fc.constantFrom(' ', '\\', '\r', '\n', '#', '0', '-', '.', 'a', '/', 'é'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

function nastyToken(tmp: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...NASTY_NUMBERS) },
    { weight: 2, arbitrary: fc.integer({ min: -1e12, max: 1e12 }).map(String) },
    { weight: 1, arbitrary: fc.double({ noNaN: false }).map(String) },
    { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map(String) },
    { weight: 3, arbitrary: fc.constantFrom(...NASTY_WORDS) },
    { weight: 2, arbitrary: fc.constantFrom(...pathPool(tmp)) },
    { weight: 3, arbitrary: fc.string({ unit: nastyChar, minLength: 1, maxLength: 20 }) },
  ).filter((t) => t.length > 0);
}

type Mutation = { op: 'replace' | 'delete' | 'insert' | 'truncate' | 'extend' | 'dup'; pos: number; val: string; more: string[] };

function mutationArb(tmp: string): fc.Arbitrary<Mutation> {
  return fc.record({
    op: fc.constantFrom('replace', 'delete', 'insert', 'truncate', 'extend', 'dup'),
    pos: fc.nat({ max: 1000 }),
    val: nastyToken(tmp),
    more: fc.array(nastyToken(tmp), { maxLength: 6 }),
  });
}

function mutate(template: string[], muts: Mutation[]): string[] {
  const t = [...template];
  for (const m of muts) {
    const i = t.length === 0 ? 0 : m.pos % (t.length + (m.op === 'insert' ? 1 : 0));
    switch (m.op) {
      case 'replace': if (t.length) t[i] = m.val; else t.push(m.val); break;
      case 'delete': t.splice(i, 1); break;
      case 'insert': t.splice(i, 0, m.val); break;
      case 'truncate': t.length = Math.min(t.length, i); break;
      case 'extend': t.push(...m.more); break;
      case 'dup': if (t.length) t.splice(i, 0, t[i]!); break;
    }
  }
  return t;
}

/** Valid request arguments (reqid first for async commands), after the session in docs/gahp-protocol.md. */
function templates(tmp: string): Record<string, string[]> {
  const batch = 'condor#schedd@submit.example.org#uppercase#1796204752';
  const job0 = `${batch}#1001.0`;
  const job1 = `${batch}#1001.1`;
  const data = path.join(tmp, 'data.txt');
  return {
    BOINC_SELECT_PROJECT: ['http://127.0.0.1:1/proj/', '0123456789abcdef0123456789abcdef'],
    BOINC_PING: ['1'],
    BOINC_SUBMIT: ['2', batch, 'uppercase', '2', job0, '0', '1', data, 'in', job1, '2', '-n', '5', '1', data, 'in',
      'NULL', 'NULL', 'NULL', 'NULL', 'NULL', 'NULL'],
    BOINC_SET_LEASE: ['3', batch, '1796226352'],
    BOINC_QUERY_BATCHES: ['4', '0', '1', batch],
    BOINC_FETCH_OUTPUT: ['6', job0, path.join(tmp, 'iwd'), 'job.err', 'SOME', '1', 'out', 'out.1001.0'],
    BOINC_ABORT_JOBS: ['7', job0, job1],
    BOINC_RETIRE_BATCH: ['8', batch],
  };
}

/** A request for a command word: a mutated valid request if we know one, else random tokens. */
function requestArb(word: string, tmp: string): fc.Arbitrary<string[]> {
  const tpl = templates(tmp)[word];
  const random = fc.array(nastyToken(tmp), { maxLength: 25 });
  if (!tpl) return random;
  return fc.oneof(
    { weight: 6, arbitrary: fc.array(mutationArb(tmp), { minLength: 1, maxLength: 4 }).map((m) => mutate(tpl, m)) },
    { weight: 1, arbitrary: random },
    { weight: 1, arbitrary: fc.constant(tpl) },
  );
}

/** Line ends in a byte stream: LFs not escaped by a backslash (a model of the client's escaping). */
function countRequestLines(data: Buffer): number {
  let n = 0;
  let escaped = false;
  for (const b of data) {
    if (escaped) escaped = false;
    else if (b === 92) escaped = true;
    else if (b === 10) n++;
  }
  return n;
}

// ---------------------------------------------------------------------------------------

describe('fuzz: every command argument parser (in-process)', () => {
  let tmp: string;
  let services: GahpServices;
  let commands: Command[];
  beforeAll(() => {
    tmp = makeTempDir('boinc-gahp-fuzz-');
    fs.mkdirSync(path.join(tmp, 'iwd'));
    fs.writeFileSync(path.join(tmp, 'data.txt'), 'hello\n');
    services = createServices({ stateDir: path.join(tmp, 'state'), log: Logger.silent() });
    commands = boincCommands(services);
  });
  afterAll(async () => {
    services.session.close();
    await services.ledger.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('the valid templates parse (so mutations start from a real request)', () => {
    const tpl = templates(tmp);
    for (const c of commands) {
      const args = tpl[c.name];
      if (!args) continue;
      if (c.kind === 'async') expect(() => { c.parse(args.slice(1)); }).not.toThrow();
      else expect(() => c.run(args, { log: Logger.silent() })).not.toThrow();
    }
  });

  test('random and mutated arguments: a request or ArgumentError, quickly; nothing else', () => {
    const runs = SOAK ? 50000 : 1500;
    for (const c of commands) {
      let n = 0;
      const parseOnce = (tokens: string[]): void => {
        if (c.kind === 'async') c.parse(tokens.slice(1));
        else c.run(tokens, { log: Logger.silent() });
      };
      fc.assert(fc.property(requestArb(c.name, tmp), (tokens) => {
        n++;
        const t0 = performance.now();
        try {
          parseOnce(tokens);
        } catch (err) {
          if (!(err instanceof ArgumentError)) {
            throw new Error(`${c.name} ${JSON.stringify(tokens).slice(0, 300)}: threw ${(err as Error)?.name}: ${(err as Error)?.message}`, { cause: err });
          }
          expect(err.message.length).toBeGreaterThan(0);
          // The server cuts E messages to 4 KiB; a parser need only stay reasonable.
          expect(err.message.length).toBeLessThan(100_000);
        }
        if (performance.now() - t0 > 500) {
          // A GC pause or a busy machine, or a parser that is really slow? Time it again.
          const t1 = performance.now();
          try { parseOnce(tokens); } catch { /* as above */ }
          expect(performance.now() - t1).toBeLessThan(500);
        }
      }), { seed: SEED, numRuns: runs });
      counts[`parse:${c.name}`] = n;
    }
  });
});

describe('fuzz: the line layer (in-process)', () => {
  const WORDS = ['VERSION', 'COMMANDS', 'ASYNC_MODE_ON', 'ASYNC_MODE_OFF', 'CONDOR_VERSION', 'TEST_SLEEP', 'TEST_WAIT', 'TEST_FAIL', 'TEST_SECRET', 'test_sleep', 'BOINC_PING'];
  // A request line as bytes: words, random bytes (no LF), escaped line breaks; never ends in an escaping backslash.
  const unit = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...WORDS).map((w) => Buffer.from(w)) },
    { weight: 3, arbitrary: fc.constantFrom(' ', '  ', '1', '0', '-1', '99999999999999999999', 'x', 'throw', 'long', 'empty-token', '5').map((w) => Buffer.from(w)) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 20 }).map((a) => Buffer.from(a.filter((b) => b !== 10))) },
    { weight: 1, arbitrary: fc.constantFrom('\\\n', '\\\r', '\\ ', '\\\\', '\r', '\\').map((w) => Buffer.from(w)) },
    { weight: 1, arbitrary: fc.constantFrom(Buffer.from([0xff]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('é😀')) },
  );
  const lineArb = fc.tuple(fc.array(unit, { maxLength: 12 }), fc.boolean()).map(([parts, crlf]) => {
    let b = Buffer.concat(parts);
    let run = 0;
    for (let i = b.length - 1; i >= 0 && b[i] === 92; i--) run++;
    if (run % 2 === 1) b = Buffer.concat([b, Buffer.from('x')]);
    return Buffer.concat([b, Buffer.from(crlf ? '\r\n' : '\n')]);
  });

  test('random request streams in random chunks: exactly one reply per line, then VERSION', async () => {
    const runs = SOAK ? 5000 : 400;
    let lines = 0;
    const samples = fc.sample(fc.tuple(fc.array(lineArb, { minLength: 1, maxLength: 30 }), fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 5 }), fc.integer({ min: 16, max: 4096 })), { seed: SEED, numRuns: runs });
    for (const [reqLines, chunks, maxLine] of samples) {
      const w = waitCommand();
      const g = new InProcessGahp([sleepCommand, w.command, failCommand, secretCommand], { maxLineBytes: maxLine, concurrency: 8, shutdownGraceMs: 100 });
      expect(await g.readLine()).toBe(TEST_BANNER);
      const data = Buffer.concat(reqLines);
      // How many request lines the bytes hold, by the protocol's definition (units may
      // combine, e.g. a backslash unit before an escaped-LF unit makes a real line end).
      const expected = countRequestLines(data);
      let pos = 0;
      let k = 0;
      while (pos < data.length) {
        const n = chunks[k++ % chunks.length]!;
        g.sendRaw(data.subarray(pos, pos + n));
        pos += n;
      }
      g.send('VERSION');
      const out: string[] = [];
      for (;;) {
        const l = await g.readLine(5000);
        if (l === 'R') continue;
        out.push(l);
        if (l === 'S ' + TEST_BANNER && out.length >= expected + 1) break;
      }
      if (out.length !== expected + 1) {
        throw new Error(`expected ${expected + 1} replies, got ${out.length}: ${JSON.stringify(out).slice(0, 500)} for ${JSON.stringify(data.toString('latin1')).slice(0, 500)}`);
      }
      for (const l of out) expect(l).toMatch(/^[SE]( |$)/);
      lines += expected;
      g.send('QUIT');
      expect(await g.exited).toBe(0);
    }
    counts['line-streams'] = runs;
    counts['line-stream-lines'] = lines;
  });
});

describe('fuzz: the real GAHP by command word', () => {
  test('random and mutated requests for every listed command: one reply each, never a crash, still answering', async () => {
    const tmp = makeTempDir('boinc-gahp-fuzzp-');
    fs.mkdirSync(path.join(tmp, 'iwd'));
    fs.writeFileSync(path.join(tmp, 'data.txt'), 'hello\n');
    const g = await GahpProcess.start({ cwd: tmp, args: ['--rpc-timeout', '2'] });
    try {
      const startup = await g.startup();
      const words = startup[0]!.split(' ').slice(1).filter((w) => !['QUIT', 'RESPONSE_PREFIX', 'RESULTS'].includes(w));
      // Nobody listens on port 1: RPCs fail at once, nothing is sent anywhere.
      await g.selectProject('http://127.0.0.1:1/proj/', '0123456789abcdef0123456789abcdef');
      const perWord = SOAK ? 2000 : 60;
      let sent = 0;
      let wordIndex = 0;
      for (const word of words) {
        const reqs = fc.sample(requestArb(word, tmp), { seed: SEED + wordIndex++, numRuns: perWord });
        for (const tokens of reqs) {
          const line = joinTokens([fc.sample(fc.constantFrom(word, word.toLowerCase()), { seed: sent, numRuns: 1 })[0]!, ...tokens]);
          g.sendCrlf(line);
          const reply = await g.readReply(10000).catch((e) => { throw new Error(`${(e as Error).message} after ${line.slice(0, 300)}`); });
          if (!/^[SE]( |$)/.test(reply)) throw new Error(`reply ${reply.slice(0, 200)} to ${line.slice(0, 300)}`);
          sent++;
          if (word === 'BOINC_SELECT_PROJECT' && reply === 'S') {
            // Keep the project unreachable whatever the fuzz selected.
            await g.selectProject('http://127.0.0.1:1/proj/', '0123456789abcdef0123456789abcdef');
          }
        }
        counts[`process:${word}`] = perWord;
      }
      // Raw garbage lines too.
      const raw = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 2000 }).map((a) => Buffer.from(a.map((b) => (b === 10 || b === 92 ? 65 : b)))), { seed: SEED, numRuns: SOAK ? 2000 : 100 });
      for (const r of raw) {
        g.sendRaw(Buffer.concat([r, Buffer.from('\r\n')]));
        expect(await g.readReply()).toMatch(/^[SE]( |$)/);
        sent++;
      }
      counts['process:raw'] = raw.length;
      counts['process:total'] = sent;
      expect(await g.request('VERSION')).toMatch(/^S \$GahpVersion: /);
      // Results come whole and once each.
      await g.drainResults();
      expect(await g.quit()).toBe(0);
      expect(g.stderr).not.toMatch(/TypeError|RangeError|ReferenceError|Unhandled|at .*\.js:\d+/);
    } finally {
      await g.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
