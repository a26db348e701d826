/**
 * The data a BoincRpcError carries for code that decides what to do (RpcErrorCode), read
 * where the reply is parsed, on real-shaped replies; the message stays the server's text.
 */
import { checkReply, serverErrorData } from '../../boinc-rpc/xml.js';
import { rejectOf } from '../support/rpc-errors.js';

const HEADER = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n';

/** A PHP fatal `Duplicate entry` reply as the real server prints it (docs/boinc-server.md). */
function duplicateReply(root: string, entry: string, key: string): string {
  return (
    `${HEADER}<${root}>\n<br />\n<b>Fatal error</b>:  Uncaught mysqli_sql_exception: Duplicate entry '${entry}' for key '${key}' in /home/boincadm/projects/test/html/inc/db_conn.inc:67\n` +
    'Stack trace:\n#0 /home/boincadm/projects/test/html/inc/db_conn.inc(67): mysqli-&gt;query()\n#1 /home/boincadm/projects/test/html/user/job_file.php(146): BoincBatchFileAssoc::insert()\n#2 {main}\n' +
    '  thrown in <b>/home/boincadm/projects/test/html/inc/db_conn.inc</b> on line <b>67</b><br />\n'
  );
}

function serverError(root: string, msg: string): string {
  return `${HEADER}<${root}>\n<error>\n    <error_num>-1</error_num>\n    <error_msg>${msg}</error_msg>\n</error>\n</${root}>\n`;
}

describe('error codes set where the reply is read', () => {
  test('Duplicate entry for a file name (jf_name): duplicate-entry of a file, message unchanged', () => {
    const e = rejectOf(() => checkReply('upload_files', duplicateReply('upload_files', 'condorv_71aa187b8a037992ca4117dce00523ad', 'jf_name'), 'upload_files'));
    expect(e.kind).toBe('fatal');
    expect(e.code).toBe('duplicate-entry');
    expect(e.duplicateOf).toBe('file');
    expect(e.serverMessage).toMatch(/^Fatal error: Uncaught mysqli_sql_exception: Duplicate entry 'condorv_71aa/);
  });

  test('Duplicate entry for a batch link (job_file_id): a link, although the stack trace names job_file.php', () => {
    const e = rejectOf(() => checkReply('query_files', duplicateReply('query_files', '47-27', 'job_file_id'), 'query_files'));
    expect(e.code).toBe('duplicate-entry');
    expect(e.duplicateOf).toBe('link');
  });

  test('Duplicate entry keys with a table prefix, and other keys', () => {
    expect(serverErrorData("Duplicate entry 'x' for key 'job_file.jf_name'")).toEqual({ code: 'duplicate-entry', duplicateOf: 'file' });
    expect(serverErrorData("Duplicate entry 'x' for key 'md5'")).toEqual({ code: 'duplicate-entry', duplicateOf: 'file' });
    expect(serverErrorData("create_work failed: Database error: Duplicate entry 'job1' for key 'name'")).toEqual({ code: 'duplicate-entry', duplicateOf: 'other' });
    expect(serverErrorData('Duplicate entry without a key')).toEqual({ code: 'duplicate-entry', duplicateOf: 'other' });
  });

  test('no batch named NAME: no-such-batch with the name; the message keeps the text HTCondor parses', () => {
    const e = rejectOf(() => checkReply('query_batch2', serverError('query_batch2', 'no batch named rtcap_142344e89175_nosuch'), 'query_batch2'));
    expect(e.kind).toBe('server');
    expect(e.code).toBe('no-such-batch');
    expect(e.batchName).toBe('rtcap_142344e89175_nosuch');
    expect(e.message).toBe('query_batch2 failed: no batch named rtcap_142344e89175_nosuch');
  });

  test('no such batch and no batch ID: no-such-batch without a name', () => {
    const e = rejectOf(() => checkReply('query_batch', serverError('query_batch', 'no such batch'), 'query_batch'));
    expect(e.code).toBe('no-such-batch');
    expect(e.batchName).toBeUndefined();
    expect(serverErrorData('no batch 17')).toEqual({ code: 'no-such-batch' });
  });

  test('refusals repeating cannot change are refused', () => {
    for (const msg of ['bad authenticator', 'no authenticator', 'no submit access', 'not owner of batch', 'file immutability violation for condorv_1']) {
      const e = rejectOf(() => checkReply('x', serverError('x', msg), 'x'));
      expect([msg, e.code]).toEqual([msg, 'refused']);
    }
  });

  test('other server errors carry no code', () => {
    for (const msg of ['batch not in init state', 'job_file->update() failed: ', 'app not found: x', 'no such job']) {
      const e = rejectOf(() => checkReply('x', serverError('x', msg), 'x'));
      expect([msg, e.code]).toEqual([msg, undefined]);
    }
  });

  test('replies cut short carry cut-short, a fatal error without duplicate does not', () => {
    expect(rejectOf(() => checkReply('query_batch2', `${HEADER}<query_batch2>\n<server_time>17</server_time>\n<batch_si`, 'query_batch2')).code).toBe('cut-short');
    expect(rejectOf(() => checkReply('ping', `${HEADER}`, 'ping')).code).toBe('cut-short');
    expect(rejectOf(() => checkReply('x', `${HEADER}<x>\n<error>\n<error_num>-1</error_num>\n<error_msg>no su`, 'x')).code).toBe('cut-short');
    const fatal = rejectOf(() => checkReply('query_completed_job', `${HEADER}<query_completed_job>\n<br />\n<b>Fatal error</b>:  Uncaught Error: Attempt to read property "exit_status" on null in /x.php:10<br />\n`, 'query_completed_job'));
    expect(fatal.kind).toBe('fatal');
    expect(fatal.code).toBeUndefined();
  });
});
