/**
 * The reply reader and request builder, on real-shaped samples (as BOINC's PHP prints them:
 * Latin-1 bytes, unescaped error text, PHP warnings, fatal errors cutting the reply short).
 */
import { checkReply, decodeEntities, decodeServerText, extractError, stripHtml, XmlRequest, xmlEscape } from '../../boinc-rpc/xml.js';
import {
  decodeStderr,
  parseAbsentFiles,
  parseBatchId,
  parseCompletedJob,
  parseQueryBatch,
  parseQueryBatch2,
  parseQueryBatches,
  parseSuccess,
  parseTemplates,
} from '../../boinc-rpc/replies.js';
import { rejectOf } from '../support/rpc-errors.js';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const HEADER = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n';
const DEPRECATED =
  '<br />\n<b>Deprecated</b>:  Creation of dynamic property BoincBatch::$njobs_success is deprecated in ' +
  '<b>/var/www/html/inc/submit_util.inc</b> on line <b>187</b><br />\n';

function latin1(s: string): Buffer {
  return Buffer.from(s, 'latin1');
}

describe('request building', () => {
  test('every value is XML-escaped', () => {
    const xml = new XmlRequest('abort_jobs').el('authenticator', 'a&b<c>"d\'').el('job_name', `job<&'">`).toString();
    expect(xml).toBe(
      '<abort_jobs>\n<authenticator>a&amp;b&lt;c&gt;&quot;d&apos;</authenticator>\n' +
        '<job_name>job&lt;&amp;&apos;&quot;&gt;</job_name>\n</abort_jobs>\n',
    );
    expect(xmlEscape('plain_name-1.0')).toBe('plain_name-1.0');
  });

  test('numbers are written plainly and non-finite ones refused', () => {
    expect(new XmlRequest('set_expire_time').el('expire_time', 1796226352.25).toString()).toContain(
      '<expire_time>1796226352.25</expire_time>',
    );
    const e = rejectOf(() => new XmlRequest('set_expire_time').el('expire_time', NaN));
    expect(e.kind).toBe('local');
    expect(e.message).toBe('set_expire_time failed: invalid expire_time: NaN');
  });

  test('opt omits undefined values', () => {
    expect(new XmlRequest('x').opt('a', undefined).opt('b', 0).toString()).toBe('<x>\n<b>0</b>\n</x>\n');
  });
});

describe('entities and HTML', () => {
  test('named and numeric entities decode; unknown ones stay', () => {
    expect(decodeEntities('&lt;a&gt; &amp; &quot;q&quot; &#39;s&#039; &#x41;&#66; &bogus; & alone')).toBe(
      `<a> & "q" 's' AB &bogus; & alone`,
    );
  });

  test('stripHtml removes tags and collapses whitespace', () => {
    expect(stripHtml('<br />\n<b>Fatal error</b>:  Uncaught x-&gt;y in <b>f.inc</b> on line <b>3</b><br />')).toBe(
      'Fatal error: Uncaught x->y in f.inc on line 3',
    );
  });
});

