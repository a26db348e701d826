/**
 * Check family 4, uploads: the PHP limits boinc-gahp plans its uploads by, and one small
 * live upload through job_file.php. The file is uploaded alone (no batch) with a
 * delete_time 10 minutes ahead; job_file.php has no way to remove a file, so it is left
 * for the project's job file deleter, and the line says so. Its name is content-addressed
 * (`condorv_<md5>`) like every staged file, and its content is unique to this run, so it
 * cannot collide with a real input.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoincRpcError } from '../../../boinc-rpc/errors.js';
import { formatPhpSize, PHP_DEFAULT_UPLOAD_LIMITS } from '../../../boinc-rpc/upload-limits.js';
import type { DoctorContext, ProjectFindings } from './context.js';
import { clientFor } from './project.js';
import type { Report } from './report.js';

const DELETE_AFTER_S = 600;

export function checkUploadLimits(ctx: DoctorContext, report: Report): void {
  const { g } = ctx;
  const d = PHP_DEFAULT_UPLOAD_LIMITS;
  const part = (flag: string, v: number | undefined, dflt: number, fmt: (n: number) => string) =>
    `${flag} ${fmt(v ?? dflt)}${v === undefined ? ' (default)' : ''}`;
  report.ok('uploads', 'upload limits', [
    part('--max-file-uploads', g.maxFileUploads, d.maxFileUploads, String),
    part('--post-max-size', g.postMaxSize, d.postMaxSize, formatPhpSize),
    part('--upload-max-filesize', g.uploadMaxFilesize, d.uploadMaxFilesize, formatPhpSize),
  ].join(', ') + ': uploads are split to fit these; each must not exceed the project\'s php.ini value');
}

export async function checkLiveUpload(ctx: DoctorContext, report: Report, url: URL, findings: ProjectFindings): Promise<void> {
  if (!findings.accountAccepted || !findings.authenticator) return;
  const what = 'upload through job_file.php';
  const content = `boinc-gahp doctor upload check, ${new Date().toISOString()}, ${crypto.randomBytes(8).toString('hex')}\n`;
  const physName = `condorv_${crypto.createHash('md5').update(content).digest('hex')}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boinc-gahp-doctor-'));
  const file = path.join(dir, 'upload-check.txt');
  const client = clientFor(ctx, url, findings.authenticator);
  try {
    fs.writeFileSync(file, content);
    const deleteTime = Math.floor(Date.now() / 1000) + DELETE_AFTER_S;
    await client.uploadFiles({ files: [{ physName, path: file }], deleteTime });
    const absent = await client.queryFiles({ physNames: [physName] });
    if (absent.length > 0) {
      report.fail('uploads', what, `upload_files answered success but query_files does not find ${physName}`, 'ask the project\'s administrators to check the download directory\'s permissions (job_file.php moves uploads there)');
      return;
    }
    report.ok('uploads', what, `${content.length}-byte file ${physName} uploaded and found by query_files; left on the server as a file only (no batch) with delete_time in ${DELETE_AFTER_S / 60} min (job_file.php cannot remove a file)`);
  } catch (err) {
    const msg = err instanceof BoincRpcError ? err.serverMessage : (err as Error).message;
    let fix = 'see the project web server\'s error log for job_file.php';
    if (/no file access|no submit access/.test(msg)) fix = 'ask the project\'s administrators to give this account remote job submission access';
    else if (/can't parse request message|upload_max_filesize|post_max_size/.test(msg)) fix = `the project's PHP refused a ${content.length}-byte upload: ask its administrators to raise upload_max_filesize and post_max_size in php.ini`;
    report.fail('uploads', what, `failed: ${msg}`, fix);
  } finally {
    client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
