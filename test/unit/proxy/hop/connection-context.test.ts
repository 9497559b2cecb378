// Per-connection state. What it must hold against a hostile or merely slow client: the reason a
// connection was ended from outside (revocation, expiry, limits) is recorded once and never overwritten
// by a later one, and its client is reset, not sent a FIN; a grant's maxDurationMs cannot be re-armed to
// last longer; a client that never sends a request head is ended by the first-request deadline, and a
// cleared deadline never fires; auth failures are counted against the peer address (or the listener, for
// a Unix socket). Real sockets on 127.0.0.1 and in a temp dir.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CloseReason } from '../../../../src/core/index.js';
import { Deadlines } from '../../../../src/egress/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { waitFor, waitForClose, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
const dirs: string[] = [];

afterEach(async () => {
  vi.useRealTimers();
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function track(socket: net.Socket): net.Socket {
  sockets.push(socket);
  socket.on('error', () => undefined);
  return socket;
}

/** A connected pair: `accepted` is the proxy's side (what the context holds), `peer` the client's. */
async function tcpPair(): Promise<{ accepted: net.Socket; peer: net.Socket }> {
  const server = net.createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = waitFor<net.Socket>(server, 'connection');
  const peer = track(net.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1' }));
  return { accepted: track(await accepted), peer };
}

const closed = (socket: net.Socket): Promise<void> => withTimeout(new Promise<void>((resolve) => socket.once('close', () => resolve())), TIMEOUT_MS, 'socket close');

const context = (socket: net.Socket = track(new net.Socket()), listener = 'proxy'): ConnectionContext => new ConnectionContext(socket, listener, { boundGrant: null });

describe('ConnectionContext', () => {
  it('starts with nothing known about the connection', () => {
    const before = Date.now();
    const ctx = context();
    expect(ctx).toMatchObject({ principal: null, verifiedAuthorization: null, hops: 0, tunnel: null, tunnelHop: null, grantId: null, endedBy: null, awaitingFirstRequest: false, listener: 'proxy' });
    expect(ctx.acceptedAtMs).toBeGreaterThanOrEqual(before);
    expect(ctx.acceptedAtMs).toBeLessThanOrEqual(Date.now());
  });

  it('gives every connection its own id', () => {
    const ids = Array.from({ length: 100 }, () => context().id);
    expect(new Set(ids).size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^c[0-9a-z]+$/);
  });

  it('numbers the hops on a connection from 1', () => {
    const ctx = context();
    expect([ctx.nextHop(), ctx.nextHop(), ctx.nextHop()]).toEqual([1, 2, 3]);
    expect(ctx.hops).toBe(3);
  });
});

describe('ConnectionContext.source: whom auth failures are counted against', () => {
  it('is the peer address of a TCP connection, kept once read', async () => {
    const { accepted, peer } = await tcpPair();
    const ctx = context(accepted);
    expect(ctx.source).toBe('127.0.0.1');
    const gone = closed(accepted);
    peer.destroy();
    await gone;
    expect(ctx.source).toBe('127.0.0.1');
  });

  it('is the listener for a Unix socket connection, which has no peer address', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ctx-'));
    dirs.push(dir);
    const server = net.createServer();
    servers.push(server);
    const file = path.join(dir, 'p.sock');
    await new Promise<void>((resolve) => server.listen(file, resolve));
    const accepted = waitFor<net.Socket>(server, 'connection');
    track(net.connect({ path: file }));
    expect(context(track(await accepted), 'grant-a').source).toBe('unix:grant-a');
  });
});

describe('ConnectionContext.end: ending a connection from outside', () => {
  it('destroys the client socket, ends its tunnel with the reason, and records the reason', async () => {
    const { accepted, peer } = await tcpPair();
    const ctx = context(accepted);
    const tunnelEnds: CloseReason[] = [];
    ctx.tunnel = { end: (reason) => void tunnelEnds.push(reason) };
    const peerGone = closed(peer);
    ctx.end('revoked');
    expect(accepted.destroyed).toBe(true);
    expect(tunnelEnds).toEqual(['revoked']);
    expect(ctx.endedBy).toBe('revoked');
    await peerGone;
  });

  it('resets the client’s TCP connection when the grant withdrew it: the client sees ECONNRESET, not a FIN', async () => {
    const { accepted, peer } = await tcpPair();
    const ctx = context(accepted);
    const ended = waitForClose(peer);
    ctx.end('revoked');
    expect(await ended).toBe('ECONNRESET');
  });

  it('closes a Unix-socket client, which has no reset, without throwing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ctx-'));
    dirs.push(dir);
    const server = net.createServer();
    servers.push(server);
    const file = path.join(dir, 'e.sock');
    await new Promise<void>((resolve) => server.listen(file, resolve));
    const accepted = waitFor<net.Socket>(server, 'connection');
    const peer = track(net.connect({ path: file }));
    const ctx = context(track(await accepted), 'grant-a');
    const ended = waitForClose(peer);
    expect(() => ctx.end('revoked')).not.toThrow();
    expect(await ended).toBeNull();
    expect(ctx.endedBy).toBe('revoked');
  });

  it('records only the first reason: a later end cannot rewrite why the connection was ended', () => {
    const ctx = context();
    const tunnelEnds: CloseReason[] = [];
    ctx.tunnel = { end: (reason) => void tunnelEnds.push(reason) };
    ctx.end('revoked');
    ctx.end('duration_limit');
    ctx.end('expired');
    expect(ctx.endedBy).toBe('revoked');
    expect(tunnelEnds).toEqual(['revoked', 'duration_limit', 'expired']);
  });

  it('ends a connection without a tunnel', () => {
    const ctx = context();
    ctx.end('expired');
    expect(ctx.endedBy).toBe('expired');
    expect(ctx.socket.destroyed).toBe(true);
  });
});

