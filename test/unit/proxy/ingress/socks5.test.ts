// The SOCKS5 listener (src/proxy/ingress/socks5.ts, RFC 1928 with RFC 1929 username/password). Real client bytes
// on a raw socket, against a real in-process Sluice. What a hostile client tries: to get in with no
// authentication method (or one Sluice does not offer), with a wrong token, with BIND or UDP ASSOCIATE
// (a listening socket or a UDP relay on the proxy host), with a target spelled as an IPv4-mapped IPv6
// address or a domain carrying ':' or '@' so that policy and dial disagree about the host; to make Sluice
// buffer an endless handshake, or hold a connection slot by stalling mid-handshake (slowloris).
import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ReasonCode } from '../../../../src/core/index.js';
import { socksReplyCode } from '../../../../src/core/index.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../../../support/sluice.js';
import { waitUntil } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const HANDSHAKE_MS = 400;
const TOKEN = 'token-socks-0123456789';

let sluice: TestSluice;
let origin: { port: number; server: net.Server; server6: net.Server; accepted: number; sockets: Set<net.Socket> };
const clients: net.Socket[] = [];

beforeAll(async () => {
  const sockets = new Set<net.Socket>();
  const echo = (socket: net.Socket): void => {
    origin.accepted += 1;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.pipe(socket);
  };
  // The same echo origin on 127.0.0.1 and on ::1, at one port, so one grant rule per spelling reaches it.
  const server = net.createServer({ allowHalfOpen: true }, echo);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const server6 = net.createServer({ allowHalfOpen: true }, echo);
  await new Promise<void>((resolve) => server6.listen(port, '::1', resolve));
  origin = { port, server, server6, accepted: 0, sockets };
  const p = origin.port;
  sluice = await startSluice(
    {
      listeners: [
        { name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' },
        { name: 'socks-s', listen: '127.0.0.1:0', grant: 's', protocol: 'socks5' },
      ],
      timeouts: { headersMs: HANDSHAKE_MS },
      grants: [{ id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://a.test:${p}`, `tcp://127.0.0.1:${p}`, `tcp://[::1]:${p}`], allowAddressClasses: ['loopback'] }],
    },
    { lookup: tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] }) },
  );
});

afterAll(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await sluice?.close();
  for (const s of origin?.sockets ?? []) s.destroy();
  await new Promise<void>((resolve) => origin?.server.close(() => resolve()));
  await new Promise<void>((resolve) => origin?.server6.close(() => resolve()));
});

beforeEach(() => {
  for (const c of clients.splice(0)) c.destroy();
  sluice.records.length = 0;
  origin.accepted = 0;
});

const portOf = (name: string): number => Number(sluice.app.listeners.find((l) => l.name === name)?.address.split(':').at(-1));

/** A raw SOCKS5 client: writes bytes, reads exactly n bytes back, sees the close. */
class SocksClient {
  private buffer = Buffer.alloc(0);
  closed = false;
  readonly socket: net.Socket;

  constructor(listener: string) {
    this.socket = net.connect(portOf(listener), '127.0.0.1');
    clients.push(this.socket);
    this.socket.on('error', () => undefined);
    this.socket.on('data', (c: Buffer) => (this.buffer = Buffer.concat([this.buffer, c])));
    this.socket.on('close', () => (this.closed = true));
  }

  send(bytes: readonly number[] | Buffer): this {
    this.socket.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
    return this;
  }

