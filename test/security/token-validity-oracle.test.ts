// Threat: a token-validity oracle on dedicated listeners (review 2026-12 finding 13; CWE-204 observable
// response discrepancy). A process that can reach grant A's dedicated socket presents a token it found or
// guessed. If a token that is valid for some other grant were answered differently from a random one
// (403 token_grant_mismatch against 407 token_invalid, as before), the answer would confirm that the
// token is live. Both are now answered the same way: status, headers (Proxy-Status, Proxy-Authenticate,
// Connection), body and connection handling, and both count as failed authentications. Only the audit
// record keeps the difference (`reason: token_grant_mismatch`, `detail` naming the token's grant).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { parseResponseHead } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { Remedies } from '../../src/core/index.js';

const TOKEN_A = 'tok-oracle-a';
const TOKEN_B = 'tok-oracle-b';
const RANDOM = 'tok-oracle-random-guess';
const LIMIT = 4;

const GRANTS = (port: number): Record<string, unknown>[] => [
  { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`http://a.test:${port}`], allowAddressClasses: ['loopback'] },
  { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`http://b.test:${port}`, `tcp://b.test:${port}`], allowAddressClasses: ['loopback'] },
];
const LOOKUP = tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] });

function tcpPort(sluice: TestSluice, name: string): number {
  const address = sluice.app.listeners.find((l) => l.name === name)?.address ?? '';
  return Number(address.slice(address.lastIndexOf(':') + 1));
}

const basic = (user: string, token: string): string => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

type Target = { readonly port: number } | { readonly path: string };

function complete(buf: Buffer): boolean {
  const head = parseResponseHead(buf);
  return head !== null && buf.length - head.headLength >= Number(head.headers['content-length'] ?? 0);
}

/**
 * Sends each request on one connection, each after the previous response is complete, and returns what
 * the client saw: every response (Date removed) and whether and when the connection was closed.
 */
function converse(target: Target, requests: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = 'path' in target ? net.connect(target.path) : net.connect({ host: '127.0.0.1', port: target.port });
    const seen: string[] = [];
    let buf = Buffer.alloc(0);
    let next = 0;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`conversation stalled after ${JSON.stringify(seen)} + ${JSON.stringify(buf.toString('latin1'))}`));
    }, 5000);
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(seen.join('\n--\n'));
    };
    const send = (): void => {
      if (next === requests.length) return done();
      socket.write(requests[next] ?? '');
      next += 1;
    };
    socket.on('connect', send);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!complete(buf)) return;
      seen.push(buf.toString('latin1').replace(/^Date: .*\r\n/gim, ''));
      buf = Buffer.alloc(0);
      send();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (buf.length > 0) seen.push(`(incomplete) ${buf.toString('latin1')}`);
      seen.push('(closed by Sluice)');
      done();
    });
  });
}

