/**
 * The app's stderr out of what BOINC reports for a job instance (query_completed_job's
 * stderr_out, its HTML escaping already undone): the BOINC client stores the slot's
 * stderr.txt between `<stderr_txt>\n` and `\n</stderr_txt>` (after lines of its own, such
 * as `<message>`), and writes every byte above 127 of it as `&#N;` (docs/boinc-server.md).
 * The user's stderr file gets stderr.txt: the text inside the wrapper, those bytes restored
 * as they were (UTF-8 or not). Text without the wrapper (another client) is kept whole.
 */

const OPEN = '<stderr_txt>';
const CLOSE = '</stderr_txt>';

export function appStderr(stderrOut: string): Buffer {
  const s = stderrOut.indexOf(OPEN);
  if (s < 0) return restoreBytes(stderrOut);
  let from = s + OPEN.length;
  if (stderrOut.startsWith('\r\n', from)) from += 2;
  else if (stderrOut.startsWith('\n', from)) from += 1;
  let to = stderrOut.lastIndexOf(CLOSE);
  if (to < from) {
    // Cut short before the closing tag: all there is.
    to = stderrOut.length;
  } else if (stderrOut[to - 1] === '\n') {
    // The newline the client puts before the closing tag.
    to -= stderrOut[to - 2] === '\r' ? 2 : 1;
  }
  return restoreBytes(stderrOut.slice(from, Math.max(from, to)));
}

/** `&#128;` ... `&#255;` back to the bytes they stand for; the rest as UTF-8. */
function restoreBytes(text: string): Buffer {
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(/&#(1[2-9][0-9]|2[0-5][0-9]);/g)) {
    const n = Number(m[1]);
    if (n < 128 || n > 255) continue;
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'), Buffer.from([n]));
    last = m.index + m[0].length;
  }
  if (parts.length === 0) return Buffer.from(text, 'utf8');
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}
