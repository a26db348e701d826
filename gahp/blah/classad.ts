/**
 * The ClassAds of the BLAH protocol (docs/blah-route.md, "The submit ad"): reading the
 * submit ad the gridmanager sends with BLAH_JOB_SUBMIT, and writing the status ad of a
 * BLAH_JOB_STATUS result.
 *
 * The submit ad is what HTCondor's ClassAdUnParser writes: `[ Name = value; ... ]` in the
 * new ClassAd syntax. Read here: strings (with every ClassAd escape), integers, reals,
 * booleans, undefined and error, lists and nested ads as values; anything else is an
 * expression, kept as its source text and never evaluated (the gridmanager has evaluated
 * what the GAHP needs: buildSubmitAd copies literals). Attribute names are case-insensitive.
 */

export type AdValue =
  | { kind: 'string'; value: string }
  | { kind: 'integer'; value: number }
  | { kind: 'real'; value: number }
  | { kind: 'boolean'; value: boolean }
  | { kind: 'undefined' }
  | { kind: 'error' }
  | { kind: 'list'; items: AdValue[] }
  | { kind: 'ad'; ad: ClassAd }
  | { kind: 'expression'; text: string };

/** A ClassAd that cannot be read: names where, in the ad's own text. */
export class ClassAdSyntaxError extends Error {
  override name = 'ClassAdSyntaxError';
}

export class ClassAd {
  private readonly attrs = new Map<string, { name: string; value: AdValue }>();

  set(name: string, value: AdValue): void {
    this.attrs.set(name.toLowerCase(), { name, value });
  }

  value(name: string): AdValue | undefined {
    return this.attrs.get(name.toLowerCase())?.value;
  }

  /** The names as written, in order. */
  names(): string[] {
    return [...this.attrs.values()].map((a) => a.name);
  }

  /** A string attribute; undefined when absent or undefined; an error naming it when of another kind. */
  string(name: string): string | undefined {
    const v = this.value(name);
    if (v === undefined || v.kind === 'undefined') return undefined;
    if (v.kind === 'string') return v.value;
    throw new ClassAdSyntaxError(`${name} should be a string, it is ${describe(v)}`);
  }

  /** A number attribute (integer or real); undefined when absent or undefined. */
  number(name: string): number | undefined {
    const v = this.value(name);
    if (v === undefined || v.kind === 'undefined') return undefined;
    if (v.kind === 'integer' || v.kind === 'real') return v.value;
    throw new ClassAdSyntaxError(`${name} should be a number, it is ${describe(v)}`);
  }

  boolean(name: string): boolean | undefined {
    const v = this.value(name);
    if (v === undefined || v.kind === 'undefined') return undefined;
    if (v.kind === 'boolean') return v.value;
    throw new ClassAdSyntaxError(`${name} should be true or false, it is ${describe(v)}`);
  }
}

function describe(v: AdValue): string {
  switch (v.kind) {
    case 'string':
      return `the string ${JSON.stringify(v.value.length > 40 ? v.value.slice(0, 40) + '...' : v.value)}`;
    case 'integer':
    case 'real':
      return `the number ${v.value}`;
    case 'boolean':
      return String(v.value);
    case 'expression':
      return `the expression ${v.text.length > 40 ? v.text.slice(0, 40) + '...' : v.text}`;
    default:
      return v.kind === 'ad' ? 'a nested ad' : v.kind === 'list' ? 'a list' : v.kind;
  }
}

/** Parses one ClassAd in the new syntax (`[ a = 1; b = "x" ]`); throws ClassAdSyntaxError. */
export function parseClassAd(text: string): ClassAd {
  const p = new Parser(text);
  p.skipSpace();
  const ad = p.ad();
  p.skipSpace();
  if (!p.atEnd()) throw p.error('text after the end of the ad');
  return ad;
}

