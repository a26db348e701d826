/**
 * The syntax of a submit description below its meaning (submit-file.ts): the file split
 * into statements, and the small languages of some values: `arguments` (old and new
 * syntax), `transfer_output_remaps`, file lists and the `queue` statement's item lists.
 * Nothing here knows what a command means or expands a macro itself.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export class SubmitFileError extends Error {
  override name = 'SubmitFileError';
  constructor(readonly file: string, readonly line: number, readonly detail: string) {
    super(`${file}:${line}: ${detail}`);
  }
}

export type Statement =
  | { kind: 'assign'; name: string; value: string; line: number }
  | { kind: 'queue'; rest: string; line: number };

/** Splits the text into statements: comments dropped, `\` continuations joined, multi-line `queue ... (` lists gathered. */
export function statements(text: string, file: string): Statement[] {
  const raw = text.split(/\r?\n/);
  const out: Statement[] = [];
  for (let i = 0; i < raw.length; i++) {
    const startLine = i + 1;
    let line = raw[i]!;
    while (/\\\s*$/.test(line) && i + 1 < raw.length) {
      line = line.replace(/\\\s*$/, '') + raw[++i]!.trimStart();
    }
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    if (/^queue(\s|$)/i.test(trimmed)) {
      let rest = trimmed.slice(5).trim();
      // `queue x in (` / `queue x from (` with the items on the following lines.
      if (/\(\s*$/.test(rest) || (/\((?![^)]*\))/.test(rest) && !rest.includes(')'))) {
        const items: string[] = [];
        let closed = false;
        while (++i < raw.length) {
          const l = raw[i]!.trim();
          if (l.startsWith(')')) {
            closed = true;
            break;
          }
          if (l === '' || l.startsWith('#')) continue;
          items.push(l);
        }
        if (!closed) throw new SubmitFileError(file, startLine, 'queue item list opened with "(" is never closed with ")"');
        rest = rest + '\n' + items.join('\n') + '\n)';
      }
      out.push({ kind: 'queue', rest, line: startLine });
      continue;
    }
    const m = /^([+A-Za-z_][A-Za-z0-9_.+]*)\s*=\s*(.*)$/s.exec(trimmed);
    if (m) {
      out.push({ kind: 'assign', name: m[1]!, value: m[2]!.trim(), line: startLine });
      continue;
    }
    const word = trimmed.split(/\s+/)[0]!;
    if (/^(if|elif|else|endif|include|error|warning)\b/i.test(word) || /^(include|use)\s*:/i.test(trimmed)) {
      throw new SubmitFileError(file, startLine, `"${word}" statements are not supported by boinc-gahp submit`);
    }
    throw new SubmitFileError(file, startLine, `cannot parse "${clip(trimmed)}": expected "name = value" or "queue ..."`);
  }
  return out;
}

/** Long text cut for an error message. */
export function clip(s: string, n = 60): string {
  return s.length > n ? s.slice(0, n) + '...' : s;
}

