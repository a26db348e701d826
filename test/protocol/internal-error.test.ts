/**
 * An internal error (an exception nobody caught, a rejection nobody handled) makes the real
 * GAHP exit at once with status 70, saying so in one line on stderr and in the debug log,
 * redacted: the gridmanager restarts it (docs/gahp-protocol.md, "When the GAHP fails").
 *
 * No request can cause such an error (that would be a bug to fix), and the product has no
 * switch for one: the error is injected from outside, by a module node preloads into the
 * child (NODE_OPTIONS=--require) that throws or rejects when the process gets SIGUSR2. Its
 * message carries the authenticator, which must not come out.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GahpProcess, makeTempDir } from '../support/gahp-process.js';
import { startStubServer, type StubServer } from '../support/stub-http.js';

let tmp: string;
let hang: StubServer;

beforeAll(async () => {
  hang = await startStubServer('hang');
});
afterAll(async () => {
  await hang.close();
});
beforeEach(() => {
  tmp = makeTempDir('boinc-gahp-internal-error-');
});
afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A preload module making the process fail on SIGUSR2 the given way, with the secret in the error. */
function faultPreload(kind: 'throw' | 'reject', secret: string): string {
  const file = path.join(tmp, `fault-${kind}.cjs`);
  const fault = `new Error('injected fault for the test (auth ' + ${JSON.stringify(secret)} + ')')`;
  fs.writeFileSync(file, `process.on('SIGUSR2', () => { ${kind === 'throw' ? `throw ${fault}` : `Promise.reject(${fault})`}; });\n`);
  return file;
}

describe.each([
  ['uncaught exception', 'throw'],
  ['unhandled rejection', 'reject'],
] as const)('an %s', (what, kind) => {
  test('with commands in flight: exit status 70 at once, one redacted line on stderr, the stack in the log', async () => {
    const auth = crypto.randomBytes(16).toString('hex');
    const logFile = path.join(tmp, 'gahp.log');
    const preload = faultPreload(kind, auth);
    const g = await GahpProcess.start({
      logFile,
      env: { NODE_OPTIONS: [process.env.NODE_OPTIONS, '--require', preload].filter(Boolean).join(' ') },
    });
    try {
      await g.startup();
      await g.selectProject(hang.url, auth);
      // Work in flight that would keep a shutdown waiting (RPCs to a server that never answers).
      for (let i = 1; i <= 5; i++) expect(await g.request(`BOINC_PING ${i}`)).toBe('S');
      for (let i = 0; i < 100 && hang.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(hang.requests.length).toBeGreaterThan(0);
      // It still answers: the preloaded module does nothing until the signal.
      expect(await g.request('RESULTS')).toBe('S 0');

      g.child.kill('SIGUSR2');
      const exit = await Promise.race([
        g.exited,
        new Promise<'alive'>((resolve) => setTimeout(() => resolve('alive'), 20_000).unref()),
      ]);
      expect(exit).toEqual({ code: 70, signal: null });
      // Nothing more on stdout, and nothing half-written.
      expect(g.unreadLines).toBe(0);
      expect(g.rawStdout.endsWith('\n')).toBe(true);

      const stderrLines = g.stderr.split('\n').filter((l) => l.length > 0);
      expect(stderrLines).toEqual([`boinc-gahp: internal error, exiting: ${what}: Error: injected fault for the test (auth ***)`]);
      const log = fs.readFileSync(logFile, 'utf8');
      expect(log).toMatch(new RegExp(`^\\S+ \\[\\d+ \\S+\\] ERROR internal error, exiting: ${what}: Error: injected fault for the test \\(auth \\*\\*\\*\\)$`, 'm'));
      expect(log).toMatch(/^\S+ \[\d+ \S+\] ERROR \s+at /m); // the stack, for whoever fixes the bug (each line prefixed)
      for (const text of [g.rawStdout, g.stderr, log]) expect(text).not.toContain(auth);
    } finally {
      await g.close();
    }
  });
});