describe('review 2026-12 finding 13: no token-validity oracle on dedicated listeners', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let dir: string;
  let socketA: string;
  let tcpA: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-oracle-'));
    socketA = path.join(dir, 'a.sock');
    sluice = await startSluice(
      {
        // High enough that the comparisons below are never throttled; the throttle has its own test.
        limits: { authFailuresPerMinute: 1000 },
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'sandbox-a', listen: `unix:${socketA}`, grant: 'a' },
          { name: 'sandbox-a-tcp', listen: '127.0.0.1:0', grant: 'a' },
        ],
        grants: GRANTS(origin.port),
      },
      { lookup: LOOKUP },
    );
    tcpA = tcpPort(sluice, 'sandbox-a-tcp');
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  const get = (host: string, pathname: string, authorization: string | null): string =>
    `GET http://${host}:${origin.port}${pathname} HTTP/1.1\r\nHost: ${host}:${origin.port}\r\n${authorization === null ? '' : `Proxy-Authorization: ${authorization}\r\n`}\r\n`;
  const connect = (authorization: string): string => `CONNECT b.test:${origin.port} HTTP/1.1\r\nHost: b.test:${origin.port}\r\nProxy-Authorization: ${authorization}\r\n\r\n`;

  // Each pair: grant B's valid token in one credential form, and a random token in the same form.
  const forms: [string, string, string][] = [
    ['Basic with the grant id', basic('b', TOKEN_B), basic('b', RANDOM)],
    ['Bearer', `Bearer ${TOKEN_B}`, `Bearer ${RANDOM}`],
    ['Basic with an empty user', basic('', TOKEN_B), basic('', RANDOM)],
  ];

  describe.each([
    ['the dedicated Unix socket', (): Target => ({ path: socketA })],
    ['the dedicated loopback TCP listener', (): Target => ({ port: tcpA })],
  ])('on %s', (_listener, target) => {
    it.each(forms)('absolute-form, %s: same answer and the connection stays usable in both cases', async (_form, valid, random) => {
      // The follow-up request carries no token: on a dedicated listener it acts for grant A.
      const conversation = (auth: string): string[] => [get('b.test', '/bleed', auth), get('a.test', '/after', null)];
      const withValid = await converse(target(), conversation(valid));
      const withRandom = await converse(target(), conversation(random));
      expect(withValid).toBe(withRandom);
      expect(withValid).toMatch(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n/);
      expect(withValid).toContain('Proxy-Status: sluice; error=http_request_denied; details="token_invalid"');
      expect(withValid).toContain('Proxy-Authenticate: Basic realm="sluice"');
      expect(withValid).toContain('origin:GET:/after');
      expect(withValid).not.toMatch(/token_grant_mismatch|grant b\b/);
    });

    it.each(forms)('CONNECT, %s: byte-identical answers, then the connection is closed', async (_form, valid, random) => {
      const withValid = await converse(target(), [connect(valid)]);
      const withRandom = await converse(target(), [connect(random)]);
      expect(withValid).toBe(withRandom);
      expect(withValid).toMatch(/^HTTP\/1\.1 407 /);
      expect(withValid).toContain('details="token_invalid"');
      expect(withValid).not.toContain('token_grant_mismatch');
    });
  });

  it('body: both name the code, the message and "grant none", never the token’s grant', async () => {
    const bodyOf = (text: string): string => text.slice(text.indexOf('\r\n\r\n') + 4);
    const valid = bodyOf(await converse({ port: tcpA }, [get('b.test', '/x', basic('b', TOKEN_B))]));
    const random = bodyOf(await converse({ port: tcpA }, [get('b.test', '/x', basic('b', RANDOM))]));
    expect(valid).toBe(random);
    expect(valid.split('\n--\n')[0]).toBe(`sluice: 407 token_invalid: the presented grant token is not valid (destination unknown, grant none); fix: ${Remedies.token_invalid}\n`);
  });

  it('the audit record keeps the difference: reason token_grant_mismatch, detail naming the token’s grant, status 407', async () => {
    await converse({ port: tcpA }, [get('b.test', '/audited', basic('b', TOKEN_B))]);
    await converse({ port: tcpA }, [get('b.test', '/audited', basic('b', RANDOM))]);
    const [valid, random] = sluice.decisions().slice(-2);
    expect(valid).toMatchObject({ listener: 'sandbox-a-tcp', principal: null, decision: 'deny', reason: 'token_grant_mismatch', status: 407, detail: 'token of grant b' });
    expect(random).toMatchObject({ listener: 'sandbox-a-tcp', principal: null, decision: 'deny', reason: 'token_invalid', status: 407, detail: null });
    expect(origin.requests.some((r) => r.url === '/bleed' || r.url === '/audited' || r.url === '/x')).toBe(false);
  });
});

describe('review 2026-12 finding 13: both refusals count against limits.authFailuresPerMinute', () => {
  let origin: Origin;

  beforeAll(async () => {
    origin = await startHttpOrigin();
  });
  afterAll(async () => {
    await origin?.close();
  });

  // Each case on its own Sluice, so that neither inherits the other's failures whatever the throttle keys on.
  it.each([
    ['a token valid for another grant', basic('b', TOKEN_B)],
    ['a random token', basic('b', RANDOM)],
  ])(`%s: ${LIMIT} refusals, then 429 auth_rate_limited (the throttle is no oracle either)`, async (_what, auth) => {
    const sluice = await startSluice(
      {
        limits: { authFailuresPerMinute: LIMIT },
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'sandbox-a-tcp', listen: '127.0.0.1:0', grant: 'a' },
        ],
        grants: GRANTS(origin.port),
      },
      { lookup: LOOKUP },
    );
    try {
      const tcpA = tcpPort(sluice, 'sandbox-a-tcp');
      const get = `GET http://b.test:${origin.port}/throttle HTTP/1.1\r\nHost: b.test:${origin.port}\r\nProxy-Authorization: ${auth}\r\n\r\n`;
      for (let i = 0; i < LIMIT; i += 1) expect(await converse({ port: tcpA }, [get])).toMatch(/^HTTP\/1\.1 407 /);
      const blocked = await converse({ port: tcpA }, [get]);
      expect(blocked).toMatch(/^HTTP\/1\.1 429 /);
      expect(blocked).toContain('details="auth_rate_limited"');
    } finally {
      await sluice.close();
    }
  });
});
