/**
 * The CLI's progress display of BOINC_SUBMIT (gahp/cli/progress.ts): a bar over hashing,
 * then over uploads, drawn in place on a terminal; nothing at all elsewhere (the CLI only
 * hooks the view up on a terminal).
 */
import { PassThrough } from 'node:stream';
import { ProgressLine, SubmitProgressView, formatBytePair, formatBytes } from '../../gahp/cli/progress.js';

function fakeTerminal(): { out: PassThrough & { isTTY: boolean; columns: number }; text: () => string } {
  const out = Object.assign(new PassThrough(), { isTTY: true, columns: 200 });
  let text = '';
  out.setEncoding('utf8');
  out.on('data', (d: string) => (text += d));
  return { out, text: () => text };
}

const MiB = 1024 * 1024;

test('formatBytes', () => {
  expect(formatBytes(512)).toBe('512 B');
  expect(formatBytes(1536)).toBe('1.5 KiB');
  expect(formatBytes(500 * MiB)).toBe('500.0 MiB');
  expect(formatBytes(3 * 1024 * MiB)).toBe('3.0 GiB');
  expect(formatBytePair(12.5 * MiB, 480 * MiB)).toBe('12.5/480.0 MiB');
  expect(formatBytePair(0, 100)).toBe('0/100 B');
});

test('hashing, then uploading, then staged: bars drawn in place on a terminal', async () => {
  const t = fakeTerminal();
  const line = new ProgressLine(t.out);
  const view = new SubmitProgressView(line, 'uppercase: 4 jobs');
  const ev = (phase: 'hash' | 'upload', files: number) => ({ phase, doneFiles: files, totalFiles: 4, doneBytes: files * MiB, totalBytes: 4 * MiB });
  view.event(ev('hash', 0));
  view.event(ev('hash', 2));
  let drawn = t.text().split('\r\x1b[K').at(-1)!;
  expect(drawn).toMatch(/^\[#{12}-{12}\] uppercase: 4 jobs: hashing 2\.0\/4\.0 MiB \(2\/4 files\)/);
  view.event(ev('upload', 1));
  drawn = t.text().split('\r\x1b[K').at(-1)!;
  expect(drawn).toContain('hashing 2.0/4.0 MiB (2/4 files), 1 on the server');
  view.event(ev('hash', 4));
  drawn = t.text().split('\r\x1b[K').at(-1)!;
  expect(drawn).toMatch(/^\[#{6}-{18}\] uppercase: 4 jobs: uploading 1\.0\/4\.0 MiB \(1\/4 files\)/);
  view.event(ev('upload', 4));
  drawn = t.text().split('\r\x1b[K').at(-1)!;
  expect(drawn).toMatch(/^[|/\\-] uppercase: 4 jobs: inputs staged, creating the jobs/);
  line.stop();
  expect(t.text().endsWith('\r\x1b[K')).toBe(true);
});