describe('checkReply', () => {
  test('a success reply passes, Latin-1 bytes decode as Latin-1', () => {
    const body = latin1(`${HEADER}<query_batch>\n<batch>\n<id>7</id>\n<name>caf\xe9</name>\n<state>1</state>\n</batch>\n</query_batch>\n`);
    const { text, root } = checkReply('query_batch', body, 'query_batch');
    expect(root).toBe('query_batch');
    expect(text).toContain('<name>café</name>');
  });

  test('UTF-8 bytes under the ISO-8859-1 declaration decode as UTF-8 (the real server sends the database\'s bytes)', () => {
    const body = Buffer.from(`${HEADER}<query_batch2>\n<error>\n    <error_num>-1</error_num>\n    <error_msg>no batch named caf\u00e9 \u65e5\u672c</error_msg>\n</error>\n</query_batch2>\n`, 'utf8');
    const e = rejectOf(() => checkReply('query_batch2', body, 'query_batch2'));
    expect(e.serverMessage).toBe('no batch named caf\u00e9 \u65e5\u672c');
    // One byte that is not UTF-8 anywhere: the whole reply is Latin-1 (nothing replaced).
    const mixed = Buffer.concat([body.subarray(0, body.indexOf('caf')), Buffer.from('caf\u00e9 \u00ff', 'latin1'), body.subarray(body.indexOf('</error_msg>'))]);
    expect(rejectOf(() => checkReply('query_batch2', mixed, 'query_batch2')).serverMessage).toBe('no batch named caf\u00e9 \u00ff');
    expect(decodeServerText(Buffer.from([0x63, 0xc3, 0xa9, 0xe6, 0x97, 0xa5]))).toBe('c\u00e9\u65e5');
    expect(decodeServerText(Buffer.from([0x63, 0xc3]))).toBe('c\u00c3');
  });

  test('an error with raw < & and quotes in error_msg still yields the whole message', () => {
    const name = `condor#a<b&c'd"e`;
    const body = latin1(
      `${HEADER}<query_batch2>\n<error>\n    <error_num>-1</error_num>\n    <error_msg>no batch named ${name}</error_msg>\n</error>\n</query_batch2>\n`,
    );
    const e = rejectOf(() => checkReply('query_batch2', body, 'query_batch2'));
    expect(e.kind).toBe('server');
    expect(e.errorNum).toBe(-1);
    expect(e.serverMessage).toBe(`no batch named ${name}`);
    expect(e.message).toBe(`query_batch2 failed: no batch named ${name}`);
    expect(e.uncertain).toBe(false);
  });

  test('an error_msg that itself contains </error_msg>-like text and newlines is kept whole', () => {
    const msg = 'weird </error> and <error_msg> inside\nline two';
    const e = rejectOf(() =>
      checkReply('x', `${HEADER}<x>\n<error>\n<error_num>-3</error_num>\n<error_msg>${msg}</error_msg>\n</error>\n</x>\n`, 'x'),
    );
    expect(e.serverMessage).toBe(msg);
    expect(e.errorNum).toBe(-3);
  });

  test('a megabyte error text is kept whole', () => {
    const sql = "create_work failed: Database error: insert into workunit values ('" + 'x'.repeat(1_000_000) + "')";
    const e = rejectOf(() => checkReply('submit_batch', `${HEADER}<submit_batch>\n<error>\n<error_num>-1</error_num>\n<error_msg>${sql}</error_msg>\n</error>\n</submit_batch>\n`, 'submit_batch'));
    expect(e.serverMessage).toBe(sql);
  });

  test('PHP deprecation blocks inside the XML are ignored', () => {
    const body = `${HEADER}<retire_batch>\n${DEPRECATED}${DEPRECATED}<success>1</success></retire_batch>\n`;
    const { text } = checkReply('retire_batch', body, 'retire_batch');
    expect(text).not.toContain('Deprecated');
    expect(() => parseSuccess('retire_batch', text)).not.toThrow();
  });

  test('PHP noise before the root element does not confuse the root', () => {
    const { root } = checkReply('ping', `${HEADER}${DEPRECATED}<ping>\n<success>1</success>\n</ping>\n`, 'ping');
    expect(root).toBe('ping');
  });

  test('a reply cut short by a fatal error is kind fatal, uncertain, with the text stripped of HTML', () => {
    const body =
      `${HEADER}<upload_files>\n<br />\n<b>Fatal error</b>:  Uncaught mysqli_sql_exception: Duplicate entry 'condorv_abc' for key 'jf_name' in /var/www/html/inc/db_conn.inc:113\n` +
      'Stack trace:\n#0 /var/www/html/inc/db_conn.inc(113): mysqli-&gt;query()\n#1 {main}\n' +
      '  thrown in <b>/var/www/html/inc/db_conn.inc</b> on line <b>113</b><br />\n';
    const e = rejectOf(() => checkReply('upload_files', body, 'upload_files'));
    expect(e.kind).toBe('fatal');
    expect(e.uncertain).toBe(true);
    expect(e.serverMessage).toMatch(/^Fatal error: Uncaught mysqli_sql_exception: Duplicate entry 'condorv_abc' for key 'jf_name' in /);
    expect(e.serverMessage).toContain('mysqli->query()');
    expect(e.serverMessage).not.toMatch(/<b>|<br/);
  });

  test('query_completed_job of a failed job: error_mask, a warning and a fatal error', () => {
    const body =
      `${HEADER}<query_completed_job>\n<completed_job>\n   <error_mask>3</error_mask>\n` +
      '<br />\n<b>Warning</b>:  Undefined variable $result in <b>/x.php</b> on line <b>9</b><br />\n' +
      '<br />\n<b>Fatal error</b>:  Uncaught Error: Attempt to read property "exit_status" on null in /x.php:10<br />\n';
    const e = rejectOf(() => checkReply('query_completed_job', body, 'query_completed_job'));
    expect(e.kind).toBe('fatal');
    expect(e.serverMessage).toContain('Attempt to read property "exit_status" on null');
  });

  test('a reply without its closing tag (no fatal text) is a protocol error, uncertain', () => {
    const e = rejectOf(() => checkReply('query_batch2', `${HEADER}<query_batch2>\n<server_time>17</server_time>\n<batch_si`, 'query_batch2'));
    expect(e.kind).toBe('protocol');
    expect(e.uncertain).toBe(true);
    expect(e.message).toContain('cut short');
  });

  test('empty and non-XML replies are protocol errors', () => {
    expect(rejectOf(() => checkReply('ping', '', 'ping')).serverMessage).toBe('empty reply');
    const e = rejectOf(() => checkReply('ping', 'just some text', 'ping'));
    expect(e.kind).toBe('protocol');
    expect(e.serverMessage).toContain('not an XML reply');
  });

  test('old-style replies without an outer tag still pass', () => {
    expect(() => checkReply('ping', `${HEADER}<success>1</success>`, 'ping')).not.toThrow();
    const e = rejectOf(() => checkReply('x', `${HEADER}<error>\n<message>no such batch</message>\n</error>\n`, 'x'));
    expect(e.serverMessage).toBe('no such batch');
    expect(e.errorNum).toBeUndefined();
  });

  test('extractError without closing tags takes the rest', () => {
    expect(extractError('<error><error_num>-1</error_num><error_msg>cut')).toEqual({ errorNum: -1, message: 'cut' });
    expect(extractError('<x/>')).toBeUndefined();
  });
});

