/**
 * The real bin/boinc-gahp as a child process over pipes, spoken to as HTCondor's
 * gridmanager does (CR LF line ends, the start-up sequence of gahp-client.cpp).
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GahpProcess, makeTempDir } from '../support/gahp-process.js';
import { startStubServer, type StubServer } from '../support/stub-http.js';

const BANNER = '$GahpVersion: 1.0.0 Dec 02 2026 boinc-gahp $';
const CONDOR_VERSION_REPLY = 'S $GahpVersion:\\ 1.0.0\\ Dec\\ 02\\ 2026\\ boinc-gahp\\ $';
/**
 * The COMMANDS reply a gridmanager session gets (docs/gahp-protocol.md): the session
 * example's 16 words and the BLAH commands of batch boinc (docs/blah-route.md), sorted.
 */
const ALL_COMMANDS = 'S ASYNC_MODE_OFF ASYNC_MODE_ON BLAH_JOB_CANCEL BLAH_JOB_REFRESH_PROXY BLAH_JOB_STATUS BLAH_JOB_SUBMIT BLAH_PING BOINC_ABORT_JOBS BOINC_FETCH_OUTPUT BOINC_PING BOINC_QUERY_BATCHES BOINC_RETIRE_BATCH BOINC_SELECT_PROJECT BOINC_SET_LEASE BOINC_SUBMIT COMMANDS CONDOR_VERSION QUIT RESPONSE_PREFIX RESULTS VERSION';
const ALL_WORDS = ALL_COMMANDS.split(' ').slice(1);

/** Every command exists: the reply is the session example's list, word for word. */
function checkCommandsReply(reply: string): void {
  expect(reply).toBe(ALL_COMMANDS);
}

const authenticator = (): string => crypto.randomBytes(16).toString('hex');

