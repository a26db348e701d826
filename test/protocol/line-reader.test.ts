/** Line framing: LF / CR LF, escaped line breaks, huge and overlong lines, bad UTF-8, any chunking. */
import fc from 'fast-check';
import { LineFramer, type LineEvent } from '../../gahp/protocol/line-reader.js';
import { splitTokens } from '../../gahp/protocol/escape.js';

const RUNS = process.env.SOAK ? 5000 : 300;

function frameAll(data: Buffer, max?: number, chunkSizes?: number[]): LineEvent[] {
  const f = new LineFramer(max);
  const events: LineEvent[] = [];
  if (!chunkSizes) {
    events.push(...f.push(data));
  } else {
    let pos = 0;
    let k = 0;
    while (pos < data.length) {
      const n = Math.max(1, chunkSizes[k++ % chunkSizes.length]!);
      events.push(...f.push(data.subarray(pos, pos + n)));
      pos += n;
    }
  }
  events.push(...f.end());
  return events;
}

const lines = (...texts: string[]): LineEvent[] => texts.map((text) => ({ kind: 'line', text }));

describe('LineFramer', () => {
  test('LF and CR LF end lines; only one unescaped CR before LF is dropped', () => {
    expect(frameAll(Buffer.from('A\nB\r\nC\r\r\n\n\r\n'))).toEqual(lines('A', 'B', 'C\r', '', ''));
    expect(frameAll(Buffer.from('mid\rdle\r\n'))).toEqual(lines('mid\rdle'));
  });

  test('a last line without LF is delivered at EOF; nothing pending gives nothing', () => {
    expect(frameAll(Buffer.from('A\nB'))).toEqual(lines('A', 'B'));
    expect(frameAll(Buffer.from(''))).toEqual([]);
    expect(frameAll(Buffer.from('A\n'))).toEqual(lines('A'));
  });

  test('an escaped LF or CR belongs to the line; an escaped backslash does not escape the LF', () => {
    expect(frameAll(Buffer.from('a\\\nb\r\nc\n'))).toEqual(lines('a\\\nb', 'c'));
    expect(frameAll(Buffer.from('a\\\\\nb\n'))).toEqual(lines('a\\\\', 'b'));
    expect(frameAll(Buffer.from('a\\\\\\\nb\n'))).toEqual(lines('a\\\\\\\nb'));
    expect(frameAll(Buffer.from('arg\\\r\r\n'))).toEqual(lines('arg\\\r'));
    expect(frameAll(Buffer.from('arg\\\r\n'))).toEqual(lines('arg\\\r'));
    // Backslash runs spanning chunk boundaries.
    for (const sizes of [[1], [2], [3], [4, 1], [5, 2]]) {
      expect(frameAll(Buffer.from('x\\\\\\\ny\\\\\nz\n'), undefined, sizes)).toEqual(lines('x\\\\\\\ny\\\\', 'z'));
    }
  });

  test('a line of several MiB is accepted whole', () => {
    const big = 'BOINC_SUBMIT 1 ' + 'job\\ x '.repeat(1_200_000); // ~8.4 MB
    const data = Buffer.from(big + '\r\nVERSION\n');
    const ev = frameAll(data, undefined, [65536]);
    expect(ev).toHaveLength(2);
    expect(ev[0]).toEqual({ kind: 'line', text: big });
    expect(ev[1]).toEqual({ kind: 'line', text: 'VERSION' });
  });

  test('an overlong line is reported once, skipped without being buffered, and the next line is fine', () => {
    const f = new LineFramer(1024);
    const events: LineEvent[] = [];
    let maxHeld = 0;
    const chunk = Buffer.alloc(4096, 'x'.charCodeAt(0));
    for (let i = 0; i < 2560; i++) { // 10 MiB
      events.push(...f.push(chunk));
      maxHeld = Math.max(maxHeld, f.bufferedBytes);
    }
    events.push(...f.push(Buffer.from('\\\nstill the same line\r\nVERSION\n')));
    expect(maxHeld).toBeLessThanOrEqual(1024);
    expect(events).toHaveLength(2);
    expect(events[0]!.kind).toBe('overlong');
    expect((events[0] as { bytes: number }).bytes).toBeGreaterThan(10 * 1024 * 1024);
    expect(events[1]).toEqual({ kind: 'line', text: 'VERSION' });
    // Exactly at the limit is fine; one byte over is not.
    expect(frameAll(Buffer.from('a'.repeat(1024) + '\n'), 1024)).toEqual(lines('a'.repeat(1024)));
    expect(frameAll(Buffer.from('a'.repeat(1025) + '\n'), 1024)[0]!.kind).toBe('overlong');
    expect(frameAll(Buffer.from('a'.repeat(2000)), 1024)[0]!.kind).toBe('overlong');
  });

  test('invalid UTF-8 is reported per line, and the framer carries on', () => {
    const data = Buffer.concat([Buffer.from('ok\n'), Buffer.from([0xff, 0xfe, 0x41, 0x0a]), Buffer.from([0xc3, 0x0a]),
      Buffer.from('é\n'), Buffer.from([0xed, 0xa0, 0x80, 0x0a]), Buffer.from('after\n')]);
    expect(frameAll(data)).toEqual([
      { kind: 'line', text: 'ok' }, { kind: 'invalid-utf8' }, { kind: 'invalid-utf8' },
      { kind: 'line', text: 'é' }, { kind: 'invalid-utf8' }, { kind: 'line', text: 'after' },
    ]);
    // A multi-byte character split across chunks is fine.
    expect(frameAll(Buffer.from('é😀\n'), undefined, [1])).toEqual(lines('é😀'));
  });

  test('property: any chunking of any bytes gives the same events as one push', () => {
    const bytes = fc.array(fc.oneof(
      fc.constantFrom(10, 13, 92, 32, 65, 0xc3, 0xa9, 0xff),
      fc.integer({ min: 0, max: 255 }),
    ), { maxLength: 400 });
    fc.assert(fc.property(bytes, fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 10 }), fc.integer({ min: 1, max: 64 }), (arr, sizes, max) => {
      const data = Buffer.from(arr);
      expect(frameAll(data, max, sizes)).toEqual(frameAll(data, max));
    }), { seed: 11, numRuns: RUNS });
  });

  test('property: request lines built the way HTCondor builds them come back token for token', () => {
    const token = fc.string({ unit: fc.constantFrom(' ', '\\', '\r', '\n', 'a', 'é', '#'), minLength: 1, maxLength: 8 });
    const escape = (s: string) => s.replace(/[ \\\r\n]/g, (c) => '\\' + c);
    fc.assert(fc.property(fc.array(fc.array(token, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 17 }), (reqs, chunk) => {
      const wire = Buffer.from(reqs.map((r) => r.map(escape).join(' ') + '\r\n').join(''));
      const ev = frameAll(wire, undefined, [chunk]);
      expect(ev.map((e) => (e.kind === 'line' ? splitTokens(e.text) : e))).toEqual(reqs);
    }), { seed: 12, numRuns: RUNS });
  });
});
