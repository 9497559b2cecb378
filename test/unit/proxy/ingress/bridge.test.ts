// `sluice bridge` relays each loopback TCP connection byte for byte to one grant's Unix socket and holds
// no authority of its own. What a sandboxed client could try: bytes that come back altered or mixed with
// another connection's, bytes sent before the Unix side is connected getting lost, a half-closed or
// abandoned connection that keeps the grant socket's connection open (or the reverse), and a missing
// grant socket leaving the client hanging. Real sockets only: 127.0.0.1 and a Unix socket in a temp dir.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startBridge, type Bridge } from '../../../../src/proxy/ingress/bridge.js';
import { waitFor, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
let dir: string;
let grantSocket: string;
const bridges: Bridge[] = [];
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bridge-'));
  grantSocket = path.join(dir, 'grant.sock');
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const b of bridges.splice(0)) await b.close();
  for (const s of servers.splice(0)) if (s.listening) await new Promise<void>((resolve) => s.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function track(socket: net.Socket): net.Socket {
  sockets.push(socket);
  socket.on('error', () => undefined);
  return socket;
}

/** The grant's Unix socket: hands each accepted connection to the test. */
async function grantServer(): Promise<{ server: net.Server; next: () => Promise<net.Socket> }> {
  const server = net.createServer({ allowHalfOpen: true });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(grantSocket, resolve));
  return { server, next: async () => track(await waitFor<net.Socket>(server, 'connection', TIMEOUT_MS)) };
}

async function bridge(errors: string[] = []): Promise<Bridge> {
  const b = await startBridge('127.0.0.1', 0, grantSocket, (message) => errors.push(message));
  bridges.push(b);
  return b;
}

function connect(b: Bridge): net.Socket {
  return track(net.connect({ port: b.port, host: '127.0.0.1', allowHalfOpen: true }));
}

/** Resolves once the peer has given up `socket`: a FIN, a reset or a close, whichever comes first. */
function gone(socket: net.Socket): Promise<string> {
  const events = ['end', 'error', 'close'] as const;
  socket.resume(); // 'end' comes only once what arrived before it is read
  return withTimeout(
    new Promise<string>((resolve) => {
      for (const event of events) socket.once(event, () => resolve(event));
    }),
    TIMEOUT_MS,
    'the peer giving up the connection',
  );
}

/** Everything `socket` receives until its end. */
function readAll(socket: net.Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return withTimeout(waitFor(socket, 'end', TIMEOUT_MS), TIMEOUT_MS, 'end of stream').then(() => Buffer.concat(chunks));
}

