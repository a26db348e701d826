/**
 * Readers of the BOINC RPC replies, on text already passed through checkReply (no <error>,
 * no fatal error, PHP noise removed). Pure functions, index-based: no DOM is built, so a
 * query_batch2 reply of 100k jobs costs little more than its own string.
 */
import { BoincRpcError } from './errors.js';
import type { AppTemplates, BatchListing, CompletedJob, JobInstance, QueryBatch2Reply, QueryBatchReply } from './types.js';
import { allTagTexts, decodeEntities, intValue, optNumber, ownCopy, tagText, textValue } from './xml.js';

function protocol(rpc: string, message: string): BoincRpcError {
  return new BoincRpcError(rpc, 'protocol', message);
}

/** `<success>1</success>` or `<success/>` (upload_files). */
export function parseSuccess(rpc: string, text: string): void {
  if (text.indexOf('<success>') >= 0 || /<success\s*\/>/.test(text)) return;
  throw protocol(rpc, 'reply lacks <success>');
}

/** `<batch_id>N</batch_id>` with N > 0. */
export function parseBatchId(rpc: string, text: string): number {
  const id = intValue(rpc, 'batch_id', tagText(text, 'batch_id'));
  if (!Number.isInteger(id) || id <= 0) throw protocol(rpc, `bad <batch_id> in reply: ${id}`);
  return id;
}

/** Status words repeat 100k times: hand back shared constants, not slices of the reply. */
function internStatus(s: string): string {
  switch (s) {
    case 'DONE':
      return 'DONE';
    case 'IN_PROGRESS':
      return 'IN_PROGRESS';
    case 'UNSENT':
      return 'UNSENT';
    case 'ERROR':
      return 'ERROR';
    default:
      return s.trim();
  }
}

function cleanName(s: string): string {
  // Names never hold whitespace; trim only if the server indented them.
  const c0 = s.charCodeAt(0);
  const cl = s.charCodeAt(s.length - 1);
  if (c0 <= 32 || cl <= 32) s = s.trim();
  return s.indexOf('&') >= 0 ? decodeEntities(s) : s;
}

/**
 * query_batch2: `<server_time>T</server_time>`, then per batch asked `<batch_size>n</batch_size>`
 * followed by n `<job><job_name>..</job_name><status>..</status></job>`.
 * A dedicated forward scan with indexOf: linear in the reply, a few allocations per job.
 */
export function parseQueryBatch2(rpc: string, text: string, batchCount: number): QueryBatch2Reply {
  const st = tagText(text, 'server_time');
  if (st === undefined) throw protocol(rpc, 'reply lacks <server_time>');
  // Its own copy: the ledger keeps each batch's last server_time as long as the batch.
  const serverTime = ownCopy(st.trim());
  const batches: QueryBatch2Reply['batches'] = [];
  let pos = text.indexOf('</server_time>') + 14;
  let bs = text.indexOf('<batch_size>', pos);
  while (bs >= 0) {
    const bsEnd = text.indexOf('</batch_size>', bs);
    if (bsEnd < 0) throw protocol(rpc, 'unterminated <batch_size>');
    const n = Number(text.slice(bs + 12, bsEnd).trim());
    if (!Number.isInteger(n) || n < 0) throw protocol(rpc, `bad <batch_size>: ${text.slice(bs + 12, Math.min(bsEnd, bs + 40))}`);
    pos = bsEnd + 13;
    const next = text.indexOf('<batch_size>', pos);
    const limit = next < 0 ? text.length : next;
    const jobs = new Array<{ name: string; status: string }>(n);
    for (let i = 0; i < n; i++) {
      const j = text.indexOf('<job>', pos);
      if (j < 0 || j >= limit) throw protocol(rpc, `batch ${batches.length}: ${i} <job> elements, <batch_size> said ${n}`);
      const je = text.indexOf('</job>', j + 5);
      if (je < 0 || je > limit) throw protocol(rpc, 'unterminated <job>');
      const ns = text.indexOf('<job_name>', j + 5);
      const ne = ns < 0 || ns > je ? -1 : text.indexOf('</job_name>', ns + 10);
      const ss = text.indexOf('<status>', j + 5);
      const se = ss < 0 || ss > je ? -1 : text.indexOf('</status>', ss + 8);
      if (ne < 0 || ne > je || se < 0 || se > je) throw protocol(rpc, `<job> without <job_name> and <status>: ${text.slice(j, Math.min(je + 6, j + 200))}`);
      jobs[i] = { name: cleanName(text.slice(ns + 10, ne)), status: internStatus(text.slice(ss + 8, se)) };
      pos = je + 6;
    }
    const extra = text.indexOf('<job>', pos);
    if (extra >= 0 && extra < limit) throw protocol(rpc, `batch ${batches.length}: more <job> elements than <batch_size> ${n}`);
    batches.push({ jobs });
    bs = next;
  }
  if (batches.length !== batchCount) {
    throw protocol(rpc, `reply has ${batches.length} batches, ${batchCount} were asked`);
  }
  return { serverTime, batches };
}

