/**
 * Test side only: how blahpd turns one command string into an argv.
 *
 * blahpd (HTCondor's src/blahp, mapped_exec.c `execute_cmd`) first backslash-escapes the
 * characters `|&;<>(){}` that are outside quotes and outside `$(...)`
 * (`escapeWordexpSpecialChars`), then splits the string with glibc's
 * `wordexp(3)` and the flag WRDE_NOCMD, and execve()s the words. `wordexp` here follows
 * glibc's behaviour, including its odd corners (an empty quoted string ends a word of its
 * own: `x ""y` gives `x`, ``, `y`), so that what a script receives in the tests is what
 * it receives under a real blahpd:
 * - separators are space and tab; an unquoted newline or `|&;<>(){}` is WRDE_BADCHAR;
 * - backslash, single and double quotes as in the shell; an unterminated quote or a
 *   trailing backslash is WRDE_SYNTAX;
 * - `$NAME`, `${NAME}`, `${#NAME}`, `${NAME:-word}` (and `-`, `=`, `?`, `+`, with or
 *   without the colon), `$$`, `$#`, `$0`..`$9`, `$*`, `$@` are expanded from the given
 *   environment and argv (blahpd's own), and unquoted results are field-split on IFS;
 * - `$(...)` and backquotes are WRDE_CMDSUB (never run);
 * - `~` and `~user` at the start of a word, and unquoted `*`, `?`, `[` globbing against
 *   the file system (a pattern matching nothing stays as written).
 * Not emulated (throws a plain Error saying so, never a wrong answer): arithmetic `$((..))`
 * and `$[..]`, and the `#`/`%` pattern-removal forms of `${...}`.
 *
 * The expected behaviour of the corner cases is pinned in test/support/blahpd.test.ts by
 * vectors recorded from glibc 2.36's wordexp.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** glibc's wordexp error codes (wordexp.h). */
export const WRDE_ERRORS = { WRDE_NOSPACE: 1, WRDE_BADCHAR: 2, WRDE_BADVAL: 3, WRDE_CMDSUB: 4, WRDE_SYNTAX: 5 } as const;
export type WordexpErrorCode = keyof typeof WRDE_ERRORS;

export class WordexpError extends Error {
  override name = 'WordexpError';
  readonly number: number;
  constructor(readonly code: WordexpErrorCode, readonly input: string) {
    super(`wordexp failed with ${code} on: ${input.length > 200 ? input.slice(0, 200) + '...' : input}`);
    this.number = WRDE_ERRORS[code];
  }
}

export interface WordexpOptions {
  /** The expanding process's environment (blahpd's); default process.env. `${X=y}` assigns into it. */
  env?: Record<string, string | undefined>;
  /** The expanding process's argv, for `$0`..`$9`, `$#`, `$*`, `$@` (default ['blahpd']). */
  argv?: string[];
  /** Its pid, for `$$` (default process.pid). */
  pid?: number;
  /** Its working directory, for relative glob patterns (default process.cwd()). */
  cwd?: string;
}

/**
 * blahpd's escape_wordexp_special_chars: a backslash before each of `|&;<>(){}` that is
 * outside single quotes, double quotes and `$(...)`. The quote tracking is blahpd's own
 * (a quote preceded by a backslash does not close a quoted part; an escaped quote can
 * still open one), reproduced as is.
 */
export function escapeWordexpSpecialChars(input: string): string {
  const special = '|&;<>(){}';
  let inDouble = false;
  let inSingle = false;
  let inCommand = false;
  let prev = '';
  let out = '';
  for (const ch of input) {
    if (ch === "'") {
      if (inSingle) {
        if (prev !== '\\') inSingle = false;
      } else if (!inDouble && !inCommand) {
        inSingle = true;
      }
    }
    if (ch === '"') {
      if (inDouble) {
        if (prev !== '\\') inDouble = false;
      } else if (!inSingle && !inCommand) {
        inDouble = true;
      }
    }
    if (ch === '(' && !inSingle && !inDouble && prev === '$') inCommand = true;
    if (special.includes(ch) && !inSingle && !inDouble && !inCommand) out += '\\';
    if (ch === ')' && inCommand && prev !== '\\') inCommand = false;
    out += ch;
    prev = ch;
  }
  return out;
}

/** glibc wordexp(words, WRDE_NOCMD). Throws WordexpError as wordexp would fail. */
export function wordexp(words: string, opts: WordexpOptions = {}): string[] {
  return new WordExpander(words, opts).run();
}

