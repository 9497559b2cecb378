// A TCP relay in front of an origin that records every byte the origin is sent (to prove that no
// injected or smuggled bytes ever reach it).
import net from 'node:net';

/** A TCP relay in front of an origin that keeps every byte the origin is sent. */
export interface Recorder {
  port: number;
  readonly connections: number;
  received(): string;
  /** What the origin was sent on each connection, in the order they were opened. */
  receivedPerConnection(): string[];
  close(): Promise<void>;
}

export async function startRecorder(targetPort: number): Promise<Recorder> {
  const chunks: Buffer[] = [];
  const perConnection: Buffer[][] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections += 1;
    const own: Buffer[] = [];
    perConnection.push(own);
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.once('close', () => sockets.delete(s));
    }
    client.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      own.push(chunk);
    });
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get connections() {
      return connections;
    },
    received: () => Buffer.concat(chunks).toString('latin1'),
    receivedPerConnection: () => perConnection.map((own) => Buffer.concat(own).toString('latin1')),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
