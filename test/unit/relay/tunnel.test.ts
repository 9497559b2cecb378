// Tunnel.end: how a tunnel ended from outside closes its two sockets and what its outcome records.
// Threat (UX review 2026-12-04 findings 4 and 5): a revoked tunnel kept delivering already-relayed bytes to
// the client, and a revocation could be recorded as something else. A withdrawal (revoked, expired,
// grant_changed, byte_limit, duration_limit) resets both sides and is the recorded reason even after one
// side had half-closed; an idle timeout or a shutdown keeps the ordinary close. Real sockets on 127.0.0.1.
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { reusedReadsOf, type CloseReason, type PinnedAddress } from '../../../src/core/index.js';
import { dial } from '../../../src/egress/index.js';
import { Tunnel, type ByteBudget } from '../../../src/relay/index.js';
import { waitFor, waitForClose, waitUntil } from '../../support/wait.js';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

/**
 * A connected pair on 127.0.0.1: `near` is Sluice's side (half-open allowed, as Sluice's are), `far` the
 * peer's: a client closes once it has seen the FIN, an origin may go on writing after it.
 */
async function tcpPair(farHalfOpen: boolean): Promise<{ near: net.Socket; far: net.Socket }> {
  const server = net.createServer({ allowHalfOpen: true });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = waitFor<net.Socket>(server, 'connection');
  const far = net.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1', allowHalfOpen: farHalfOpen });
  // Errors are read where a test looks for them (waitForClose); none may crash the worker.
  far.on('error', () => undefined);
  sockets.push(far);
  const [near] = await Promise.all([accepted, waitFor(far, 'connect')]);
  sockets.push(near);
  return { near, far };
}

/** A live tunnel between a client and an origin, with the far ends the test plays. */
async function liveTunnel(): Promise<{ tunnel: Tunnel; client: net.Socket; origin: net.Socket }> {
  const c = await tcpPair(false);
  const o = await tcpPair(true);
  const tunnel = new Tunnel(c.near, o.near, { idleTimeoutMs: 60_000 }, Buffer.alloc(0));
  return { tunnel, client: c.far, origin: o.far };
}

describe('Tunnel.end', () => {
  it.each<CloseReason>(['revoked', 'expired', 'grant_changed', 'byte_limit', 'duration_limit'])('%s resets the client and the origin, and records the reason', async (reason) => {
    const { tunnel, client, origin } = await liveTunnel();
    const clientEnd = waitForClose(client);
    const originEnd = waitForClose(origin);
    client.resume();
    origin.resume();
    tunnel.end(reason);
    expect(await clientEnd).toBe('ECONNRESET');
    expect(await originEnd).toBe('ECONNRESET');
    expect((await tunnel.done).closedBy).toBe(reason);
  });

  it.each<CloseReason>(['idle_timeout', 'proxy_shutdown'])('%s closes both sides without a reset', async (reason) => {
    const { tunnel, client, origin } = await liveTunnel();
    const clientEnd = waitForClose(client);
    const originFin = waitFor(origin, 'end');
    client.resume();
    origin.resume();
    tunnel.end(reason);
    expect(await clientEnd).toBeNull();
    await originFin;
    expect((await tunnel.done).closedBy).toBe(reason);
  });

  it('records a revocation that cuts a half-closed tunnel as revoked, not as the client’s close', async () => {
    const { tunnel, client, origin } = await liveTunnel();
    origin.resume();
    const originSawFin = waitFor(origin, 'end');
    client.end();
    await originSawFin;
    // The origin is still answering the half-closed client when the grant is revoked.
    const arrived = waitFor(client, 'data');
    origin.write('still streaming');
    await arrived;
    tunnel.end('revoked');
    expect((await tunnel.done).closedBy).toBe('revoked');
  });

  it('keeps the first reason when a tunnel had already finished both ways', async () => {
    const { tunnel, client, origin } = await liveTunnel();
    client.resume();
    origin.resume();
    client.end();
    await waitFor(origin, 'end');
    origin.end();
    await waitUntil(() => tunnel.client.readableEnded && tunnel.upstream.readableEnded, { timeoutMs: 5_000, label: 'both FINs passed on' });
    tunnel.end('revoked');
    expect((await tunnel.done).closedBy).toBe('client_closed');
  });
});

/**
 * A tunnel whose upstream is dialed the way tunnels are (egress dial(): reused reads, ADR 0022) to an
 * origin that sends `payload` and its FIN at once, and attached only after those bytes were read.
 */
async function tunnelAfterEarlyBytes(payload: Buffer, budget: ByteBudget | null): Promise<{ tunnel: Tunnel; client: net.Socket }> {
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => undefined);
    socket.end(payload);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const target = { address: '127.0.0.1', family: 4, port: (server.address() as net.AddressInfo).port, class: 'loopback' } as unknown as PinnedAddress;
  const dialed = await dial([target], { timeoutMs: 5_000 });
  if (!dialed.ok) throw new Error(dialed.detail);
  const upstream = dialed.value.socket;
  sockets.push(upstream);
  const reads = reusedReadsOf(upstream);
  expect(reads).toBeDefined();
  await waitUntil(() => (reads?.earlyBytes ?? 0) > 0, { timeoutMs: 5_000, label: 'the origin’s first bytes read before the tunnel' });
  const c = await tcpPair(false);
  const tunnel = new Tunnel(c.near, upstream, { idleTimeoutMs: 60_000 }, Buffer.alloc(0), budget);
  return { tunnel, client: c.far };
}

async function readAll(socket: net.Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await waitFor(socket, 'end', 10_000);
  return Buffer.concat(chunks);
}

describe('Tunnel over a dialed socket with reused reads', () => {
  it('relays what the origin sent before the tunnel attached first, then the rest and its FIN, all counted', async () => {
    const payload = randomBytes(3 * 1024 * 1024 + 17);
    const { tunnel, client } = await tunnelAfterEarlyBytes(payload, null);
    const got = await readAll(client);
    client.end();
    expect(createHash('sha256').update(got).digest('hex')).toBe(createHash('sha256').update(payload).digest('hex'));
    const outcome = await tunnel.done;
    expect(outcome.bytesDown).toBe(payload.length);
    expect(outcome.closedBy).toBe('origin_closed');
  });

  it('counts the early bytes against the budget: past maxBytes the tunnel ends with byte_limit and they never reach the client', async () => {
    let left = 10;
    const budget: ByteBudget = { take: (bytes) => (left -= bytes) >= 0 };
    const { tunnel, client } = await tunnelAfterEarlyBytes(Buffer.alloc(64, 0x61), budget);
    const chunks: Buffer[] = [];
    client.on('data', (chunk: Buffer) => chunks.push(chunk));
    const closed = waitForClose(client);
    expect((await tunnel.done).closedBy).toBe('byte_limit');
    await closed;
    expect(Buffer.concat(chunks).length).toBe(0);
  });
});