/** Splits HTCondor `arguments`: new syntax when the value is wrapped in double quotes, else old syntax. */
export function parseArguments(value: string): string[] {
  const v = value.trim();
  if (v.startsWith('"')) {
    if (!v.endsWith('"') || v.length < 2) throw new Error('arguments: a value that starts with " must end with "');
    const inner = v.slice(1, -1);
    const args: string[] = [];
    let cur = '';
    let have = false;
    for (let i = 0; i < inner.length; i++) {
      const c = inner[i]!;
      if (c === '"') {
        if (inner[i + 1] === '"') {
          cur += '"';
          have = true;
          i++;
          continue;
        }
        throw new Error('arguments: a double quote inside the new syntax must be doubled ("")');
      }
      if (c === "'") {
        have = true;
        for (;;) {
          i++;
          if (i >= inner.length) throw new Error("arguments: unterminated single quote");
          const d = inner[i]!;
          if (d === "'") {
            if (inner[i + 1] === "'") {
              cur += "'";
              i++;
              continue;
            }
            break;
          }
          cur += d;
        }
        continue;
      }
      if (/\s/.test(c)) {
        if (have) args.push(cur);
        cur = '';
        have = false;
        continue;
      }
      cur += c;
      have = true;
    }
    if (have) args.push(cur);
    return args;
  }
  // Old syntax: whitespace separates; \" is a literal double quote.
  return v.split(/\s+/).filter((a) => a.length > 0).map((a) => a.replace(/\\"/g, '"'));
}

/** `transfer_output_remaps = "a = b; c = d"` */
export function parseRemaps(value: string): Record<string, string> {
  let v = value.trim();
  if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1);
  const out: Record<string, string> = {};
  for (const part of v.split(';')) {
    const p = part.trim();
    if (p === '') continue;
    const eq = p.indexOf('=');
    if (eq <= 0) throw new Error(`transfer_output_remaps: "${clip(p)}" is not "name = new_name"`);
    const from = p.slice(0, eq).trim();
    const to = p.slice(eq + 1).trim();
    if (!from || !to) throw new Error(`transfer_output_remaps: "${clip(p)}" is not "name = new_name"`);
    out[from] = to;
  }
  return out;
}

/** A file list: names separated by commas and/or whitespace. */
export function splitList(value: string): string[] {
  return value.split(/[,\s]+/).map((s) => s.trim()).filter((s) => s.length > 0);
}

export interface QueueSpec {
  count: number;
  vars: string[];
  /** Each item's field values (one per var); one empty item when there is no list. */
  items: string[][];
}

/** Reads a `queue` statement (after the word): [N] [<vars> in (...) | from <file>|(...)]; `expand` expands macros in it. */
export function parseQueue(rest: string, opts: { file: string; cwd: string }, line: number, expand: (s: string) => string): QueueSpec {
  const fail = (msg: string): never => {
    throw new SubmitFileError(opts.file, line, msg);
  };
  let text = expand(rest).trim();
  let count = 1;
  const countMatch = /^([0-9]+)(\s+|$)/.exec(text);
  if (countMatch) {
    count = Number(countMatch[1]);
    text = text.slice(countMatch[0].length).trim();
  }
  if (text === '') return { count, vars: [], items: [[]] };
  const m = /^([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)?\s*\b(in|from|matching)\b\s*([\s\S]*)$/i.exec(text);
  if (!m) return fail(`cannot parse "queue ${clip(rest)}": expected queue [N] [<var>[,<var>...]] in (...) | from <file>`);
  const keyword = m[2]!.toLowerCase();
  const vars = m[1] ? m[1].split(/\s*,\s*/) : ['Item'];
  let body = m[3]!.trim();
  if (keyword === 'matching') return fail('"queue ... matching" is not supported by boinc-gahp submit (list the items with "in" or "from")');
  let lines: string[];
  if (body.startsWith('(')) {
    if (!body.endsWith(')')) return fail('queue item list must end with ")"');
    body = body.slice(1, -1);
    lines = keyword === 'in'
      ? body.split(/[\n,]/).map((s) => s.trim()).filter((s) => s.length > 0)
      : body.split('\n').map((s) => s.trim()).filter((s) => s.length > 0 && !s.startsWith('#'));
  } else if (keyword === 'in') {
    // `queue x in a, b, c` (no parentheses) is accepted too.
    lines = body.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  } else {
    const file = path.resolve(opts.cwd, body);
    let content: string;
    try {
      content = fs.readFileSync(file, 'utf8');
    } catch (err) {
      return fail(`queue from: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    lines = content.split(/\r?\n/).map((s) => s.trim()).filter((s) => s.length > 0 && !s.startsWith('#'));
  }
  const items = lines.map((l) => {
    if (vars.length === 1) return [l];
    // Fields separated by commas and/or whitespace; the last variable takes the rest.
    const fields: string[] = [];
    let restText = l;
    for (let v = 0; v < vars.length - 1; v++) {
      const fm = /^([^,\s]*)[,\s]+/.exec(restText);
      if (!fm) {
        fields.push(restText);
        restText = '';
        continue;
      }
      fields.push(fm[1]!);
      restText = restText.slice(fm[0].length);
    }
    fields.push(restText.trim());
    return fields;
  });
  return { count, vars, items };
}
