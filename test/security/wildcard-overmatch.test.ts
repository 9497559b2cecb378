// Threat: wildcard over-match. A grant for `*.a.test` is meant to cover the subdomains of a.test; a
// sandbox asks for a.test.evil.test (a suffix test without a label boundary, or a prefix test), xa.test
// (a suffix test on the string instead of on labels: CWE-697, the classic `endsWith("a.test")` bug), or
// a.test itself (docs/glossary.md: `*.example.com` means subdomains only). Matching is done on the canonical
// destination, label by label (RFC 1034 §3.1 domain names; compare RFC 6125 §6.4.3 for certificates),
// end to end through the proxy for CONNECT and absolute-form. A refused name is never resolved and the
// origin sees no connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LookupAll } from '../../src/core/index.js';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { waitFor } from '../support/wait.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-wildcard';
const AUTH = { 'Proxy-Authorization': `Basic ${Buffer.from(`w:${TOKEN}`).toString('base64')}` };

describe('wildcard destination rules match subdomains only, on label boundaries', () => {
  let echo: EchoServer;
  let origin: Origin;
  let sluice: TestSluice;
  const looked: string[] = [];

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    origin = await startHttpOrigin();
    // Every name resolves to the loopback origin, so only authorization can keep a name out.
    const lookup: LookupAll = async (host) => {
      looked.push(host);
      return [{ address: '127.0.0.1', family: 4, ttlSeconds: 0 }];
    };
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'w',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`https://*.a.test:${echo.port}`, `http://*.a.test:${origin.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
    await origin?.close();
  });

  async function echoThrough(target: string): Promise<string> {
    const tunnel = await openConnectTunnel(sluice.port, target, AUTH);
    expect(tunnel.status, target).toBe(200);
    const chunks: Buffer[] = [];
    tunnel.socket.on('data', (c: Buffer) => chunks.push(c));
    tunnel.socket.end('ping');
    await waitFor(tunnel.socket, 'close', 5000);
    return Buffer.concat(chunks).toString();
  }

  it.each(['b.a.test', 'x.y.a.test', 'B.A.TEST.', 'xn--bcher-kva.a.test', '_srv.a.test'])('CONNECT %s is granted by https://*.a.test and relayed', async (host) => {
    expect(await echoThrough(`${host}:${echo.port}`)).toBe('ping');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', rule: `https://*.a.test:${echo.port}` });
  });

  it.each([
    'a.test', // the apex: subdomains only
    'a.test.', // the apex with a trailing dot
    'xa.test', // string suffix, not a label suffix
    'x-a.test',
    'a.test.evil.test', // the granted name as a prefix of an attacker's zone
    'b.a.test.evil.test',
    'evil.test',
    'a.tes',
    'b.a.test.a', // an extra label after the suffix
  ])('CONNECT %s is refused with 403 destination_not_granted before DNS and dial', async (host) => {
    const connections = echo.connections;
    looked.length = 0;
    const tunnel = await openConnectTunnel(sluice.port, `${host}:${echo.port}`, AUTH);
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toContain('Proxy-Status: sluice; error=http_request_denied; details="destination_not_granted"');
    expect(looked).toEqual([]);
    expect(echo.connections).toBe(connections);
  });

  it('refuses a granted subdomain on another port', async () => {
    const otherPort = echo.port === 65535 ? 65534 : echo.port + 1;
    const tunnel = await openConnectTunnel(sluice.port, `b.a.test:${otherPort}`, AUTH);
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toContain('details="destination_not_granted"');
  });

  it.each(['*.a.test', '.a.test', 'b..a.test', '*a.test'])('CONNECT %s (a pattern or an empty label as a host) is 400 destination_malformed', async (host) => {
    const connections = echo.connections;
    const tunnel = await openConnectTunnel(sluice.port, `${host}:${echo.port}`, AUTH);
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(400);
    expect(tunnel.head).toContain('details="destination_malformed"');
    expect(echo.connections).toBe(connections);
  });

  const get = (host: string): Promise<{ text: string }> =>
    rawRequest(
      sluice.port,
      `GET http://${host}:${origin.port}/w HTTP/1.1\r\nHost: ${host}:${origin.port}\r\nProxy-Authorization: ${AUTH['Proxy-Authorization']}\r\nConnection: close\r\n\r\n`,
      { untilClose: true },
    );

  it('absolute-form: b.a.test is forwarded under http://*.a.test', async () => {
    const res = await get('b.a.test');
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(res.text.endsWith('origin:GET:/w')).toBe(true);
  });

  it.each(['a.test', 'xa.test', 'a.test.evil.test'])('absolute-form: %s is refused with 403 destination_not_granted and never forwarded', async (host) => {
    const requests = origin.requests.length;
    looked.length = 0;
    const res = await get(host);
    expect(res.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(res.text).toContain('details="destination_not_granted"');
    expect(res.text).toContain(`(destination ${host}:${origin.port}, grant w)`);
    expect(looked).toEqual([]);
    expect(origin.requests.length).toBe(requests);
  });
});
