/**
 * The bundled test server in a child process of its own, so that its work (parsing a
 * 2,000-job submit, storing uploads) neither shares the bench's event loop (which times
 * replies) nor counts towards anyone's RSS. Driven over IPC by lib/server.ts.
 *
 * It also times every HTTP call the server handles, from the request's headers to the end
 * of its reply, through node's http diagnostics channels: the server code is not touched,
 * so the same timing works against the test server of any older commit (at-commit.ts).
 * The end of a reply is where a client can know it is complete: its last byte when it has
 * a length (Content-Length or chunked), else, as BOINC's PHP replies are framed, the
 * server's end of the connection (its FIN: the socket's 'finish').
 * Times are process.hrtime (CLOCK_MONOTONIC on Linux: the same clock in every process).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
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
/** Replies whose body ends with the connection, sent whole but not yet closed. */
const closing = new Set<Promise<void>>();
const started = new WeakMap<IncomingMessage, number>();
diagnosticsChannel.subscribe('http.server.request.start', (m) => {
  started.set((m as { request: IncomingMessage }).request, nowMs());
});

/** The reply tells its own end (Content-Length, chunked): its last byte is its end. */
const hasLength = (res: ServerResponse) => res.hasHeader('content-length') || (res as unknown as { chunkedEncoding: boolean }).chunkedEncoding;

diagnosticsChannel.subscribe('http.server.response.finish', (m) => {
  const { request: req, response: res } = m as { request: IncomingMessage; response: ServerResponse };
  const start = started.get(req);
  if (start === undefined) return;
  const path = (req.url ?? '').replace(/\?.*$/, '');
  const socket = req.socket;
  if (hasLength(res) || socket.writableFinished || socket.destroyed) {
    callTimes.push({ start, end: nowMs(), path });
    return;
  }
  const done = new Promise<void>((resolve) => {
    const end = () => {
      socket.off('finish', end).off('close', end);
      callTimes.push({ start, end: nowMs(), path });
      closing.delete(done);
      resolve();
    };
    socket.on('finish', end).on('close', end);
  });
  closing.add(done);
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
          // A client has the whole reply only after the server's FIN: every call is over.
          await Promise.race([Promise.all(closing), sleep(1000)]);
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