  async read(n: number): Promise<number[]> {
    await waitUntil(() => this.buffer.length >= n || this.closed, { timeoutMs: TIMEOUT_MS, label: `${n} bytes from Sluice` });
    if (this.buffer.length < n) throw new Error(`closed after ${JSON.stringify([...this.buffer])}, wanted ${n} bytes`);
    const out = [...this.buffer.subarray(0, n)];
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  async untilClosed(timeoutMs = TIMEOUT_MS): Promise<number[]> {
    await waitUntil(() => this.closed, { timeoutMs, label: 'Sluice to close the connection' });
    return [...this.buffer];
  }

  /** RFC 1929 sub-negotiation: VER 1, ULEN, UNAME, PLEN, PASSWD. */
  credentials(user: string, pass: string): this {
    return this.send(Buffer.concat([Buffer.from([1, user.length]), Buffer.from(user), Buffer.from([pass.length]), Buffer.from(pass)]));
  }

  /** Greets with user/password and authenticates as grant s. */
  async login(): Promise<this> {
    this.send([5, 1, 2]);
    expect(await this.read(2)).toEqual([5, 2]);
    this.credentials('s', TOKEN);
    expect(await this.read(2)).toEqual([1, 0]);
    return this;
  }
}

const portBytes = (port: number): number[] => [port >> 8, port & 0xff];
const request = (cmd: number, atyp: number, address: readonly number[], port: number): number[] => [5, cmd, 0, atyp, ...address, ...portBytes(port)];
const domain = (name: string): number[] => [name.length, ...Buffer.from(name, 'latin1')];
const IPV6_LOOPBACK = [...Array(15).fill(0), 1];
const IPV4_MAPPED_LOOPBACK = [...Array(10).fill(0), 0xff, 0xff, 127, 0, 0, 1];

describe('socksReplyCode: RFC 1928 §6 reply for each way a hop ends', () => {
  it.each([
    ['granted', 0x00],
    ['dial_refused', 0x05],
    ['dial_unreachable', 0x04],
    ['dns_no_address', 0x04],
    ['upstream_unreachable', 0x04],
    ['dial_timeout', 0x06],
    ['dns_timeout', 0x06],
    ['upstream_timeout', 0x06],
    ['destination_malformed', 0x08],
    ['destination_not_granted', 0x02],
    ['address_class_denied', 0x02],
    ['address_self', 0x02],
    ['route_unattested', 0x02],
    ['grant_expired', 0x02],
    ['grant_revoked', 0x02],
    ['token_grant_mismatch', 0x02],
    ['byte_limit_reached', 0x02],
    ['sni_mismatch', 0x02],
    ['internal_error', 0x01],
    ['upstream_auth_required', 0x01],
    ['request_malformed', 0x01],
  ] as const)('%s → reply code %i', (reason, code) => {
    expect(socksReplyCode(reason as ReasonCode)).toBe(code);
  });
});

describe('SOCKS5 method negotiation and authentication', () => {
  it.each([
    ['only NO AUTH', [5, 1, 0]],
    ['only GSSAPI', [5, 1, 1]],
    ['no methods at all', [5, 0]],
  ])('a token listener answers %s with 0xFF (no acceptable method) and closes, with no hop', async (_label, greeting) => {
    const c = new SocksClient('socks').send(greeting);
    expect(await c.read(2)).toEqual([5, 0xff]);
    await c.untilClosed();
    expect(sluice.decisions()).toHaveLength(0);
  });

  it('closes on a greeting that is not SOCKS5, answering nothing', async () => {
    const c = new SocksClient('socks').send([4, 1, 0, 80, 127, 0, 0, 1, 0]);
    expect(await c.untilClosed()).toEqual([]);
    expect(sluice.decisions()).toHaveLength(0);
  });

  it('answers bad credentials with an RFC 1929 failure, closes, and records token_invalid', async () => {
    const c = new SocksClient('socks').send([5, 1, 2]);
    expect(await c.read(2)).toEqual([5, 2]);
    c.credentials('s', 'wrong-token');
    expect(await c.read(2)).toEqual([1, 1]);
    await c.untilClosed();
    expect(sluice.decisions()).toMatchObject([{ reason: 'token_invalid', method: 'SOCKS5', principal: null }]);
    expect(origin.accepted).toBe(0);
  });

  it('a dedicated SOCKS5 listener needs no credentials and acts for its grant', async () => {
    const c = new SocksClient('socks-s').send([5, 1, 0]);
    expect(await c.read(2)).toEqual([5, 0]);
    c.send(request(1, 3, domain('a.test'), origin.port));
    expect((await c.read(10)).slice(0, 2)).toEqual([5, 0]);
    c.send(Buffer.from('ping'));
    expect(Buffer.from(await c.read(4)).toString()).toBe('ping');
    expect(sluice.decisions()).toMatchObject([{ reason: 'granted', principal: 's', via: 'listener', canonical: `a.test:${origin.port}` }]);
  });
});

describe('SOCKS5 requests', () => {
  it.each([
    ['BIND', 2],
    ['UDP ASSOCIATE', 3],
  ])('refuses %s with reply 0x07 and never dials', async (_label, cmd) => {
    const c = await new SocksClient('socks').login();
    c.send(request(cmd, 1, [127, 0, 0, 1], origin.port));
    expect((await c.read(10)).slice(0, 2)).toEqual([5, 7]);
    await c.untilClosed();
    expect(origin.accepted).toBe(0);
    expect(sluice.decisions()).toMatchObject([{ reason: 'request_malformed', principal: 's' }]);
  });

  it.each([
    ['a domain in any case with a trailing dot', 3, () => domain('A.Test.'), 'a.test'],
    ['an IPv4 address', 1, () => [127, 0, 0, 1], '127.0.0.1'],
    ['an IPv6 address', 4, () => IPV6_LOOPBACK, '[::1]'],
    ['an IPv4-mapped IPv6 address (unwrapped before any check)', 4, () => IPV4_MAPPED_LOOPBACK, '127.0.0.1'],
  ])('canonicalizes %s like a CONNECT target and tunnels it', async (_label, atyp, address, host) => {
    const c = await new SocksClient('socks').login();
    c.send(request(1, atyp, address(), origin.port));
    expect((await c.read(10)).slice(0, 2)).toEqual([5, 0]);
    c.send(Buffer.from('echo'));
    expect(Buffer.from(await c.read(4)).toString()).toBe('echo');
    expect(sluice.decisions()).toMatchObject([{ reason: 'granted', canonical: `${host}:${origin.port}`, method: 'SOCKS5' }]);
  });

  it.each([
    ['a host outside the grant', () => domain('b.test'), 3, 0x02, 'destination_not_granted'],
    ['a domain smuggling a port', () => domain('b.test:80'), 3, 0x08, 'destination_malformed'],
    ['a domain with userinfo', () => domain('u@a.test'), 3, 0x08, 'destination_malformed'],
    ['a domain with a NUL', () => domain('a.test\u0000.evil'), 3, 0x08, 'destination_malformed'],
    ['an unknown address type', () => [1, 2, 3, 4], 9, 0x08, 'destination_malformed'],
  ])('refuses %s with its reply code and never dials', async (_label, address, atyp, code, reason) => {
    const c = await new SocksClient('socks').login();
    c.send(atyp === 9 ? [5, 1, 0, 9] : request(1, atyp, address(), origin.port));
    expect((await c.read(10)).slice(0, 2)).toEqual([5, code]);
    await c.untilClosed();
    expect(origin.accepted).toBe(0);
    expect(sluice.decisions()).toMatchObject([{ reason }]);
  });
});

describe('SOCKS5 handshake bounds', () => {
  it('cuts a handshake larger than its buffer bound, answering nothing', async () => {
    const c = new SocksClient('socks').send(Buffer.concat([Buffer.from([5, 1, 2]), Buffer.alloc(4096, 0x41)]));
    expect(await c.untilClosed()).toEqual([]);
    expect(sluice.decisions()).toHaveLength(0);
  });

  it('ends a handshake that stalls after the greeting at the handshake timeout', async () => {
    const started = Date.now();
    const c = new SocksClient('socks').send([5, 1, 2]);
    expect(await c.read(2)).toEqual([5, 2]);
    await c.untilClosed(HANDSHAKE_MS * 10);
    expect(Date.now() - started).toBeGreaterThanOrEqual(HANDSHAKE_MS - 50);
    expect(sluice.decisions()).toHaveLength(0);
  });

  it('ends a request that stalls after authentication at the handshake timeout, recorded as request_malformed', async () => {
    const started = Date.now();
    const c = await new SocksClient('socks').login();
    c.send([5, 1, 0]);
    await c.untilClosed(HANDSHAKE_MS * 10);
    expect(Date.now() - started).toBeGreaterThanOrEqual(HANDSHAKE_MS - 50);
    expect(sluice.decisions()).toMatchObject([{ reason: 'request_malformed', principal: 's' }]);
    expect(origin.accepted).toBe(0);
  });
});