describe('the real GAHP over pipes', () => {
  let stub: StubServer;
  let tmp: string;
  beforeAll(async () => {
    stub = await startStubServer('ok');
  });
  afterAll(async () => {
    await stub.close();
  });
  beforeEach(() => {
    tmp = makeTempDir('boinc-gahp-proto-');
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("HTCondor's start-up sequence, every reply byte for byte", async () => {
    const g = await GahpProcess.start();
    try {
      const auth = authenticator();
      g.sendCrlf('COMMANDS');
      const commands = await g.readLine();
      checkCommandsReply(commands);
      g.sendCrlf('CONDOR_VERSION $CondorVersion:\\ 9.0.0\\ May\\ 01\\ 2021\\ $');
      expect(await g.readLine()).toBe(CONDOR_VERSION_REPLY);
      g.sendCrlf('RESPONSE_PREFIX GAHP:');
      expect(await g.readLine()).toBe('S');
      g.sendCrlf('ASYNC_MODE_ON');
      expect(await g.readLine()).toBe('GAHP:S');
      g.sendCrlf(`BOINC_SELECT_PROJECT ${stub.url} ${auth}`);
      expect(await g.readLine()).toBe('GAHP:S');
      g.sendCrlf('BOINC_PING 1');
      expect(await g.readLine()).toBe('GAHP:S');
      expect(await g.readLine()).toBe('GAHP:R');
      g.sendCrlf('RESULTS');
      expect(await g.readLine()).toBe('GAHP:S 1');
      expect(await g.readLine()).toBe('GAHP:1 NULL');
      g.sendCrlf('VERSION');
      expect(await g.readLine()).toBe('GAHP:S ' + BANNER);
      g.sendCrlf('QUIT');
      expect(await g.readLine()).toBe('GAHP:S');
      const { code } = await g.exited;
      expect(code).toBe(0);
      expect(g.rawStdout).toBe([
        BANNER, commands, CONDOR_VERSION_REPLY, 'S', 'GAHP:S', 'GAHP:S', 'GAHP:S', 'GAHP:R', 'GAHP:S 1', 'GAHP:1 NULL',
        'GAHP:S ' + BANNER, 'GAHP:S', '',
      ].join('\n'));
      expect(g.stderr).toBe('');
    } finally {
      await g.close();
    }
  });

  test('the COMMANDS list is exactly the 16 words of the session example and the 5 BLAH commands, sorted, each once', async () => {
    const g = await GahpProcess.start();
    try {
      const reply = await g.request('COMMANDS');
      expect(ALL_WORDS).toHaveLength(21);
      expect(ALL_WORDS).toEqual([...new Set(ALL_WORDS)].sort());
      expect(reply.split(' ').slice(1)).toEqual(ALL_WORDS);
      expect(reply).toBe(ALL_COMMANDS);
    } finally {
      await g.close();
    }
  });

  test('malformed lines each get exactly one E, and the GAHP then answers VERSION', async () => {
    const g = await GahpProcess.start();
    try {
      await g.startup();
      const garbage = crypto.createHash('sha256').update('seed').digest();
      const big = Buffer.alloc(1024 * 1024);
      for (let i = 0; i < big.length; i++) {
        const b = garbage[i % 32]! ^ (i * 131 & 0xff);
        big[i] = b === 10 || b === 92 ? 0x41 : b; // no line end, no escape of the line end
      }
      const bad: Array<string | Buffer> = [
        'BOINC_SUBMIT 1', 'BOINC_QUERY_BATCHES 2', 'BOINC_FETCH_OUTPUT 3 job', 'BOINC_SET_LEASE 4 b', 'BOINC_PING abc',
        'BOINC_PING 0', 'BOINC_PING 5 extra', 'BOINC_PING', 'BOINC_SELECT_PROJECT', 'BOINC_SELECT_PROJECT http://x/',
        'BOINC_SELECT_PROJECT http://x/ a b', 'BOINC_ABORT_JOBS', 'BOINC_RETIRE_BATCH 6',
        'FROBNICATE', 'frobnicate 1 2 3', '', '   ', 'RESULTS 1', 'CONDOR_VERSION', 'RESPONSE_PREFIX',
        Buffer.concat([Buffer.from('BOINC_PING 7 '), big]),
        big,
        Buffer.from([0xff, 0xfe, 0x42, 0x4f, 0x49, 0x4e, 0x43]),
        Buffer.from([0x42, 0x4f, 0x49, 0x4e, 0x43, 0x5f, 0x50, 0x49, 0x4e, 0x47, 0x20, 0x31, 0xc3]),
      ];
      for (const line of bad) {
        g.sendRaw(typeof line === 'string' ? line + '\r\n' : Buffer.concat([line, Buffer.from('\r\n')]));
        const reply = await g.readLine();
        expect(reply.startsWith('GAHP:E')).toBe(true);
        expect(reply.length).toBeLessThan(8192);
      }
      g.sendCrlf('VERSION');
      expect(await g.readLine()).toBe('GAHP:S ' + BANNER);
      expect(g.unreadLines).toBe(0);
      expect(await g.quit()).toBe(0);
    } finally {
      await g.close();
    }
  });

  test('a line of several MiB gets its one reply; a line over 64 MiB gets E and is skipped', async () => {
    const g = await GahpProcess.start();
    try {
      await g.startup();
      const mib = Buffer.alloc(1024 * 1024, 'a\\ b '); // escaped spaces and separators
      const write = async (data: Buffer): Promise<void> => {
        if (!g.child.stdin.write(data)) await new Promise((r) => g.child.stdin.once('drain', r));
      };
      await write(Buffer.from('BOINC_ABORT_JOBS 11 '));
      for (let i = 0; i < 6; i++) await write(mib);
      await write(Buffer.from('\r\n'));
      expect(await g.readReply(30000)).toBe('S');
      await write(Buffer.from('BOINC_PING 12 '));
      for (let i = 0; i < 65; i++) await write(mib);
      await write(Buffer.from('\r\nVERSION\r\n'));
      expect(await g.readReply(30000)).toMatch(/^E line\\ too\\ long/);
      expect(await g.readReply()).toBe('S ' + BANNER);
      expect(await g.quit()).toBe(0);
    } finally {
      await g.close();
    }
  });

  test('VERSION is answered at once while hundreds of pings hang on an unresponsive server', async () => {
    const hang = await startStubServer('hang');
    const g = await GahpProcess.start();
    try {
      await g.startup();
      await g.selectProject(hang.url, authenticator());
      for (let i = 1; i <= 300; i++) g.sendCrlf(`BOINC_PING ${i}`);
      for (let i = 1; i <= 300; i++) expect(await g.readReply()).toBe('S');
      // The pings never get an answer (the server hangs; the RPC timeout is 60 s), so VERSION
      // answered with no result ready shows it did not wait behind them, whatever the load.
      expect(await g.request('VERSION')).toBe('S ' + BANNER);
      expect(await g.request('RESULTS')).toBe('S 0');
      // The pings did go out: wait for the first to reach the server (no fixed sleep).
      for (let waited = 0; hang.requests.length === 0 && waited < 30000; waited += 50) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(hang.requests.length).toBeGreaterThan(0);
    } finally {
      await g.close();
      await hang.close();
    }
  });

  for (const how of ['QUIT', 'EOF'] as const) {
    test(`${how} with pings in flight to a server that never answers exits within a few seconds`, async () => {
      const hang = await startStubServer('hang');
      const g = await GahpProcess.start({ logFile: path.join(tmp, 'gahp.log') });
      try {
        await g.startup();
        await g.selectProject(hang.url, authenticator());
        for (let i = 1; i <= 40; i++) expect(await g.request(`BOINC_PING ${i}`)).toBe('S');
        // Wait until the RPCs are really on the wire.
        for (let i = 0; i < 100 && hang.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
        expect(hang.requests.length).toBeGreaterThan(0);
        const t0 = Date.now();
        if (how === 'QUIT') {
          g.sendCrlf('QUIT');
          expect(await g.readReply()).toBe('S');
        } else {
          g.child.stdin.end();
        }
        const { code } = await g.exited;
        const took = Date.now() - t0;
        expect(code).toBe(0);
        expect(took).toBeLessThan(4000);
        // Nothing but the QUIT reply after the QUIT: no results, no R.
        expect(g.unreadLines).toBe(0);
        // The RPCs the exit cut off are not failures (10.0's shutdown logged them as such).
        const logged = fs.readFileSync(path.join(tmp, 'gahp.log'), 'utf8');
        expect(logged).toMatch(/ INFO BOINC_PING \d+ cut off at shutdown /);
        expect(logged).not.toMatch(/ failed: /);
      } finally {
        await g.close();
        await hang.close();
      }
    });
  }

  test('the gridmanager going away (stdout closed) makes the GAHP exit, not spin', async () => {
    const g = await GahpProcess.start();
    try {
      await g.startup();
      g.child.stdout.destroy();
      const t0 = Date.now();
      for (let i = 0; i < 20; i++) g.sendCrlf('VERSION');
      const { code, signal } = await g.exited;
      expect(signal).toBeNull();
      expect(code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(4000);
    } finally {
      await g.close();
    }
  });

  test('the authenticator never appears in the log, stdout or stderr, across failing RPCs', async () => {
    const auth = authenticator();
    const failing = await startStubServer('error', `database error for user ${auth}: <authenticator>${auth}</authenticator>`);
    const logFile = path.join(tmp, 'gahp.log');
    // Both ways of logging, side by side (failing RPCs take seconds of retries).
    await Promise.all((['--log', '--debug'] as const).map(async (mode) => {
      const g = await GahpProcess.start(mode === '--log' ? { logFile } : { args: ['--debug'] });
      try {
        await g.startup();
        // Success, then a server that fails (with the secret in its error page), then nobody listening.
        await g.selectProject(stub.url, auth);
        expect(await g.call('BOINC_PING')).toEqual(['NULL']);
        await g.selectProject(failing.url, auth);
        const err = await g.call('BOINC_PING');
        expect(err).toHaveLength(1);
        expect(err[0]).not.toBe('NULL');
        await g.selectProject('http://127.0.0.1:1/proj/', auth);
        expect((await g.call('BOINC_PING'))[0]).not.toBe('NULL');
        // Malformed selections carrying the secret.
        expect(await g.request(`BOINC_SELECT_PROJECT ${stub.url} ${auth} extra`)).toMatch(/^E/);
        // A URL it cannot use is still answered S (anything else aborts the gridmanager):
        // the commands for it fail, naming the URL, never the authenticator.
        expect(await g.request(`BOINC_SELECT_PROJECT not-a-url ${auth}`)).toBe('S');
        const unusable = await g.call('BOINC_PING');
        expect(unusable).toHaveLength(1);
        expect(unusable[0]).toMatch(/project URL "not-a-url" is not an http\(s\) URL/);
        expect(await g.request(`BOINC_SELECT_PROJECT ${auth}`)).toMatch(/^E/);
        expect(await g.request(`boinc_select_project ${stub.url}${auth}/ ${auth}`)).toBe('S');
        expect((await g.call('BOINC_PING'))[0]).toBeDefined();
        expect(await g.request(`BOINC_SELECT_PROJEC ${stub.url} ${auth}`)).toMatch(/^E/);
        expect(await g.quit()).toBe(0);
      } finally {
        await g.close();
      }
      expect(g.rawStdout).not.toContain(auth);
      expect(g.stderr).not.toContain(auth);
      if (mode === '--debug') {
        expect(g.stderr).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[\d+ \S+\] DEBUG < BOINC_SELECT_PROJECT http:\/\/127\.0\.0\.1:\d+\/proj\/ \*\*\*$/m);
      }
    }));
    const log = fs.readFileSync(logFile, 'utf8');
    expect(log).not.toContain(auth);
    // The log does record the session: timestamped lines both ways.
    expect(log).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[\d+ \S+\] DEBUG < BOINC_PING 2$/m);
    expect(log).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[\d+ \S+\] DEBUG > GAHP:S$/m);
    expect(log).toMatch(/DEBUG > GAHP:2 /);
    // Written to the end, though the process exits right after QUIT.
    expect(log.trimEnd().split('\n').pop()).toMatch(/INFO QUIT: shutting down$/);
    expect((fs.statSync(logFile).mode & 0o777).toString(8)).toBe('600');
    await failing.close();
  });
});
