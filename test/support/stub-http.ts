/**
 * A tiny HTTP server on 127.0.0.1 for protocol-level tests that need an RPC to succeed,
 * fail or never answer (no BOINC logic: use fixtures/test-server for that).
 */
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type StubMode =
  /** Answers every request with a BOINC-style success reply. */
  | 'ok'
  /** Accepts connections and reads requests but never answers. */
  | 'hang'
  /** Answers 500 with a body. */
  | 'error';

export interface StubServer {
  /** Base URL ending with `/`. */
  url: string;
  /** Requests received so far (bodies included, for secret checks). */
  requests: Array<{ url: string; body: string }>;
  /** Connections currently open. */
  readonly openConnections: number;
  close(): Promise<void>;
}

export async function startStubServer(mode: StubMode, errorBody = 'Internal error'): Promise<StubServer> {
  const sockets = new Set<Socket>();
  const requests: StubServer['requests'] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      requests.push({ url: req.url ?? '', body: Buffer.concat(parts).toString('latin1') });
      if (mode === 'hang') return;
      if (mode === 'error') {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(errorBody);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/xml' });
      res.end('<?xml version="1.0" encoding="ISO-8859-1" ?>\n<reply>\n<success>1</success>\n</reply>\n');
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/proj/`,
    requests,
    get openConnections() {
      return sockets.size;
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