/** What blahpd does with a command string: escape, then wordexp(WRDE_NOCMD). */
export function blahpdSplitCommand(command: string, opts: WordexpOptions = {}): string[] {
  return wordexp(escapeWordexpSpecialChars(command), opts);
}

class NotEmulated extends Error {
  override name = 'NotEmulated';
  constructor(what: string, input: string) {
    super(`wordexp emulation: ${what} is not emulated (input: ${input.slice(0, 200)})`);
  }
}

const isAlpha = (c: string | undefined) => c !== undefined && /^[A-Za-z_]$/.test(c);
const isAlnum = (c: string | undefined) => c !== undefined && /^[A-Za-z0-9_]$/.test(c);
const isDigit = (c: string | undefined) => c !== undefined && /^[0-9]$/.test(c);

/**
 * One expansion. `word` is null while no word has been started (glibc's NULL word): adding
 * an empty string to it keeps it null, adding a character starts it.
 */
class WordExpander {
  private readonly out: string[] = [];
  private word: string | null = null;
  private readonly env: Record<string, string | undefined>;
  private readonly argv: string[];
  private readonly pid: number;
  private readonly cwd: string;
  private readonly ifs: string;
  private readonly ifsWhite: string;

  constructor(private readonly s: string, opts: WordexpOptions) {
    this.env = opts.env ?? process.env;
    this.argv = opts.argv ?? ['blahpd'];
    this.pid = opts.pid ?? process.pid;
    this.cwd = opts.cwd ?? process.cwd();
    const ifs = this.env.IFS;
    if (ifs === undefined) {
      this.ifs = ' \t\n';
      this.ifsWhite = ' \t\n';
    } else {
      this.ifs = ifs;
      this.ifsWhite = [...new Set([...ifs].filter((c) => c === ' ' || c === '\t' || c === '\n'))].join('');
    }
  }

  private fail(code: WordexpErrorCode): never {
    throw new WordexpError(code, this.s);
  }

  private add(text: string): void {
    if (text === '' && this.word === null) return;
    this.word = (this.word ?? '') + text;
  }

  private addChar(ch: string): void {
    this.word = (this.word ?? '') + ch;
  }

  private endWord(list: string[] = this.out): void {
    list.push(this.word ?? '');
    this.word = null;
  }

  run(): string[] {
    const s = this.s;
    let i = 0;
    while (i < s.length) {
      const c = s[i]!;
      if (c === '\\') {
        i = this.backslash(i, false);
      } else if (c === '$') {
        i = this.dollar(i, false, this.out);
      } else if (c === '`') {
        this.backtick(i + 1);
      } else if (c === '"' || c === "'") {
        i = c === '"' ? this.dquote(i + 1) : this.squote(i + 1);
        // glibc: a quoted part that leaves the word empty is a word of its own, at once.
        if (this.word === null || this.word.length === 0) {
          this.out.push('');
          this.word = null;
        }
      } else if (c === '~') {
        i = this.tilde(i);
      } else if (c === '*' || c === '[' || c === '?') {
        i = this.glob(i);
      } else if (c === ' ' || c === '\t') {
        if (this.word !== null) this.endWord();
        this.word = null;
        i++;
      } else if ('\n|&;<>(){}'.includes(c)) {
        this.fail('WRDE_BADCHAR');
      } else {
        this.addChar(c);
        i++;
      }
    }
    if (this.word !== null) this.out.push(this.word);
    return this.out;
  }

  /** At a backslash outside quotes; returns the index after what it consumed. */
  private backslash(i: number, quoted: boolean): number {
    const next = this.s[i + 1];
    if (next === undefined) this.fail('WRDE_SYNTAX');
    if (next === '\n') return i + 2;
    if (quoted && !'$`"\\'.includes(next)) this.addChar('\\');
    this.addChar(next);
    return i + 2;
  }

  /** Just after an opening single quote. */
  private squote(i: number): number {
    const end = this.s.indexOf("'", i);
    if (end < 0) this.fail('WRDE_SYNTAX');
    this.add(this.s.slice(i, end));
    return end + 1;
  }

  /** Just after an opening double quote. */
  private dquote(i: number): number {
    const s = this.s;
    while (i < s.length) {
      const c = s[i]!;
      if (c === '"') return i + 1;
      if (c === '$') i = this.dollar(i, true, this.out);
      else if (c === '`') this.backtick(i + 1);
      else if (c === '\\') i = this.backslash(i, true);
      else {
        this.addChar(c);
        i++;
      }
    }
    this.fail('WRDE_SYNTAX');
  }

