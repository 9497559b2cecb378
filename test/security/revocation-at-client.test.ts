// Threat: a principal whose grant is revoked keeps receiving data after the revocation
// (UX review 2026-12-04 finding 5). Sluice stopped relaying at once, but what it had already written into
// the kernel's send buffer for a client that reads slowly was still delivered: 6.5 s (forwarded) and
// 9.4 s (tunnel) of data at 500 kB/s, 90 s behind HAProxy. Revocation must end the connection at the
// client: Sluice resets it, so what Sluice had not yet delivered to the client is dropped (the client can
// read only what its own receive buffer already held), and the client sees a reset, not a FIN it could
// take for the end of the transfer. And the record must say why (UX review 2026-12-04 finding 4): a
// forwarded download cut by the revocation was recorded as `response_error`, "the forwarded response
// failed mid-stream". A transfer that ends normally (completed, or the client's own close) still
// delivers every byte. Each client here does not read until the kernel buffers toward it are full (at
// least 1 MiB that Sluice has handed to its kernel), as a slow reader's would be. Real sockets on 127.0.0.1.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { sawReset, watchToClose } from '../support/read-to-close.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';
import { waitFor, waitUntil } from '../support/wait.js';

const MIB = 1024 * 1024;
/** What an origin offers to a download that is revoked: far more than every buffer on the way holds. */
const ENDLESS = 64 * MIB;
/** A download that ends normally: small enough for the kernel buffers to hold while the client waits. */
const SMALL = 512 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** Bound on how long after the revocation the client may still be reading (review: 6.5 s and 9.4 s). */
const AFTER_REVOKE_MS = 2_000;

/** Writes `total` bytes to `out` as fast as it takes them, then ends it (or stops when it is gone). */
function stream(out: NodeJS.WritableStream & { destroyed: boolean }, total: number): void {
  let sent = 0;
  const pump = (): void => {
    while (sent < total && !out.destroyed) {
      const n = Math.min(CHUNK.length, total - sent);
      sent += n;
      if (!out.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) return void out.once('drain', pump);
    }
    if (sent >= total && !out.destroyed) out.end();
  };
  pump();
}

/** A TCP origin that streams `total` bytes to every connection and then sends its FIN; it ignores the client's FIN. */
async function startFirehose(total: number): Promise<{ port: number; close(): Promise<void> }> {
  const live = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    live.add(socket);
    socket.on('close', () => live.delete(socket));
    socket.on('error', () => socket.destroy());
    stream(socket, total);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of live) s.destroy();
        server.close(() => resolve());
      }),
  };
}

let web: Origin;
let endless: Awaited<ReturnType<typeof startFirehose>>;
let small: Awaited<ReturnType<typeof startFirehose>>;
let sluice: TestSluice;
const clients: net.Socket[] = [];

beforeAll(async () => {
  web = await startHttpOrigin({
    handler: (req, res) => {
      const total = req.url === '/small' ? SMALL : ENDLESS;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
      stream(res, total);
    },
  });
  endless = await startFirehose(ENDLESS);
  small = await startFirehose(SMALL);
  sluice = await startSluice({}, { lookup: tableLookup({ 'origin.test': ['127.0.0.1'] }) });
});

afterAll(async () => {
  for (const c of clients) c.destroy();
  await sluice?.close();
  await Promise.all([web?.close(), endless?.close(), small?.close()]);
});

/** A run-time grant for the origins here: http:// for forwarded requests, tcp:// for opaque tunnels. */
async function issue(): Promise<{ id: string; token: string }> {
  const r = await sluice.app.control.issueGrant({
    destinations: [`http://origin.test:${web.port}`, `tcp://origin.test:${endless.port}`, `tcp://origin.test:${small.port}`],
    allowAddressClasses: ['loopback'],
  });
  if (!r.ok) throw new Error(`issue failed: ${JSON.stringify(r)}`);
  return { id: r.value.id, token: r.value.token };
}

/** A client that sends one absolute-form GET and then does not read. */
async function forwardClient(token: string, path: string, extra = ''): Promise<net.Socket> {
  const client = net.connect(sluice.port, '127.0.0.1');
  clients.push(client);
  client.pause();
  await waitFor(client, 'connect');
  client.write(`GET http://origin.test:${web.port}${path} HTTP/1.1\r\nHost: origin.test:${web.port}\r\nProxy-Authorization: Bearer ${token}\r\n${extra}\r\n`);
  return client;
}

/** A client with an established opaque tunnel to `port` that does not read; `early` is what came with the 200. */
async function tunnelClient(token: string, port: number): Promise<{ client: net.Socket; early: number }> {
  const t = await openConnectTunnel(sluice.port, `origin.test:${port}`, { 'Proxy-Authorization': `Bearer ${token}` });
  clients.push(t.socket);
  if (t.status !== 200) throw new Error(`tunnel refused: ${t.head}`);
  t.socket.pause();
  return { client: t.socket, early: t.rest.length };
}

