// Threat: header bombs. A sandbox sends hundreds of header fields, or one enormous field or request-target,
// to exhaust the proxy's memory and CPU or to push a field past what a limit-checking component looks at
// (CWE-770; CVE-2018-12121, "Denial of Service with large HTTP headers" in Node, fixed by the 8 KiB/16 KiB
// header cap; RFC 6585 §5 names 431 for this, RFC 9110 §15.5.1 allows 400). Sluice caps the head at
// `limits.maxHeaderBytes` (Node's parser stops at the cap: HPE_HEADER_OVERFLOW) and the field count at
// `limits.maxHeaderCount`, answers 400 headers_too_large, closes that connection, forwards nothing, and
// keeps serving every other client, including an established tunnel of another principal.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type net from 'node:net';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { runCurl } from '../support/curl.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { waitFor } from '../support/wait.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN_A = 'tok-bomb-a';
const TOKEN_B = 'tok-bomb-b';
const AUTH_A = `Basic ${Buffer.from(`a:${TOKEN_A}`).toString('base64')}`;

const fields = (count: number): string => Array.from({ length: count }, (_, i) => `X-Filler-${i}: v\r\n`).join('');

describe('header bombs', () => {
  let origin: Origin;
  let echo: EchoServer;
  let sluice: TestSluice;
  let P: number;
  let tunnelB: net.Socket;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    echo = await startTcpEchoServer();
    P = origin.port;
    sluice = await startSluice(
      {
        limits: { maxHeaderBytes: 16_384, maxHeaderCount: 100 },
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`http://web.test:${P}`, `tcp://web.test:${echo.port}`], allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'] }) },
    );
    // Another principal's tunnel, established before the bombs: it must keep working throughout.
    const tunnel = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${TOKEN_B}` });
    expect(tunnel.status).toBe(200);
    tunnelB = tunnel.socket;
  });
  afterAll(async () => {
    tunnelB?.destroy();
    await sluice?.close();
    await origin?.close();
    await echo?.close();
  });

  async function echoB(text: string): Promise<string> {
    const got = waitFor<Buffer>(tunnelB, 'data', 5000);
    tunnelB.write(text);
    return (await got).toString();
  }

  const get = (extra: string, target = `http://web.test:${P}/bomb`): string =>
    `GET ${target} HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH_A}\r\nConnection: close\r\n${extra}\r\n`;

  async function expectRefused(request: string): Promise<void> {
    const requests = origin.requests.length;
    const connections = echo.connections;
    const res = await rawRequest(sluice.port, request, { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('Proxy-Status: sluice; error=http_request_error; details="headers_too_large"');
    expect(res.closed).toBe(true);
    expect(origin.requests.length).toBe(requests);
    expect(echo.connections).toBe(connections);
  }

  it('refuses 200 header fields in absolute-form with 400 headers_too_large', async () => {
    await expectRefused(get(fields(197)));
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'headers_too_large', detail: 'more than 100 header fields' });
  });

  it('refuses 200 header fields on a CONNECT with 400 headers_too_large, before the tunnel is dialed', async () => {
    await expectRefused(`CONNECT web.test:${echo.port} HTTP/1.1\r\nHost: web.test\r\nProxy-Authorization: ${AUTH_A}\r\n${fields(198)}\r\n`);
  });

  it('allows exactly limits.maxHeaderCount fields and refuses one more', async () => {
    // Host, Proxy-Authorization and Connection are three of the 100.
    const allowed = await rawRequest(sluice.port, get(fields(97), `http://web.test:${P}/at-the-cap`), { untilClose: true });
    expect(allowed.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(origin.requests.at(-1)?.url).toBe('/at-the-cap');
    await expectRefused(get(fields(98)));
  });

  it('refuses one 64 KiB header field with 400 headers_too_large', async () => {
    await expectRefused(get(`X-Big: ${'a'.repeat(64 * 1024)}\r\n`));
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'headers_too_large', detail: 'HPE_HEADER_OVERFLOW' });
  });

  it('refuses a 64 KiB request-target with 400 headers_too_large', async () => {
    await expectRefused(get('', `http://web.test:${P}/${'a'.repeat(64 * 1024)}`));
  });

  it('refuses a 64 KiB Proxy-Authorization (the token is never even parsed)', async () => {
    const requests = origin.requests.length;
    const res = await rawRequest(sluice.port, `GET http://web.test:${P}/ HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: Basic ${'A'.repeat(64 * 1024)}\r\n\r\n`, { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(res.text).toContain('details="headers_too_large"');
    expect(origin.requests.length).toBe(requests);
  });

  it('refuses many small fields that together pass limits.maxHeaderBytes', async () => {
    await expectRefused(get(Array.from({ length: 60 }, (_, i) => `X-Long-${i}: ${'b'.repeat(400)}\r\n`).join('')));
  });

  it('keeps serving other clients while 40 bombs arrive at once', async () => {
    const bombs = Array.from({ length: 40 }, (_, i) =>
      rawRequest(sluice.port, i % 2 === 0 ? get(`X-Big: ${'a'.repeat(64 * 1024)}\r\n`) : get(fields(300)), { untilClose: true }),
    );
    const [normal, echoed] = await Promise.all([runCurl(['--proxy', `http://a:${TOKEN_A}@127.0.0.1:${sluice.port}`, `http://web.test:${P}/during`]), echoB('during')]);
    const results = await Promise.all(bombs);
    expect(normal.stdout).toBe('origin:GET:/during');
    expect(echoed).toBe('during');
    for (const res of results) expect(res.text).toContain('details="headers_too_large"');
    expect(await echoB('after')).toBe('after');
    expect(origin.requests.some((r) => r.url === '/bomb')).toBe(false);
  });
});
