// Proves the shared test-support helpers (PKI, origins, curl, waiting, raw client) behave as documented.
import { X509Certificate } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, startTcpEchoServer } from '../../support/origins.js';
import { curlHeadersAndBody, runCurl } from '../../support/curl.js';
import { waitFor, waitUntil, withTimeout } from '../../support/wait.js';
import { openConnectTunnel, rawRequest } from '../../support/raw-client.js';

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  await Promise.all(cleanups.map((fn) => fn()));
});

describe('pki', () => {
  it('caches per names list and writes the CA file', () => {
    const a = createTestPki(['origin.test', '127.0.0.1', '::1']);
    expect(createTestPki(['origin.test', '127.0.0.1', '::1'])).toBe(a);
    expect(readFileSync(a.caFile, 'utf8')).toBe(a.caPem);
    const x509 = new X509Certificate(a.certPem);
    expect(x509.checkIssued(new X509Certificate(a.caPem))).toBe(true);
    expect(x509.subjectAltName).toContain('DNS:origin.test');
    expect(x509.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(x509.subjectAltName).toContain('IP Address:0:0:0:0:0:0:0:1');
  });

  it('leaf verifies against the CA over TLS', async () => {
    const pki = createTestPki(['origin.test', '127.0.0.1']);
    const origin = await startHttpsOrigin(pki);
    cleanups.push(origin.close);
    const socket = tls.connect({ port: origin.port, host: '127.0.0.1', servername: 'origin.test', ca: pki.caPem });
    await waitFor(socket, 'secureConnect');
    expect(socket.authorized).toBe(true);
    socket.destroy();
    const res = await runCurl(['--cacert', pki.caFile, '--resolve', `origin.test:${origin.port}:127.0.0.1`, `https://origin.test:${origin.port}/tls`]);
    expect(res.stderr).toBe('');
    expect(res.stdout).toBe('origin:GET:/tls');
  });
});

describe('origins', () => {
  it('http origin counts connections and records requests', async () => {
    const origin = await startHttpOrigin();
    cleanups.push(origin.close);
    const res = await rawRequest(origin.port, 'GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\n\r\n');
    expect(res.closed).toBe(false);
    expect(res.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(res.text.endsWith('\r\n\r\norigin:GET:/a?b=1')).toBe(true);
    await rawRequest(origin.port, 'POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc', { untilClose: true });
    expect(origin.connections).toBe(2);
    expect(origin.requests.map((r) => [r.method, r.url, r.body])).toEqual([['GET', '/a?b=1', ''], ['POST', '/p', 'abc']]);
    expect(origin.requests[0]?.headers['x-test']).toBe('yes');
    expect(origin.requests[0]?.rawHeaders).toContain('X-Test');
    expect(origin.requests[0]?.remoteAddress).toBe('127.0.0.1');
    await origin.close();
    await origin.close();
  });

  it('custom handler overrides the default', async () => {
    const origin = await startHttpOrigin({ handler: (_req, res, body) => { res.writeHead(201); res.end(`got ${body}`); } });
    cleanups.push(origin.close);
    const res = await runCurl(['-i', '--data', 'hi', `${origin.url}/x`]);
    const parsed = curlHeadersAndBody(res.stdout);
    expect(parsed.status).toBe(201);
    expect(parsed.body).toBe('got hi');
  });

  it('echo server echoes and honours half-close', async () => {
    const echo = await startTcpEchoServer();
    cleanups.push(echo.close);
    const socket = net.connect({ port: echo.port, host: '127.0.0.1', allowHalfOpen: true });
    await waitFor(socket, 'connect');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.write('hello ');
    socket.end('world');
    await waitFor(socket, 'end');
    expect(Buffer.concat(chunks).toString()).toBe('hello world');
    await waitFor(socket, 'close');
    expect(echo.connections).toBe(1);
    await echo.close();
  });
});

describe('curl', () => {
  it('runs curl --version and fetches directly from an origin', async () => {
    expect((await runCurl(['--version'])).stdout).toMatch(/^curl \d/);
    const origin = await startHttpOrigin();
    cleanups.push(origin.close);
    // A proxy in the parent env is scrubbed; --noproxy '' only clears NO_PROXY, so an explicit env proxy is used.
    const saved = process.env['http_proxy'];
    process.env['http_proxy'] = 'http://127.0.0.1:9';
    let res;
    try {
      res = await runCurl(['-i', `${origin.url}/hello`]);
      expect((await runCurl([`${origin.url}/via`], { env: { ...process.env } })).code).toBe(7);
    } finally {
      if (saved === undefined) delete process.env['http_proxy'];
      else process.env['http_proxy'] = saved;
    }
    expect(res.code).toBe(0);
    expect(origin.requests.map((r) => r.url)).toEqual(['/hello']);
    const parsed = curlHeadersAndBody(res.stdout);
    expect(parsed.status).toBe(200);
    expect(parsed.headers['content-type']).toBe('text/plain');
    expect(parsed.body).toBe('origin:GET:/hello');
    expect(parsed.blocks).toHaveLength(1);
  });

  it('splits a CONNECT block from the real response', () => {
    const out = 'HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nX-A: 1\r\nX-A: 2\r\n\r\nnope';
    const parsed = curlHeadersAndBody(out);
    expect(parsed.blocks.map((b) => b.status)).toEqual([200, 404]);
    expect(parsed.headers['x-a']).toBe('2');
    expect(parsed.all).toEqual(['Content-Length: 4', 'X-A: 1', 'X-A: 2']);
    expect(parsed.body).toBe('nope');
  });
});

describe('raw client', () => {
  it('opens a CONNECT tunnel through a minimal proxy', async () => {
    const echo = await startTcpEchoServer();
    cleanups.push(echo.close);
    const proxy = net.createServer((client) => {
      client.once('data', (head: Buffer) => {
        const ok = head.toString().startsWith(`CONNECT 127.0.0.1:${echo.port} `);
        if (!ok) return void client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno');
        const upstream = net.connect(echo.port, '127.0.0.1', () => {
          client.write('HTTP/1.1 200 Connection established\r\n\r\n');
          client.pipe(upstream).pipe(client);
        });
      });
    });
    proxy.listen(0, '127.0.0.1');
    await waitFor(proxy, 'listening');
    cleanups.push(() => new Promise((r) => proxy.close(() => r())));
    const port = (proxy.address() as net.AddressInfo).port;
    const denied = await openConnectTunnel(port, 'example.test:443');
    expect([denied.status, denied.rest.toString()]).toEqual([403, 'no']);
    const tunnel = await openConnectTunnel(port, `127.0.0.1:${echo.port}`, { 'Proxy-Authorization': 'Basic eDp5' });
    expect(tunnel.status).toBe(200);
    tunnel.socket.write('ping');
    const echoed = await waitFor<Buffer>(tunnel.socket, 'data');
    expect(echoed.toString()).toBe('ping');
    tunnel.socket.destroy();
  });
});

describe('wait', () => {
  it('waitFor times out with a clear error and cleans up', async () => {
    const emitter = new EventEmitter();
    await expect(waitFor(emitter, 'never', 20)).rejects.toThrow("timed out after 20 ms waiting for 'never' event");
    expect(emitter.listenerCount('never')).toBe(0);
    expect(emitter.listenerCount('error')).toBe(0);
    setImmediate(() => emitter.emit('ready', 42));
    expect(await waitFor<number>(emitter, 'ready')).toBe(42);
  });

  it('waitUntil and withTimeout are bounded', async () => {
    let n = 0;
    await waitUntil(() => ++n > 8, { timeoutMs: 1000, label: 'counter' });
    await expect(waitUntil(() => false, { timeoutMs: 30, label: 'never true' })).rejects.toThrow("'never true' not satisfied within 30 ms");
    await expect(withTimeout(new Promise(() => undefined), 20, 'stuck')).rejects.toThrow("'stuck' did not settle within 20 ms");
    expect(await withTimeout(Promise.resolve(7), 20, 'fast')).toBe(7);
  });
});
