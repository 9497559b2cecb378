// CONNECT end to end with real curl: an allowed HTTPS origin is reached through an opaque tunnel whose
// certificate curl verifies (Sluice never decrypts); denials are answered before any byte reaches the origin.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpsOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { openConnectTunnel, parseResponseHead } from '../support/raw-client.js';
import { waitFor, waitUntil } from '../support/wait.js';
import { unusedPort } from '../support/ports.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-connect-a';

describe('CONNECT tunnels', () => {
  let pki: TestPki;
  let origin: Origin;
  let echo: EchoServer;
  let sluice: TestSluice;
  let deadPort: number;

  beforeAll(async () => {
    pki = createTestPki(['allowed.test', 'other.test']);
    origin = await startHttpsOrigin(pki);
    echo = await startTcpEchoServer();
    deadPort = await unusedPort();
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'a',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`https://allowed.test:${origin.port}`, `tcp://echo.test:${echo.port}`, `tcp://dead.test:${deadPort}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup: tableLookup({ 'allowed.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'], 'dead.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    await echo?.close();
  });

  const proxy = (): string => `http://a:${TOKEN}@127.0.0.1:${sluice.port}`;

  it('reaches an allowed HTTPS origin through an opaque tunnel that curl verifies end to end', async () => {
    const result = await runCurl(['-i', '--proxy', proxy(), '--cacert', pki.caFile, `https://allowed.test:${origin.port}/hello`]);
    expect(result.stderr).toBe('');
    const response = curlHeadersAndBody(result.stdout);
    expect(response.blocks[0]?.status).toBe(200);
    expect(response.blocks[0]?.headers['proxy-status']).toBe('sluice; details="granted"');
    expect(response.status).toBe(200);
    expect(response.body).toBe('origin:GET:/hello');
    const decision = sluice.decisions().at(-1);
    expect(decision).toMatchObject({ decision: 'allow', reason: 'granted', canonical: `allowed.test:${origin.port}`, pinned: '127.0.0.1', route: 'direct', attested: true });
  });

  it('refuses a destination outside the grant with 403 and Proxy-Status before the origin sees a connection', async () => {
    const before = origin.connections;
    const result = await runCurl(['-i', '--proxy', proxy(), '--cacert', pki.caFile, `https://other.test:${origin.port}/`]);
    expect(result.code).toBe(56);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.blocks[0]?.status).toBe(403);
    expect(response.blocks[0]?.headers['proxy-status']).toContain('details="destination_not_granted"');
    expect(origin.connections).toBe(before);
  });

  it('names the canonical destination and grant in the denial body, never the token', async () => {
    const tunnel = await openConnectTunnel(sluice.port, 'OTHER.test.:' + origin.port, { 'Proxy-Authorization': `Basic ${Buffer.from(`a:${TOKEN}`).toString('base64')}` });
    expect(tunnel.status).toBe(403);
    expect(tunnel.rest.toString()).toContain(`destination other.test:${origin.port}, grant a`);
    expect(tunnel.head + tunnel.rest.toString()).not.toContain(TOKEN);
    tunnel.socket.destroy();
  });

  it('relays a raw TCP tunnel with half-close: the client FIN reaches the origin and the echo still comes back', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${TOKEN}` });
    expect(tunnel.status).toBe(200);
    const chunks: Buffer[] = [];
    tunnel.socket.on('data', (c: Buffer) => chunks.push(c));
    tunnel.socket.end('ping-after-fin');
    await waitFor(tunnel.socket, 'close', 5000);
    expect(Buffer.concat(chunks).toString()).toBe('ping-after-fin');
    const close = sluice.closes().at(-1);
    expect(close).toMatchObject({ request: 'connect', closedBy: 'client_closed', bytesUp: 14, bytesDown: 14 });
  });

  /** Sends `pieces` to Sluice one by one, 20 ms apart so they leave as separate segments, and reads until the reply ends with `until`. */
  async function rawExchange(pieces: string[], until: string): Promise<string> {
    const socket = net.connect(sluice.port, '127.0.0.1');
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
    socket.on('error', () => undefined);
    await waitFor(socket, 'connect', 2000);
    for (const piece of pieces) {
      socket.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitUntil(() => received.toString('latin1').endsWith(until) || socket.destroyed, { timeoutMs: 3000, label: `reply ending in ${until}` });
    socket.destroy();
    return received.toString('latin1');
  }

  it('tunnels a CONNECT head split across segments (node:http reads it) and one with tunnel bytes in the same segment (the fast path)', async () => {
    const head = `CONNECT echo.test:${echo.port} HTTP/1.1\r\nHost: echo.test:${echo.port}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`;
    const established = 'HTTP/1.1 200 Connection Established';
    const split = await rawExchange([head.slice(0, 9), head.slice(9, 40), head.slice(40), 'split-ping'], 'split-ping');
    expect(split.startsWith(established)).toBe(true);
    expect(split.endsWith('split-ping')).toBe(true);
    const together = await rawExchange([`${head}early-ping`], 'early-ping');
    expect(together.startsWith(established)).toBe(true);
    expect(together.endsWith('early-ping')).toBe(true);
    expect(parseResponseHead(Buffer.from(together, 'latin1'))?.status).toBe(200);
  });

  it('answers 502 dial_refused when the pinned address refuses, and records it', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `dead.test:${deadPort}`, { 'Proxy-Authorization': `Bearer ${TOKEN}` });
    expect(tunnel.status).toBe(502);
    expect(tunnel.head).toContain('details="dial_refused"');
    tunnel.socket.destroy();
    expect(sluice.decisions().at(-1)).toMatchObject({ decision: 'deny', reason: 'dial_refused', canonical: `dead.test:${deadPort}` });
  });
});