describe('reply readers', () => {
  test('batch_id', () => {
    expect(parseBatchId('create_batch', '<create_batch>\n<batch_id>42</batch_id>\n</create_batch>')).toBe(42);
    expect(rejectOf(() => parseBatchId('create_batch', '<create_batch></create_batch>')).message).toBe(
      'create_batch failed: reply lacks <batch_id>',
    );
    expect(rejectOf(() => parseBatchId('create_batch', '<batch_id>0</batch_id>')).kind).toBe('protocol');
  });

  test('success forms', () => {
    expect(() => parseSuccess('upload_files', '<upload_files><success/>\n</upload_files>')).not.toThrow();
    expect(() => parseSuccess('ping', '<ping><success>1</success></ping>')).not.toThrow();
    expect(rejectOf(() => parseSuccess('ping', '<ping></ping>')).message).toBe('ping failed: reply lacks <success>');
  });

  test('query_batch2: batches in order, jobs per batch_size', () => {
    const text =
      '<query_batch2>\n<server_time>1796204760.1234</server_time>\n<jobs>\n' +
      '   <batch_size>2</batch_size>\n' +
      '    <job>\n        <job_name>b1#1.0</job_name>\n        <status>DONE</status>\n    </job>\n' +
      '    <job>\n        <job_name>b1#1.1</job_name>\n        <status>IN_PROGRESS</status>\n    </job>\n' +
      '   <batch_size>0</batch_size>\n' +
      '   <batch_size>1</batch_size>\n' +
      '    <job>\n        <job_name>b3&amp;x</job_name>\n        <status>ERROR</status>\n    </job>\n' +
      '</jobs>\n</query_batch2>\n';
    expect(parseQueryBatch2('query_batch2', text, 3)).toEqual({
      serverTime: '1796204760.1234',
      batches: [
        { jobs: [{ name: 'b1#1.0', status: 'DONE' }, { name: 'b1#1.1', status: 'IN_PROGRESS' }] },
        { jobs: [] },
        { jobs: [{ name: 'b3&x', status: 'ERROR' }] },
      ],
    });
  });

  test('query_batch2: count mismatches are protocol errors', () => {
    const two = '<server_time>1</server_time><batch_size>2</batch_size><job><job_name>a</job_name><status>DONE</status></job>';
    expect(rejectOf(() => parseQueryBatch2('query_batch2', two, 1)).message).toContain('<batch_size> said 2');
    const extra =
      '<server_time>1</server_time><batch_size>0</batch_size><job><job_name>a</job_name><status>DONE</status></job>';
    expect(rejectOf(() => parseQueryBatch2('query_batch2', extra, 1)).message).toContain('more <job> elements');
    expect(rejectOf(() => parseQueryBatch2('query_batch2', '<server_time>1</server_time>', 2)).message).toContain(
      '0 batches, 2 were asked',
    );
    expect(rejectOf(() => parseQueryBatch2('query_batch2', '<x/>', 0)).message).toContain('lacks <server_time>');
  });

  test('query_batch: batch parameters and jobs', () => {
    const text =
      `<query_batch>\n<batch>\n        <id>12</id>\n        <create_time>1</create_time>\n        <expire_time>1796226352</expire_time>\n` +
      `        <njobs>2</njobs>\n        <state>1</state>\n        <name>cond#b</name>\n        <app_name>uppercase</app_name>\n` +
      '    <job>\n        <id>100</id>\n        <name>cond#b#1.0</name>\n        <canonical_instance_id>0</canonical_instance_id>\n        <n_outfiles>1</n_outfiles>\n        </job>\n' +
      '    <job>\n        <id>101</id>\n        <name>cond#b#1.1</name>\n        <canonical_instance_id>55</canonical_instance_id>\n        <status>DONE</status>\n        </job>\n' +
      '</batch>\n</query_batch>\n';
    expect(parseQueryBatch('query_batch', text)).toEqual({
      id: 12,
      name: 'cond#b',
      state: 1,
      appName: 'uppercase',
      njobs: 2,
      expireTime: 1796226352,
      jobs: [
        { id: 100, name: 'cond#b#1.0', canonicalInstanceId: 0 },
        { id: 101, name: 'cond#b#1.1', canonicalInstanceId: 55, status: 'DONE' },
      ],
    });
  });

  test('completed job: CDATA stderr with HTML entities decoded', () => {
    const stderr = `line <1> & "two" 'three'\n<stderr_txt>done</stderr_txt>\n`;
    const escaped = stderr.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#039;');
    const text =
      '<query_completed_job>\n<completed_job>\n   <error_mask>0</error_mask>\n   <canonical_resultid>77</canonical_resultid>\n' +
      '   <exit_status>0</exit_status>\n   <elapsed_time>101.25</elapsed_time>\n   <cpu_time>50.625</cpu_time>\n' +
      `   <stderr_out><![CDATA[\n${escaped}   ]]></stderr_out>\n</completed_job>\n</query_completed_job>\n`;
    expect(parseCompletedJob('query_completed_job', text)).toEqual({
      errorMask: 0,
      canonicalResultId: 77,
      exitStatus: 0,
      elapsedTime: 101.25,
      cpuTime: 50.625,
      stderrOut: stderr,
    });
    expect(decodeStderr('<![CDATA[\n&#x263a;&#9731;   ]]>')).toBe('☺☃');
    expect(rejectOf(() => parseCompletedJob('query_completed_job', '<query_completed_job/>')).kind).toBe('protocol');
  });

  test('templates: open_names of input and output file_refs, in order, comments ignored', () => {
    const input =
      '<input_template>\n<file_info>\n<number>0</number>\n</file_info>\n<file_info>\n<number>1</number>\n</file_info>\n' +
      '<workunit>\n<file_ref>\n<file_number>0</file_number>\n<open_name>in</open_name>\n</file_ref>\n' +
      '<!-- <file_ref><open_name>old</open_name></file_ref> -->\n' +
      '<file_ref>\n<file_number>1</file_number>\n<open_name>params.txt</open_name>\n<copy_file/>\n</file_ref>\n' +
      '<rsc_fpops_est>1e12</rsc_fpops_est>\n</workunit>\n</input_template>';
    const output =
      '<output_template>\n<file_info>\n<name><OUTFILE_0/></name>\n<generated_locally/>\n</file_info>\n' +
      '<result>\n<file_ref>\n<file_name><OUTFILE_0/></file_name>\n<open_name>out</open_name>\n</file_ref>\n' +
      '<file_ref>\n<file_name><OUTFILE_1/></file_name>\n<open_name>log.zip</open_name>\n</file_ref>\n</result>\n</output_template>';
    const text = `<get_templates>\n<templates>\n${input}\n${output}\n</templates>\n</get_templates>\n`;
    // The whole elements too (comments removed), for per-job templates.
    expect(parseTemplates('get_templates', text)).toEqual({
      inputOpenNames: ['in', 'params.txt'],
      outputOpenNames: ['out', 'log.zip'],
      inputTemplate: input.replace('<!-- <file_ref><open_name>old</open_name></file_ref> -->', ''),
      outputTemplate: output,
    });
    // Old templates without the wrappers.
    const old = text.replace(/<\/?input_template>/g, '').replace(/<\/?output_template>/g, '');
    expect(parseTemplates('get_templates', old)).toEqual({ inputOpenNames: ['in', 'params.txt'], outputOpenNames: ['out', 'log.zip'] });
    expect(rejectOf(() => parseTemplates('get_templates', '<get_templates></get_templates>')).message).toContain('lacks <templates>');
  });

  test('absent files', () => {
    expect(parseAbsentFiles('query_files', '<query_files>\n<absent_files>\n<file>0</file>\n<file>2</file>\n</absent_files>\n</query_files>', 3)).toEqual([0, 2]);
    expect(parseAbsentFiles('query_files', '<query_files><absent_files>\n</absent_files></query_files>', 3)).toEqual([]);
    expect(rejectOf(() => parseAbsentFiles('query_files', '<absent_files><file>5</file></absent_files>', 3)).message).toContain('out of range');
    expect(rejectOf(() => parseAbsentFiles('query_files', '<query_files></query_files>', 3)).message).toContain('lacks <absent_files>');
  });
});

