// Owns the TLS front: terminates TLS on 127.0.0.1 and pipes each decrypted connection to a loopback
// TCP port, turning a plain HTTP proxy (e.g. the Squid fixture) into an HTTPS proxy.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import type { TestPki } from './pki.js';

export interface TlsFront {
  port: number;
  /** `https://127.0.0.1:<port>` */
  url: string;
  /** Number of TLS connections that completed the handshake. */
  readonly connections: number;
  /** Destroys every client and upstream socket, then closes the listener. Idempotent. */
  close(): Promise<void>;
}

/** Names the front's certificate should cover: pass `createTestPki(TLS_FRONT_NAMES)`. */
export const TLS_FRONT_NAMES = ['127.0.0.1', 'localhost', 'proxy.test'];

/** TLS server on 127.0.0.1:0 (leaf from `pki`) forwarding decrypted bytes to 127.0.0.1:targetPort. */
export function startTlsFront(pki: TestPki, targetPort: number): Promise<TlsFront> {
  const sockets = new Set<net.Socket>();
  const trackSocket = (socket: net.Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  let handshakes = 0;

  const server = tls.createServer({ key: pki.keyPem, cert: pki.certPem });
  server.on('connection', trackSocket);
  server.on('tlsClientError', (_err, socket) => socket.destroy());
  server.on('secureConnection', (client: tls.TLSSocket) => {
    handshakes += 1;
    trackSocket(client);
    const upstream = net.connect({ port: targetPort, host: '127.0.0.1' });
    trackSocket(upstream);
    const teardown = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', teardown);
    upstream.on('error', teardown);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      const { port } = server.address() as AddressInfo;
      resolve({
        port,
        url: `https://127.0.0.1:${port}`,
        get connections() {
          return handshakes;
        },
        close,
      });
    });
  });
}
