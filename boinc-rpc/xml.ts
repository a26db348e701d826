/**
 * XML for the BOINC web RPCs: building requests (every value escaped) and reading replies
 * leniently. BOINC's PHP handlers print replies with `echo`, so a reply may hold raw `<`, `&`
 * and quotes inside <error_msg>, PHP warnings as HTML in the middle, or end abruptly after a
 * PHP fatal error. A strict XML parser rejects all of that, so replies are read with small
 * index-based extractors for the known, flat element structure instead.
 */
import { isUtf8 } from 'node:buffer';
import { BoincRpcError, type DuplicateOf, type RpcErrorOptions } from './errors.js';

// ---------------------------------------------------------------------------------------------
// Requests

const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Escapes a value for XML element content (and attribute values). */
const NEEDS_ESCAPE = /[&<>"']/;

export function xmlEscape(value: string): string {
  // Most values (job names, physical names) hold nothing to escape: no replace() then.
  return NEEDS_ESCAPE.test(value) ? value.replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!) : value;
}

/** A number as the server parses it; refuses NaN and infinities. */
export function xmlNumber(rpc: string, what: string, n: number): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) {
    throw new BoincRpcError(rpc, 'local', `invalid ${what}: ${String(n)}`);
  }
  return String(n);
}

/** One line of a request document under `root`: `<name>escaped value</name>`. */
export function xmlElement(root: string, name: string, value: string | number): string {
  const text = typeof value === 'number' ? xmlNumber(root, name, value) : xmlEscape(value);
  return `<${name}>${text}</${name}>\n`;
}

/** Builds a request document line by line; every value goes through xmlEscape. */
export class XmlRequest {
  private readonly parts: string[];

  constructor(private readonly root: string) {
    this.parts = [`<${root}>\n`];
  }

  /** `<name>escaped value</name>` */
  el(name: string, value: string | number): this {
    this.parts.push(xmlElement(this.root, name, value));
    return this;
  }

  /** Same, but only when value is defined. */
  opt(name: string, value: string | number | undefined): this {
    if (value !== undefined) this.el(name, value);
    return this;
  }

  open(name: string): this {
    this.parts.push(`<${name}>\n`);
    return this;
  }

  close(name: string): this {
    this.parts.push(`</${name}>\n`);
    return this;
  }

  /** Markup put in as it is: only for XML the caller built from the server's own (e.g. a template). */
  markup(xml: string): this {
    this.parts.push(xml);
    return this;
  }

  toString(): string {
    return this.parts.join('') + `</${this.root}>\n`;
  }
}

// ---------------------------------------------------------------------------------------------
// Entities and HTML

const NAMED_ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'", nbsp: '\u00a0' };

/** Decodes &lt; &gt; &amp; &quot; &apos; &#39; &#x27; ...; unknown entities are left as they are. */
export function decodeEntities(s: string): string {
  if (s.indexOf('&') < 0) return s;
  return s.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,6});/g, (whole, body: string) => {
    if (body[0] === '#') {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      if (!Number.isFinite(code) || code < 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return whole;
      return String.fromCodePoint(code);
    }
    const named = NAMED_ENTITIES[body];
    return named ?? whole;
  });
}

/** Text of an HTML fragment: tags removed, entities decoded, whitespace collapsed. */
export function stripHtml(s: string): string {
  return decodeEntities(s.replace(/<br\s*\/?>/gi, ' ').replace(/<[^>]*>/g, '')).replace(/\s+/g, ' ').trim();
}

// ---------------------------------------------------------------------------------------------
// Replies

/**
 * PHP diagnostics printed into a reply with display_errors on and html_errors on, e.g.
 * `<br />\n<b>Deprecated</b>:  Creation of dynamic property ... on line <b>187</b><br />`.
 * (Fatal errors are not noise: they are detected before this is applied.)
 */
const PHP_NOISE = /(?:<br \/>\s*)?<b>(?:Warning|Notice|Deprecated|Strict Standards|User Warning|User Notice|User Deprecated)<\/b>:[\s\S]{0,65536}?<br \/>/g;
const PHP_FATAL = /<b>(?:Fatal error|Parse error|Recoverable fatal error|Catchable fatal error)<\/b>:/;

/** Removes PHP warning/notice/deprecation blocks printed inside a reply. */
export function stripPhpNoise(text: string): string {
  if (text.indexOf('<b>') < 0) return text;
  return text.replace(PHP_NOISE, '');
}

/** The first element name of a document, after the XML declaration, comments and `<br />`s. */
export function rootElementName(text: string): string | undefined {
  const re = /<([A-Za-z_][\w.:-]*)[^>]*>/g;
  for (;;) {
    const m = re.exec(text);
    if (!m) return undefined;
    const name = m[1]!;
    if (name === 'br' || name === 'b') continue;
    return name;
  }
}

export interface ParsedReply {
  /** The reply text (decoded by decodeServerText, PHP noise removed). */
  text: string;
  root: string;
}

