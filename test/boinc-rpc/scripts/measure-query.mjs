// Measures reading a query_batch2 reply of 100 batches x 1000 jobs (the shape the real server
// prints, with its PHP deprecation blocks). Run after building: node --expose-gc test/boinc-rpc/scripts/measure-query.mjs
import { checkReply } from '../../../dist/boinc-rpc/xml.js';
import { parseQueryBatch2 } from '../../../dist/boinc-rpc/replies.js';
import { BoincClient } from '../../../dist/boinc-rpc/client.js';
import * as http from 'node:http';

const DEPRECATED =
  '<br />\n<b>Deprecated</b>:  Creation of dynamic property BoincBatch::$njobs_success is deprecated in ' +
  '<b>/var/www/html/inc/submit_util.inc</b> on line <b>187</b><br />\n';
function reply() {
  const parts = ['<?xml version="1.0" encoding="ISO-8859-1" ?>\n<query_batch2>\n', DEPRECATED, DEPRECATED, '<server_time>1796204760.123456</server_time>\n<jobs>\n'];
  for (let b = 0; b < 100; b++) {
    parts.push('   <batch_size>1000</batch_size>\n');
    for (let j = 0; j < 1000; j++) {
      parts.push(`    <job>\n        <job_name>condor#schedd@submit.example.org#uppercase#17962047${String(b).padStart(2, '0')}#${j}.0</job_name>\n        <status>${j % 3 ? 'IN_PROGRESS' : 'DONE'}</status>\n    </job>\n`);
    }
  }
  parts.push('</jobs>\n</query_batch2>\n');
  return Buffer.from(parts.join(''), 'latin1');
}
const body = reply();
globalThis.gc?.();
const mem = () => process.memoryUsage();
const m0 = mem();
const times = [];
let keep;
for (let i = 0; i < 5; i++) {
  const t0 = process.hrtime.bigint();
  const { text } = checkReply('query_batch2', body, 'query_batch2');
  keep = parseQueryBatch2('query_batch2', text, 100);
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
const m1 = mem();
const jobs = keep.batches.reduce((n, b) => n + b.jobs.length, 0);
globalThis.gc?.();
const m2 = mem();
console.log(JSON.stringify({
  replyMB: +(body.length / 1048576).toFixed(2),
  jobs,
  msPerParse: times.map((t) => +t.toFixed(1)),
  heapWithResultMB: +((m2.heapUsed - m0.heapUsed) / 1048576).toFixed(1),
  rssPeakDeltaMB: +((Math.max(m1.rss, m2.rss) - m0.rss) / 1048576).toFixed(1),
  rssMB: +(m1.rss / 1048576).toFixed(1),
}));

// End to end: the same reply served over HTTP (Connection: close, no Content-Length) to BoincClient.
const srv = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'Content-type': 'text/xml;charset=UTF-8', Connection: 'close' });
    res.end(body);
  });
});
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
const c = new BoincClient({ projectUrl: `http://127.0.0.1:${srv.address().port}/p/`, authenticator: 'x' });
const names = Array.from({ length: 100 }, (_, i) => `batch${i}`);
const e2e = [];
for (let i = 0; i < 3; i++) {
  const t0 = Date.now();
  const r = await c.queryBatch2('0', names);
  e2e.push(Date.now() - t0);
  if (r.batches.length !== 100) throw new Error('bad reply');
}
c.close();
srv.close();
console.log(JSON.stringify({ endToEndMs: e2e, rssAfterMB: +(process.memoryUsage().rss / 1048576).toFixed(1) }));
