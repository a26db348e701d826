/**
 * The argument vector blahpd gives `boinc_submit.sh` (docs/blahp.md, "Submit"):
 *
 *   [-x <proxy>] [-u <subject>] [-r no] -c <Cmd> -T <temp dir> [-I <file>] [-O <file>]
 *   [-R <file>] [-C <file>] [-i <In>] [-o <Out>] [-e <Err>] -w <Iwd> [-q <queue>]
 *   [-g <gpus>] [-D <job dir>] [-A <project>] [-t <runtime>] [-a <extra>] [-m <memory MB>]
 *   [-V <env> | -v <env>] [-- <arguments word>]
 *
 * Each option is its own word followed by its value (blahpd builds the string that way and
 * splits it with wordexp). The arguments come as ONE word holding every argument as a
 * double-quoted shell word (`"a" "b c" "\"q\""`), which splitArgumentsWord turns back into
 * the list. -I/-O/-R name list files that blahpd deletes as soon as the script returns, so
 * they are read here, at once.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { OutputSpec } from '../batch-boinc/job-check.js';

/** A usage problem in what blahpd sent: nothing is submitted. */
export class BlahpUsageError extends Error {
  override name = 'BlahpUsageError';
}

/** Options that take a value (the letters blahp's own submit scripts accept). */
const WITH_VALUE = new Set('aioecsvVwqnNzhgGMPSrplxujTIORCDmAt'.split(''));
/** Options without a value. */
const FLAGS = new Set(['d']);

export interface SubmitOptions {
  /** Option letter -> value, as given (the last one wins). */
  values: Map<string, string>;
  /** The job's arguments, split back into the list. */
  args: string[];
}

export function parseSubmitArgv(argv: readonly string[]): SubmitOptions {
  const values = new Map<string, string>();
  const args: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') {
      i++;
      break;
    }
    const m = /^-([A-Za-z])$/.exec(word);
    if (!m) throw new BlahpUsageError(`unexpected word ${show(word)} in the submit command (options are -<letter> <value>, arguments follow --)`);
    const letter = m[1]!;
    if (FLAGS.has(letter)) {
      values.set(letter, '');
      continue;
    }
    if (!WITH_VALUE.has(letter)) throw new BlahpUsageError(`unknown submit option -${letter}`);
    const value = argv[i + 1];
    if (value === undefined) throw new BlahpUsageError(`submit option -${letter} needs a value`);
    values.set(letter, value);
    i++;
  }
  for (; i < argv.length; i++) args.push(...splitArgumentsWord(argv[i]!));
  return { values, args };
}

/**
 * Splits the arguments word back into the job's arguments, as a POSIX shell would split
 * it: blanks separate words; inside "..." a backslash escapes `"` `\` `$` and a backquote;
 * '...' is literal; outside quotes a backslash escapes the next character. blahpd also
 * puts a backslash before `(`, `)` and `&` inside the double quotes (for its wordexp);
 * those backslashes are dropped too, so such characters arrive as the user wrote them.
 */
export function splitArgumentsWord(word: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let i = 0;
  while (i < word.length) {
    const c = word[i]!;
    if (c === ' ' || c === '\t' || c === '\n') {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
      i++;
      continue;
    }
    inWord = true;
    if (c === '"') {
      i++;
      for (;;) {
        if (i >= word.length) throw new BlahpUsageError(`the arguments ${show(word)} end inside a double-quoted word`);
        const d = word[i]!;
        if (d === '"') {
          i++;
          break;
        }
        if (d === '\\' && i + 1 < word.length && '"\\$`()&'.includes(word[i + 1]!)) {
          cur += word[i + 1]!;
          i += 2;
          continue;
        }
        cur += d;
        i++;
      }
      continue;
    }
    if (c === "'") {
      const end = word.indexOf("'", i + 1);
      if (end < 0) throw new BlahpUsageError(`the arguments ${show(word)} end inside a single-quoted word`);
      cur += word.slice(i + 1, end);
      i = end + 1;
      continue;
    }
    if (c === '\\' && i + 1 < word.length) {
      cur += word[i + 1]!;
      i += 2;
      continue;
    }
    cur += c;
    i++;
  }
  if (inWord) out.push(cur);
  return out;
}

/** The lines of a list file (-I, -O, -R): without line ends, the last empty line dropped. */
export function readListFile(file: string, what: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new BlahpUsageError(`cannot read the ${what} list ${file}: ${code === 'ENOENT' ? 'it does not exist' : code ?? (err as Error).message}`);
  }
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

/**
 * Pairs -O names with -R destinations (same order, an empty remap line = no remap).
 * Blank -O lines are skipped (HTCondor's list may end with a comma).
 */
export function outputSpecs(outputs: readonly string[], remaps: readonly string[] | undefined): OutputSpec[] {
  if (remaps && remaps.length > outputs.length && remaps.slice(outputs.length).some((r) => r.trim() !== '')) {
    throw new BlahpUsageError(`the remap list has ${remaps.length} lines for ${outputs.length} output files`);
  }
  const specs: OutputSpec[] = [];
  outputs.forEach((o, k) => {
    const src = o.trim();
    if (src === '') return;
    const remap = remaps?.[k]?.trim() ?? '';
    specs.push({ src, dst: remap === '' ? src : remap });
  });
  return specs;
}

/** The input files of the -I list: absolute paths (a relative one is taken under Iwd). */
export function inputPaths(lines: readonly string[], iwd: string): string[] {
  return lines.map((l) => l.trim()).filter((l) => l !== '').map((l) => (path.isAbsolute(l) ? l : path.join(iwd, l)));
}

export function show(text: string): string {
  return JSON.stringify(text.length > 80 ? text.slice(0, 80) + '...' : text);
}