/**
 * A string equal to `s` that holds its own characters. V8 makes a slice of a long string
 * (13 characters or more) point into it, keeping the whole string alive while the slice
 * lives: a name or time parsed from a reply and kept (in a ledger, a status table) would
 * keep the whole reply, megabytes for a large cluster (issue 44, item 10).
 */
export function ownCopy(s: string): string {
  return Buffer.from(s, 'utf8').toString('utf8');
}

/**
 * Decodes text the server sent. Replies declare ISO-8859-1 (and the Content-Type UTF-8),
 * but carry the database's bytes as stored, UTF-8 on a default MariaDB
 * (docs/boinc-server.md): valid UTF-8 is read as UTF-8, anything else as Latin-1 (which
 * any byte sequence is, so nothing is lost or replaced).
 */
export function decodeServerText(bytes: Buffer): string {
  return isUtf8(bytes) ? bytes.toString('utf8') : bytes.toString('latin1');
}

/** Decodes a reply body (decodeServerText). */
export function decodeReply(body: Buffer | string): string {
  return typeof body === 'string' ? body : decodeServerText(body);
}

function shorten(s: string, max = 300): string {
  return s.length > max ? s.slice(0, max) + '...' : s;
}

/**
 * Checks a reply and returns its cleaned text, or throws the BoincRpcError it stands for:
 * - a PHP fatal error (with or without a closing tag): kind 'fatal', uncertain, message = the
 *   error's text stripped of HTML;
 * - an <error> element: kind 'server' with error_num and the server's text unchanged;
 * - a reply without the closing tag of its root element: kind 'protocol', uncertain (cut short);
 * - an empty or non-XML reply: kind 'protocol'.
 * `expectedRoot` is the request's root name (the real server wraps replies in it).
 * `jobErrorFlags`: the reply may hold `<error>word</error>` elements that are data, not an
 * error: query_batch with job details flags each job BOINC gave up on so
 * (`<error>too_many_error_results</error>`), while the server's errors always hold
 * `<error_num>` and `<error_msg>`.
 */
export function checkReply(rpc: string, body: Buffer | string, expectedRoot: string, opts: { jobErrorFlags?: boolean } = {}): ParsedReply {
  const raw = decodeReply(body);
  const fatal = raw.includes(' error</b>:') ? PHP_FATAL.exec(raw) : null;
  if (fatal) {
    // From the start of the fatal block (the `<br />` before it) to the end of the body.
    const start = fatal.index;
    const message = stripHtml(raw.slice(start));
    throw new BoincRpcError(rpc, 'fatal', message || 'PHP fatal error', { uncertain: true, ...duplicateEntry(message) });
  }
  const text = stripPhpNoise(raw);
  const errors = opts.jobErrorFlags && text.includes('<error>') ? text.replace(JOB_ERROR_FLAG, '') : text;
  const errAt = errors.indexOf('<error>');
  if (errAt >= 0 && errors.indexOf('</error>', errAt) < 0) {
    // An error element the connection cut before its end: the message may be cut too.
    const outer = rootElementName(text.replace(/^\s*<\?xml[^>]*\?>/, ''));
    if (!outer || outer === 'error' || text.lastIndexOf(`</${outer}>`) < 0) {
      throw new BoincRpcError(rpc, 'protocol', `${CUT_SHORT} (no closing </error> tag)`, { uncertain: true, code: 'cut-short' });
    }
  }
  const err = extractError(errors);
  if (err) {
    const data = serverErrorData(err.message);
    throw new BoincRpcError(rpc, 'server', err.message, err.errorNum === undefined ? data : { errorNum: err.errorNum, ...data });
  }
  const root = rootElementName(text.replace(/^\s*<\?xml[^>]*\?>/, ''));
  if (!root) {
    // The XML declaration and nothing (or half a tag) after it: cut short.
    if (/^\s*<\?xml/.test(text)) throw new BoincRpcError(rpc, 'protocol', `${CUT_SHORT} (no root element)`, { uncertain: true, code: 'cut-short' });
    throw new BoincRpcError(rpc, 'protocol', text.trim() ? `not an XML reply: ${shorten(text.trim())}` : 'empty reply');
  }
  const complete =
    text.lastIndexOf(`</${expectedRoot}>`) >= 0 ||
    text.lastIndexOf(`</${root}>`) >= 0 ||
    new RegExp(`<${root}\\s*/>`).test(text);
  if (!complete) {
    throw new BoincRpcError(rpc, 'protocol', `${CUT_SHORT} (no closing </${root}> tag)`, { uncertain: true, code: 'cut-short' });
  }
  return { text, root };
}

const CUT_SHORT = 'reply cut short';
/** A job's flag in query_batch's job details: one word, no child elements. */
const JOB_ERROR_FLAG = /<error>[a-z_]+<\/error>/g;

type ErrorData = Pick<RpcErrorOptions, 'code' | 'duplicateOf' | 'batchName'>;

/** Database keys of a file's registration (job_file): `jf_name`, or `md5` on older schemas. */
const FILE_KEYS = new Set(['jf_name', 'md5']);
/** The key of a file's link to a batch (batch_file_assoc). */
const LINK_KEYS = new Set(['job_file_id']);

