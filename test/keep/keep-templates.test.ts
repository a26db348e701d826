/**
 * The per-job templates that keep a job's files (gahp/staging/keep-files.ts): the real
 * server's own templates (transcript 05) with `<no_delete/>` in each file_info, and what a
 * submit_batch carries of them within the project's post_max_size.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BoincClient } from '../../boinc-rpc/client.js';
import { parseTemplates } from '../../boinc-rpc/replies.js';
import type { SubmitJob } from '../../boinc-rpc/types.js';
import { keepingTemplate, keepingTemplates, withKeepingTemplates } from '../../gahp/staging/keep-files.js';
import { REPO_ROOT } from '../support/gahp-process.js';

const transcript = fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/real-server/05-get_templates-uppercase.txt'), 'latin1');
const real = parseTemplates('get_templates', transcript.slice(transcript.indexOf('<?xml')));

test("the real server's uppercase templates, compact, each file_info marked no_delete, a newline between tags", () => {
  const lines = (...l: string[]) => l.join('\n');
  expect(keepingTemplates(real)).toEqual({
    inputTemplate: lines(
      '<input_template>', '<file_info>', '<number>0</number>', '<no_delete/>', '</file_info>', '<workunit>', '<file_ref>', '<file_number>0</file_number>',
      '<open_name>in</open_name>', '<copy_file/>', '</file_ref>', '<target_nresults>1</target_nresults>', '<min_quorum>1</min_quorum>',
      '<rsc_fpops_est>1e10</rsc_fpops_est>', '<rsc_fpops_bound>1e12</rsc_fpops_bound>', '<rsc_memory_bound>1e8</rsc_memory_bound>',
      '<rsc_disk_bound>1e9</rsc_disk_bound>', '<delay_bound>86400</delay_bound>', '</workunit>', '</input_template>',
    ),
    outputTemplate: lines(
      '<output_template>', '<file_info>', '<name><OUTFILE_0/></name>', '<generated_locally/>', '<upload_when_present/>', '<max_nbytes>10000000</max_nbytes>',
      '<url><UPLOAD_URL/></url>', '<no_delete/>', '</file_info>', '<result>', '<file_ref>', '<file_name><OUTFILE_0/></file_name>', '<open_name>out</open_name>',
      '<copy_file/>', '</file_ref>', '</result>', '</output_template>',
    ),
  });
});

test("the output template keeps the text BOINC's scheduler looks for: `<result>` and a newline (a compacted `<result><file_ref>` made every job unsendable on the real server)", () => {
  expect(keepingTemplate('<output_template>  <file_info><name><OUTFILE_0/></name></file_info><result><file_ref><file_name><OUTFILE_0/></file_name><open_name>out</open_name></file_ref></result></output_template>', 'output_template')).toContain('<result>\n');
  expect(keepingTemplates(real).outputTemplate).toContain('<result>\n');
});

test('no_delete already there is not doubled; an empty file_info gets one; odd templates are left to the app', () => {
  expect(keepingTemplate('<input_template><file_info/><file_info><no_delete>0</no_delete><number>1</number></file_info></input_template>', 'input_template')).toBe(
    '<input_template><file_info>\n<no_delete/>\n</file_info><file_info>\n<number>1</number>\n<no_delete/>\n</file_info></input_template>',
  );
  expect(keepingTemplate('<input_template><![CDATA[x]]></input_template>', 'input_template')).toBeUndefined();
  expect(keepingTemplate('<workunit></workunit>', 'input_template')).toBeUndefined();
  expect(keepingTemplate(undefined, 'output_template')).toBeUndefined();
});

test('within post_max_size both templates go; over it the output template alone, then neither, each time saying why', () => {
  const client = new BoincClient({ projectUrl: 'http://127.0.0.1:9/p/', authenticator: '0'.repeat(32) });
  const jobs: SubmitJob[] = Array.from({ length: 10_000 }, (_, i) => ({ name: `condor#submit.example.org#uppercase#1765000000#12345.${i}`, commandLine: '', inputFiles: [`condorv_${'0'.repeat(32)}`] }));
  const bytes = (js: SubmitJob[]) => client.submitBatchBodyBytes({ batchId: 1, batchName: 'condor#submit.example.org#uppercase#1765000000', appName: 'uppercase', jobs: js });
  const keep = keepingTemplates(real);
  const base = bytes(jobs);
  const both = withKeepingTemplates(jobs, keep, bytes, 64 * 1024 * 1024);
  expect(both.note).toBeUndefined();
  const full = bytes(both.jobs);
  expect(full).toBe(base + jobs.length * (keep.inputTemplate!.length + keep.outputTemplate!.length));
  // 10,000 jobs under PHP's default post_max_size (8M): the output templates fit, the input ones do not.
  const eightM = 8 * 1024 * 1024;
  expect(full).toBeGreaterThan(eightM);
  const outputsOnly = withKeepingTemplates(jobs, keep, bytes, eightM);
  expect(outputsOnly.jobs.every((j) => j.outputTemplate === keep.outputTemplate && j.inputTemplate === undefined)).toBe(true);
  expect(bytes(outputsOnly.jobs)).toBeLessThanOrEqual(eightM);
  expect(outputsOnly.note).toContain("the jobs' inputs are not marked no_delete");
  expect(outputsOnly.note).toContain(`would be ${full} bytes, over the project's post_max_size ${eightM}`);
  const none = withKeepingTemplates(jobs, keep, bytes, base + 1);
  expect(none.jobs).toBe(jobs);
  expect(none.note).toContain("the jobs' files are not marked no_delete");
  client.close();
});
