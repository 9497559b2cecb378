// dialRoute (src/proxy/tunnel/dial-route.ts): opens an authorized tunnel over the hop's route alternatives, in
// order. What must hold against a hostile destination or a hostile network: only the pinned (checked)
// address is dialed, never the name again (DNS rebinding, ADR 0001); a proxy alternative is sent the
// canonical name, or the checked IP literal with sendResolvedAddress so that the pin survives the hop; and
// a proxy that refuses (407, 403) ends the hop: Sluice never goes DIRECT instead (principle A2 in
// docs/principles.md), since an attacker who can make the proxy refuse would otherwise pick the route.
// Only a connection-level failure moves on. Real loopback listeners; the CONNECT proxy is a tiny fixture.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/authority/index.js';
import type { PinnedAddress, UpstreamProxy } from '../../../../src/core/index.js';
import { dialRoute } from '../../../../src/proxy/tunnel/dial-route.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import type { RouteHop } from '../../../../src/route/index.js';
import { unusedPort } from '../../../support/ports.js';
import { waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const rt = { dial: { timeoutMs: 2_000 }, upstream: { timeoutMs: 2_000 } } as unknown as ProxyRuntime;
const closers: (() => Promise<void>)[] = [];
const opened: net.Socket[] = [];

afterEach(async () => {
  for (const s of opened.splice(0)) s.destroy();
  for (const close of closers.splice(0)) await close();
});

interface Listener {
  readonly port: number;
  readonly accepted: net.Socket[];
  /** Each connection's first bytes (a CONNECT head, for the proxy fixture). */
  readonly heads: string[];
}

/** A TCP listener on `host` that keeps what it accepts; `onHead` answers a connection's first bytes. */
async function listener(onHead: (socket: net.Socket, head: string) => void = () => undefined, host = '127.0.0.1'): Promise<Listener> {
  const accepted: net.Socket[] = [];
  const heads: string[] = [];
  const server = net.createServer((socket) => {
    accepted.push(socket);
    socket.on('error', () => undefined);
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      if (heads.length < accepted.length && buffer.includes('\r\n\r\n')) {
        heads.push(buffer);
        onHead(socket, buffer);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => new Promise<void>((resolve) => {
    for (const s of accepted) s.destroy();
    server.close(() => resolve());
  }));
  return { port: (server.address() as net.AddressInfo).port, accepted, heads };
}

/** A CONNECT-speaking upstream proxy that answers every CONNECT with `status`, then `early` tunnel bytes. */
function connectProxy(status: number, early = ''): Promise<Listener> {
  return listener((socket) => {
    if (status === 200) socket.write(`HTTP/1.1 200 Connection Established\r\n\r\n${early}`);
    else socket.end(`HTTP/1.1 ${status} No\r\n${status === 407 ? 'Proxy-Authenticate: Basic realm="corp"\r\n' : ''}Content-Length: 0\r\n\r\n`);
  });
}

function proxyAt(port: number, options: Partial<UpstreamProxy> = {}): RouteHop {
  return { kind: 'proxy', proxy: { label: `http://127.0.0.1:${port}`, tls: false, host: '127.0.0.1', port, authorization: 'Basic c2x1aWNlOmNvcnA=', ca: null, inspectsTls: false, sendResolvedAddress: false, ...options } };
}

const DIRECT: RouteHop = { kind: 'direct' };
const pinned = (address: string, port: number): PinnedAddress => ({ address, family: address.includes(':') ? 6 : 4, port, class: 'loopback' }) as PinnedAddress;

function hopTo(authority: string, pins: readonly PinnedAddress[], routeHops: readonly RouteHop[]): Hop {
  const hop = new Hop(1, 'connect', 'CONNECT', authority);
  const dest = canonicalize(authority);
  if (!dest.ok) throw new Error(`cannot canonicalize ${authority}`);
  hop.canonical = dest.value;
  hop.pinned = pins;
  hop.routeHops = routeHops;
  return hop;
}

async function open(hop: Hop): ReturnType<typeof dialRoute> {
  const result = await withTimeout(dialRoute(rt, hop), TIMEOUT_MS * 2, 'dialRoute');
  if (result.ok) opened.push(result.value.socket);
  return result;
}

describe('dialRoute: direct alternatives dial the pin', () => {
  it('dials the pinned address (not the name), returns the socket and records hop.dialed', async () => {
    const origin = await listener();
    const pin = pinned('127.0.0.1', origin.port);
    const hop = hopTo(`rebind.test:${origin.port}`, [pin], [DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.socket.remotePort).toBe(origin.port);
    expect(result.value.head.length).toBe(0);
    expect(hop.dialed).toBe(pin);
    expect(hop.usedHop).toBe(DIRECT);
    await waitUntil(() => origin.accepted.length === 1, { timeoutMs: TIMEOUT_MS, label: 'the origin accepts' });
  });

  it('dials an IPv6 pin', async () => {
    const origin = await listener(undefined, '::1');
    const hop = hopTo(`a.test:${origin.port}`, [pinned('::1', origin.port)], [DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    expect(hop.dialed?.address).toBe('::1');
  });

  it('moves from a refused pin to the next pin', async () => {
    const dead = await unusedPort();
    const origin = await listener();
    const hop = hopTo(`a.test:${origin.port}`, [pinned('127.0.0.1', dead), pinned('127.0.0.1', origin.port)], [DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    expect(hop.dialed?.port).toBe(origin.port);
  });

  it('moves from a refused first alternative to the next one', async () => {
    const dead = await unusedPort();
    const proxy = await connectProxy(200);
    const second = proxyAt(proxy.port);
    const hop = hopTo('a.test:443', [pinned('127.0.0.1', dead)], [DIRECT, second]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    expect(hop.usedHop).toBe(second);
    expect(proxy.heads[0]).toMatch(/^CONNECT a\.test:443 HTTP\/1\.1\r\n/);
  });

  it('reports the last failure when every alternative is refused', async () => {
    const deadProxy = await unusedPort();
    const dead = await unusedPort();
    const hop = hopTo('a.test:443', [pinned('127.0.0.1', dead)], [proxyAt(deadProxy), DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe('dial_refused');
    expect(hop.dialed).toBeNull();
  });

  it('with no alternative left by the decision, opens nothing: route_none', async () => {
    const result = await open(hopTo('a.test:443', [pinned('127.0.0.1', 1)], []));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe('route_none');
  });
});

describe('dialRoute: an upstream proxy alternative', () => {
  it('sends CONNECT for the canonical name with the proxy’s own credentials, and hands on its early bytes', async () => {
    const proxy = await connectProxy(200, 'early-bytes');
    const hop = hopTo('API.Example.TEST.:8443', [], [proxyAt(proxy.port)]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(proxy.heads[0]).toBe('CONNECT api.example.test:8443 HTTP/1.1\r\nHost: api.example.test:8443\r\nProxy-Authorization: Basic c2x1aWNlOmNvcnA=\r\n\r\n');
    expect(result.value.head.toString()).toBe('early-bytes');
    // A proxy given the name resolves it itself: nothing was dialed by Sluice, so no pin is claimed.
    expect(hop.dialed).toBeNull();
  });

  it.each([
    ['an IPv4 pin', '127.0.0.1', 'CONNECT 127.0.0.1:443 '],
    ['an IPv6 pin', '::1', 'CONNECT [::1]:443 '],
  ])('with sendResolvedAddress sends the checked IP literal (%s) and records it as dialed', async (_label, address, line) => {
    const proxy = await connectProxy(200);
    const pin = pinned(address, 443);
    const hop = hopTo('a.test:443', [pin, pinned('127.0.0.9', 443)], [proxyAt(proxy.port, { sendResolvedAddress: true })]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    expect(proxy.heads[0]?.startsWith(line)).toBe(true);
    expect(proxy.heads[0]).not.toContain('a.test');
    expect(hop.dialed).toBe(pin);
  });

  it('with sendResolvedAddress and no checked address, refuses before connecting to the proxy (never sends the name)', async () => {
    const proxy = await connectProxy(200);
    const origin = await listener();
    const hop = hopTo('a.test:443', [], [proxyAt(proxy.port, { sendResolvedAddress: true }), DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe('dns_no_address');
    expect(proxy.accepted.length).toBe(0);
    expect(origin.accepted.length).toBe(0);
  });

  it.each([
    [407, 'upstream_auth_required'],
    [403, 'upstream_refused'],
    [502, 'upstream_refused'],
  ] as const)('a %i from the proxy ends the hop with %s and DIRECT is never tried', async (status, reason) => {
    const proxy = await connectProxy(status);
    const origin = await listener();
    const fallback = await connectProxy(200);
    const hop = hopTo(`a.test:${origin.port}`, [pinned('127.0.0.1', origin.port)], [proxyAt(proxy.port), DIRECT, proxyAt(fallback.port)]);
    const result = await open(hop);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe(reason);
    expect(proxy.heads).toHaveLength(1);
    expect(origin.accepted.length).toBe(0);
    expect(fallback.accepted.length).toBe(0);
    expect(hop.dialed).toBeNull();
  });

  it('an unreachable proxy is a connection failure: the next alternative is tried', async () => {
    const deadProxy = await unusedPort();
    const origin = await listener();
    const hop = hopTo(`a.test:${origin.port}`, [pinned('127.0.0.1', origin.port)], [proxyAt(deadProxy), DIRECT]);
    const result = await open(hop);
    expect(result.ok).toBe(true);
    expect(hop.usedHop).toBe(DIRECT);
    expect(hop.dialed?.port).toBe(origin.port);
  });
});
