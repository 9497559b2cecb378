// Threat: junk in the CONNECT request target. RFC 9110 §9.3.6 allows only authority-form `host:port`
// there (RFC 9112 §3.2.3), yet parsers differ on userinfo (`user@host`: the host a naive splitter sees is
// not the one dialed, as in url-parse's GHSA-rqff-837h-mm52 and Orange Tsai's "A New Era of SSRF",
// Black Hat 2017), paths, empty hosts, IPv6 zone IDs (RFC 6874: `%25eth0` selects an interface),
// out-of-range or trailing-garbage ports (`0`, `65536`, `443abc`: parseInt stops at the junk; compare
// url-parse's CVE-2022-0686 port confusion) and absolute URIs. Every such target must be answered 400 with the reason that names the
// problem, closed, never resolved or dialed, and without disturbing any other connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type net from 'node:net';
import type { LookupAll } from '../../src/core/index.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { waitFor } from '../support/wait.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-junk';
const BASIC = `Basic ${Buffer.from(`j:${TOKEN}`).toString('base64')}`;

describe('CONNECT target junk', () => {
  let echo: EchoServer;
  let sluice: TestSluice;
  let looked = 0;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    const lookup: LookupAll = async () => {
      looked += 1;
      return [{ address: '127.0.0.1', family: 4, ttlSeconds: 0 }];
    };
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'j',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`tcp://a.test:${echo.port}`, `https://a.test:${echo.port}`, `tcp://127.0.0.1:${echo.port}`],
            allowAddressClasses: ['loopback', 'link_local'],
          },
        ],
      },
      { lookup },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  /** A granted tunnel that echoes; used to show other connections are not disturbed. */
  async function openEcho(): Promise<net.Socket> {
    const tunnel = await openConnectTunnel(sluice.port, `a.test:${echo.port}`, { 'Proxy-Authorization': BASIC });
    expect(tunnel.status).toBe(200);
    return tunnel.socket;
  }

  async function roundTrip(socket: net.Socket, text: string): Promise<string> {
    const got = waitFor<Buffer>(socket, 'data', 5000);
    socket.write(text);
    return (await got).toString();
  }

  // [target, details]: the target is sent exactly as written, after a valid token.
  const JUNK: readonly (readonly [string, string])[] = [
    ['user:pass@a.test:{port}', 'destination_malformed'], // userinfo (RFC 9110 §4.2.4: deprecated and never in authority-form)
    ['@a.test:{port}', 'destination_malformed'],
    ['a.test@127.0.0.1:{port}', 'destination_malformed'],
    ['a.test:{port}/', 'destination_malformed'], // a path
    ['a.test:{port}/admin', 'destination_malformed'],
    ['a.test:{port}?x=1', 'destination_malformed'], // a query
    ['https://a.test:{port}', 'destination_malformed'], // an absolute URI
    ['https://a.test:{port}/', 'destination_malformed'],
    ['//a.test:{port}', 'destination_malformed'],
    [':{port}', 'destination_malformed'], // an empty host
    ['[]:{port}', 'destination_malformed'],
    ['[fe80::1%25eth0]:{port}', 'destination_malformed'], // an IPv6 zone ID, percent-encoded (RFC 6874)
    ['[fe80::1%eth0]:{port}', 'destination_malformed'], // and raw
    ['[::1%lo]:{port}', 'destination_malformed'],
    ['::1:{port}', 'destination_malformed'], // IPv6 without brackets
    ['[::1]x:{port}', 'destination_malformed'], // junk after the literal
    ['[::1:{port}', 'destination_malformed'], // an unterminated literal
    ['a.test:0', 'destination_malformed'], // port 0
    ['a.test:65536', 'destination_malformed'], // past 65535
    ['a.test:99999999999', 'destination_malformed'],
    ['a.test:443abc', 'destination_malformed'], // trailing garbage (parseInt would say 443)
    ['a.test:0x1bb', 'destination_malformed'],
    ['a.test:+443', 'destination_malformed'],
    ['a.test:-1', 'destination_malformed'],
    ['a.test:', 'destination_malformed'], // an empty port
    ['a.test', 'destination_malformed'], // no port: CONNECT needs one
    ['a.test:{port}:{port}', 'destination_malformed'],
    ['a.test\\:{port}', 'request_malformed'], // the HTTP parser refuses a backslash in a request-target
    ['a.test%2f:{port}', 'destination_malformed'],
    ['a.test#frag:{port}', 'request_malformed'], // the HTTP parser refuses '#' in a request-target
  ];

  const fill = (template: string): string => template.replaceAll('{port}', String(echo.port));
  const sendJunk = (target: string): ReturnType<typeof rawRequest> =>
    rawRequest(sluice.port, `CONNECT ${target} HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: ${BASIC}\r\n\r\n`, { untilClose: true });

  it.each(JUNK)('CONNECT %s is answered 400 %s, closed, and neither resolved nor dialed', async (template, details) => {
    const connections = echo.connections;
    const lookups = looked;
    const res = await sendJunk(fill(template));
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain(`Proxy-Status: sluice; error=http_request_error; details="${details}"`);
    expect(res.closed).toBe(true);
    expect(looked).toBe(lookups);
    expect(echo.connections).toBe(connections);
  });

  it('records each refusal as one decision with no canonical destination, never echoing userinfo', async () => {
    const before = sluice.decisions().length;
    await rawRequest(sluice.port, `CONNECT user:secret-pw@a.test:${echo.port} HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: ${BASIC}\r\n\r\n`, { untilClose: true });
    const decisions = sluice.decisions().slice(before);
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({ decision: 'deny', reason: 'destination_malformed', canonical: null, principal: 'j' });
    expect(JSON.stringify(decisions)).not.toContain('secret-pw');
  });

  it('leaves an established tunnel and new connections untouched while junk arrives', async () => {
    const live = await openEcho();
    expect(await roundTrip(live, 'before')).toBe('before');
    await Promise.all(JUNK.map(([template]) => sendJunk(fill(template))));
    expect(await roundTrip(live, 'after')).toBe('after');
    live.destroy();
    const fresh = await openEcho();
    expect(await roundTrip(fresh, 'fresh')).toBe('fresh');
    fresh.destroy();
  });
});
