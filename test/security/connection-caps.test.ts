// Threat: connection exhaustion (CWE-770 allocation without limits; CWE-400). One sandbox opens
// connections until Sluice runs out of file descriptors or memory and every other principal is cut off
// (the EMFILE outage pattern; RFC 6585 §4 429 Too Many Requests). Sluice holds at most
// `limits.maxConnections` client connections across all listeners and `listeners[].maxConnections` on one
// listener; the next connection is answered 429 connections_exhausted (Proxy-Status proxy_internal_error)
// and closed before anything is read, identified or dialed, and the established connections of every
// principal keep working. A released slot is admitted again.
import { afterEach, describe, expect, it } from 'vitest';
import type net from 'node:net';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, rawRequest, roundTrip as echoRoundTrip } from '../support/raw-client.js';
import { waitUntil } from '../support/wait.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN_A = 'tok-caps-a';
const TOKEN_B = 'tok-caps-b';

const roundTrip = (socket: net.Socket, text: string): Promise<string> => echoRoundTrip(socket, text, 5000);

const portOf = (sluice: TestSluice, name: string): number => {
  const address = sluice.app.listeners.find((l) => l.name === name)?.address ?? '';
  return Number(address.slice(address.lastIndexOf(':') + 1));
};

describe('connection caps', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  async function setup(config: { maxConnections?: number; sharedMax?: number }): Promise<{ sluice: TestSluice; echo: EchoServer; tunnel: (port: number, token: string) => Promise<net.Socket> }> {
    const echo = await startTcpEchoServer();
    cleanup.push(() => echo.close());
    const sluice = await startSluice(
      {
        ...(config.maxConnections === undefined ? {} : { limits: { maxConnections: config.maxConnections } }),
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token', ...(config.sharedMax === undefined ? {} : { maxConnections: config.sharedMax }) },
          { name: 'sandbox-b', listen: '127.0.0.1:0', grant: 'b' },
        ],
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
    cleanup.push(() => sluice.close());
    const tunnel = async (port: number, token: string): Promise<net.Socket> => {
      const opened = await openConnectTunnel(port, `echo.test:${echo.port}`, token === '' ? {} : { 'Proxy-Authorization': `Bearer ${token}` });
      expect(opened.status).toBe(200);
      cleanup.push(() => void opened.socket.destroy());
      return opened.socket;
    };
    return { sluice, echo, tunnel };
  }

  /** Opens one more connection and expects the cap's answer, before any request byte is sent. */
  async function expectExhausted(sluice: TestSluice, port: number): Promise<void> {
    const decisions = sluice.decisions().length;
    const res = await rawRequest(port, Buffer.alloc(0), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
    expect(res.text).toContain('Proxy-Status: sluice; error=proxy_internal_error; details="connections_exhausted"');
    expect(res.closed).toBe(true);
    expect(sluice.decisions().slice(decisions)).toEqual([expect.objectContaining({ reason: 'connections_exhausted', principal: null, canonical: null })]);
  }

  it('limits.maxConnections: the next connection on any listener gets 429 and is closed; established tunnels of every principal keep working', async () => {
    const { sluice, echo, tunnel } = await setup({ maxConnections: 3 });
    const sandboxB = portOf(sluice, 'sandbox-b');
    const a1 = await tunnel(sluice.port, TOKEN_A);
    const a2 = await tunnel(sluice.port, TOKEN_A);
    const b1 = await tunnel(sandboxB, '');
    const dialed = echo.connections;

    await expectExhausted(sluice, sluice.port);
    await expectExhausted(sluice, sandboxB);
    // A full request with a valid token is refused the same way: the cap comes before identification.
    const refused = await rawRequest(sluice.port, `CONNECT echo.test:${echo.port} HTTP/1.1\r\nHost: echo.test\r\nProxy-Authorization: Bearer ${TOKEN_B}\r\n\r\n`, { untilClose: true });
    expect(refused.text).toContain('details="connections_exhausted"');
    expect(echo.connections).toBe(dialed);

    expect(await roundTrip(a1, 'a1')).toBe('a1');
    expect(await roundTrip(a2, 'a2')).toBe('a2');
    expect(await roundTrip(b1, 'b1')).toBe('b1');

    // Closing one frees its slot.
    a2.destroy();
    await waitUntil(() => sluice.app.runtime.gate.count === 2, { timeoutMs: 5000, label: 'slot released' });
    const again = await tunnel(sluice.port, TOKEN_B);
    expect(await roundTrip(again, 'again')).toBe('again');
  });

  it('listeners[].maxConnections: the full listener answers 429; the other listener and the established tunnels carry on', async () => {
    const { sluice, tunnel } = await setup({ sharedMax: 2 });
    const sandboxB = portOf(sluice, 'sandbox-b');
    const a1 = await tunnel(sluice.port, TOKEN_A);
    const b1 = await tunnel(sluice.port, TOKEN_B);

    await expectExhausted(sluice, sluice.port);
    const b2 = await tunnel(sandboxB, '');
    const b3 = await tunnel(sandboxB, '');
    expect(await roundTrip(b2, 'b2')).toBe('b2');
    expect(await roundTrip(b3, 'b3')).toBe('b3');
    expect(await roundTrip(a1, 'a1')).toBe('a1');
    expect(await roundTrip(b1, 'b1')).toBe('b1');
    await expectExhausted(sluice, sluice.port);
  });

  it('answers a flood of connections over the cap quickly, each with 429, and keeps the slots it has', async () => {
    const { sluice, tunnel } = await setup({ maxConnections: 2 });
    const a1 = await tunnel(sluice.port, TOKEN_A);
    const b1 = await tunnel(portOf(sluice, 'sandbox-b'), '');
    const started = Date.now();
    const flood = await Promise.all(Array.from({ length: 50 }, () => rawRequest(sluice.port, Buffer.alloc(0), { untilClose: true })));
    expect(Date.now() - started).toBeLessThan(3000);
    for (const res of flood) expect(res.text).toContain('details="connections_exhausted"');
    expect(await roundTrip(a1, 'still')).toBe('still');
    expect(await roundTrip(b1, 'here')).toBe('here');
    expect(sluice.app.runtime.gate.count).toBe(2);
  });
});
