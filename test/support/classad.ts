/**
 * Test side only: just enough of the ClassAd language to read a BLAHP status ad the way
 * blahpd and the gridmanager do, and to write it back the way blahpd does.
 *
 * A status line's ad (`[BatchjobId="boinc/x"; JobStatus=4; ExitCode=0]`) is parsed by
 * blahpd, unparsed again (`[ BatchjobId = "boinc/x"; JobStatus = 4; ExitCode = 0 ]`, strings
 * re-escaped: `"` as `\"`, `\` as `\\`), its spaces escaped for the GAHP line, and parsed
 * once more by the gridmanager after its tokenizer removed one level of backslashes. Values
 * understood here: integers, reals, strings (ClassAd escapes: `\"`, `\\`, `\n`, `\t`, octal;
 * another escaped character stands for itself), true/false, undefined, error. Anything else
 * (an expression) is kept as its source text and written back unchanged.
 */

export type ClassAdValue =
  | { type: 'integer'; value: number; text: string }
  | { type: 'real'; value: number; text: string }
  | { type: 'string'; value: string }
  | { type: 'boolean'; value: boolean }
  | { type: 'undefined' }
  | { type: 'error' }
  | { type: 'expression'; text: string };

/** A parsed ad. Attribute names are case-insensitive, as in ClassAds. */
export class ClassAd {
  private readonly attrs = new Map<string, { name: string; value: ClassAdValue }>();

  set(name: string, value: ClassAdValue): void {
    this.attrs.set(name.toLowerCase(), { name, value });
  }

  getValue(name: string): ClassAdValue | undefined {
    return this.attrs.get(name.toLowerCase())?.value;
  }

  /** A literal's JS value (number, string, boolean; null for undefined/error); undefined when absent or an expression. */
  get(name: string): number | string | boolean | null | undefined {
    const v = this.getValue(name);
    if (!v) return undefined;
    switch (v.type) {
      case 'integer':
      case 'real':
      case 'string':
      case 'boolean':
        return v.value;
      case 'undefined':
      case 'error':
        return null;
      default:
        return undefined;
    }
  }

  has(name: string): boolean {
    return this.attrs.has(name.toLowerCase());
  }

  get names(): string[] {
    return [...this.attrs.values()].map((a) => a.name);
  }

  /** Plain object of literal values, keyed by the names as written (for toEqual in tests). */
  toObject(): Record<string, number | string | boolean | null | undefined> {
    const o: Record<string, number | string | boolean | null | undefined> = {};
    for (const { name } of this.attrs.values()) o[name] = this.get(name);
    return o;
  }

  /** As ClassAdUnParser writes a new-style ad: `[ A = 1; B = "x" ]`. */
  unparse(): string {
    const parts = [...this.attrs.values()].map(({ name, value }) => `${name} = ${unparseValue(value)}`);
    return parts.length === 0 ? '[  ]' : `[ ${parts.join('; ')} ]`;
  }
}

function unparseValue(v: ClassAdValue): string {
  switch (v.type) {
    case 'integer':
    case 'real':
      return v.text;
    case 'string':
      return `"${escapeString(v.value)}"`;
    case 'boolean':
      return v.value ? 'true' : 'false';
    case 'undefined':
      return 'undefined';
    case 'error':
      return 'error';
    case 'expression':
      return v.text;
  }
}

function escapeString(s: string): string {
  let out = '';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === '"') out += '\\"';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (code < 0x20 || code === 0x7f) out += '\\' + code.toString(8).padStart(3, '0');
    else out += ch;
  }
  return out;
}

/** The body of a string literal (between its quotes) with ClassAd escapes converted; null if invalid. */
function convertEscapes(body: string): string | null {
  let out = '';
  for (let i = 0; i < body.length; i++) {
    let ch = body[i]!;
    if (ch === '\\' && i < body.length - 1) {
      ch = body[++i]!;
      const simple: Record<string, string> = { '"': '"', "'": "'", '?': '?', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };
      if (ch in simple) ch = simple[ch]!;
      else if (/[0-7]/.test(ch)) {
        let n = Number(ch);
        if (/[0-7]/.test(body[i + 1] ?? '')) {
          n = n * 8 + Number(body[++i]);
          if (n < 0x20 && /[0-7]/.test(body[i + 1] ?? '')) n = n * 8 + Number(body[++i]);
        }
        if (n === 0) return null;
        ch = String.fromCharCode(n);
      }
    }
    out += ch;
  }
  return out;
}

/** Parses `[ name = value; ... ]`; null where ClassAdParser::ParseClassAd would fail. */
export function parseClassAd(text: string): ClassAd | null {
  let i = 0;
  const ws = () => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  ws();
  if (text[i] !== '[') return null;
  i++;
  const ad = new ClassAd();
  for (;;) {
    ws();
    if (text[i] === ']') {
      i++;
      break;
    }
    const nameMatch = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (!nameMatch) return null;
    const name = nameMatch[0];
    i += name.length;
    ws();
    if (text[i] !== '=') return null;
    i++;
    // The value's source text: up to `;` or `]` outside strings and brackets.
    const start = i;
    let depth = 0;
    while (i < text.length) {
      const c = text[i]!;
      if (c === '"') {
        i++;
        while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
        if (i >= text.length) return null;
        i++;
        continue;
      }
      if (c === '(' || c === '[' || c === '{') depth++;
      else if (c === ')' || c === '}') depth--;
      else if (c === ']') {
        if (depth === 0) break;
        depth--;
      } else if (c === ';' && depth === 0) break;
      i++;
    }
    if (i >= text.length) return null;
    const value = parseValue(text.slice(start, i).trim());
    if (!value) return null;
    ad.set(name, value);
    if (text[i] === ';') i++;
  }
  ws();
  return i === text.length ? ad : null;
}

function parseValue(src: string): ClassAdValue | null {
  if (src === '') return null;
  if (/^[+-]?[0-9]+$/.test(src)) return { type: 'integer', value: Number(src), text: src };
  if (/^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?$/.test(src)) return { type: 'real', value: Number(src), text: src };
  if (/^true$/i.test(src)) return { type: 'boolean', value: true };
  if (/^false$/i.test(src)) return { type: 'boolean', value: false };
  if (/^undefined$/i.test(src)) return { type: 'undefined' };
  if (/^error$/i.test(src)) return { type: 'error' };
  if (src.startsWith('"')) {
    // One string literal, nothing after it.
    let j = 1;
    while (j < src.length && src[j] !== '"') j += src[j] === '\\' ? 2 : 1;
    if (j !== src.length - 1) {
      // More after the closing quote: ClassAds would read an expression (e.g. string
      // concatenation isn't a thing); a stray quote from an unescaped `"` makes it invalid.
      return null;
    }
    const value = convertEscapes(src.slice(1, -1));
    return value === null ? null : { type: 'string', value };
  }
  return { type: 'expression', text: src };
}
