/**
 * What a job's memory request means for a BOINC job (docs/boinc-server.md, "Memory
 * bound"). BOINC sends a job only to hosts with `rsc_memory_bound` bytes to spare, and the
 * client aborts the job when its working set grows past it. The app's input template
 * holds the bound its author measured; HTCondor's memory request is mostly a default
 * nobody chose (`RequestMemory = 128` on every routed vanilla job, which reaches the BLAHP
 * as `-m 128`). So a request can only raise the bound above the template's, never lower
 * it: a smaller bound would only make clients abort jobs the app needs the memory for.
 * Without a template bound (a template that sets none), the request is all there is.
 * Both routes come here: the GAHP's `rsc_memory_bound` argument and the BLAHP's `-m`.
 */
import type { JobParams } from '../../boinc-rpc/types.js';

/**
 * The job parameters to send: `rscMemoryBound` dropped (the template's applies) when it
 * is not above the template's bound; `note` says so, for the log.
 */
export function withTemplateMemoryFloor(params: JobParams, templateBound: number | undefined): { params: JobParams; note?: string } {
  const asked = params.rscMemoryBound;
  if (asked === undefined || asked <= 0 || templateBound === undefined || !(templateBound > 0) || asked > templateBound) return { params };
  const rest = { ...params };
  delete rest.rscMemoryBound;
  return {
    params: rest,
    note: `memory bound ${asked} bytes asked is not above the app template's ${templateBound}: the template's applies (a smaller bound makes BOINC clients abort jobs)`,
  };
}
