/**
 * HTTP for the BOINC RPCs (http.ts, on got, for the POSTs and the downloads): a timeout per
 * attempt, retries with exponential backoff and jitter for calls that are safe to repeat,
 * bounded concurrency,
 * streamed multipart uploads and streamed downloads, cancellation by AbortSignal.
 * Everything it reports is redacted.
 *
 * Time to an error is bounded (README, "Retries and time to error"): a call makes a new
 * attempt only while less than 2 x timeoutMs have passed since its first attempt started
 * (a download that received data restarts that clock), and never after a second attempt
 * that got no answer within the timeout. So a server that hangs fails a call after two
 * timeouts (plus one backoff), and fast failures (5xx, connection refused) are retried up to
 * `retries` times within the same budget.
 */
import PQueue from 'p-queue';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { BoincRpcError } from './errors.js';
import { xmlEscape } from './xml.js';
import { ByteCount, ErrorBodyCheck, ErrorBodyFound, MAX_REDIRECTS, REDIRECTS, readSome, redirectTarget, stripTags, webPageError } from './download-body.js';
import { redactBoincCredentials } from './redact.js';
import { MAX_TIMED_OUT_ATTEMPTS, Retries, sleep, type RetryPolicy } from './retry.js';
import { HttpClient, FileChangedError, HttpFailure, HttpTimeout, ReplyTooLarge, type DownloadReply } from './http.js';
import { requestForm, type FilePart } from './multipart.js';
import { proxySecrets, type NetworkSettings } from './network.js';

export interface TransportOptions {
  timeoutMs: number;
  /** Longest RPC reply read (downloads streamed to files are not limited). */
  maxReplyBytes: number;
  retries: number;
  retryBaseMs: number;
  concurrency: number;
  authenticator: string;
  /** BoincClientOptions.network: proxy and trust settings. */
  network?: NetworkSettings;
  log?: (line: string) => void;
}

export interface PostOptions {
  /** Safe to repeat: retried on connection errors, timeouts, 5xx and cut-short replies. */
  idempotent: boolean;
  /** Files attached as file_0, file_1, ... (streamed from disk). */
  files?: Array<{ path: string; name: string }>;
  /** Checks the reply (throws BoincRpcError); a retryable failure is retried when idempotent. */
  parse: (body: Buffer) => void;
  /** Stops the call wherever it is (queued, in flight, backing off): a 'local' error, `aborted`. */
  signal?: AbortSignal;
}

/** A call makes no new attempt once this many timeouts have passed since its first attempt began. */
export const CALL_BUDGET_TIMEOUTS = 2;
/** Longest wait between two attempts of a call. */
const MAX_BACKOFF_MS = 30_000;

const USER_AGENT = 'boinc-gahp';

/** Rejection of a call whose signal fired while it waited for a slot. */
class AbortedWhileQueued extends Error {}

