// Proves the NTLM proxy fixture against curl, an independent NTLMv2 client (curl sends NTLMv2 once the
// type 2 carries target info), and against src/egress/ntlm.ts over raw sockets: the handshake and the
// CONNECT share one TCP connection, a wrong password or a type 3 moved to another connection is refused.
// Sluice's upstream NTLM client is tested against this fixture, so this file is what makes that mean something.
import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AV_ID, ntlmAuthenticateMessage, ntlmNegotiateMessage, parseAvPairs, parseNtlmChallenge } from '../../../src/egress/ntlm.js';
import { curlHeadersAndBody, runCurl } from '../../support/curl.js';
import { NTLM_PROXY_DOMAIN, startNtlmProxy } from '../../support/ntlm-proxy.js';
import type { NtlmProxy } from '../../support/ntlm-proxy.js';
import { startHttpOrigin, startHttpsOrigin, startTcpEchoServer } from '../../support/origins.js';
import type { EchoServer, Origin } from '../../support/origins.js';
import { createTestPki } from '../../support/pki.js';
import { waitUntil, withTimeout } from '../../support/wait.js';

const PKI = createTestPki(['origin.test']);
const USERS = { [`${NTLM_PROXY_DOMAIN}\\alice`]: 's3cret', bob: 'b0b-pw' };

interface Reply { status: number; headers: Array<[string, string]>; body: string }

/** One client TCP connection that reads responses with Content-Length bodies (or none, for a 200 CONNECT). */
class Client {
  private buffer = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  isClosed = false;
  readonly socket: net.Socket;
  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.waiter?.();
    });
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.isClosed = true;
      this.waiter?.();
    });
  }

  async send(head: string): Promise<Reply> {
    this.socket.write(head);
    return withTimeout(this.read(), 5000, `reply to ${head.split('\r\n')[0] ?? ''}`);
  }

  private async read(): Promise<Reply> {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const [statusLine = '', ...lines] = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
        const headers = lines.map((l): [string, string] => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]);
        const status = Number(statusLine.split(' ')[1]);
        const length = Number(headers.find(([n]) => n === 'content-length')?.[1] ?? '0');
        if (this.buffer.length >= end + 4 + length) {
          const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
          this.buffer = this.buffer.subarray(end + 4 + length);
          return { status, headers, body };
        }
      }
      if (this.isClosed) throw new Error('connection closed before a complete reply');
      await new Promise<void>((resolve) => { this.waiter = resolve; });
      this.waiter = null;
    }
  }
}

const header = (reply: Reply, name: string): string[] => reply.headers.filter(([n]) => n === name).map(([, v]) => v);

/** Runs type 1 on `client` and returns the parsed type 2 from the 407. */
async function negotiate(client: Client, requestLine: string): Promise<NonNullable<ReturnType<typeof parseNtlmChallenge>>> {
  const reply = await client.send(`${requestLine}\r\nProxy-Authorization: NTLM ${ntlmNegotiateMessage().toString('base64')}\r\n\r\n`);
  expect(reply.status).toBe(407);
  const offer = header(reply, 'proxy-authenticate')[0] ?? '';
  const challenge = parseNtlmChallenge(Buffer.from(offer.replace(/^NTLM /, ''), 'base64'));
  if (challenge === null) throw new Error(`no parsable type 2 in ${offer}`);
  return challenge;
}

