/**
 * GAHP token escaping, exactly as HTCondor's gahp client does it: inside an argument a
 * backslash escapes the next character. On output we escape space, backslash, CR and LF,
 * so any printed token splits back into exactly one token on the client.
 */

const NEEDS_ESCAPE = /[ \\\r\n]/;
const ESCAPE_ALL = /[ \\\r\n]/g;

/** Escapes one token for printing on the protocol. */
export function escapeToken(token: string): string {
  // Fast path: most tokens (numbers, NULL, job names) need nothing.
  if (!NEEDS_ESCAPE.test(token)) return token;
  return token.replace(ESCAPE_ALL, (c) => '\\' + c);
}

/**
 * Escapes each token and joins them with single spaces: one protocol line (no LF).
 * Array join, not `+=`: a BOINC_QUERY_BATCHES result of 100,000 jobs is 200,000 tokens, and
 * appending them one by one built a rope of as many pieces that writing it then flattened,
 * more than twice the time of one join (test/bench/README.md, "Item 11").
 */
export function joinTokens(tokens: readonly string[]): string {
  const escaped = new Array<string>(tokens.length);
  for (let i = 0; i < tokens.length; i++) escaped[i] = escapeToken(tokens[i]!);
  return escaped.join(' ');
}

/**
 * Splits a request line into unescaped tokens. Unescaped spaces separate tokens; runs of
 * them and leading/trailing ones produce no empty tokens (a hand-typed line with two
 * spaces still parses). `\x` is `x` for every x; a lone trailing backslash is kept as is.
 * An escaped space at the very start still makes a (non-empty) token, so an empty string
 * can never be an argument: callers needing "empty" must use an explicit word.
 */
export function splitTokens(line: string): string[] {
  const tokens: string[] = [];
  // Fast path: no backslash at all, a plain split is exact.
  if (line.indexOf('\\') < 0) {
    for (const t of line.split(' ')) if (t.length > 0) tokens.push(t);
    return tokens;
  }
  let current = '';
  let inToken = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\') {
      if (i + 1 < line.length) {
        current += line[++i]!;
      } else {
        current += c;
      }
      inToken = true;
    } else if (c === ' ') {
      if (inToken) tokens.push(current);
      current = '';
      inToken = false;
    } else {
      current += c;
      inToken = true;
    }
  }
  if (inToken) tokens.push(current);
  return tokens;
}

/**
 * Splits a request line exactly as HTCondor's gahp client splits lines (read_argv): every
 * unescaped space ends a token, so two spaces in a row make an empty token, which is how
 * the gridmanager sends an empty string (an empty job argument, an empty stderr path).
 * `\x` is `x` for every x; a lone trailing backslash is kept as is. The protocol server
 * reads requests with this: collapsing spaces would shift every later argument, and the
 * `E` for the miscount would make the gridmanager EXCEPT. (splitTokens is for hand-typed
 * lines.)
 */
export function splitTokensExact(line: string): string[] {
  if (line.indexOf('\\') < 0) return line.split(' ');
  const tokens: string[] = [];
  let current = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\') {
      current += i + 1 < line.length ? line[++i]! : c;
    } else if (c === ' ') {
      tokens.push(current);
      current = '';
    } else {
      current += c;
    }
  }
  tokens.push(current);
  return tokens;
}
