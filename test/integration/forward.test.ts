// Absolute-form HTTP/1.1 forwarding with real curl: every request on a keep-alive connection is a hop
// authorized again, Proxy-Authorization and hop-by-hop fields never reach the origin (RFC 9110 §7.6.1),
// bodies stream both ways, and URI/Host disagreement is refused (RFC 9112 §3.2.2).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitFor, waitUntil } from '../support/wait.js';

const TOKEN = 'tok-forward';
const AUTH = `Basic ${Buffer.from(`f:${TOKEN}`).toString('base64')}`;

describe('absolute-form forwarding', () => {
  let origin: Origin;
  let sluice: TestSluice;

  beforeAll(async () => {
    origin = await startHttpOrigin({
      handler: (req, res, body) => {
        if (req.url === '/echo') {
          res.writeHead(200, { 'content-type': 'text/plain', connection: 'x-origin-private', 'x-origin-private': 'secret', 'keep-alive': 'timeout=9' });
          res.end(`echo:${body}`);
          return;
        }
        if (req.url === '/slow') {
          // Answers after the client has gone (see the client_gone test).
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.end('late');
          }, 300);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(`origin:${req.method}:${req.url}`);
      },
    });
    sluice = await startSluice(
      { grants: [{ id: 'f', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] }] },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
  });

  const proxy = (): string => `http://f:${TOKEN}@127.0.0.1:${sluice.port}`;

  it('forwards an allowed request and never passes Proxy-Authorization or hop-by-hop fields to the origin', async () => {
    const result = await runCurl(['-i', '--proxy', proxy(), '-H', 'Connection: x-drop-me', '-H', 'X-Drop-Me: 1', '-H', 'X-Keep: 2', `http://web.test:${origin.port}/a?q=secret`]);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.status).toBe(200);
    expect(response.body).toBe('origin:GET:/a?q=secret');
    const seen = origin.requests.at(-1);
    expect(seen?.headers['proxy-authorization']).toBeUndefined();
    expect(seen?.headers['x-drop-me']).toBeUndefined();
    expect(seen?.headers['x-keep']).toBe('2');
    expect(seen?.headers.host).toBe(`web.test:${origin.port}`);
    expect(JSON.stringify(origin.requests)).not.toContain(TOKEN);
    expect(JSON.stringify(sluice.records)).not.toContain('secret');
  });

  it('records client_gone when the client leaves before the response head, and keeps serving', async () => {
    const before = sluice.decisions().length;
    const socket = net.connect(sluice.port, '127.0.0.1');
    socket.on('error', () => undefined);
    await waitFor(socket, 'connect', 2000);
    socket.write(`GET http://web.test:${origin.port}/slow HTTP/1.1\r\nHost: web.test:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    await waitUntil(() => origin.requests.some((r) => r.url === '/slow'), { timeoutMs: 2000, label: 'the origin saw /slow' });
    socket.destroy();
    await waitUntil(() => sluice.decisions().length > before, { timeoutMs: 3000, label: 'a decision record for /slow' });
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'client_gone', canonical: `web.test:${origin.port}` });
    const next = await runCurl(['--proxy', proxy(), `http://web.test:${origin.port}/after`]);
    expect(next.stdout).toBe('origin:GET:/after');
  });

  it('strips hop-by-hop fields the origin names in Connection from the response', async () => {
    const result = await runCurl(['-i', '--proxy', proxy(), '--data-binary', 'payload-123', `http://web.test:${origin.port}/echo`]);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.body).toBe('echo:payload-123');
    expect(response.headers['x-origin-private']).toBeUndefined();
    expect(response.headers['keep-alive']).not.toBe('timeout=9');
    expect(sluice.closes().at(-1)).toMatchObject({ request: 'forward', status: 200, bytesUp: 11, closedBy: 'completed' });
  });

  it('streams a large request body through and back', async () => {
    const big = 'x'.repeat(2 * 1024 * 1024);
    const result = await runCurl(['--proxy', proxy(), '--data-binary', '@-', `http://web.test:${origin.port}/echo`, '-o', '/dev/null', '-w', '%{http_code} %{size_download}'], { stdin: big });
    expect(result.stdout).toBe(`200 ${big.length + 5}`);
  });

  it('authorizes every request on a keep-alive connection: a second request to another host is refused', async () => {
    const result = await runCurl(['-i', '--proxy', proxy(), `http://web.test:${origin.port}/one`, `http://other.test:${origin.port}/two`, '-w', '%{num_connects}\n']);
    expect(result.stdout).toContain('origin:GET:/one');
    expect(result.stdout).toContain('details="destination_not_granted"');
    expect(result.stdout.trim().split('\n').at(-1)).toBe('0');
    expect(origin.requests.some((r) => r.url === '/two')).toBe(false);
    const [first, second] = sluice.decisions().slice(-2);
    expect(first?.connection).toBe(second?.connection);
    expect(second).toMatchObject({ reason: 'destination_not_granted', hop: (first?.hop ?? 0) + 1 });
  });

  it('refuses absolute-form https:// with scheme_forbidden ("use CONNECT")', async () => {
    const res = await rawRequest(sluice.port, `GET https://web.test:${origin.port}/ HTTP/1.1\r\nHost: web.test:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(res.text).toMatch(/^HTTP\/1.1 400/);
    expect(res.text).toContain('details="scheme_forbidden"');
  });

  it('refuses a request whose Host disagrees with its absolute-form URI', async () => {
    const before = origin.requests.length;
    const res = await rawRequest(sluice.port, `GET http://web.test:${origin.port}/ HTTP/1.1\r\nHost: other.test\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(res.text).toMatch(/^HTTP\/1.1 400/);
    expect(res.text).toContain('details="host_mismatch"');
    expect(origin.requests.length).toBe(before);
  });

  it('refuses origin-form requests: Sluice is not an origin', async () => {
    const res = await rawRequest(sluice.port, `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(res.text).toMatch(/^HTTP\/1.1 400/);
    expect(res.text).toContain('details="request_malformed"');
  });

  it('answers a malformed request line with 400 and closes only that connection', async () => {
    const res = await rawRequest(sluice.port, 'GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\nBad Header\r\n\r\n', { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1.1 400/);
    expect(res.text).toContain('details="request_malformed"');
    expect(res.closed).toBe(true);
    const ok = await runCurl(['--proxy', proxy(), `http://web.test:${origin.port}/after`]);
    expect(ok.stdout).toBe('origin:GET:/after');
  });

  it('refuses Content-Length with Transfer-Encoding (request smuggling, RFC 9112 §6.3)', async () => {
    const res = await rawRequest(
      sluice.port,
      `POST http://web.test:${origin.port}/echo HTTP/1.1\r\nHost: web.test:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      { untilClose: true },
    );
    expect(res.text).toMatch(/^HTTP\/1.1 400/);
  });

  it('keeps origin connections alive across client connections to the same pinned address', async () => {
    const fresh = await startHttpOrigin();
    const local = await startSluice(
      { grants: [{ id: 'k', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${fresh.port}`], allowAddressClasses: ['loopback'] }] },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
    try {
      for (let i = 0; i < 3; i += 1) {
        const r = await runCurl(['--proxy', `http://k:${TOKEN}@127.0.0.1:${local.port}`, `http://web.test:${fresh.port}/ka${i}`]);
        expect(r.stdout).toBe(`origin:GET:/ka${i}`);
      }
      expect(fresh.connections).toBe(1);
    } finally {
      await local.close();
      await fresh.close();
    }
  });
});

describe('listeners', () => {
  it('serves on an IPv6 loopback listener ([::1]:port)', async () => {
    const origin = await startHttpOrigin();
    const v6 = await startSluice(
      { listeners: [{ name: 'v6', listen: '[::1]:0', identify: 'token' }], grants: [{ id: 'v', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] }] },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
    try {
      expect(v6.app.listeners[0]?.address).toMatch(/^\[::1\]:\d+$/);
      const r = await runCurl(['--proxy', `http://v:${TOKEN}@[::1]:${v6.port}`, `http://web.test:${origin.port}/v6`]);
      expect(r.stdout).toBe('origin:GET:/v6');
    } finally {
      await v6.close();
      await origin.close();
    }
  });
});