describe('ConnectionContext.limitDuration: a grant’s maxDurationMs', () => {
  it('ends the connection with duration_limit once the limit has passed, not before', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const ctx = context();
    ctx.limitDuration(1_000);
    vi.advanceTimersByTime(999);
    expect(ctx.endedBy).toBeNull();
    expect(ctx.socket.destroyed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(ctx.endedBy).toBe('duration_limit');
    expect(ctx.socket.destroyed).toBe(true);
  });

  it('keeps the first limit: a second call can neither extend nor shorten it', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const longer = context();
    longer.limitDuration(1_000);
    longer.limitDuration(60_000);
    const shorter = context();
    shorter.limitDuration(1_000);
    shorter.limitDuration(10);
    vi.advanceTimersByTime(999);
    expect(shorter.endedBy).toBeNull();
    vi.advanceTimersByTime(1);
    expect(longer.endedBy).toBe('duration_limit');
    expect(shorter.endedBy).toBe('duration_limit');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops its timer when the connection closes first', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const ctx = context();
    ctx.limitDuration(1_000);
    expect(vi.getTimerCount()).toBe(1);
    const gone = new Promise<void>((resolve) => ctx.socket.once('close', () => resolve()));
    ctx.socket.destroy();
    await gone;
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(2_000);
    expect(ctx.endedBy).toBeNull();
  });

  it('keeps the reason it was ended for when the limit passes afterwards', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const ctx = context();
    ctx.limitDuration(1_000);
    ctx.end('revoked');
    vi.advanceTimersByTime(1_000);
    expect(ctx.endedBy).toBe('revoked');
  });
});

describe('ConnectionContext: the first-request deadline (timeouts.headersMs)', () => {
  // A timeout no other test file uses, so these deadlines share a sweep with nothing else.
  const HEADERS_MS = 37;

  it('calls expire for a client that never sends a request head', async () => {
    const ctx = context();
    let expired = 0;
    ctx.startFirstRequestDeadline(Deadlines.for(HEADERS_MS), () => (expired += 1));
    expect(ctx.awaitingFirstRequest).toBe(true);
    await waitUntil(() => expired === 1, { timeoutMs: TIMEOUT_MS, label: 'first-request deadline' });
  });

  it('never calls expire once the first head has arrived, while a later deadline on the same sweep fires', async () => {
    const deadlines = Deadlines.for(HEADERS_MS);
    const prompt = context();
    let promptExpired = false;
    prompt.startFirstRequestDeadline(deadlines, () => (promptExpired = true));
    prompt.firstRequestDone();
    expect(prompt.awaitingFirstRequest).toBe(false);
    // Started after the cleared one, so it is due no earlier: once it fires, the cleared one would have too.
    const slow = context();
    let slowExpired = false;
    slow.startFirstRequestDeadline(deadlines, () => (slowExpired = true));
    await waitUntil(() => slowExpired, { timeoutMs: TIMEOUT_MS, label: 'the later deadline' });
    expect(promptExpired).toBe(false);
  });

  it('takes firstRequestDone without a deadline, and twice', () => {
    const ctx = context();
    ctx.firstRequestDone();
    ctx.startFirstRequestDeadline(Deadlines.for(HEADERS_MS), () => undefined);
    ctx.firstRequestDone();
    ctx.firstRequestDone();
    expect(ctx.awaitingFirstRequest).toBe(false);
  });
});