  /** Just after a backquote: WRDE_NOCMD refuses a complete command substitution. */
  private backtick(i: number): never {
    const s = this.s;
    while (i < s.length) {
      if (s[i] === '`') this.fail('WRDE_CMDSUB');
      if (s[i] === '\\') {
        if (i + 1 >= s.length) this.fail('WRDE_SYNTAX');
        i += 2;
        continue;
      }
      i++;
    }
    this.fail('WRDE_SYNTAX');
  }

  /**
   * At a `$`. `quoted`: inside double quotes (no field splitting). `list`: where field
   * splitting puts finished words. Returns the index after what it consumed.
   */
  private dollar(i: number, quoted: boolean, list: string[]): number {
    const s = this.s;
    const next = s[i + 1];
    if (next === undefined || next === '"' || next === "'") {
      this.addChar('$');
      return i + 1;
    }
    if (next === '(') {
      if (s[i + 2] === '(') {
        let j = i + 3;
        let depth = 0;
        while (j < s.length && !(depth === 0 && s[j] === ')')) {
          if (s[j] === '(') depth++;
          else if (s[j] === ')') depth--;
          j++;
        }
        if (s[j] === ')' && s[j + 1] === ')') throw new NotEmulated('arithmetic expansion $((...))', s);
      }
      // Command substitution: scanned to its closing parenthesis, then refused.
      let depth = 1;
      let q = 0;
      for (let j = i + 2; j < s.length; j++) {
        const c = s[j];
        if (c === "'") q = q === 0 ? 1 : q === 1 ? 0 : q;
        else if (c === '"') q = q === 0 ? 2 : q === 2 ? 0 : q;
        else if (c === ')' && !q && --depth === 0) this.fail('WRDE_CMDSUB');
        else if (c === '(' && !q) depth++;
      }
      this.fail('WRDE_SYNTAX');
    }
    if (next === '[') throw new NotEmulated('arithmetic expansion $[...]', s);
    return this.param(i + 1, quoted, list);
  }

  /** Just after a `$` that starts a parameter expansion. */
  private param(i: number, quoted: boolean, list: string[]): number {
    const s = this.s;
    const start = i;
    const brace = s[i] === '{';
    if (brace) i++;
    let name = '';
    let special = false;
    let seenHash = false;
    let action: '' | '-' | '=' | '?' | '+' = '';
    let colon = false;
    let pattern = '';

    if (s[i] === '#') {
      seenHash = true;
      i++;
      if (!brace) {
        // `$#`: the number of positional parameters.
        this.add(String(Math.max(this.argv.length - 1, 0)));
        return i;
      }
    }
    if (isAlpha(s[i])) {
      while (isAlnum(s[i])) name += s[i++];
    } else if (isDigit(s[i])) {
      special = true;
      if (!brace) name = s[i++]!;
      else while (isDigit(s[i])) name += s[i++];
    } else if (s[i] !== undefined && '*@$'.includes(s[i]!)) {
      special = true;
      name = s[i++]!;
    } else if (brace) {
      this.fail('WRDE_SYNTAX');
    }

    if (brace) {
      const c = s[i];
      if (c === '}') {
        i++;
      } else {
        if (c === '#' || c === '%') throw new NotEmulated('pattern removal ${name#...} / ${name%...}', s);
        if (c === ':') {
          if (s[i + 1] === undefined || !'-=?+'.includes(s[i + 1]!)) this.fail('WRDE_SYNTAX');
          colon = true;
          i++;
        } else if (c === undefined || !'-=?+'.includes(c)) {
          this.fail('WRDE_SYNTAX');
        }
        action = s[i] as typeof action;
        i++;
        // The pattern, unexpanded, up to the matching brace.
        let depth = 0;
        let pq = 0;
        let closed = false;
        for (; i < s.length; i++) {
          const ch = s[i]!;
          if (ch === '{' && !pq) depth++;
          else if (ch === '}' && !pq) {
            if (depth === 0) {
              closed = true;
              i++;
              break;
            }
            depth--;
          } else if (ch === '\\' && !pq) {
            if (i + 1 >= s.length) this.fail('WRDE_SYNTAX');
            pattern += '\\';
            i++;
          } else if (ch === "'") pq = pq === 0 ? 1 : pq === 1 ? 0 : pq;
          else if (ch === '"') pq = pq === 0 ? 2 : pq === 2 ? 0 : pq;
          pattern += s[i];
        }
        if (!closed) this.fail('WRDE_SYNTAX');
      }
    }

    if (name === '') {
      // Just a `$` on its own: kept, and what follows is read again.
      this.addChar('$');
      return start;
    }

    let value: string | undefined;
    let words: string[] | undefined; // "$@" with several parameters
    if (isDigit(name[0])) {
      const n = Number.parseInt(name, 10);
      value = n < this.argv.length ? this.argv[n] : undefined;
    } else if (special) {
      const params = this.argv.slice(1);
      if (name === '$') value = String(this.pid);
      else if ((name === '*' || name === '@') && seenHash) {
        this.add(String(params.length));
        return i;
      } else if (name === '*' || (name === '@' && !quoted)) value = params.join(' ');
      else {
        // Quoted "$@": each parameter a word of its own.
        if (params.length === 0) return i;
        if (params.length === 1) value = params[0];
        else words = params;
      }
    } else {
      value = this.env[name];
    }

    if (words) {
      this.add(words[0]!);
      this.endWord(list);
      for (const w of words.slice(1, -1)) list.push(w);
      this.word = null;
      value = words[words.length - 1];
    }

    if (action) {
      const unsetOrNull = value === undefined || (colon && value === '');
      if (action === '-' || action === '=') {
        if (unsetOrNull) {
          value = this.expandPattern(pattern);
          if (action === '=') this.env[name] = value;
        }
      } else if (action === '+') {
        if (!unsetOrNull) value = this.expandPattern(pattern);
        else return i;
      } else {
        // `?`: glibc prints the message and substitutes nothing; blahpd's stderr only.
        if (!(value !== undefined && value !== '')) return i;
      }
    }

    if (seenHash) {
      this.add(String(value === undefined ? 0 : value.length));
      return i;
    }
    if (value === undefined) return i;
    if (quoted) {
      // glibc: appending an empty value to a word not yet started fails with WRDE_NOSPACE
      // (so "$EMPTY" with EMPTY set to "" is an error, while "$UNSET" is an empty word).
      if (value === '' && this.word === null) this.fail('WRDE_NOSPACE');
      this.add(value);
      return i;
    }
    this.fieldSplit(value, list);
    return i;
  }

