// closeListeners drains: a balancer-driven shutdown must stop new connections at once, close idle ones,
// give live ones up to drainMs, then end what is left (the caller's tunnels record why), and never leave
// a listener accepting or a socket open past the drain.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeListeners, type ClosableListener } from '../../../src/listen/index.js';
import { waitFor, withTimeout } from '../../support/wait.js';

const clients: net.Socket[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.destroy();
});

async function listener(): Promise<{ l: ClosableListener; port: number }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { l: { server, http: null, sockets, socketFile: null }, port: (server.address() as net.AddressInfo).port };
}

async function connect(port: number, l: ClosableListener, n: number): Promise<net.Socket[]> {
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i += 1) {
    const c = net.connect({ port, host: '127.0.0.1' });
    c.on('error', () => undefined);
    clients.push(c);
    await waitFor(c, 'connect');
    out.push(c);
  }
  await withTimeout(
    new Promise<void>((resolve) => {
      const check = (): void => (l.sockets.size >= n ? resolve() : void setImmediate(check));
      check();
    }),
    2000,
    'accepted',
  );
  return out;
}

describe('closeListeners', () => {
  it('closes idle sockets at once, lets a live one finish within drainMs, and refuses new connections meanwhile', async () => {
    const { l, port } = await listener();
    const [idle, live] = await connect(port, l, 2);
    const serverSides = [...l.sockets];
    const liveServerSide = serverSides[1];
    const ended: net.Socket[] = [];
    const closing = closeListeners([l], 10_000, { isIdle: (s) => s === serverSides[0], endLive: (s) => void ended.push(s) });
    await waitFor(idle!, 'close', 2000);
    const refused = net.connect({ port, host: '127.0.0.1' });
    refused.on('error', () => undefined);
    clients.push(refused);
    await expect(waitFor(refused, 'connect', 1000)).rejects.toThrow();
    // The live connection ends on its own: the drain is over then, not at drainMs.
    const started = Date.now();
    live!.destroy();
    await withTimeout(closing, 3000, 'drain completes once the live connection ends');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(ended).toEqual([]);
    expect(liveServerSide?.destroyed).toBe(true);
  });

  it('ends what is still live when drainMs passes, through endLive, and closes it', async () => {
    const { l, port } = await listener();
    const [live] = await connect(port, l, 1);
    const ended: net.Socket[] = [];
    await withTimeout(closeListeners([l], 100, { isIdle: () => false, endLive: (s) => void ended.push(s) }), 3000, 'drain');
    expect(ended).toHaveLength(1);
    await waitFor(live!, 'close', 2000);
  });
});
