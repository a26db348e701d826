/**
 * Connections opened ahead (boinc-rpc/spare.ts) as the server sees them from a real GAHP
 * process: a BOINC_SUBMIT's calls come one per connection, and the server accepts one
 * connection more than it gets requests (the one opened for a next call that did not
 * come, closed unused); with `--connect-ahead 0` exactly one per request. The submit's
 * result is the same either way.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { startEnv, batchName, jobName, type Env } from '../commands/helpers.js';
import { submitLine, writeInput, expectOneCompleteBatch } from './support.js';

/** Connections accepted per local port, and whether each one sent anything. */
const accepted = new Map<number, Array<{ sent: boolean }>>();
const onAccept = (m: unknown) => {
  const socket = (m as { socket: Socket }).socket;
  const entry = { sent: false };
  const list = accepted.get(socket.localPort ?? 0) ?? [];
  list.push(entry);
  accepted.set(socket.localPort ?? 0, list);
  socket.once('data', () => (entry.sent = true));
};

beforeAll(() => diagnosticsChannel.subscribe('net.server.socket', onAccept));
afterAll(() => diagnosticsChannel.unsubscribe('net.server.socket', onAccept));

async function submitAndCount(args: string[]): Promise<{ requests: number; connections: Array<{ sent: boolean }> }> {
  const env: Env = await startEnv({}, { args });
  try {
    const port = Number(new URL(env.server.url).port);
    const paths = [0, 1, 2].map((i) => writeInput(env.dir, `ahead${i}.txt`, `input ${i} ${args.join(' ')}\n`));
    const batch = batchName('uppercase');
    const jobs = paths.map((p, i) => ({ name: jobName(batch, 30, i), inputs: [[p, 'in']] as Array<[string, string]> }));
    const since = env.server.rpcLog().length;
    const connectionsBefore = accepted.get(port)?.length ?? 0;
    expect(await env.gahp.call(`BOINC_SUBMIT ${submitLine(batch, 'uppercase', jobs)}`, 60_000)).toEqual(['NULL']);
    expectOneCompleteBatch(env.server, batch, jobs.map((j) => j.name));
    // A connection opened after the last call's request is accepted a moment later.
    await new Promise((r) => setTimeout(r, 100));
    return { requests: env.server.rpcLog().length - since, connections: (accepted.get(port) ?? []).slice(connectionsBefore) };
  } finally {
    await env.close();
  }
}

test('a submit\'s calls each have a connection; one more is opened ahead and left unused', async () => {
  const { requests, connections } = await submitAndCount([]);
  expect(requests).toBeGreaterThanOrEqual(5);
  expect(connections).toHaveLength(requests + 1);
  expect(connections.filter((c) => c.sent)).toHaveLength(requests);
});

test('with --connect-ahead 0, exactly one connection per call', async () => {
  const { requests, connections } = await submitAndCount(['--connect-ahead', '0']);
  expect(requests).toBeGreaterThanOrEqual(5);
  expect(connections).toHaveLength(requests);
  expect(connections.every((c) => c.sent)).toBe(true);
});