/** Sluice's own socket for `client`: what it has written toward the client is read from there. */
async function sluiceSideOf(client: net.Socket): Promise<net.Socket> {
  let side: net.Socket | undefined;
  await waitUntil(
    () => {
      for (const l of sluice.app.listeners) for (const s of l.sockets) if (s.remotePort === client.localPort) side = s;
      return side !== undefined;
    },
    { timeoutMs: 5_000, label: 'Sluice accepted the client' },
  );
  return side as net.Socket;
}

/**
 * Waits until the kernel holds all it will take toward the client (a write is left in Sluice's own
 * buffer) and at least 1 MiB of it; returns what Sluice has handed to its kernel for the client.
 */
async function kernelFull(side: net.Socket): Promise<number> {
  const handed = (): number => side.bytesWritten - side.writableLength;
  await waitUntil(() => side.writableLength > 0 && handed() >= MIB, { timeoutMs: 15_000, label: 'the buffers toward the client full' });
  return handed();
}

const closesOf = (id: string): ReturnType<TestSluice['closes']> => sluice.closes().filter((r) => r.principal === id);

describe('revocation ends a live connection at the client', () => {
  it('a forwarded download: the client sees a reset within 2 s, not the MiB queued for it, and the close record says revoked', async () => {
    const g = await issue();
    const client = await forwardClient(g.token, '/endless');
    const side = await sluiceSideOf(client);
    const queued = await kernelFull(side);
    const watch = watchToClose(client);

    const revoked = await sluice.app.control.revokeGrant(g.id);
    expect(revoked.ok && revoked.value.endedConnections).toBe(1);
    const r = await watch.read(AFTER_REVOKE_MS);

    expect(sawReset(r)).toBe(true);
    // What it still got is what its own receive buffer held (and the head): far less than was queued.
    expect(r.bytes).toBeLessThan(queued / 2);
    await waitUntil(() => closesOf(g.id).length >= 1, { timeoutMs: 5_000, label: 'the close record' });
    const closes = closesOf(g.id);
    expect(closes).toHaveLength(1);
    expect(closes[0]).toMatchObject({ request: 'forward', status: 200, closedBy: 'revoked' });
    expect(closes[0]?.bytesDown).toBeGreaterThan(2 * r.bytes);
  });

  it('a CONNECT tunnel: the client sees a reset within 2 s, not the MiB queued for it, and the close record says revoked', async () => {
    const g = await issue();
    const { client, early } = await tunnelClient(g.token, endless.port);
    const side = await sluiceSideOf(client);
    const queued = await kernelFull(side);
    const watch = watchToClose(client);

    const revoked = await sluice.app.control.revokeGrant(g.id);
    expect(revoked.ok && revoked.value.endedConnections).toBe(1);
    const r = await watch.read(AFTER_REVOKE_MS);

    expect(sawReset(r)).toBe(true);
    expect(early + r.bytes).toBeLessThan(queued / 2);
    await waitUntil(() => closesOf(g.id).length >= 1, { timeoutMs: 5_000, label: 'the close record' });
    const closes = closesOf(g.id);
    expect(closes).toHaveLength(1);
    expect(closes[0]).toMatchObject({ request: 'connect', status: 200, closedBy: 'revoked' });
    expect(closes[0]?.bytesDown).toBeGreaterThan(2 * (early + r.bytes));
  });
});

describe('a connection that ends normally still delivers every byte', () => {
  it('a completed forwarded download (Connection: close): the client reads it all after Sluice is done, then a FIN', async () => {
    const g = await issue();
    const client = await forwardClient(g.token, '/small', 'Connection: close\r\n');
    const side = await sluiceSideOf(client);
    const watch = watchToClose(client);
    // Sluice has relayed the whole response and closed its side before the client reads a byte.
    await waitUntil(() => closesOf(g.id).length >= 1 && side.closed, { timeoutMs: 15_000, label: 'the response relayed and the connection closed' });
    expect(closesOf(g.id)[0]).toMatchObject({ request: 'forward', status: 200, closedBy: 'completed', bytesDown: SMALL });

    const r = await watch.read(5_000);
    expect(r).toEqual({ bytes: side.bytesWritten, error: null, ended: true });
    expect(r.bytes).toBeGreaterThan(SMALL);
  });

  it('a tunnel the client half-closed: it reads everything the origin sent after Sluice is done, then a FIN', async () => {
    const g = await issue();
    const { client, early } = await tunnelClient(g.token, small.port);
    const side = await sluiceSideOf(client);
    const watch = watchToClose(client);
    client.end();
    await waitUntil(() => closesOf(g.id).length >= 1 && side.closed, { timeoutMs: 15_000, label: 'the tunnel relayed and closed' });
    expect(closesOf(g.id)[0]).toMatchObject({ request: 'connect', closedBy: 'client_closed', bytesDown: SMALL });

    const r = await watch.read(5_000);
    expect(r.error).toBeNull();
    expect(r.ended).toBe(true);
    expect(early + r.bytes).toBe(SMALL);
  });
});