describe('query_batch2 at scale', () => {
  test('100 batches x 1000 jobs parse quickly', () => {
    const parts: string[] = [HEADER, '<query_batch2>\n<server_time>1796204760.123456</server_time>\n<jobs>\n'];
    const names: string[] = [];
    for (let b = 0; b < 100; b++) {
      parts.push('   <batch_size>1000</batch_size>\n');
      for (let j = 0; j < 1000; j++) {
        const name = `condor#schedd@submit.example.org#uppercase#17962047${String(b).padStart(2, '0')}#${j}.0`;
        if (b === 0) names.push(name);
        parts.push(`    <job>\n        <job_name>${name}</job_name>\n        <status>${j % 3 ? 'IN_PROGRESS' : 'DONE'}</status>\n    </job>\n`);
      }
    }
    parts.push('</jobs>\n</query_batch2>\n');
    const body = latin1(parts.join(''));
    const t0 = process.hrtime.bigint();
    const { text } = checkReply('query_batch2', body, 'query_batch2');
    const reply = parseQueryBatch2('query_batch2', text, 100);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(reply.batches).toHaveLength(100);
    expect(reply.batches.every((b) => b.jobs.length === 1000)).toBe(true);
    expect(reply.batches[0]!.jobs.map((j) => j.name)).toEqual(names);
    expect(reply.batches[99]!.jobs[1]!.name).toContain('#1.0');
    expect(reply.batches[99]!.jobs[1]!.status).toBe('IN_PROGRESS');
    // Parse speed is a figure of `npm run bench` (query_100k_s), not asserted here.
    console.log(`parsed 100x1000 jobs in ${ms.toFixed(0)} ms`);
  });
});

test("query_batches: the real server's reply (test/fixtures/real-server/23), PHP notices between the batches", () => {
  const capture = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'real-server', '23-query_batches-all.txt'), 'latin1');
  const body = capture.slice(capture.indexOf('<?xml', capture.indexOf('--- response ---')));
  const { text } = checkReply('query_batches', latin1(body), 'query_batches');
  const batches = parseQueryBatches('query_batches', text);
  expect(batches).toHaveLength(14);
  expect(batches[0]).toEqual({
    id: 15, name: 'condor#bench@vm#uppercase#1796221165', appName: 'uppercase', state: 1, njobs: 40, nerrorJobs: 0,
    fractionDone: 0, createTime: 1796221165, expireTime: 1796224765,
  });
  expect(batches[1]).toMatchObject({ id: 18, name: 'rtcap_1423077fcaca_b1', state: 0, njobs: 0 });
});