/** Codes of failures that happen before the request could reach the server. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ERR_INVALID_URL', 'EPROXY', 'EPROXYSETTING']);


export class Transport {
  private readonly http: HttpClient;
  private readonly queue: PQueue;
  private readonly secrets: string[];
  private closed = false;

  constructor(private readonly opts: TransportOptions) {
    this.http = new HttpClient(opts.network, opts.timeoutMs);
    this.queue = new PQueue({ concurrency: Math.max(1, opts.concurrency) });
    const a = opts.authenticator;
    const authenticator = a ? [a, encodeURIComponent(a), xmlEscape(a)] : [];
    // The proxy's user and password are secrets as the authenticator is.
    this.secrets = [...new Set([...authenticator, ...proxySecrets(opts.network)])].filter((s) => s.length > 0).sort((x, y) => y.length - x.length);
  }

  /** Removes the authenticator (raw, URL- or XML-encoded), the proxy's credentials and whatever stands where BOINC's wire format carries an authenticator. */
  redact(s: string): string {
    let out = s;
    for (const secret of this.secrets) {
      if (out.includes(secret)) out = out.split(secret).join('***');
    }
    return redactBoincCredentials(out);
  }

  private log(line: string): void {
    if (this.opts.log) {
      try {
        this.opts.log(this.redact(line));
      } catch {
        /* a failing log sink must not fail the call */
      }
    }
  }

  /** The same error with secrets removed from its message. */
  redactError(err: BoincRpcError): BoincRpcError {
    const clean = this.redact(err.serverMessage);
    const batchName = err.batchName === undefined ? undefined : this.redact(err.batchName);
    if (clean === err.serverMessage && batchName === err.batchName) return err;
    return new BoincRpcError(err.rpc, err.kind, clean, batchName === undefined ? err.options : { ...err.options, batchName });
  }

  /**
   * The retries of one call: up to `retries` more attempts, none after MAX_TIMED_OUT_ATTEMPTS
   * timed out, none starting CALL_BUDGET_TIMEOUTS x timeoutMs or later after the first began.
   */
  private retries(): Retries {
    const policy: RetryPolicy = {
      baseMs: this.opts.retryBaseMs,
      capMs: MAX_BACKOFF_MS,
      jitter: true,
      maxAttempts: Math.max(0, this.opts.retries) + 1,
      maxTimeouts: MAX_TIMED_OUT_ATTEMPTS,
      budgetMs: CALL_BUDGET_TIMEOUTS * this.opts.timeoutMs,
    };
    return new Retries(policy);
  }

  /** An HTTP failure as a BoincRpcError, uncertain unless the request cannot have reached the server. */
  private transportError(rpc: string, err: unknown): BoincRpcError {
    if (err instanceof BoincRpcError) return err;
    if (err instanceof FileChangedError) return new BoincRpcError(rpc, 'local', this.redact(err.message));
    if (err instanceof ReplyTooLarge) {
      // The request was answered: it may have taken effect. Not retried (kind 'protocol').
      return new BoincRpcError(rpc, 'protocol', err.message, { code: 'reply-too-large', uncertain: true, httpStatus: err.status });
    }
    const e = err as { code?: string; message?: string };
    const code = e?.code;
    // A proxy setting that cannot work (not a URL, a scheme not supported): nothing was sent.
    if (code === 'EPROXYSETTING') return new BoincRpcError(rpc, 'local', this.redact(e.message ?? ''), { code: 'proxy' });
    const timeout = err instanceof HttpTimeout;
    const hop = err instanceof HttpFailure ? err.hop : undefined;
    // A certificate problem fails before anything is sent, as does a proxy that refused.
    const notSent = timeout ? err.event === 'connect' : hop === 'tls' || (code !== undefined && NOT_SENT_CODES.has(code));
    // The messages of the proxy's and the certificate's failures say what they are already.
    const message = timeout || hop ? (e.message ?? '') : `${code ? code + ': ' : ''}${e?.message ?? String(err)}`;
    return new BoincRpcError(rpc, 'transport', this.redact(message), {
      uncertain: !notSent,
      ...(timeout ? { timedOut: true } : {}),
      ...(hop === 'proxy' ? { code: 'proxy' as const } : hop === 'tls' ? { code: 'certificate' as const } : {}),
      ...(err instanceof HttpFailure && err.proxyStatus !== undefined ? { httpStatus: err.proxyStatus } : {}),
    });
  }

  /** The error of a call stopped by its signal; `mayHaveReached`: an attempt was under way. */
  private abortedError(rpc: string, signal: AbortSignal, mayHaveReached: boolean): BoincRpcError {
    const r: unknown = signal.reason;
    let why = '';
    if (typeof r === 'string' && r) why = `: ${r}`;
    else if (r instanceof Error && r.name !== 'AbortError' && r.message) why = `: ${r.message}`;
    return new BoincRpcError(rpc, 'local', this.redact(`aborted${why}`), { aborted: true, uncertain: mayHaveReached });
  }

  /**
   * Runs fn when the concurrency queue has a slot. With a signal, a call still waiting for
   * its slot rejects at once when the signal fires (fn then never runs); once fn has started
   * it must handle the signal itself.
   */
  private inQueue<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (!signal) return this.queue.add(fn);
    if (signal.aborted) return Promise.reject(new AbortedWhileQueued());
    return new Promise<T>((resolve, reject) => {
      let started = false;
      const onAbort = () => {
        if (!started) reject(new AbortedWhileQueued());
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue
        .add(async () => {
          signal.removeEventListener('abort', onAbort);
          if (signal.aborted) return; // already rejected: free the slot at once
          started = true;
          resolve(await fn());
        })
        .catch(reject);
    });
  }

  /**
   * Safe calls are repeated after any transport failure and after a cut-short reply; the
   * others only when the request cannot have reached the server (connection refused, DNS).
   */
  private isRetryable(err: BoincRpcError, idempotent: boolean): boolean {
    // A certificate not trusted, a proxy setting that cannot work or a proxy asking for
    // credentials: repeating cannot change them.
    if (err.code === 'certificate' || (err.code === 'proxy' && err.options.httpStatus === 407)) return false;
    if (!idempotent) return err.kind === 'transport' && !err.uncertain;
    return err.kind === 'transport' || err.code === 'cut-short';
  }

  /**
   * The retry loop of every call: attempts run in the concurrency queue until one succeeds,
   * the failure is not `retryable`, or the call's Retries allow no other. The signal stops
   * it wherever it is; `uncertainWhenAborted`: an attempt under way may have taken effect.
   * An attempt that received data (`progress.bytes`) was no hang: the budget starts again
   * (a long download cut near its end is retried; the attempts are still bounded).
   */
  private async repeat<T>(
    rpc: string,
    signal: AbortSignal | undefined,
    uncertainWhenAborted: boolean,
    retryable: (e: BoincRpcError) => boolean,
    attempt: (progress: { bytes: number }) => Promise<T>,
  ): Promise<T> {
    const retries = this.retries();
    for (;;) {
      if (signal?.aborted) throw this.abortedError(rpc, signal, false);
      let started = false;
      const progress = { bytes: 0 };
      try {
        // inQueue, not p-queue's own signal: that would reject at once while a running
        // download still cleans up its temp file.
        return await this.inQueue(() => {
          started = true;
          retries.started();
          return attempt(progress);
        }, signal);
      } catch (err) {
        if (signal?.aborted) throw this.abortedError(rpc, signal, started && uncertainWhenAborted);
        const e = err instanceof BoincRpcError ? err : this.transportError(rpc, err);
        if (progress.bytes > 0) retries.restart();
        const delay = retries.next(e);
        if (delay === undefined || this.closed || !retryable(e)) throw this.redactError(e);
        this.log(`boinc-rpc ${rpc}: ${e.message}; retry ${retries.failed}/${retries.policy.maxAttempts - 1} in ${delay} ms`);
        await sleep(delay, signal);
      }
    }
  }

  /** POSTs `request` (one multipart field `request`, plus file parts) to projectUrl+script. */
  post(rpc: string, url: string, request: string, opts: PostOptions): Promise<void> {
    return this.repeat(rpc, opts.signal, true, (e) => this.isRetryable(e, opts.idempotent), () => this.postOnce(rpc, url, request, opts));
  }

  /**
   * The file parts of an upload, each stat'ed now (its size goes into the body's length).
   * Synchronous stats: a few microseconds each for the at most max_file_uploads files of a
   * request, where one thread-pool round trip per file, one after another, held the request
   * back by milliseconds (more on a busy machine) on a cold BOINC_SUBMIT's critical path.
   */
  private fileParts(rpc: string, files: PostOptions['files']): FilePart[] {
    const parts: FilePart[] = [];
    for (const f of files ?? []) {
      try {
        const st = fs.statSync(f.path);
        if (!st.isFile()) throw new Error('not a regular file');
        parts.push({ path: f.path, size: st.size, name: f.name });
      } catch (e) {
        throw new BoincRpcError(rpc, 'local', `cannot read ${f.path}: ${(e as Error).message}`);
      }
    }
    return parts;
  }

  private async postOnce(rpc: string, url: string, request: string, opts: PostOptions): Promise<void> {
    if (this.closed) throw new BoincRpcError(rpc, 'local', 'client closed');
    const started = Date.now();
    const parts = this.fileParts(rpc, opts.files);
    const script = url.slice(url.lastIndexOf('/') + 1);
    let res;
    const form = requestForm(request, parts);
    try {
      res = await this.http.post(url, form.form, {
        // Uploads may take long: there the timeout is for inactivity and for the answer.
        timeouts: opts.files ? { idle: this.opts.timeoutMs } : { total: this.opts.timeoutMs },
        userAgent: USER_AGENT,
        maxReplyBytes: this.opts.maxReplyBytes,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (err) {
      const e = opts.signal?.aborted ? this.abortedError(rpc, opts.signal, true) : this.transportError(rpc, err);
      this.log(`boinc-rpc ${rpc} ${script} failed after ${Date.now() - started} ms: ${e.serverMessage}`);
      throw e;
    } finally {
      form.close();
    }
    const status = res.status;
    const body = res.body;
    this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} ${body.length} bytes in ${Date.now() - started} ms`);
    if (status >= 500) {
      // Through a forwarding proxy a 5xx may be the proxy's own (it could not reach the
      // project): the proxy is named, with the start of what was said.
      const via = res.via ? ` from proxy ${res.via} (its own answer or the project's): ${stripTags(body.toString('latin1')).slice(0, 200)}` : '';
      throw new BoincRpcError(rpc, 'transport', `HTTP ${status}${res.statusMessage ? ' ' + res.statusMessage : ''}${via}`, {
        httpStatus: status,
        uncertain: true,
      });
    }
    if (status < 200 || status >= 300) {
      // A 404 most often means the URL is not the project's master URL: name what was asked.
      const where = status >= 300 && status < 400 && res.headers.location ? ` (redirect to ${res.headers.location})`
        : status === 404 ? ` for ${withoutCredentials(url)}: is ${withoutCredentials(url.slice(0, url.length - script.length))} the project's master URL (the one its ${script} is under)?` : '';
      throw new BoincRpcError(rpc, 'protocol', `HTTP ${status}${res.statusMessage ? ' ' + res.statusMessage : ''}${where}`, {
        httpStatus: status,
      });
    }
    opts.parse(body);
  }

  /**
   * GETs url into destPath: streamed to a temporary file beside it, renamed into place when
   * complete. A non-2xx status or a body starting `ERROR: ` leaves nothing behind. Only
   * transport failures are retried.
   */
  download(rpc: string, url: string, destPath: string, signal?: AbortSignal, destIsTemp = false, web?: WebLogin): Promise<{ bytes: number }> {
    return this.repeat(rpc, signal, false, (e) => e.kind === 'transport', (progress) => this.downloadOnce(rpc, url, destPath, destIsTemp, signal, progress, web));
  }

  private async downloadOnce(
    rpc: string, url: string, destPath: string, destIsTemp: boolean, signal: AbortSignal | undefined, progress: { bytes: number }, web: WebLogin | undefined,
  ): Promise<{ bytes: number }> {
    if (signal?.aborted) throw this.abortedError(rpc, signal, false);
    if (this.closed) throw new BoincRpcError(rpc, 'local', 'client closed');
    const started = Date.now();
    const dir = path.dirname(destPath);
    // A temp name of the caller's is written directly (one file and one rename less a fetch).
    const tmp = destIsTemp ? destPath : path.join(dir, `.${path.basename(destPath)}.${process.pid}.${randomBytes(6).toString('hex')}.part`);
    // The URL carries the authenticator (auth_str): a redirect is followed only within its
    // origin, or the next request would hand the secret to whoever the redirect names.
    const origin = new URL(url).origin;
    const script = new URL(url).pathname.replace(/^.*\//, '');
    let current = url;
    const headers = web ? { cookie: `auth=${web.authenticator}` } : undefined;
    let get = this.http.getStream(current, { idleMs: this.opts.timeoutMs, userAgent: USER_AGENT, ...(headers ? { headers } : {}) });
    let response: DownloadReply | undefined;
    let out: fs.WriteStream | undefined;
    let check: ErrorBodyCheck | ByteCount | undefined;
    // Whether the file is ours to remove on failure (not when the exclusive create failed).
    let created = false;
    const onAbort = () => {
      const e = this.abortedError(rpc, signal!, false);
      response?.body.destroy(e);
      get.destroy(e);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (let hops = 0; ; hops++) {
        response = await get.response;
        // A web page's redirect (to login_form.php, when the cookie is not taken) is an answer.
        const to = REDIRECTS.has(response.statusCode ?? 0) && !web ? redirectTarget(response.headers.location, current) : undefined;
        if (!to || to.origin !== origin || hops >= MAX_REDIRECTS) break;
        response.body.resume();
        current = to.href;
        get = this.http.getStream(current, { idleMs: this.opts.timeoutMs, userAgent: USER_AGENT });
      }
      const status = response.statusCode ?? 0;
      if (web && status >= 300 && status < 400) {
        response.body.resume();
        this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} in ${Date.now() - started} ms`);
        throw webRedirectError(rpc, status, response.headers.location, current);
      }
      const declared = web && status >= 200 && status < 300 ? webFileLength(response.headers) : undefined;
      if (declared !== undefined && typeof declared !== 'number') {
        const text = await readSome(response.body, 64 * 1024).catch(() => '');
        this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} page in ${Date.now() - started} ms`);
        const e = declared === 'page' ? webPageError(text) : { message: `the project has no file ${declared.missing}`, code: 'no-such-file' as const };
        throw new BoincRpcError(rpc, 'protocol', e.message, { httpStatus: status, ...(e.code ? { code: e.code } : {}) });
      }
      if (status < 200 || status >= 300) {
        const text = await readSome(response.body, 64 * 1024).catch(() => '');
        this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} in ${Date.now() - started} ms`);
        const to = status >= 300 && status < 400 ? redirectTarget(response.headers.location, current) : undefined;
        // Only the target's origin: its path and query may carry the authenticator on.
        const detail = !to ? stripTags(text) : to.origin !== origin ? `redirect to ${to.origin} not followed (another origin; the download URL carries the authenticator)` : `more than ${MAX_REDIRECTS} redirects`;
        throw new BoincRpcError(rpc, status >= 500 ? 'transport' : 'protocol', `HTTP ${status}${detail ? ': ' + detail : ''}`, {
          httpStatus: status,
        });
      }
      // get_output.php answers its errors as text; a web page's file is whatever it holds.
      check = web ? new ByteCount() : new ErrorBodyCheck();
      try {
        out = fs.createWriteStream(tmp, { flags: 'wx' });
        out.once('open', () => (created = true));
        await pipeline(response.body, check, out);
      } catch (err) {
        if (err instanceof ErrorBodyFound) {
          this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} error body in ${Date.now() - started} ms`);
          const gone = /^ERROR: no such file\b/.test(err.message);
          throw new BoincRpcError(rpc, 'protocol', err.message, { httpStatus: status, ...(gone ? { code: 'no-such-file' as const } : {}) });
        }
        throw err;
      }
      if (typeof declared === 'number' && check.bytes !== declared) {
        // The connection ended early: whatever arrived is not the file.
        throw new BoincRpcError(rpc, 'transport', `reply cut short: ${check.bytes} of ${declared} bytes`, { httpStatus: status });
      }
      if (!destIsTemp) await fsp.rename(tmp, destPath);
      this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} ${check.bytes} bytes in ${Date.now() - started} ms`);
      return { bytes: check.bytes };
    } catch (err) {
      progress.bytes = check?.bytes ?? 0;
      response?.body.destroy();
      get.destroy();
      if (out) {
        // The file may still be opening: wait until it is closed, or it reappears after rm.
        const ws = out;
        if (!ws.closed) await new Promise<void>((resolve) => { ws.once('close', () => resolve()); ws.destroy(); });
        if (created) await fsp.rm(tmp, { force: true }).catch(() => undefined);
      }
      if (err instanceof BoincRpcError) throw err;
      if (!(err instanceof HttpFailure) && !(err instanceof HttpTimeout) && (err as NodeJS.ErrnoException)?.syscall) {
        // A local file-system failure (destination directory missing, disk full, ...).
        const message = (err as Error).message;
        throw new BoincRpcError(rpc, 'local', `cannot write ${destPath}: ${message}`, { fileError: message.split(',')[0]! });
      }
      throw this.transportError(rpc, err);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * GETs a page of the project's web code, logged in by the `auth` cookie, and returns its
   * text (at most maxBytes read). A redirect is not followed: one to login_form.php (the
   * cookie not taken as a login) is code `refused`; any other non-2xx is an error. Only
   * transport failures are retried.
   */
  page(rpc: string, url: string, web: WebLogin, maxBytes: number, signal?: AbortSignal): Promise<string> {
    return this.repeat(rpc, signal, false, (e) => e.kind === 'transport', () => this.pageOnce(rpc, url, web, maxBytes, signal));
  }

  private async pageOnce(rpc: string, url: string, web: WebLogin, maxBytes: number, signal: AbortSignal | undefined): Promise<string> {
    if (signal?.aborted) throw this.abortedError(rpc, signal, false);
    if (this.closed) throw new BoincRpcError(rpc, 'local', 'client closed');
    const started = Date.now();
    const script = new URL(url).pathname.replace(/^.*\//, '');
    const get = this.http.getStream(url, { idleMs: this.opts.timeoutMs, userAgent: USER_AGENT, headers: { cookie: `auth=${web.authenticator}` } });
    let response: DownloadReply | undefined;
    const onAbort = () => get.destroy(this.abortedError(rpc, signal!, false));
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      response = await get.response;
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        response.body.resume();
        this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} in ${Date.now() - started} ms`);
        throw webRedirectError(rpc, status, response.headers.location, url);
      }
      const text = await readSome(response.body, maxBytes);
      this.log(`boinc-rpc ${rpc} ${script} HTTP ${status} ${text.length} chars in ${Date.now() - started} ms`);
      if (status < 200 || status >= 300) {
        throw new BoincRpcError(rpc, status >= 500 ? 'transport' : 'protocol', `HTTP ${status}${stripTags(text) ? ': ' + stripTags(text).slice(0, 200) : ''}`, { httpStatus: status });
      }
      return text;
    } catch (err) {
      response?.body.destroy();
      get.destroy();
      if (err instanceof BoincRpcError) throw err;
      throw this.transportError(rpc, err);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  close(): void {
    // Queued calls are not dropped (their promises would never settle): they start, see
    // `closed` and fail; calls in flight fail when their sockets are destroyed.
    this.closed = true;
    this.http.destroy();
  }
}

