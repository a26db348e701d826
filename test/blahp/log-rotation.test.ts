/**
 * The BLAHP log (boinc_log) rotates as the GAHP's does, set from blah.config
 * (boinc_max_log, boinc_max_num_log): job owners' scripts, running side by side, share the
 * file and rotate it without losing a line, and each file they make is group-writable
 * (docs/blahp.md, "The log").
 */
import * as fs from 'node:fs';
import { jobDir, blahpEnvForFile } from './support.js';

const env = blahpEnvForFile({}, { boinc_max_log: '2K', boinc_max_num_log: '100' });

test('scripts side by side rotate the shared log past boinc_max_log: every line kept, every file 0660', async () => {
  const n = 8;
  const subs = await Promise.all(Array.from({ length: n }, (_, k) => {
    const iwd = jobDir(env(), `rot${k}`, `rotation ${k}\n`);
    return env().blahpd.submit({ Cmd: '/usr/bin/true', Queue: 'uppercase', Iwd: iwd, TransferInput: 'in', TransferOutput: 'out', Out: 'o', Err: 'e', JobDirectory: iwd });
  }));
  expect(subs.every((s) => s.jobId !== null && s.jobId !== undefined)).toBe(true);
  for (const s of subs) await env().blahpd.status(s.jobId!);
  const files = fs.readdirSync(env().dir).filter((f) => /^blahp\.log(\.\d{8}T\d{6}\.\d{3}Z\.\d+)?$/.test(f));
  expect(files.length).toBeGreaterThan(1);
  for (const f of files) expect({ f, mode: fs.statSync(`${env().dir}/${f}`).mode & 0o777 }).toEqual({ f, mode: 0o660 });
  const all = files.map((f) => fs.readFileSync(`${env().dir}/${f}`, 'utf8')).join('');
  // Each submit call logs its job once; lines are whole.
  expect(all.match(/ INFO blahp submit \S+: app uppercase, 1 inputs, queued in group /g)).toHaveLength(n);
  expect(all).toMatch(/^(\d{4}-\d\d-\d\dT[\d:.]+Z \[\d+ \S+\] [A-Z]+ [^\n]*\n)+$/);
}, 180_000);