/**
 * query_batch: batch parameters, then `<job>` elements (id, name, canonical_instance_id; with
 * job details the status, the error flags and the exit status of each failed instance).
 */
export function parseQueryBatch(rpc: string, text: string): QueryBatchReply {
  const firstJob = text.indexOf('<job>');
  const headEnd = firstJob < 0 ? text.length : firstJob;
  const head = (name: string) => tagText(text, name, 0, headEnd);
  const id = intValue(rpc, 'id', head('id'));
  const nameRaw = head('name');
  const jobs: QueryBatchReply['jobs'] = [];
  let pos = headEnd;
  for (;;) {
    const j = text.indexOf('<job>', pos);
    if (j < 0) break;
    const je = text.indexOf('</job>', j + 5);
    if (je < 0) throw protocol(rpc, 'unterminated <job>');
    const seg = text.slice(j + 5, je);
    const job: QueryBatchReply['jobs'][number] = {
      id: intValue(rpc, 'job id', tagText(seg, 'id')),
      name: cleanName(tagText(seg, 'name') ?? ''),
    };
    const canon = optNumber(tagText(seg, 'canonical_instance_id'));
    if (canon !== undefined) job.canonicalInstanceId = canon;
    const status = tagText(seg, 'status');
    if (status !== undefined) job.status = internStatus(status.trim());
    // Job details (show_job_details): the flags and failed instances' exit statuses of a job BOINC gave up on.
    if (seg.indexOf('<error>') >= 0) job.errors = allTagTexts(seg, 'error').map((e) => e.trim());
    if (seg.indexOf('<exit_status>') >= 0) {
      job.exitStatuses = allTagTexts(seg, 'exit_status').map((e) => optNumber(e)).filter((n) => n !== undefined);
    }
    jobs.push(job);
    pos = je + 6;
  }
  const reply: QueryBatchReply = {
    id,
    name: nameRaw === undefined ? '' : textValue(nameRaw),
    state: intValue(rpc, 'state', head('state')),
    njobs: optNumber(head('njobs')) ?? jobs.length,
    jobs,
  };
  const app = head('app_name');
  if (app !== undefined) reply.appName = textValue(app);
  const expire = optNumber(head('expire_time'));
  if (expire !== undefined) reply.expireTime = expire;
  return reply;
}

/** query_batches: one `<batch>` of batch parameters per batch of the account not retired. */
export function parseQueryBatches(rpc: string, text: string): BatchListing[] {
  const batches: BatchListing[] = [];
  for (let pos = 0; ;) {
    const b = text.indexOf('<batch>', pos);
    if (b < 0) return batches;
    const be = text.indexOf('</batch>', b + 7);
    if (be < 0) throw protocol(rpc, 'unterminated <batch>');
    const seg = text.slice(b + 7, be);
    const name = tagText(seg, 'name');
    const batch: BatchListing = {
      id: intValue(rpc, 'id', tagText(seg, 'id')),
      name: name === undefined ? '' : textValue(name),
      state: intValue(rpc, 'state', tagText(seg, 'state')),
      njobs: optNumber(tagText(seg, 'njobs')) ?? 0,
      nerrorJobs: optNumber(tagText(seg, 'nerror_jobs')) ?? 0,
      fractionDone: optNumber(tagText(seg, 'fraction_done')) ?? 0,
    };
    const app = tagText(seg, 'app_name');
    if (app !== undefined) batch.appName = textValue(app);
    const created = optNumber(tagText(seg, 'create_time'));
    if (created !== undefined) batch.createTime = created;
    const expire = optNumber(tagText(seg, 'expire_time'));
    if (expire !== undefined) batch.expireTime = expire;
    batches.push(batch);
    pos = be + 8;
  }
}

