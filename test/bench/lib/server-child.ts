/**
 * The bundled test server in a child process of its own, so that its work (parsing a
 * 2,000-job submit, storing uploads) neither shares the bench's event loop (which times
 * replies) nor counts towards anyone's RSS. Driven over IPC by lib/server.ts.
 *
 * It also times every HTTP call the server handles, from the request's headers to the end
 * of its reply, through node's http diagnostics channels: the server code is not touched,
 * so the same timing works against the test server of any older commit (at-commit.ts).
 * Times are process.hrtime (CLOCK_MONOTONIC on Linux: the same clock in every process).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { startTestServer } from '../../../fixtures/test-server/index.js';
import type { ExtendedTestServerOptions } from '../../../fixtures/test-server/index.js';

interface Request {
  id: number;
  op: 'advanceAll' | 'summary' | 'clearRpcLog' | 'calls' | 'close';
  batchName?: string;
  to?: 'UNSENT' | 'IN_PROGRESS' | 'DONE' | 'ERROR';
}

/** One HTTP call as the server saw it: ms on the shared monotonic clock, and its URL path. */
export interface CallTime {
  start: number;
  end: number;
  path: string;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const callTimes: CallTime[] = [];
const started = new WeakMap<IncomingMessage, number>();
diagnosticsChannel.subscribe('http.server.request.start', (m) => {
  started.set((m as { request: IncomingMessage }).request, nowMs());
});
diagnosticsChannel.subscribe('http.server.response.finish', (m) => {
  const req = (m as { request: IncomingMessage }).request;
  const start = started.get(req);
  if (start !== undefined) callTimes.push({ start, end: nowMs(), path: (req.url ?? '').replace(/\?.*$/, '') });
});

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? '{}') as ExtendedTestServerOptions;
  const server = await startTestServer(opts);
  const send = (m: unknown) => process.send!(m);
  send({ ready: true, url: server.url, authenticator: server.authenticator });
  process.on('disconnect', () => {
    void server.close().finally(() => process.exit(0));
  });
  // An IPC listener is not awaited: each request runs as its own task and reports its own failure.
  process.on('message', (req: Request) => void (async () => {
    try {
      let result: unknown = null;
      switch (req.op) {
        case 'advanceAll':
          server.advanceAll(req.batchName, req.to);
          break;
        case 'summary': {
          const rpcs: Record<string, number> = {};
          for (const e of server.rpcLog()) rpcs[e.rpc] = (rpcs[e.rpc] ?? 0) + 1;
          const files = server.files();
          result = {
            batches: server.batches().length,
            jobs: server.jobs().length,
            files: files.length,
            fileBytes: files.reduce((a, f) => a + f.size, 0),
            rpcs,
          };
          break;
        }
        case 'clearRpcLog':
          server.clearRpcLog();
          callTimes.length = 0;
          break;
        case 'calls':
          result = callTimes;
          break;
        case 'close':
          await server.close();
          send({ id: req.id, result: null });
          process.exit(0);
      }
      send({ id: req.id, result });
    } catch (err) {
      send({ id: req.id, error: (err as Error).message });
    }
  })());
}

main().catch((err) => {
  process.stderr.write(`bench server: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
