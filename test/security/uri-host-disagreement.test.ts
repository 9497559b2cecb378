// Threat: absolute-form URI and Host disagreement. A sandbox sends `GET http://allowed.test/` with
// `Host: internal.test`, hoping that policy checks one and the origin (or a virtual-host router behind
// it) acts on the other: the host-header confusion behind cache poisoning, password-reset poisoning and
// routing SSRF (James Kettle, "Practical HTTP Host header attacks", 2013). RFC 9112 §3.2.2: a proxy MUST
// ignore the received Host and use the request-target's authority; §3.2: a request with more than one
// Host field line MUST be answered 400. Sluice refuses any Host that does not canonicalize to the URI's
// destination (400 host_mismatch, a disagreement is an attack signal), accepts the spellings that do
// (case, trailing dot, the scheme's default port, RFC 9110 §4.2.3), and always sends the origin its
// own canonical Host, never the client's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type net from 'node:net';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-host';
const AUTH = `Basic ${Buffer.from(`h:${TOKEN}`).toString('base64')}`;

/** An origin on port 80 of a random loopback address, for default-port equivalence; null without privilege. */
interface PortEightyOrigin {
  address: string;
  server: http.Server | null;
  hosts: string[];
}

async function startPortEightyOrigin(): Promise<PortEightyOrigin> {
  const hosts: string[] = [];
  for (let attempt = 0; attempt < 10; attempt += 1) {
    const address = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;
    const server = http.createServer((req, res) => {
      hosts.push(req.headers.host ?? '');
      res.writeHead(200, { 'content-type': 'text/plain', connection: 'close' }).end(`port80:${req.url ?? ''}`);
    });
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(80, address, () => resolve(true));
    });
    if (bound) return { address, server, hosts };
    if (attempt === 9) return { address, server: null, hosts };
  }
  return { address: '127.0.0.1', server: null, hosts };
}

interface RefusedCase {
  target: string;
  hosts: readonly string[];
}

interface AcceptedCase {
  target: string;
  host: string;
}

describe('absolute-form URI and Host must agree', () => {
  let origin: Origin;
  let echo: EchoServer;
  let port80: PortEightyOrigin;
  let sluice: TestSluice;
  let P: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    echo = await startTcpEchoServer();
    port80 = await startPortEightyOrigin();
    P = origin.port;
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'h',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`http://web.test:${P}`, 'http://web.test', 'http://default.test', `http://127.0.0.1:${P}`, `tcp://web.test:${echo.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      // default.test is served by the port-80 origin (or nothing listens there); web.test by the loopback origin.
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'default.test': [port80.address], 'evil.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    await echo?.close();
    const server = port80?.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const send = (target: string, hostLines: readonly string[]): Promise<{ text: string }> =>
    rawRequest(sluice.port, `GET ${target} HTTP/1.1\r\n${hostLines.map((h) => `Host: ${h}\r\n`).join('')}Proxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`, { untilClose: true });

  it.each([
    ['another host', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`evil.test:${p}`] })],
    ['another port', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`web.test:${p + 1}`] })],
    ['no port, so the default 80, against a URI port', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: ['web.test'] })],
    ['a non-default port against a URI without one', (p: number): RefusedCase => ({ target: 'http://web.test/', hosts: [`web.test:${p}`] })],
    ['an empty value', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [''] })],
    ['userinfo', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`evil.test@web.test:${p}`] })],
    ['a path', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`web.test:${p}/x`] })],
    ['two ports', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`web.test:${p}:${p}`] })],
    ['an IPv4 literal for a name', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`127.0.0.1:${p}`] })],
    ['a disagreeing first Host of two', (p: number): RefusedCase => ({ target: `http://web.test:${p}/`, hosts: [`evil.test:${p}`, `web.test:${p}`] })],
  ])('refuses a Host with %s: 400 host_mismatch, origin untouched', async (_name, build) => {
    const { target, hosts } = build(P);
    const connections = origin.connections;
    const res = await send(target, hosts);
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('Proxy-Status: sluice; error=http_request_error; details="host_mismatch"');
    expect(origin.connections).toBe(connections);
    expect(port80.hosts).toEqual([]);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'host_mismatch', decision: 'deny' });
  });

  // RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1 request
  // message that ... contains more than one Host header field line".
  it('refuses two Host field lines even when the first agrees: 400 host_mismatch, origin untouched', async () => {
    const connections = origin.connections;
    const res = await send(`http://web.test:${P}/two-hosts`, [`web.test:${P}`, `evil.test:${P}`]);
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('details="host_mismatch"');
    expect(origin.connections).toBe(connections);
  });

  it.each([
    ['the same authority', (p: number): AcceptedCase => ({ target: `http://web.test:${p}/same`, host: `web.test:${p}` })],
    ['another case and a trailing dot', (p: number): AcceptedCase => ({ target: `http://web.test:${p}/case`, host: `WEB.Test.:${p}` })],
    ['another spelling of the same IPv4 literal', (p: number): AcceptedCase => ({ target: `http://127.0.0.1:${p}/ip`, host: `127.1:${p}` })],
  ])('accepts a Host with %s, and the origin gets Sluice’s canonical Host', async (_name, build) => {
    const { target, host } = build(P);
    const res = await send(target, [host]);
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    const canonical = new URL(target).host;
    expect(origin.requests.at(-1)?.rawHeaders.filter((_v, i, all) => i % 2 === 0 && all[i]?.toLowerCase() === 'host')).toHaveLength(1);
    expect(origin.requests.at(-1)?.headers.host).toBe(canonical);
  });

  it('accepts a request without Host and sends the URI’s authority (RFC 9112 §3.2.2)', async () => {
    const res = await send(`http://web.test:${P}/no-host`, []);
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(origin.requests.at(-1)).toMatchObject({ url: '/no-host', headers: { host: `web.test:${P}` } });
  });

  it.each([
    ['Host without port, URI with :80', 'http://default.test:80/default', 'default.test'],
    ['Host with :80, URI without port', 'http://default.test/default', 'DEFAULT.test:80'],
  ])('treats the default port as equal (%s)', async (_name, target, host) => {
    const res = await send(target, [host]);
    expect(res.text).not.toContain('host_mismatch');
    expect(sluice.decisions().at(-1)).toMatchObject({ canonical: 'default.test:80', rule: 'http://default.test:80' });
    if (port80.server !== null) {
      expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
      expect(res.text).toContain('port80:/default');
      // Sluice sends the default port implicitly, as RFC 9110 §4.2.3 normalization suggests.
      expect(port80.hosts.at(-1)).toBe('default.test');
    } else {
      // Without privilege for port 80 nothing listens there: the hop went on to the dial, past the Host check.
      expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'dial_refused' });
    }
  });

  it('never uses a CONNECT’s Host for policy: the request-target alone is authorized', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `web.test:${echo.port}`, { 'Proxy-Authorization': AUTH });
    const socket: net.Socket = tunnel.socket;
    socket.destroy();
    expect(tunnel.status).toBe(200);
    const forbidden = await rawRequest(sluice.port, `CONNECT evil.test:${echo.port} HTTP/1.1\r\nHost: web.test:${echo.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`, { untilClose: true });
    expect(forbidden.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(forbidden.text).toContain('details="destination_not_granted"');
    expect(sluice.decisions().at(-1)).toMatchObject({ canonical: `evil.test:${echo.port}` });
  });
});