/** A download of BOINC's web pages (get_output3.php): logged in by the `auth` cookie, no redirect followed. */
export interface WebLogin {
  authenticator: string;
}

/**
 * What a web page's answer is (docs/boinc-server.md, "get_output3.php"): do_download()
 * sends a file with `Content-Disposition: attachment` and its size as Content-Length; the
 * size of a file that is not there is PHP's `false`, printed as nothing. Anything without
 * the attachment header is a page (error_page(), or PHP's complaints printed before the
 * headers could be sent).
 */
function webFileLength(headers: Record<string, string | string[] | undefined>): number | 'page' | { missing: string } {
  const disposition = String(headers['content-disposition'] ?? '');
  if (!/\battachment\b/i.test(disposition)) return 'page';
  const length = String(headers['content-length'] ?? '').trim();
  if (/^\d+$/.test(length)) return Number(length);
  return { missing: /filename=("?)([^";]*)\1/.exec(disposition)?.[2] ?? '(unnamed)' };
}

/**
 * The error for a web page's redirect, which is not followed: one to login_form.php is the
 * cookie not taken as a login (code `refused`); another names the origin and path it points to.
 */
function webRedirectError(rpc: string, status: number, location: string | undefined, from: string): BoincRpcError {
  const to = redirectTarget(location, from);
  if (to && /(^|\/)login_form\.php$/.test(to.pathname)) {
    return new BoincRpcError(rpc, 'protocol', `HTTP ${status} to login_form.php: the project's web pages did not take the authenticator as a login`, { httpStatus: status, code: 'refused' });
  }
  return new BoincRpcError(rpc, 'protocol', `HTTP ${status}: redirect${to ? ` to ${to.origin}${to.pathname}` : ''} not followed`, { httpStatus: status });
}

/** A URL to print: its user and password (Basic authorization) left out. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
}