const IDENT = /[A-Za-z_][A-Za-z0-9_.]*/y;
const NUMBER = /[+-]?(?:0[xX][0-9A-Fa-f]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)/y;

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  atEnd(): boolean {
    return this.i >= this.s.length;
  }

  error(what: string): ClassAdSyntaxError {
    const at = this.s.slice(this.i, this.i + 30);
    return new ClassAdSyntaxError(`the ClassAd cannot be read at character ${this.i + 1}: ${what}${at ? ` (at ${JSON.stringify(at)})` : ''}`);
  }

  skipSpace(): void {
    for (;;) {
      while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
      // Comments: ClassAds allow // to the end of the line and /* ... */.
      if (this.s.startsWith('//', this.i)) {
        const nl = this.s.indexOf('\n', this.i);
        this.i = nl < 0 ? this.s.length : nl + 1;
      } else if (this.s.startsWith('/*', this.i)) {
        const end = this.s.indexOf('*/', this.i + 2);
        if (end < 0) throw this.error('a comment that does not end');
        this.i = end + 2;
      } else {
        return;
      }
    }
  }

  private expect(c: string): void {
    this.skipSpace();
    if (this.s[this.i] !== c) throw this.error(`expected '${c}'`);
    this.i++;
  }

  ad(): ClassAd {
    this.expect('[');
    const ad = new ClassAd();
    this.skipSpace();
    if (this.s[this.i] === ']') {
      this.i++;
      return ad;
    }
    for (;;) {
      this.skipSpace();
      const name = this.attributeName();
      this.expect('=');
      ad.set(name, this.value(';]'));
      this.skipSpace();
      const c = this.s[this.i];
      if (c === ';') {
        this.i++;
        this.skipSpace();
        if (this.s[this.i] === ']') {
          this.i++;
          return ad;
        }
        continue;
      }
      if (c === ']') {
        this.i++;
        return ad;
      }
      throw this.error("expected ';' or ']'");
    }
  }

  private attributeName(): string {
    if (this.s[this.i] === "'") {
      // A quoted name ('weird name'): the same escapes as a string.
      return this.quoted("'");
    }
    IDENT.lastIndex = this.i;
    const m = IDENT.exec(this.s);
    if (!m) throw this.error('expected an attribute name');
    this.i += m[0].length;
    return m[0];
  }

  /** One value, up to (not including) one of `ends` at depth 0. */
  private value(ends: string): AdValue {
    this.skipSpace();
    const start = this.i;
    const literal = this.literal();
    if (literal) {
      this.skipSpace();
      if (this.i >= this.s.length || ends.includes(this.s[this.i]!)) return literal;
    }
    // An expression (or a literal followed by an operator): kept as written.
    this.i = start;
    this.skipExpression(ends);
    const text = this.s.slice(start, this.i).trim();
    if (text === '') throw this.error('expected a value');
    return { kind: 'expression', text };
  }

  private literal(): AdValue | undefined {
    const c = this.s[this.i];
    if (c === '"') return { kind: 'string', value: this.quoted('"') };
    if (c === '[') return { kind: 'ad', ad: this.ad() };
    if (c === '{') return this.list();
    NUMBER.lastIndex = this.i;
    const n = NUMBER.exec(this.s);
    if (n && !/[A-Za-z_0-9.]/.test(this.s[this.i + n[0].length] ?? '')) {
      this.i += n[0].length;
      const t = n[0];
      if (/^[+-]?0[xX]/.test(t)) return { kind: 'integer', value: parseInt(t, 16) };
      if (/[.eE]/.test(t)) return { kind: 'real', value: Number(t) };
      return { kind: 'integer', value: Number(t) };
    }
    IDENT.lastIndex = this.i;
    const w = IDENT.exec(this.s);
    if (w) {
      const word = w[0].toLowerCase();
      const next = this.s[this.i + w[0].length] ?? '';
      if (/[A-Za-z0-9_(]/.test(next)) return undefined;
      const known: Record<string, AdValue> = {
        true: { kind: 'boolean', value: true },
        false: { kind: 'boolean', value: false },
        undefined: { kind: 'undefined' },
        error: { kind: 'error' },
      };
      const v = known[word];
      if (v) {
        this.i += w[0].length;
        return v;
      }
    }
    return undefined;
  }

  private list(): AdValue {
    this.expect('{');
    const items: AdValue[] = [];
    this.skipSpace();
    if (this.s[this.i] === '}') {
      this.i++;
      return { kind: 'list', items };
    }
    for (;;) {
      items.push(this.value(',}'));
      this.skipSpace();
      const c = this.s[this.i];
      this.i++;
      if (c === '}') return { kind: 'list', items };
      if (c !== ',') throw this.error("expected ',' or '}' in a list");
    }
  }

  /** A quoted string or name: ClassAd escapes (\" \' \\ \n \t \r \b \f, octal up to \377). */
  private quoted(q: string): string {
    this.i++;
    let out = '';
    for (;;) {
      if (this.i >= this.s.length) throw this.error('a string that does not end');
      const c = this.s[this.i++]!;
      if (c === q) return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.s[this.i++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case undefined: throw this.error('a string that ends in a backslash');
        default:
          if (/[0-7]/.test(e)) {
            let digits = e;
            const max = e <= '3' ? 3 : 2;
            while (digits.length < max && /[0-7]/.test(this.s[this.i] ?? '')) digits += this.s[this.i++];
            out += String.fromCharCode(parseInt(digits, 8));
          } else {
            out += e; // \" \' \\ and any other escaped character stand for themselves
          }
      }
    }
  }

  /** Moves past an expression: brackets balanced, strings skipped, up to one of `ends` at depth 0. */
  private skipExpression(ends: string): void {
    const stack: string[] = [];
    while (this.i < this.s.length) {
      const c = this.s[this.i]!;
      if (stack.length === 0 && ends.includes(c)) return;
      if (c === '"' || c === "'") {
        this.quoted(c);
        continue;
      }
      if (c === '(' || c === '[' || c === '{') stack.push(c === '(' ? ')' : c === '[' ? ']' : '}');
      else if (c === ')' || c === ']' || c === '}') {
        if (stack.pop() !== c) throw this.error(`unbalanced '${c}'`);
      }
      this.i++;
    }
    if (stack.length > 0) throw this.error(`missing '${stack[stack.length - 1]}'`);
  }
}

/** A string literal as ClassAds write it (the gridmanager's parser reads it back exactly). */
export function adString(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (code < 0x20 || code === 0x7f) out += '\\' + code.toString(8).padStart(3, '0');
    else out += ch;
  }
  return out + '"';
}

export type PlainValue = string | number | boolean;

/** `[ A = 1; B = "x" ]`: an ad of literals, in order, as the status result carries it. */
export function writeClassAd(fields: ReadonlyArray<readonly [string, PlainValue]>): string {
  const parts = fields.map(([name, v]) => {
    const text = typeof v === 'string' ? adString(v) : typeof v === 'boolean' ? (v ? 'true' : 'false') : Number.isFinite(v) ? String(v) : '0';
    return `${name} = ${text}`;
  });
  return `[ ${parts.join('; ')} ]`;
}
