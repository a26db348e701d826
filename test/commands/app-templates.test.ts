/**
 * The age bound of the templates kept between fetches (gahp/app-templates.ts; docs/boinc-server.md,
 * "Templates kept between fetches"), with a short bound, against the test server over HTTP:
 * the GAHP's 5 minutes cannot be waited out in a test, the rule is the same.
 */
import { BoincClient } from '../../boinc-rpc/client.js';
import { sampleApps, startTestServer, type ExtendedTestBoincServer } from '../../fixtures/test-server/index.js';
import { AppTemplateMemory } from '../../gahp/app-templates.js';

const uppercase = sampleApps.find((a) => a.name === 'uppercase')!;

describe('AppTemplateMemory', () => {
  let server: ExtendedTestBoincServer;
  let rpc: BoincClient;
  beforeAll(async () => {
    server = await startTestServer();
    rpc = new BoincClient({ projectUrl: server.url, authenticator: server.authenticator });
  });
  afterAll(async () => {
    rpc.close();
    await server.close();
  });
  const asked = () => server.rpcLog().filter((e) => e.rpc === 'get_templates').length;
  const signal = new AbortController().signal;

  test('an answer serves until its age runs out, then the app is asked again', async () => {
    const maxAgeMs = 3000;
    const memory = new AppTemplateMemory(maxAgeMs);
    const first = await memory.get(rpc, 'account', 'uppercase', 0, signal);
    expect(first.templates.outputOpenNames).toEqual(['out']);
    server.replaceApp({ ...uppercase, outputs: [{ openName: 'upper' }] });
    try {
      // Within the bound the kept answer serves, though the server's template has changed.
      const kept = await memory.get(rpc, 'account', 'uppercase', 0, signal);
      expect(kept).toBe(first);
      expect(asked()).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, first.askedAt + maxAgeMs + 1 - Date.now()));
      const after = await memory.get(rpc, 'account', 'uppercase', 0, signal);
      expect(after.templates.outputOpenNames).toEqual(['upper']);
      expect(asked()).toBe(2);
      // Another account's answer is its own.
      await memory.get(rpc, 'other account', 'uppercase', 0, signal);
      expect(asked()).toBe(3);
    } finally {
      server.replaceApp(uppercase);
    }
  });
});