  /** The word of `${name-word}`: quotes removed, `$` expanded, a backslash kept with its character. */
  private expandPattern(pattern: string): string {
    let out = '';
    let q = 0;
    for (let p = 0; p < pattern.length; p++) {
      const c = pattern[p]!;
      if (c === '"' && q !== 1) {
        q = q === 2 ? 0 : 2;
        continue;
      }
      if (c === "'" && q !== 2) {
        q = q === 1 ? 0 : 1;
        continue;
      }
      if ((c === '*' || c === '?') && q) out += '\\';
      if (c === '$') {
        const sub = new WordExpander(pattern.slice(p), { env: this.env, argv: this.argv, pid: this.pid, cwd: this.cwd });
        const consumed = sub.param(1, true, []);
        out += sub.word ?? '';
        p += consumed - 1;
        continue;
      }
      if (c === '\\') {
        out += '\\';
        p++;
        out += pattern[p] ?? '';
        continue;
      }
      out += c;
    }
    return out;
  }

  /** Field splitting of an unquoted expansion's value, as glibc does it. */
  private fieldSplit(value: string, list: string[]): void {
    const inIfs = (c: string | undefined) => c !== undefined && this.ifs.includes(c);
    const inWhite = (c: string | undefined) => c !== undefined && this.ifsWhite.includes(c);
    let begin = 0;
    let seenNonWhite = false;
    let first = true;
    do {
      if (!first) this.endWord(list);
      first = false;
      while (inWhite(value[begin])) begin++;
      if (!seenNonWhite && begin >= value.length) break;
      let end = begin;
      while (end < value.length && !inIfs(value[end])) end++;
      let next = end;
      while (inWhite(value[next])) next++;
      seenNonWhite = false;
      if (next < value.length && inIfs(value[next])) {
        seenNonWhite = true;
        next++;
      }
      this.add(value.slice(begin, end));
      begin = next;
    } while (seenNonWhite || begin < value.length);
  }