/**
 * `Duplicate entry 'V' for key 'K'` (MySQL; MariaDB may write `table.K`) in a fatal or
 * <error> text: code `duplicate-entry` and which row (DuplicateOf), else nothing.
 */
function duplicateEntry(text: string): ErrorData {
  const at = text.search(/Duplicate entry/i);
  if (at < 0) return {};
  const key = /^Duplicate entry [\s\S]*? for key '([^']*)'/i.exec(text.slice(at, at + 4096))?.[1];
  const name = key?.slice(key.lastIndexOf('.') + 1) ?? '';
  const duplicateOf: DuplicateOf = FILE_KEYS.has(name) ? 'file' : LINK_KEYS.has(name) ? 'link' : 'other';
  return { code: 'duplicate-entry', duplicateOf };
}

/**
 * What an <error> text means for the caller: a duplicate entry, a batch the server does not
 * have (`no such batch`, `no batch named NAME`, `no batch ID`), or a refusal that repeating
 * cannot change (authenticator, access, immutability, ownership). The text stays as it is.
 */
export function serverErrorData(text: string): ErrorData {
  const duplicate = duplicateEntry(text);
  if (duplicate.code) return duplicate;
  if (/no such batch|\bno batch\b/i.test(text)) {
    const named = /no batch named (\S+)/.exec(text)?.[1];
    return named === undefined ? { code: 'no-such-batch' } : { code: 'no-such-batch', batchName: named };
  }
  if (/authenticator|access|immutab|not owner/i.test(text)) return { code: 'refused' };
  return {};
}

/**
 * `<error><error_num>N</error_num><error_msg>TEXT</error_msg></error>` where TEXT is not
 * escaped: it runs to the LAST `</error_msg>` (older servers: `<message>`).
 */
export function extractError(text: string): { errorNum?: number; message: string } | undefined {
  const at = text.indexOf('<error>');
  if (at < 0) return undefined;
  let errorNum: number | undefined;
  const numStart = text.indexOf('<error_num>', at);
  if (numStart >= 0) {
    const numEnd = text.indexOf('</error_num>', numStart);
    const n = Number.parseInt(text.slice(numStart + 11, numEnd < 0 ? undefined : numEnd).trim(), 10);
    if (Number.isFinite(n)) errorNum = n;
  }
  for (const tag of ['error_msg', 'message']) {
    const open = `<${tag}>`;
    const s = text.indexOf(open, at);
    if (s < 0) continue;
    const from = s + open.length;
    let e = text.lastIndexOf(`</${tag}>`);
    if (e < from) {
      // No closing tag: up to </error> or the end.
      e = text.indexOf('</error>', from);
      if (e < 0) e = text.length;
    }
    return { errorNum, message: text.slice(from, e) };
  }
  const end = text.indexOf('</error>', at);
  return { errorNum, message: stripHtml(text.slice(at + 7, end < 0 ? undefined : end)) || 'unspecified error' };
}

/**
 * Text content of the first `<name>` element at or after `from` (and before `to` when given),
 * or undefined. Handles `<name/>` (empty) and `<name>` with attributes is not expected.
 */
export function tagText(text: string, name: string, from = 0, to = text.length): string | undefined {
  const open = `<${name}>`;
  const s = text.indexOf(open, from);
  if (s < 0 || s >= to) {
    const empty = text.indexOf(`<${name}/>`, from);
    return empty >= 0 && empty < to ? '' : undefined;
  }
  const e = text.indexOf(`</${name}>`, s + open.length);
  if (e < 0 || e > to) return undefined;
  return text.slice(s + open.length, e);
}

/** Text contents of every `<name>` element between from and to, in order. */
export function allTagTexts(text: string, name: string, from = 0, to = text.length): string[] {
  const open = `<${name}>`;
  const close = `</${name}>`;
  const out: string[] = [];
  let pos = from;
  for (;;) {
    const s = text.indexOf(open, pos);
    if (s < 0 || s >= to) break;
    const e = text.indexOf(close, s + open.length);
    if (e < 0 || e > to) break;
    out.push(text.slice(s + open.length, e));
    pos = e + close.length;
  }
  return out;
}

/** Decoded, trimmed text of an element (CDATA sections unwrapped). */
export function textValue(raw: string): string {
  const t = raw.trim();
  if (t.startsWith('<![CDATA[')) {
    const end = t.lastIndexOf(']]>');
    return t.slice(9, end < 0 ? undefined : end);
  }
  return decodeEntities(t);
}

export function intValue(rpc: string, name: string, raw: string | undefined): number {
  const n = raw === undefined ? NaN : Number(raw.trim());
  if (!Number.isFinite(n)) {
    throw new BoincRpcError(rpc, 'protocol', raw === undefined ? `reply lacks <${name}>` : `bad <${name}> in reply: ${shorten(raw)}`);
  }
  return n;
}

export function optNumber(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const t = raw.trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}
