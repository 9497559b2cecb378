// `sluice bridge`: inside a sandbox's network namespace (loopback only), accepts on 127.0.0.1:<port> and
// relays each connection byte for byte to one grant's dedicated Unix socket bound into the sandbox. It
// holds no authority: the principal is whichever grant's socket it reaches; it reads and decides nothing.
import net from 'node:net';
import { SlotSet } from '../../core/index.js';
import { connectUnix } from '../../egress/index.js';
import { bindTcp } from '../../listen/index.js';

export interface Bridge {
  readonly port: number;
  close(): Promise<void>;
}

const BRIDGE_SLOT = Symbol('sluice.bridgeSlot');

export async function startBridge(host: string, port: number, grantSocket: string, onError: (message: string) => void): Promise<Bridge> {
  // One member per connection: a SlotSet, not a Set (ADR 0025).
  const sockets = new SlotSet<net.Socket>(BRIDGE_SLOT);
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    client.pause();
    connectUnix(grantSocket).then(
      (upstream) => {
        sockets.add(upstream);
        upstream.once('close', () => {
          sockets.delete(upstream);
          client.destroy();
        });
        upstream.on('error', () => upstream.destroy());
        client.once('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      },
      (error: Error) => {
        onError(`cannot reach the grant socket ${grantSocket}: ${error.message}`);
        client.destroy();
      },
    );
  });
  await bindTcp(server, host, port);
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