  /** At a `~`. */
  private tilde(i: number): number {
    const s = this.s;
    if (this.word !== null && this.word.length > 0) {
      const last = this.word[this.word.length - 1];
      const first = this.out.length === 0;
      const afterAssign = last === '=' && first;
      const afterColon = last === ':' && this.word.includes('=') && first;
      if (!afterAssign && !afterColon) {
        this.addChar('~');
        return i + 1;
      }
    }
    let j = i + 1;
    for (; j < s.length; j++) {
      const c = s[j]!;
      if (c === ':' || c === '/' || c === ' ' || c === '\t') break;
      if (c === '\\') {
        this.addChar('~');
        return i + 1;
      }
    }
    if (j === i + 1) {
      const home = this.env.HOME ?? homeOfUser(os.userInfo().username);
      if (home !== undefined) this.add(home);
      else this.addChar('~');
      return j;
    }
    const user = s.slice(i + 1, j);
    const home = homeOfUser(user);
    if (home !== undefined) this.add(home);
    else {
      this.addChar('~');
      this.add(user);
    }
    return j;
  }

  /** At an unquoted `*`, `?` or `[`: the rest of the word is a pattern. */
  private glob(i: number): number {
    const s = this.s;
    const patterns: string[] = [];
    let q = 0;
    for (; i < s.length; i++) {
      const c = s[i]!;
      if (this.ifs.includes(c)) break;
      if (c === "'" && q !== 2) {
        q = q === 1 ? 0 : 1;
        continue;
      }
      if (c === '"' && q !== 1) {
        q = q === 2 ? 0 : 2;
        continue;
      }
      if (c === '$' && q !== 1) {
        i = this.dollar(i, q === 2, patterns) - 1;
        continue;
      }
      if (c === '\\') {
        i = this.backslash(i, q !== 0) - 1;
        continue;
      }
      this.addChar(c);
    }
    patterns.push(this.word ?? '');
    this.word = null;
    for (const p of patterns) {
      for (const m of globNoCheck(p, this.cwd)) this.out.push(m);
    }
    return i;
  }
}

function homeOfUser(user: string): string | undefined {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const f = line.split(':');
      if (f[0] === user && f[5]) return f[5];
    }
  } catch {
    // no passwd file: like an unknown user
  }
  return undefined;
}

/** fnmatch-style pattern of one path component as a RegExp (no FNM_PERIOD subtleties beyond a leading dot). */
function componentRegExp(pattern: string): RegExp {
  let re = '';
  for (let k = 0; k < pattern.length; k++) {
    const c = pattern[k]!;
    if (c === '\\' && k + 1 < pattern.length) re += escapeRe(pattern[++k]!);
    else if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const close = pattern.indexOf(']', k + 2);
      if (close < 0) re += '\\[';
      else {
        let body = pattern.slice(k + 1, close);
        let neg = false;
        if (body[0] === '!' || body[0] === '^') {
          neg = true;
          body = body.slice(1);
        }
        re += `[${neg ? '^' : ''}${body.replace(/[\\\]^]/g, (m) => '\\' + m)}]`;
        k = close;
      }
    } else re += escapeRe(c);
  }
  return new RegExp(`^${re}$`, 's');
}

function escapeRe(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, (m) => '\\' + m);
}

const hasMagic = (p: string) => /[*?[]/.test(p);

/** glob(pattern, GLOB_NOCHECK): sorted matches, or the pattern itself when nothing matches. */
function globNoCheck(pattern: string, cwd: string): string[] {
  const absolute = pattern.startsWith('/');
  const parts = pattern.split('/');
  let candidates: string[] = [absolute ? '/' : ''];
  for (let k = absolute ? 1 : 0; k < parts.length; k++) {
    const part = parts[k]!;
    const last = k === parts.length - 1;
    const next: string[] = [];
    for (const base of candidates) {
      const dir = path.resolve(cwd, base === '' ? '.' : base);
      const join = (name: string) => (base === '' ? name : base.endsWith('/') ? base + name : `${base}/${name}`);
      if (part === '') {
        next.push(join(''));
        continue;
      }
      if (!hasMagic(part)) {
        const p = join(part.replace(/\\(.)/g, '$1'));
        if (last ? fs.existsSync(path.resolve(cwd, p)) : isDir(path.resolve(cwd, p))) next.push(p);
        continue;
      }
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch {
        continue;
      }
      const re = componentRegExp(part);
      for (const name of names.sort()) {
        if (name.startsWith('.') && !part.startsWith('.')) continue;
        if (!re.test(name)) continue;
        const p = join(name);
        if (last || isDir(path.resolve(cwd, p))) next.push(p);
      }
    }
    candidates = next;
  }
  return candidates.length > 0 ? candidates : [pattern];
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}
