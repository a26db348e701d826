/**
 * The one line a BLAHP status script prints per job: `0[BatchjobId="<id>"; JobStatus=<n>;
 * ...]` or `1<error>`. blahpd makes each line a separate result, re-escapes only spaces
 * (a `"` or `\` inside a string value reaches the gridmanager raw and its ad no longer
 * parses) and keeps at most 1,023 characters of a line (docs/blahp.md, "Status").
 */

export type AdValue = number | string | boolean;

/** Longest line we print, newline not counted (blahpd's buffer holds 1,023 characters). */
export const MAX_LINE = 1000;

/** A string value made safe: no quote, backslash or control character. */
export function safeString(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
  return text.replace(/["\\]/g, "'").replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029]+/g, ' ');
}

function literal(v: AdValue): string {
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000)) : '0';
  return `"${safeString(v)}"`;
}

/**
 * The success line (without its newline). String values are cut so the line fits
 * MAX_LINE: the longest string first (a hold reason quoting a server message).
 */
export function statusLine(batchJobId: string, jobStatus: number, extra: Array<[string, AdValue]> = []): string {
  const fields: Array<[string, AdValue]> = [['BatchjobId', batchJobId], ['JobStatus', jobStatus], ...extra];
  const render = () => `0[${fields.map(([k, v]) => `${k}=${literal(v)}`).join('; ')}]`;
  let line = render();
  while (line.length > MAX_LINE) {
    let longest = -1;
    fields.forEach(([, v], i) => {
      if (typeof v === 'string' && i > 0 && (longest < 0 || v.length > (fields[longest]![1] as string).length)) longest = i;
    });
    if (longest < 0) break;
    const s = fields[longest]![1] as string;
    const cut = Math.max(0, s.length - (line.length - MAX_LINE) - 3);
    fields[longest]![1] = s.slice(0, cut) + '...';
    line = render();
  }
  return line;
}

/** The error line (without its newline): `1<text>`, one line, cut to fit. */
export function errorLine(text: string): string {
  const one = safeString(text).trim() || 'error';
  return `1${one.length > MAX_LINE - 1 ? one.slice(0, MAX_LINE - 4) + '...' : one}`;
}
