/**
 * got's own floor for the project bench (project.ts): a minimal client making the same
 * sequence of POSTs as our BOINC_SUBMIT (docs/boinc-server.md), with got and form-data and
 * nothing else (no retries, limits, proxies, redaction, ledger or hash cache), so that what
 * got itself costs per call on a project's server is measured beside the GAHPs.
 *
 *   node dist/test/bench/project-floor.js <project_url> <authenticator_file> <app>
 *
 * Like a GAHP it is driven over stdin: it pings once (loading got, as a GAHP that has
 * pinged), prints `ready`, then for each line `SUBMIT <batch_name> <njobs> <file>...`
 * (job i takes file i mod nfiles as its one input) makes the calls one after another and
 * prints `OK <calls>` or `ERROR <reason>`.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as readline from 'node:readline';
import FormData from 'form-data';
import got from 'got';
import { XmlRequest } from '../../boinc-rpc/xml.js';

const [url, authFile, app] = process.argv.slice(2);
if (!url || !authFile || !app) {
  console.error('usage: node dist/test/bench/project-floor.js <project_url> <authenticator_file> <app>');
  process.exit(2);
}
const authenticator = fs.readFileSync(authFile, 'utf8').trim();
let calls = 0;

/** One POST of `request` (and files as file_0, file_1, ...); the reply's text, or an error if it holds one (unless `errorOk`). */
async function post(script: string, request: XmlRequest, files: string[] = [], errorOk = false): Promise<string> {
  calls++;
  const form = new FormData();
  form.append('request', request.toString());
  files.forEach((f, i) => form.append(`file_${i}`, fs.createReadStream(f), { filename: f.slice(f.lastIndexOf('/') + 1), knownLength: fs.statSync(f).size }));
  const text = await got.post(url + script, { body: form, headers: { 'content-length': String(form.getLengthSync()) }, retry: { limit: 0 } }).text();
  if (!errorOk && /<error>/.test(text)) throw new Error(`${script}: ${text.replace(/\s+/g, ' ').slice(0, 200)}`);
  return text;
}

const rpc = (root: string) => new XmlRequest(root).el('authenticator', authenticator);

async function submit(batch: string, njobs: number, files: string[]): Promise<void> {
  const phys = new Map<string, string>();
  for (const f of files) phys.set(f, `condorv_${crypto.createHash('md5').update(fs.readFileSync(f)).digest('hex')}`);
  const names = [...new Set(phys.values())];
  const paths = [...phys.keys()];
  // Our GAHP's sequence: the two lookups together, create_batch, query_files, upload_files, submit_batch.
  await Promise.all([post('submit_rpc_handler.php', rpc('get_templates').el('app_name', app!)), post('submit_rpc_handler.php', rpc('query_batch').el('batch_name', batch), [], true)]);
  const created = await post('submit_rpc_handler.php', rpc('create_batch').el('batch_name', batch).el('app_name', app!).el('expire_time', Math.floor(Date.now() / 1000) + 86400));
  const batchId = Number(/<batch_id>\s*(\d+)/.exec(created)?.[1]);
  const query = rpc('query_files').el('batch_id', batchId);
  for (const n of names) query.el('phys_name', n);
  const absent = [...(await post('job_file.php', query)).matchAll(/<file>\s*(\d+)/g)].map((m) => Number(m[1]));
  if (absent.length > 0) {
    const upload = rpc('upload_files').el('batch_id', batchId);
    for (const i of absent) upload.el('phys_name', names[i]!);
    await post('job_file.php', upload, absent.map((i) => paths.find((p) => phys.get(p) === names[i])!));
  }
  const x = rpc('submit_batch').open('batch').el('batch_id', batchId).el('batch_name', batch).el('app_name', app!);
  for (let i = 0; i < njobs; i++) {
    x.open('job').el('name', `${batch}#1000.${i}`).open('input_file').el('mode', 'local_staged').el('source', phys.get(files[i % files.length]!)!).close('input_file').close('job');
  }
  await post('submit_rpc_handler.php', x.close('batch'));
}

async function main(): Promise<void> {
  await post('submit_rpc_handler.php', new XmlRequest('ping'));
  console.log('ready');
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [word, batch, njobs, ...files] = line.split(' ').filter((w) => w !== '');
    if (word !== 'SUBMIT') continue;
    calls = 0;
    try {
      await submit(batch!, Number(njobs), files);
      console.log(`OK ${calls}`);
    } catch (err) {
      console.log(`ERROR ${(err as Error).message.replace(/\s+/g, ' ')}`);
    }
  }
}

main().catch((err) => {
  console.error(`project-floor: ${(err as Error).message}`);
  process.exit(1);
});
