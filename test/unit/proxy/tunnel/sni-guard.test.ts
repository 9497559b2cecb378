// The domain-fronting guard (grant tls.requireSniMatch). After 200 to CONNECT the client's first tunnel
// bytes must be a TLS ClientHello (RFC 8446 §4.1.2) whose server_name (RFC 6066 §3) is the authorized
// host. A hostile client tries to name another host behind an allowed one (domain fronting), to send no
// name, to send something other than TLS, to split or stall the ClientHello, or to make Sluice buffer an
// oversized record. The ClientHellos here come from Node's own TLS client over real loopback sockets.
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/authority/index.js';
import type { CanonicalDestination } from '../../../../src/core/index.js';
import { MAX_CLIENT_HELLO_BYTES } from '../../../../src/relay/index.js';
import { checkSni, type SniCheck } from '../../../../src/proxy/tunnel/sni-guard.js';
import { createTestPki } from '../../../support/pki.js';
import { waitFor, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

function dest(authority: string): CanonicalDestination {
  const verdict = canonicalize(authority, 443);
  if (!verdict.ok) throw new Error(`cannot canonicalize ${authority}`);
  return verdict.value;
}

async function listen(server: net.Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

function track<T extends net.Socket>(socket: T): T {
  sockets.push(socket);
  socket.on('error', () => undefined);
  return socket;
}

/** A raw TCP connection to a loopback server: the accepted side is what the guard reads, as after 200 to CONNECT. */
async function rawPair(): Promise<{ accepted: net.Socket; client: net.Socket }> {
  const server = net.createServer();
  const port = await listen(server);
  const accepted = waitFor<net.Socket>(server, 'connection');
  const client = track(net.connect({ port, host: '127.0.0.1', noDelay: true }));
  return { accepted: track(await accepted), client };
}

/** A real TLS client whose ClientHello arrives on the accepted socket. */
async function tlsPair(options: tls.ConnectionOptions): Promise<{ accepted: net.Socket; client: tls.TLSSocket }> {
  const { accepted, client: raw } = await rawPair();
  const client = track(tls.connect({ socket: raw, ...options }));
  return { accepted, client };
}

/** The ClientHello record a real TLS client sends for `options`, captured whole. */
async function captureHello(options: tls.ConnectionOptions): Promise<Buffer> {
  const { accepted } = await tlsPair(options);
  let buffer = Buffer.alloc(0);
  accepted.on('data', (chunk: Buffer) => (buffer = Buffer.concat([buffer, chunk])));
  await waitUntil(() => buffer.length >= 5 && buffer.length >= 5 + buffer.readUInt16BE(3), { timeoutMs: TIMEOUT_MS, label: 'a whole ClientHello record' });
  accepted.destroy();
  return buffer;
}

const check = (socket: net.Socket, to: string, timeoutMs = TIMEOUT_MS, first: Buffer = Buffer.alloc(0)): Promise<SniCheck> =>
  withTimeout(checkSni(socket, first, dest(to), timeoutMs), TIMEOUT_MS * 2, `checkSni for ${to}`);

describe('checkSni: the server name must be the authorized host', () => {
  it('passes a ClientHello that names the authorized host, and hands on the bytes it read as they came', async () => {
    const { accepted } = await tlsPair({ servername: 'a.test' });
    const result = await check(accepted, 'a.test:443');
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.head[0]).toBe(22); // a handshake record
    expect(result.head.length).toBe(5 + result.head.readUInt16BE(3));
    // Nothing more is read once it has decided: the rest of the tunnel is for the relay.
    expect(accepted.listenerCount('data')).toBe(0);
    expect(accepted.isPaused()).toBe(true);
  });

  it.each([
    ['another host behind the authorized one (domain fronting)', 'evil.test', 'a.test:443', /server name evil\.test is not a\.test/],
    ['a subdomain of the authorized host', 'x.a.test', 'a.test:443', /is not a\.test/],
    ['the authorized host as a prefix of another name', 'a.test.evil', 'a.test:443', /is not a\.test/],
    ['a name that ends in the authorized host', 'xa.test', 'a.test:443', /is not a\.test/],
    ['a name on an IP-literal destination (RFC 6066 §3: IP literals are not sent as names)', 'a.test', '192.0.2.1:443', /server name a\.test on an address destination/],
  ])('refuses %s', async (_label, servername, authority, detail) => {
    const { accepted } = await tlsPair({ servername });
    const result = await check(accepted, authority);
    expect(result).toEqual({ ok: false, detail: expect.stringMatching(detail) });
  });

  it('refuses a ClientHello without server_name for a name destination', async () => {
    const { accepted } = await tlsPair({});
    expect(await check(accepted, 'a.test:443')).toEqual({ ok: false, detail: 'no server name for a name destination' });
  });

  it('passes a ClientHello without server_name for an IP-literal destination', async () => {
    const { accepted } = await tlsPair({});
    expect((await check(accepted, '192.0.2.1:443')).ok).toBe(true);
  });

  it.each([
    ['in upper case', 'A.TEST'],
    ['with a trailing dot', 'a.test.'],
  ])('compares a server name %s as the same host', async (_label, servername) => {
    const { accepted } = await tlsPair({ servername });
    expect((await check(accepted, 'a.test:443')).ok).toBe(true);
  });

  it('relays the checked bytes unchanged: the client completes its handshake with the real origin', async () => {
    const pki = createTestPki(['a.test']);
    const origin = tls.createServer({ cert: pki.certPem, key: pki.keyPem }, (s) => s.end('hello from a.test'));
    const originPort = await listen(origin);
    const { accepted, client } = await tlsPair({ servername: 'a.test', ca: pki.caPem });
    const received: Buffer[] = [];
    client.on('data', (chunk: Buffer) => received.push(chunk));
    const result = await check(accepted, 'a.test:443');
    if (!result.ok) throw new Error(result.detail);
    const upstream = track(net.connect({ port: originPort, host: '127.0.0.1' }));
    upstream.write(result.head);
    accepted.pipe(upstream);
    upstream.pipe(accepted);
    await withTimeout(waitFor(client, 'end'), TIMEOUT_MS, 'the origin answer through the tunnel');
    expect(Buffer.concat(received).toString()).toBe('hello from a.test');
  });
});

describe('checkSni: how the ClientHello arrives', () => {
  it('reads a ClientHello split over several TCP segments', async () => {
    const hello = await captureHello({ servername: 'a.test' });
    const { accepted, client } = await rawPair();
    const pending = check(accepted, 'a.test:443');
    // Each piece is read by the guard before the next is sent, so they arrive as separate segments.
    for (const [from, to] of [[0, 1], [1, 4], [4, 5], [5, 60], [60, hello.length]] as const) {
      client.write(hello.subarray(from, to));
      await waitUntil(() => accepted.bytesRead >= to, { timeoutMs: TIMEOUT_MS, label: `byte ${to} read` });
    }
    const result = await pending;
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.head.equals(hello)).toBe(true);
  });

  it('reads the bytes that came with the CONNECT head first, and the rest from the socket', async () => {
    const hello = await captureHello({ servername: 'a.test' });
    const { accepted, client } = await rawPair();
    const pending = check(accepted, 'a.test:443', TIMEOUT_MS, hello.subarray(0, 40));
    client.write(hello.subarray(40));
    const result = await pending;
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.head.equals(hello)).toBe(true);
  });

  it('decides on a whole ClientHello in the CONNECT head without reading the socket', async () => {
    const hello = await captureHello({ servername: 'evil.test' });
    const { accepted } = await rawPair();
    // The client sends nothing on this socket: an answer that waited for it would be the timeout's.
    expect(await check(accepted, 'a.test:443', TIMEOUT_MS, hello)).toEqual({ ok: false, detail: 'server name evil.test is not a.test' });
  });

  it.each([
    ['a plain HTTP request', Buffer.from('GET / HTTP/1.1\r\nHost: a.test\r\n\r\n')],
    ['a TLS record that is not a handshake', Buffer.from([23, 3, 3, 0, 5, 1, 2, 3, 4, 5])],
    ['a handshake record that is not a ClientHello', Buffer.from([22, 3, 1, 0, 4, 2, 0, 0, 0])],
    ['an SSLv2-style first byte', Buffer.from([0x80, 0x2e, 1, 3, 1])],
    ['a single garbage byte', Buffer.from([0])],
  ])('refuses %s as not TLS', async (_label, bytes) => {
    const { accepted, client } = await rawPair();
    client.write(bytes);
    expect(await check(accepted, 'a.test:443')).toEqual({ ok: false, detail: 'the first bytes are not a TLS ClientHello' });
  });

  it('refuses a record header longer than a TLS record may be (2^14) without waiting for its body', async () => {
    const { accepted, client } = await rawPair();
    client.write(Buffer.from([22, 3, 1, 0xff, 0xff]));
    expect(await check(accepted, 'a.test:443')).toEqual({ ok: false, detail: 'the first bytes are not a TLS ClientHello' });
  });

  it('buffers at most one record: a maximal record claiming a longer ClientHello is refused, whatever follows it', async () => {
    const { accepted, client } = await rawPair();
    const record = Buffer.alloc(MAX_CLIENT_HELLO_BYTES);
    record.set([22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff]); // record of 2^14 bytes; ClientHello of 2^24-1
    client.write(Buffer.concat([record, Buffer.alloc(256 * 1024, 0x41)]));
    expect(await check(accepted, 'a.test:443')).toEqual({ ok: false, detail: 'the first bytes are not a TLS ClientHello' });
  });

  it('refuses a client that never sends, once the handshake timeout has passed', async () => {
    const { accepted } = await rawPair();
    const started = Date.now();
    expect(await check(accepted, 'a.test:443', 50)).toEqual({ ok: false, detail: 'no ClientHello within the handshake timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('refuses a ClientHello that stalls part way, once the handshake timeout has passed', async () => {
    const hello = await captureHello({ servername: 'a.test' });
    const { accepted, client } = await rawPair();
    client.write(hello.subarray(0, hello.length - 1));
    expect(await check(accepted, 'a.test:443', 100)).toEqual({ ok: false, detail: 'no ClientHello within the handshake timeout' });
  });

  it('refuses a client that closes before its ClientHello is complete', async () => {
    const hello = await captureHello({ servername: 'a.test' });
    const { accepted, client } = await rawPair();
    client.end(hello.subarray(0, 30));
    expect(await check(accepted, 'a.test:443')).toEqual({ ok: false, detail: 'the client closed before sending a ClientHello' });
  });

  it('refuses a client that resets part way at once, not after the handshake timeout (the dialed upstream is not held)', async () => {
    const { accepted, client } = await rawPair();
    client.write(Buffer.from([0x16, 0x03, 0x01]));
    const started = Date.now();
    const result = check(accepted, 'a.test:443', 60_000);
    client.resetAndDestroy();
    expect(await result).toEqual({ ok: false, detail: 'the client closed before sending a ClientHello' });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
  });

  it('refuses at once when the client socket is already gone', async () => {
    const { accepted } = await rawPair();
    accepted.destroy();
    expect(await check(accepted, 'a.test:443', 60_000)).toEqual({ ok: false, detail: 'the client closed before sending a ClientHello' });
  });
});