describe('startBridge', () => {
  it('listens on the loopback address it is given, on an ephemeral port when asked for 0', async () => {
    await grantServer();
    const b = await bridge();
    expect(b.port).toBeGreaterThan(0);
    const client = connect(b);
    await waitFor(client, 'connect');
    expect(client.remoteAddress).toBe('127.0.0.1');
  });

  it('relays bytes both ways exactly, including what the client sends before the grant socket answers', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const up = randomBytes(1024 * 1024);
    const down = randomBytes(768 * 1024);
    const client = connect(b);
    // Written at once, before the bridge has connected to the grant socket: nothing may be lost.
    client.end(up);
    const upstream = await grant.next();
    const atGrant = readAll(upstream);
    const atClient = readAll(client);
    expect((await atGrant).equals(up)).toBe(true);
    upstream.end(down);
    expect((await atClient).equals(down)).toBe(true);
  });

  it('passes a request with credentials on untouched: it reads and decides nothing', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const request = Buffer.from('CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nProxy-Authorization: Basic Zzp0\r\n\r\n\x16\x03\x01\x00\x00', 'latin1');
    const client = connect(b);
    client.end(request);
    expect((await readAll(await grant.next())).equals(request)).toBe(true);
  });

  it('gives each client connection its own grant-socket connection: no bytes cross between them', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const payloads = [0, 1, 2].map((i) => Buffer.from(`client ${i} `.repeat(10_000)));
    const upstreams: net.Socket[] = [];
    grant.server.on('connection', (s) => upstreams.push(track(s)));
    const clients = payloads.map((payload) => connect(b).end(payload));
    await waitUntil(() => upstreams.length === 3, { timeoutMs: TIMEOUT_MS, label: 'three grant-socket connections' });
    const received = await Promise.all(upstreams.map(readAll));
    expect(received.map((r) => r.toString()).sort()).toEqual(payloads.map((p) => p.toString()).sort());
    // Each answers on its own connection, and each client gets back only its own answer.
    const answers = clients.map(readAll);
    upstreams.forEach((u, i) => u.end(`answer to ${received[i]?.subarray(0, 8).toString()}`));
    expect((await Promise.all(answers)).map((a) => a.toString())).toEqual(['answer to client 0', 'answer to client 1', 'answer to client 2']);
  });

  it('carries a half-close: the client’s FIN reaches the grant socket, and its answer still comes back', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const client = connect(b);
    const answer = readAll(client);
    client.end('GET / HTTP/1.0\r\n\r\n');
    const upstream = await grant.next();
    expect((await readAll(upstream)).toString()).toBe('GET / HTTP/1.0\r\n\r\n');
    upstream.end('HTTP/1.0 200 OK\r\n\r\nafter the FIN');
    expect((await answer).toString()).toBe('HTTP/1.0 200 OK\r\n\r\nafter the FIN');
  });

  it('ends the grant-socket connection when the client goes away abruptly', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const client = connect(b);
    client.write('x');
    const upstream = await grant.next();
    await waitUntil(() => upstream.bytesRead === 1, { timeoutMs: TIMEOUT_MS, label: 'first byte relayed' });
    const ended = gone(upstream);
    client.resetAndDestroy();
    await ended;
  });

  it('ends the client connection when the grant socket’s side goes away abruptly', async () => {
    const grant = await grantServer();
    const b = await bridge();
    const client = connect(b);
    client.write('x');
    const upstream = await grant.next();
    const ended = gone(client);
    upstream.destroy();
    await ended;
  });

  it('closes the client and reports the path when the grant socket is missing, and serves again once it appears', async () => {
    const errors: string[] = [];
    const b = await bridge(errors);
    const first = connect(b);
    first.write('CONNECT a.test:443 HTTP/1.1\r\n\r\n');
    await gone(first);
    expect(errors).toEqual([expect.stringContaining(`cannot reach the grant socket ${grantSocket}`)]);
    const grant = await grantServer();
    const second = connect(b);
    second.end('hello');
    expect((await readAll(await grant.next())).toString()).toBe('hello');
  });

  it('closes the client when the grant socket path is a stale file nothing listens on', async () => {
    const stale = net.createServer();
    await new Promise<void>((resolve) => stale.listen(grantSocket, resolve));
    // Closing a Unix server unlinks its file; a crashed server leaves it: make one like that.
    fs.linkSync(grantSocket, `${grantSocket}.keep`);
    await new Promise<void>((resolve) => stale.close(() => resolve()));
    fs.renameSync(`${grantSocket}.keep`, grantSocket);
    const errors: string[] = [];
    const b = await bridge(errors);
    const client = connect(b);
    await gone(client);
    expect(errors).toEqual([expect.stringMatching(/ECONNREFUSED/)]);
  });

  it('close() ends live connections on both sides and stops accepting', async () => {
    const grant = await grantServer();
    const b = await startBridge('127.0.0.1', 0, grantSocket, () => undefined);
    const client = connect(b);
    client.write('x');
    const upstream = await grant.next();
    const clientClosed = gone(client);
    const upstreamClosed = gone(upstream);
    await withTimeout(b.close(), TIMEOUT_MS, 'bridge close');
    await Promise.all([clientClosed, upstreamClosed]);
    const refused = track(net.connect({ port: b.port, host: '127.0.0.1' }));
    await expect(waitFor(refused, 'connect', TIMEOUT_MS)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('rejects when its port is taken, instead of relaying for someone else', async () => {
    const taken = net.createServer();
    servers.push(taken);
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    await expect(startBridge('127.0.0.1', port, grantSocket, () => undefined)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
