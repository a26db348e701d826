/**
 * TLS in front of a plain-HTTP server (the test server), as a site's https project has:
 * each TLS connection is piped to the target's port. For tests of https projects.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as tls from 'node:tls';

export interface TlsFront {
  port: number;
  close(): Promise<void>;
}

export async function startTlsFront(target: URL, keyFile: string, certFile: string): Promise<TlsFront> {
  const server = tls.createServer({ key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile) }, (client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  // A client that refuses the certificate is what some tests want: not an error here.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
