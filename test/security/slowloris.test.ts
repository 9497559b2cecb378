// Threat: slowloris (RSnake 2009; CVE-2007-6750 for Apache httpd; CWE-400): a sandbox opens connections
// and sends the request head a byte at a time, or a CONNECT head that never ends, or nothing at all, so
// each connection holds a slot and a parser forever; after CONNECT it may also stall before the TLS
// ClientHello that the domain-fronting guard waits for. Sluice gives every connection
// `timeouts.headersMs` for a complete head (Node's headersTimeout, added for CVE-2018-12122, checked
// every second by `connectionsCheckingInterval` instead of Node's default 30 s) and answers 408
// request_timeout (RFC 9110 §15.5.9), then closes; the ClientHello wait has the same bound. Meanwhile an
// ordinary client is served at once. Bounds below allow for the 1 s checking interval.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { runCurl } from '../support/curl.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-slow';
const AUTH = `Basic ${Buffer.from(`s:${TOKEN}`).toString('base64')}`;
const HEADERS_MS = 500;
// headersMs plus one connectionsCheckingInterval (1 s) plus scheduling slack.
const BOUND_MS = HEADERS_MS + 1_000 + 1_000;

interface SlowResult {
  text: string;
  elapsedMs: number;
  closedByServer: boolean;
  bytesSent: number;
}

/** Sends `parts` one per `everyMs`, from connect; resolves when the server closes, or after `giveUpMs`. */
function dribble(port: number, parts: readonly string[], everyMs: number, giveUpMs: number): Promise<SlowResult> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect({ host: '127.0.0.1', port });
    let text = '';
    let sent = 0;
    let closedByServer = true;
    const tick = setInterval(() => {
      const part = parts[sent];
      if (part !== undefined && !socket.destroyed) {
        socket.write(part);
        sent += 1;
      }
    }, everyMs);
    const giveUp = setTimeout(() => {
      closedByServer = false;
      socket.destroy();
    }, giveUpMs);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(tick);
      clearTimeout(giveUp);
      resolve({ text, elapsedMs: Date.now() - started, closedByServer, bytesSent: sent });
    });
  });
}

/** Resolves true when the peer closes `socket`, false (and destroys it) after `ms`. */
function closedWithin(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(false);
    }, ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe('slowloris', () => {
  let origin: Origin;
  let echo: EchoServer;
  let sluice: TestSluice;
  let P: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    echo = await startTcpEchoServer();
    P = origin.port;
    sluice = await startSluice(
      {
        timeouts: { headersMs: HEADERS_MS },
        grants: [
          { id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${P}`, `tcp://web.test:${echo.port}`], allowAddressClasses: ['loopback'] },
          { id: 'sni', tokenSha256: tokenHash(`${TOKEN}-sni`), destinations: [`https://web.test:${echo.port}`], allowAddressClasses: ['loopback'], tls: { requireSniMatch: true } },
        ],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    await echo?.close();
  });

  const head = (): string => `GET http://web.test:${P}/slow HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;

  function expectTimedOut(result: SlowResult): void {
    expect(result.closedByServer).toBe(true);
    expect(result.elapsedMs).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expect(result.elapsedMs).toBeLessThan(BOUND_MS);
    expect(result.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(result.text).toContain('Proxy-Status: sluice; error=http_request_error; details="request_timeout"');
  }

  it('answers a head dribbled a byte every 100 ms with 408 request_timeout and closes it in time', async () => {
    const requests = origin.requests.length;
    const result = await dribble(sluice.port, head().split(''), 100, BOUND_MS + 2_000);
    expectTimedOut(result);
    expect(result.bytesSent).toBeLessThan(head().length);
    expect(origin.requests.length).toBe(requests);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'request_timeout', principal: null });
  });

  it('answers a CONNECT whose head never ends with 408 and never dials', async () => {
    const connections = echo.connections;
    const result = await dribble(sluice.port, [`CONNECT web.test:${echo.port} HTTP/1.1\r\n`, `Proxy-Authorization: ${AUTH}\r\n`], 50, BOUND_MS + 2_000);
    expectTimedOut(result);
    expect(echo.connections).toBe(connections);
  });

  it('closes a connection that sends nothing at all', async () => {
    const result = await dribble(sluice.port, [], 100, BOUND_MS + 2_000);
    expectTimedOut(result);
  });

  it('closes a tunnel whose TLS ClientHello never comes (domain-fronting guard wait), forwarding no byte', async () => {
    const started = Date.now();
    const tunnel = await openConnectTunnel(sluice.port, `web.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${TOKEN}-sni` });
    expect(tunnel.status).toBe(200);
    let echoed = 0;
    tunnel.socket.on('data', (chunk: Buffer) => (echoed += chunk.length));
    const closed = closedWithin(tunnel.socket, BOUND_MS + 2_000);
    tunnel.socket.resume();
    tunnel.socket.write(Buffer.from([0x16, 0x03, 0x01])); // a record header that never completes
    expect(await closed).toBe(true);
    expect(Date.now() - started).toBeLessThan(BOUND_MS);
    expect(echoed).toBe(0);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'sni_mismatch', detail: 'no ClientHello within the handshake timeout' });
  });

  it('serves an ordinary client at once while 30 slowloris connections hang', async () => {
    const started = Date.now();
    const slow = Array.from({ length: 30 }, () => dribble(sluice.port, head().split(''), 100, BOUND_MS + 2_000));
    const normal = await runCurl(['--proxy', `http://s:${TOKEN}@127.0.0.1:${sluice.port}`, `http://web.test:${P}/normal`]);
    const servedAfterMs = Date.now() - started;
    expect(normal.stdout).toBe('origin:GET:/normal');
    // Served while every slow connection was still open: none of them was closed before this point.
    for (const result of await Promise.all(slow)) {
      expectTimedOut(result);
      expect(result.elapsedMs).toBeGreaterThan(servedAfterMs);
    }
  });

  it('serves a head that is slow but complete within timeouts.headersMs', async () => {
    const text = head().replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n');
    const parts = [text.slice(0, 20), text.slice(20, 60), text.slice(60)];
    const result = await dribble(sluice.port, parts, 80, BOUND_MS);
    expect(result.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(result.text).toContain('origin:GET:/slow');
  });
});
