/**
 * Texts the protocol server prints or logs: error messages made fit for one token (bounded
 * length; line breaks kept, escaped when printed) and the tokens a handler returns checked
 * before they are joined; and such a message as lines for a person (asLines).
 */
import type { Logger } from '../log.js';

export const DEFAULT_MAX_MESSAGE_CHARS = 4096;

/**
 * Cuts a long message to at most `max` characters, keeping a little of its start and most
 * of its end: the gridmanager parses the end of some errors (`... no batch named <name>`),
 * and BOINC can return a megabyte of SQL as an error text.
 */
export function cutMessage(message: string, max = DEFAULT_MAX_MESSAGE_CHARS): string {
  if (message.length <= max) return message;
  const marker = ` [...${message.length - max} characters cut...] `;
  if (marker.length >= max) {
    const cut = message.length - max;
    return message.slice(isLowSurrogate(message.charCodeAt(cut)) ? cut + 1 : cut);
  }
  let head = Math.floor((max - marker.length) / 3);
  let tail = max - marker.length - head;
  // Never cut a surrogate pair in two (it would print as garbage).
  if (isHighSurrogate(message.charCodeAt(head - 1))) head--;
  if (isLowSurrogate(message.charCodeAt(message.length - tail))) tail--;
  return message.slice(0, head) + marker + message.slice(message.length - tail);
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * An error's message as the error result's token: the text as it is, line breaks included.
 * escapeToken puts a backslash before CR and LF as HTCondor's escapeGahpString() does, and
 * the gridmanager's reader keeps an escaped line break inside the token, so a server's
 * multi-line error reaches HoldReason unchanged (docs/gahp-protocol.md, "Lines and tokens").
 */
export function errorText(err: unknown): string {
  let raw: string;
  try {
    raw = String(err instanceof Error ? err.message : err);
  } catch {
    raw = 'unprintable error';
  }
  return raw.trim().length > 0 ? raw : 'unknown error';
}

/**
 * A message for a person, as lines: a CR LF or a lone CR (which on a terminal would send the
 * cursor back over the text) becomes a line break. The prompt and the CLI print through this.
 */
export function asLines(text: string): string {
  return text.replace(/\r\n?/g, '\n');
}

/**
 * A handler's result must be a non-empty list of non-empty strings: an empty token cannot
 * be printed (it would vanish and shift every later token), so such a result is a bug,
 * reported as an error result of one token, which the client takes as a failure.
 */
export function checkResultTokens(tokens: unknown): string[] {
  if (!Array.isArray(tokens)) throw new Error('internal error: the command returned no result tokens');
  if (tokens.length === 0) return ['NULL'];
  for (const t of tokens) {
    if (typeof t !== 'string' || t.length === 0) throw new Error('internal error: the command returned an empty or non-text result token');
  }
  return tokens as string[];
}

/** A protocol line cut for the debug log. */
export function clip(line: string, fullLength = line.length): string {
  return line.length > 2000 ? line.slice(0, 2000) + `...[${fullLength} chars]` : line;
}

/**
 * A line cut for the log, redacted before it is cut (so a cut never leaves half a secret)
 * but without scanning all of a multi-MiB line.
 */
export function clipRedacted(log: Logger, line: string): string {
  return clip(log.redact(line.length > 8192 ? line.slice(0, 8192) : line), line.length);
}
