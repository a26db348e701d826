/**
 * Keeping a job's files on the server until the GAHP is done with them (docs/storage.md,
 * "What the project keeps"). A project's file_deleter removes a job's outputs once it is
 * assimilated, and its inputs too, whoever else names them (a `condorv_` file shared by a
 * cluster or reused by a later batch); `<no_delete/>` in a `<file_info>` spares the file.
 * submit_batch takes per-job templates in place of the app's, so each job is sent the
 * app's own templates with `<no_delete/>` added to every file_info
 * (docs/boinc-server.md, "The project's daemons").
 */
import type { AppTemplates, SubmitJob } from '../../boinc-rpc/types.js';

/** The per-job templates that keep a job's files: undefined for a side the app's templates cannot give. */
export interface KeepingTemplates {
  inputTemplate?: string;
  outputTemplate?: string;
}

/**
 * A template element with `<no_delete/>` in each `<file_info>` (one already there is
 * replaced), compacted: comments gone, the whitespace between two tags made one newline,
 * and `<result>` and `<workunit>` always followed by one: BOINC's scheduler finds `<result>`
 * in a result's template by the text `<result>\n` and cannot send a result without it,
 * leaving it "in progress" on no host until its deadline (docs/storage.md, "What the
 * project keeps"). Undefined when the element is not a plain `<root>...</root>`
 * of tags and text (CDATA, processing instructions, DOCTYPEs are not touched: the app's
 * template is then left to apply).
 */
export function keepingTemplate(template: string | undefined, root: 'input_template' | 'output_template'): string | undefined {
  if (template === undefined) return undefined;
  const compact = template
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/>\s+</g, '>\n<')
    .replace(/<(result|workunit)>(?!\n)/g, '<$1>\n')
    .trim();
  if (!compact.startsWith(`<${root}>`) || !compact.endsWith(`</${root}>`) || /<!|<\?/.test(compact)) return undefined;
  const infos = compact.replace(/<file_info\s*\/>/g, '<file_info></file_info>');
  return infos.replace(/<file_info>([\s\S]*?)<\/file_info>/g, (_m, inner: string) => {
    const rest = inner.replace(/<no_delete\s*\/>|<no_delete>[^<]*<\/no_delete>/g, '').replace(/\n{2,}/g, '\n').trim();
    return `<file_info>\n${rest ? `${rest}\n` : ''}<no_delete/>\n</file_info>`;
  });
}

/** The app's templates made to keep each job's inputs and outputs. */
export function keepingTemplates(templates: AppTemplates): KeepingTemplates {
  const inputTemplate = keepingTemplate(templates.inputTemplate, 'input_template');
  const outputTemplate = keepingTemplate(templates.outputTemplate, 'output_template');
  return { ...(inputTemplate ? { inputTemplate } : {}), ...(outputTemplate ? { outputTemplate } : {}) };
}

/** What of the keeping a submit_batch carries, and why not all. */
export interface KeptJobs {
  jobs: SubmitJob[];
  /** Said in the log when not every file could be kept. */
  note?: string;
}

/**
 * The jobs with the keeping templates, as much as fits the project's post_max_size: PHP
 * hands BOINC an empty request when a POST is bigger (docs/boinc-server.md, "PHP's limits
 * on uploads"), and submit_batch is one request for the whole batch (BOINC takes no second
 * submit_batch into a batch). The templates add the same bytes to every job: both when
 * they fit; else the outputs' alone (an output lost is the volunteers' work lost; an input
 * lost fails the jobs that had yet to download it, at once and saying so); else neither.
 */
export function withKeepingTemplates(jobs: SubmitJob[], keep: KeepingTemplates, bodyBytes: (jobs: SubmitJob[]) => number, postMaxSize: number): KeptJobs {
  const base = bodyBytes(jobs);
  const per = (t: string | undefined) => (t ? Buffer.byteLength(t, 'utf8') * jobs.length : 0);
  const fits = (bytes: number) => postMaxSize <= 0 || bytes <= postMaxSize;
  const over = (what: string, bytes: number) =>
    `${what}: the submit_batch request would be ${bytes} bytes, over the project's post_max_size ${postMaxSize} (--post-max-size, BOINC_GAHP_POST_MAX_SIZE; submit fewer jobs per cluster, or raise both)`;
  const all = base + per(keep.inputTemplate) + per(keep.outputTemplate);
  if (fits(all)) return { jobs: jobs.map((j) => ({ ...j, ...keep })) };
  const outputsOnly = base + per(keep.outputTemplate);
  if (keep.outputTemplate && fits(outputsOnly)) {
    const outputTemplate = keep.outputTemplate;
    return { jobs: jobs.map((j) => ({ ...j, outputTemplate })), note: over("the jobs' inputs are not marked no_delete (the project's file_deleter may delete a shared input before every job has it)", all) };
  }
  return { jobs, note: over("the jobs' files are not marked no_delete (the project's file_deleter may delete outputs before they are fetched)", keep.outputTemplate ? outputsOnly : all) };
}