/** query_job: one `<instance>` per instance of the job (name, id, state in words, output sizes). */
export function parseQueryJob(rpc: string, text: string): JobInstance[] {
  return allTagTexts(text, 'instance').map((seg) => ({
    name: cleanName(tagText(seg, 'name') ?? ''),
    id: intValue(rpc, 'instance id', tagText(seg, 'id')),
    state: textValue(tagText(seg, 'state') ?? ''),
  }));
}

/**
 * stderr_out: a CDATA section (the server adds a newline after `<![CDATA[` and indentation
 * before `]]>`) whose content went through PHP's htmlspecialchars: decode the entities.
 */
export function decodeStderr(raw: string): string {
  let s = raw;
  const cs = s.indexOf('<![CDATA[');
  if (cs >= 0) {
    const ce = s.lastIndexOf(']]>');
    s = s.slice(cs + 9, ce > cs ? ce : undefined);
    if (s.startsWith('\r\n')) s = s.slice(2);
    else if (s.startsWith('\n')) s = s.slice(1);
    s = s.replace(/[ \t]+$/, '');
  } else {
    s = s.trim();
  }
  return decodeEntities(s);
}

export function parseCompletedJob(rpc: string, text: string): CompletedJob {
  const at = text.indexOf('<completed_job>');
  if (at < 0) throw protocol(rpc, 'reply lacks <completed_job>');
  // stderr runs to the LAST </stderr_out>; read the other fields outside of it.
  const ss = text.indexOf('<stderr_out>', at);
  const se = ss < 0 ? -1 : text.lastIndexOf('</stderr_out>');
  const fieldsEnd = ss < 0 ? text.length : ss;
  const f = (name: string) => tagText(text, name, at, fieldsEnd) ?? (se > 0 ? tagText(text, name, se) : undefined);
  const job: CompletedJob = {
    errorMask: optNumber(f('error_mask')) ?? 0,
    exitStatus: optNumber(f('exit_status')) ?? 0,
    elapsedTime: optNumber(f('elapsed_time')) ?? 0,
    cpuTime: optNumber(f('cpu_time')) ?? 0,
    stderrOut: ss >= 0 && se > ss ? decodeStderr(text.slice(ss + 12, se)) : '',
  };
  const canon = optNumber(f('canonical_resultid'));
  if (canon !== undefined) job.canonicalResultId = canon;
  const errRes = optNumber(f('error_resultid'));
  if (errRes !== undefined) job.errorResultId = errRes;
  return job;
}

/** open_names of the `<file_ref>` elements between from and to (XML comments ignored). */
function fileRefOpenNames(text: string, from: number, to: number): string[] {
  const region = text.slice(from, to).replace(/<!--[\s\S]*?-->/g, '');
  return allTagTexts(region, 'file_ref').map((ref) => textValue(tagText(ref, 'open_name') ?? ''));
}

/**
 * For each output file_ref, in order: whether its file_info (the one whose `<name>` is the
 * ref's `<file_name>`, e.g. `<OUTFILE_0/>`) says `<gzip_when_done/>` (the volunteer's client
 * gzips the file before uploading it). BOINC's parse_bool takes `<x/>` and `<x>1</x>`.
 */
function gzippedOutputs(template: string): boolean[] {
  const gzipByName = new Map<string, boolean>();
  for (const info of allTagTexts(template, 'file_info')) {
    const name = (tagText(info, 'name') ?? '').trim();
    const flag = /<gzip_when_done\s*\/>/.test(info) || /<gzip_when_done>\s*[1-9]\d*\s*<\/gzip_when_done>/.test(info);
    gzipByName.set(name, flag);
  }
  const result = region(template, 'result');
  const refs = allTagTexts(template, 'file_ref', result?.[0] ?? 0, result?.[1] ?? template.length);
  return refs.map((ref) => gzipByName.get((tagText(ref, 'file_name') ?? '').trim()) ?? false);
}

