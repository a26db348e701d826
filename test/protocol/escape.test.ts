/**
 * Token escaping and splitting, against a model of HTCondor's client (gahp-client.cpp:
 * escapeGahpString for what it sends, read_argv for how it reads what we print).
 */
import fc from 'fast-check';
import { escapeToken, joinTokens, splitTokens } from '../../gahp/protocol/escape.js';

const RUNS = process.env.SOAK ? 20000 : 500;

/** HTCondor's escapeGahpString: a backslash before space, backslash, CR and LF. */
function clientEscape(s: string): string {
  let out = '';
  for (const c of s) out += (c === ' ' || c === '\\' || c === '\r' || c === '\n' ? '\\' : '') + c;
  return out;
}

/**
 * HTCondor's read_argv on one line (without its LF): a backslash lets the next character
 * through; an unescaped CR is ignored; an unescaped space ends an argument (even an empty one).
 */
function clientReadArgv(line: string): string[] {
  const args: string[] = [];
  let cur = '';
  let escape = false;
  for (const c of line) {
    if (escape) { cur += c; escape = false; continue; }
    if (c === '\\') { escape = true; continue; }
    if (c === '\r') continue;
    if (c === ' ') { args.push(cur); cur = ''; continue; }
    cur += c;
  }
  args.push(cur);
  return args;
}

/** Strings rich in the characters that matter, plus arbitrary Unicode. */
const nastyChar = fc.oneof(
  fc.constantFrom(' ', '\\', '\r', '\n', '\t', '$', '#', 'a', 'Z', '0', 'é', '\u0000', '\u2028', '😀'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const token = fc.string({ unit: nastyChar, minLength: 1, maxLength: 30 });
const tokenList = fc.array(token, { minLength: 1, maxLength: 12 });

describe('escapeToken / joinTokens / splitTokens', () => {
  test('examples', () => {
    expect(escapeToken('plain')).toBe('plain');
    expect(escapeToken('a b')).toBe('a\\ b');
    expect(escapeToken('a\\b')).toBe('a\\\\b');
    expect(escapeToken('a\r\nb')).toBe('a\\\r\\\nb');
    expect(joinTokens(['S', 'x y', 'z'])).toBe('S x\\ y z');
    expect(splitTokens('BOINC_PING 1')).toEqual(['BOINC_PING', '1']);
    expect(splitTokens('a\\ b c')).toEqual(['a b', 'c']);
    expect(splitTokens('a\\\\ b')).toEqual(['a\\', 'b']);
    expect(splitTokens('\\a\\b')).toEqual(['ab']);
    expect(splitTokens('a\\\nb')).toEqual(['a\nb']);
    expect(splitTokens('a  b ')).toEqual(['a', 'b']);
    expect(splitTokens('')).toEqual([]);
    expect(splitTokens('   ')).toEqual([]);
    expect(splitTokens('\\ ')).toEqual([' ']);
    expect(splitTokens('x\\')).toEqual(['x\\']);
    expect(splitTokens('$CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $')).toEqual(['$CondorVersion: 9.0.0 May 01 2021 $']);
  });

  test('property: escape-join then split gives the same list', () => {
    fc.assert(fc.property(tokenList, (list) => {
      expect(splitTokens(joinTokens(list))).toEqual(list);
    }), { seed: 20261202, numRuns: RUNS });
  });

  test('property: what we print, HTCondor reads back as exactly our tokens', () => {
    fc.assert(fc.property(tokenList, (list) => {
      const line = joinTokens(list);
      expect(clientReadArgv(line)).toEqual(list);
    }), { seed: 7, numRuns: RUNS });
  });

  test('property: what HTCondor sends, we split into exactly its arguments', () => {
    fc.assert(fc.property(tokenList, (list) => {
      expect(splitTokens(list.map(clientEscape).join(' '))).toEqual(list);
    }), { seed: 8, numRuns: RUNS });
  });

  test('property: splitting any text never throws and never yields an empty token', () => {
    fc.assert(fc.property(fc.string({ unit: nastyChar, maxLength: 200 }), (line) => {
      for (const t of splitTokens(line)) expect(t.length).toBeGreaterThan(0);
    }), { seed: 9, numRuns: RUNS });
  });

  test('a printed token never contains an unescaped space, CR or LF', () => {
    fc.assert(fc.property(token, (t) => {
      expect(escapeToken(t).replace(/\\[\s\S]/g, '')).not.toMatch(/[ \r\n\\]/);
    }), { seed: 10, numRuns: RUNS });
  });
});