describe('ntlm-proxy fixture', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  let origin: Origin;
  let httpsOrigin: Origin;
  let echo: EchoServer;

  beforeAll(async () => {
    [origin, httpsOrigin, echo] = await Promise.all([startHttpOrigin(), startHttpsOrigin(PKI), startTcpEchoServer()]);
    return async () => {
      await Promise.all([origin.close(), httpsOrigin.close(), echo.close()]);
    };
  });

  afterEach(async () => {
    await Promise.all(cleanups.splice(0).reverse().map((fn) => fn()));
  });

  async function start(opts: Partial<Parameters<typeof startNtlmProxy>[0]> = {}): Promise<NtlmProxy> {
    const proxy = await startNtlmProxy({ users: USERS, hosts: { 'origin.test': '127.0.0.1' }, ...opts });
    cleanups.push(() => proxy.close());
    return proxy;
  }

  const client = (proxy: NtlmProxy): Client => {
    const c = new Client(proxy.port);
    cleanups.push(() => { c.socket.destroy(); });
    return c;
  };

  describe('with curl (an independent NTLMv2 implementation)', () => {
    it('authenticates a plain GET: type 1 and type 3 on one connection, the origin sees no Proxy-Authorization', async () => {
      const proxy = await start();
      const res = await runCurl(['-i', '--proxy-ntlm', '-U', `${NTLM_PROXY_DOMAIN}\\alice:s3cret`, '--proxy', proxy.url, `http://origin.test:${origin.port}/x`]);
      const parsed = curlHeadersAndBody(res.stdout);
      expect(res.stderr).toBe('');
      expect(parsed.status).toBe(200);
      expect(parsed.body).toBe('origin:GET:/x');
      expect(origin.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
      expect(proxy.connections()).toEqual([{ id: 1, user: `${NTLM_PROXY_DOMAIN}\\alice`, requests: [
        { method: 'GET', target: `http://origin.test:${origin.port}/x`, authorization: 'NTLM', status: 407 },
        { method: 'GET', target: `http://origin.test:${origin.port}/x`, authorization: 'NTLM', status: 200 },
      ] }]);
    });

    it('streams a POST body to the origin once the handshake is done', async () => {
      const proxy = await start();
      const res = await runCurl(['-i', '--proxy-ntlm', '-U', 'bob:b0b-pw', '--proxy', proxy.url, '--data-binary', 'payload=1', `http://origin.test:${origin.port}/post`]);
      expect(curlHeadersAndBody(res.stdout).status).toBe(200);
      expect(origin.requests.at(-1)).toMatchObject({ method: 'POST', url: '/post', body: 'payload=1' });
      expect(proxy.connections().map((c) => c.user)).toEqual(['bob']);
    });

    it('opens a CONNECT tunnel to an HTTPS origin after the handshake on the same connection', async () => {
      const proxy = await start();
      const res = await runCurl(['-i', '--proxy-ntlm', '-U', `${NTLM_PROXY_DOMAIN}\\alice:s3cret`, '--proxy', proxy.url, '--cacert', PKI.caFile, `https://origin.test:${httpsOrigin.port}/tls`]);
      expect(res.stderr).toBe('');
      expect(curlHeadersAndBody(res.stdout).body).toBe('origin:GET:/tls');
      const [connection, ...others] = proxy.connections();
      expect(others).toEqual([]);
      expect(connection?.user).toBe(`${NTLM_PROXY_DOMAIN}\\alice`);
      expect(connection?.requests.map((r) => [r.method, r.authorization, r.status])).toEqual([['CONNECT', 'NTLM', 407], ['CONNECT', 'NTLM', 200]]);
    });

    it('relays a response without Content-Length as chunked and keeps the authenticated connection for the next URL', async () => {
      const streaming = await startHttpOrigin({ handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part-1;');
        res.end('part-2');
      } });
      cleanups.push(() => streaming.close());
      const proxy = await start();
      const url = `http://origin.test:${streaming.port}`;
      const res = await runCurl(['--proxy-ntlm', '-U', 'bob:b0b-pw', '--proxy', proxy.url, `${url}/one`, `${url}/two`]);
      expect(res.stdout).toBe('part-1;part-2part-1;part-2');
      const [connection, ...others] = proxy.connections();
      expect(others).toEqual([]);
      // curl re-runs the handshake for each URL, on the same TCP connection.
      expect(connection?.requests.filter((r) => r.status === 200).map((r) => r.target)).toEqual([`${url}/one`, `${url}/two`]);
    });

    it('tunnels to a plain origin with curl -p', async () => {
      const proxy = await start();
      const res = await runCurl(['-p', '--proxy-ntlm', '-U', 'bob:b0b-pw', '--proxy', proxy.url, `http://origin.test:${origin.port}/p`]);
      expect(res.stdout).toBe('origin:GET:/p');
      expect(proxy.connections()[0]?.requests.map((r) => r.status)).toEqual([407, 200]);
    });

    it.each([
      ['a wrong password', `${NTLM_PROXY_DOMAIN}\\alice:wrong`],
      ['a wrong domain for a domain-bound user', 'OTHER\\alice:s3cret'],
      ['an unknown user', `${NTLM_PROXY_DOMAIN}\\mallory:s3cret`],
    ])('answers 407 and closes for %s; the origin sees nothing', async (_label, userArg) => {
      const proxy = await start();
      const before = origin.requests.length;
      const res = await runCurl(['-i', '--proxy-ntlm', '-U', userArg, '--proxy', proxy.url, `http://origin.test:${origin.port}/denied`]);
      expect(curlHeadersAndBody(res.stdout).status).toBe(407);
      expect(origin.requests.length).toBe(before);
      expect(proxy.connections().every((c) => c.user === null)).toBe(true);
      expect(proxy.connections()[0]?.requests.map((r) => r.status)).toEqual([407, 407]);
    });

    it('refuses a CONNECT with a wrong password (curl reports the 407)', async () => {
      const proxy = await start();
      const res = await runCurl(['--proxy-ntlm', '-U', 'bob:nope', '--proxy', proxy.url, '--cacert', PKI.caFile, `https://origin.test:${httpsOrigin.port}/`]);
      expect(res.code).not.toBe(0);
      expect(res.stderr).toMatch(/407/);
      expect(httpsOrigin.requests.some((r) => r.url === '/')).toBe(false);
    });
  });

  describe('over raw sockets with src/egress/ntlm.ts', () => {
    it('answers an unauthenticated request with every offer as its own header, a body, and keeps the connection', async () => {
      const proxy = await start({ offer: ['Negotiate', 'NTLM', 'Basic realm="x"'] });
      const c = client(proxy);
      const first = await c.send(`GET http://origin.test:${origin.port}/ HTTP/1.1\r\nHost: origin.test\r\n\r\n`);
      expect(first.status).toBe(407);
      expect(header(first, 'proxy-authenticate')).toEqual(['Negotiate', 'NTLM', 'Basic realm="x"']);
      expect(first.body.length).toBeGreaterThan(0);
      expect(header(first, 'connection')).toEqual(['keep-alive']);
      const second = await c.send(`CONNECT origin.test:${origin.port} HTTP/1.1\r\nHost: origin.test\r\n\r\n`);
      expect(second.status).toBe(407);
      expect(proxy.connections()).toHaveLength(1);
    });

    it('sends a type 2 with a fresh challenge, MsvAvNbDomainName and MsvAvTimestamp', async () => {
      const proxy = await start();
      const c = client(proxy);
      const a = await negotiate(c, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      const b = await negotiate(c, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      expect(a.serverChallenge.equals(b.serverChallenge)).toBe(false);
      const pairs = parseAvPairs(a.targetInfo);
      expect(pairs?.get(AV_ID.NB_DOMAIN_NAME)?.toString('utf16le')).toBe(NTLM_PROXY_DOMAIN);
      expect(pairs?.get(AV_ID.TIMESTAMP)?.length).toBe(8);
      expect(a.targetName).toBe(NTLM_PROXY_DOMAIN);
    });

    it('authenticates the connection: the CONNECT carrying type 3 tunnels, and a later request on it needs no header', async () => {
      const proxy = await start();
      const c = client(proxy);
      const challenge = await negotiate(c, `GET http://origin.test:${origin.port}/a HTTP/1.1\r\nHost: origin.test`);
      const type3 = ntlmAuthenticateMessage(challenge, { user: 'alice', domain: NTLM_PROXY_DOMAIN, password: 's3cret' }).toString('base64');
      const first = await c.send(`GET http://origin.test:${origin.port}/a HTTP/1.1\r\nHost: origin.test\r\nProxy-Authorization: NTLM ${type3}\r\n\r\n`);
      expect(first).toMatchObject({ status: 200, body: 'origin:GET:/a' });
      const second = await c.send(`GET http://origin.test:${origin.port}/b HTTP/1.1\r\nHost: origin.test\r\n\r\n`);
      expect(second).toMatchObject({ status: 200, body: 'origin:GET:/b' });
      const tunnel = await c.send(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      expect(tunnel.status).toBe(200);
      const echoed = new Promise<string>((resolve) => c.socket.once('data', (d: Buffer) => resolve(d.toString())));
      c.socket.write('ping');
      expect(await withTimeout(echoed, 3000, 'echo through the tunnel')).toBe('ping');
      expect(proxy.connections()).toEqual([{ id: 1, user: `${NTLM_PROXY_DOMAIN}\\alice`, requests: [
        { method: 'GET', target: `http://origin.test:${origin.port}/a`, authorization: 'NTLM', status: 407 },
        { method: 'GET', target: `http://origin.test:${origin.port}/a`, authorization: 'NTLM', status: 200 },
        { method: 'GET', target: `http://origin.test:${origin.port}/b`, authorization: null, status: 200 },
        { method: 'CONNECT', target: `127.0.0.1:${echo.port}`, authorization: null, status: 200 },
      ] }]);
    });

    it('refuses a type 3 presented on another connection than its type 2, and closes it', async () => {
      const proxy = await start();
      const echoesBefore = echo.connections;
      const first = client(proxy);
      const challenge = await negotiate(first, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      const type3 = ntlmAuthenticateMessage(challenge, { user: 'bob', domain: '', password: 'b0b-pw' }).toString('base64');
      const other = client(proxy);
      const reply = await other.send(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: NTLM ${type3}\r\n\r\n`);
      expect(reply.status).toBe(407);
      expect(header(reply, 'connection')).toEqual(['close']);
      await waitUntil(() => other.isClosed, { timeoutMs: 3000, label: 'the other connection closed' });
      expect(proxy.connections().map((c) => c.user)).toEqual([null, null]);
      expect(echo.connections).toBe(echoesBefore);
    });

    it('accepts one type 3 per challenge: a replay on the same connection is refused', async () => {
      const proxy = await start();
      const c = client(proxy);
      const challenge = await negotiate(c, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      const wrong = ntlmAuthenticateMessage(challenge, { user: 'bob', domain: '', password: 'guess' }).toString('base64');
      const reply = await c.send(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: NTLM ${wrong}\r\n\r\n`);
      expect(reply.status).toBe(407);
      await waitUntil(() => c.isClosed, { timeoutMs: 3000, label: 'closed after a failed type 3' });
    });

    it('closes right after the type 2 when told to (closeAfterChallenge)', async () => {
      const proxy = await start({ closeAfterChallenge: true });
      const c = client(proxy);
      await negotiate(c, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      await waitUntil(() => c.isClosed, { timeoutMs: 3000, label: 'closed after the challenge' });
    });

    it('refuses Basic even when it is offered (only NTLM is verified), and a malformed head with 400', async () => {
      const proxy = await start({ offer: ['NTLM', 'Basic realm="x"'] });
      const echoesBefore = echo.connections;
      const basic = client(proxy);
      const reply = await basic.send(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from('bob:b0b-pw').toString('base64')}\r\n\r\n`);
      expect(reply.status).toBe(407);
      const bad = client(proxy);
      expect((await bad.send('GET / HTTP/1.1\r\n folded: header\r\n\r\n')).status).toBe(400);
      expect(echo.connections).toBe(echoesBefore);
    });

    it('close() ends a live tunnel', async () => {
      const proxy = await start();
      const c = client(proxy);
      const challenge = await negotiate(c, `CONNECT 127.0.0.1:${echo.port} HTTP/1.1`);
      const type3 = ntlmAuthenticateMessage(challenge, { user: 'bob', domain: 'ANY', password: 'b0b-pw' }).toString('base64');
      expect((await c.send(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: NTLM ${type3}\r\n\r\n`)).status).toBe(200);
      await withTimeout(proxy.close(), 3000, 'fixture close');
      await waitUntil(() => c.isClosed, { timeoutMs: 3000, label: 'tunnel closed by close()' });
    });
  });
});