function region(text: string, name: string, from = 0): [number, number] | undefined {
  const s = text.indexOf(`<${name}>`, from);
  if (s < 0) return undefined;
  const e = text.indexOf(`</${name}>`, s);
  return [s, e < 0 ? text.length : e];
}

/**
 * get_templates: `<templates>` holding the app's input template (`<input_template>`, whose
 * `<workunit>` lists `<file_ref>`s) and output template (`<output_template>`, file_refs in
 * `<result>`). Older templates lack the wrappers: then `<workunit>` / `<result>` delimit them.
 * The input template's `<rsc_memory_bound>` is kept too (gahp/staging/memory-bound.ts).
 */
export function parseTemplates(rpc: string, text: string): AppTemplates {
  const t = region(text, 'templates');
  if (!t) throw protocol(rpc, 'reply lacks <templates>');
  const body = text.slice(t[0], t[1]).replace(/<!--[\s\S]*?-->/g, '');
  const input = region(body, 'input_template') ?? region(body, 'workunit');
  const output = region(body, 'output_template') ?? region(body, 'result');
  if (!input && !output) throw protocol(rpc, 'reply holds neither an input nor an output template');
  const templates: AppTemplates = {
    inputOpenNames: input ? fileRefOpenNames(body, input[0], input[1]) : [],
    outputOpenNames: output ? fileRefOpenNames(body, output[0], output[1]) : [],
  };
  if (output) {
    const gzip = gzippedOutputs(body.slice(output[0], output[1]));
    if (gzip.some((g) => g)) templates.outputGzip = gzip;
  }
  // The whole elements, for per-job templates made from them (gahp/staging/keep-files.ts).
  const whole = (name: string): string | undefined => {
    const r = region(body, name);
    return r && r[1] < body.length ? body.slice(r[0], r[1] + name.length + 3) : undefined;
  };
  const inputTemplate = whole('input_template');
  if (inputTemplate) templates.inputTemplate = inputTemplate;
  const outputTemplate = whole('output_template');
  if (outputTemplate) templates.outputTemplate = outputTemplate;
  const memory = input ? region(body, 'rsc_memory_bound', input[0]) : undefined;
  if (memory && memory[1] <= input![1]) {
    const bound = Number(body.slice(memory[0] + '<rsc_memory_bound>'.length, memory[1]).trim());
    if (Number.isFinite(bound) && bound > 0) templates.rscMemoryBound = bound;
  }
  return templates;
}

/** query_files: `<absent_files><file>I</file>...</absent_files>`. */
export function parseAbsentFiles(rpc: string, text: string, count: number): number[] {
  const r = region(text, 'absent_files');
  if (!r) {
    if (/<absent_files\s*\/>/.test(text)) return [];
    throw protocol(rpc, 'reply lacks <absent_files>');
  }
  const out = allTagTexts(text, 'file', r[0], r[1]).map((s) => intValue(rpc, 'file', s));
  for (const i of out) {
    if (!Number.isInteger(i) || i < 0 || i >= count) throw protocol(rpc, `absent file index ${i} out of range (0..${count - 1})`);
  }
  return out;
}

/**
 * The stderr result.php shows (BOINC's html/inc/result.inc: `<h3>Stderr output</h3> <pre>`,
 * then the text through htmlspecialchars with ENT_QUOTES, then `</pre>`), unescaped;
 * undefined when the page has none (the instance is not over).
 */
export function parseResultPageStderr(page: string): string | undefined {
  const m = /<h3>Stderr output<\/h3>\s*<pre>([\s\S]*?)<\/pre>/.exec(page);
  if (!m) return undefined;
  return m[1]!.replace(/&(lt|gt|quot|amp|#0*39|#x0*27|apos);/gi, (_, e: string) => HTML_ENTITIES[e.toLowerCase().replace(/^#x0*27$|^#0*39$/, '#39')] ?? '');
}

const HTML_ENTITIES: Record<string, string> = { lt: '<', gt: '>', quot: '"', amp: '&', '#39': "'", apos: "'" };
