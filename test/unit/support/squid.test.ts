// Proves the real-Squid fixture and the TLS front work end to end with the real curl binary.
import { existsSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../../support/pki.js';
import { startHttpOrigin, startHttpsOrigin } from '../../support/origins.js';
import type { Origin } from '../../support/origins.js';
import { curlHeadersAndBody, runCurl } from '../../support/curl.js';
import { squidAvailable, startSquid, waitForLog } from '../../support/squid.js';
import type { Squid, SquidLogEntry } from '../../support/squid.js';
import { startTlsFront, TLS_FRONT_NAMES } from '../../support/tls-front.js';
import type { TlsFront } from '../../support/tls-front.js';

const ORIGIN_PKI = createTestPki(['origin.test']);
const FRONT_PKI = createTestPki(TLS_FRONT_NAMES);

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(false);
    }, 2000);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('squid fixture (real squid + curl)', () => {
  const cleanups: Array<() => Promise<void>> = [];
  let origin: Origin;
  let httpsOrigin: Origin;
  let squid: Squid;
  let front: TlsFront;
  let proxyUrl: string;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    cleanups.push(origin.close);
    httpsOrigin = await startHttpsOrigin(ORIGIN_PKI);
    cleanups.push(httpsOrigin.close);
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, users: { alice: 's3cret' } });
    cleanups.push(squid.close);
    front = await startTlsFront(FRONT_PKI, squid.port);
    cleanups.push(front.close);
    proxyUrl = `http://alice:s3cret@127.0.0.1:${squid.port}`;
  });

  afterAll(async () => {
    await Promise.all(cleanups.reverse().map((fn) => fn()));
  });

  const find = (entries: SquidLogEntry[], method: string, url: string): SquidLogEntry | undefined =>
    entries.find((e) => e.method === method && e.url === url);

  it('writes a private, loopback-only config', () => {
    expect(squid.config).toContain(`http_port 127.0.0.1:${squid.port}`);
    expect(squid.config).toContain('dns_nameservers 127.0.0.1');
    expect(squid.config).toContain(`pid_filename ${squid.dir}/squid.pid`);
    expect(squid.url).toBe(`http://127.0.0.1:${squid.port}`);
  });

  it('forwards an authenticated plain-HTTP request and logs it with status 200', async () => {
    const url = `http://origin.test:${origin.port}/x`;
    const res = await runCurl(['-i', '-x', proxyUrl, url]);
    expect(res.stderr).toBe('');
    const parsed = curlHeadersAndBody(res.stdout);
    expect(parsed.status).toBe(200);
    expect(parsed.body).toBe('origin:GET:/x');

    const recorded = origin.requests.at(-1);
    expect(recorded?.headers['via']).toBeUndefined();
    expect(recorded?.headers['x-forwarded-for']).toBeUndefined();
    expect(recorded?.headers['proxy-authorization']).toBeUndefined();

    const entries = await squid.waitForLog((all) => find(all, 'GET', url) !== undefined, 5000);
    expect(find(entries, 'GET', url)).toMatchObject({
      status: 200,
      client: '127.0.0.1',
      serverAddress: '127.0.0.1',
      serverPort: origin.port,
      user: 'alice',
    });
  });

  it('answers 407 for a wrong password and for missing credentials, without dialing the origin', async () => {
    const before = origin.requests.length;
    const wrongUrl = `http://origin.test:${origin.port}/wrong`;
    const wrong = await runCurl(['-i', '-x', `http://alice:nope@127.0.0.1:${squid.port}`, wrongUrl]);
    const wrongParsed = curlHeadersAndBody(wrong.stdout);
    expect(wrongParsed.status).toBe(407);
    expect(wrongParsed.headers['proxy-authenticate']).toMatch(/^Basic /);

    const anonUrl = `http://origin.test:${origin.port}/anon`;
    const anon = await runCurl(['-i', '-x', squid.url, anonUrl]);
    expect(curlHeadersAndBody(anon.stdout).status).toBe(407);
    expect(origin.requests.length).toBe(before);

    const entries = await waitForLog(
      squid,
      (all) => find(all, 'GET', wrongUrl) !== undefined && find(all, 'GET', anonUrl) !== undefined,
      5000,
    );
    expect(find(entries, 'GET', wrongUrl)).toMatchObject({ status: 407, serverAddress: null });
    expect(find(entries, 'GET', anonUrl)).toMatchObject({ status: 407, serverAddress: null });
  });

  it('tunnels CONNECT to an HTTPS origin and logs CONNECT origin.test:<port>', async () => {
    const res = await runCurl([
      '-i',
      '-x',
      proxyUrl,
      '--cacert',
      ORIGIN_PKI.caFile,
      `https://origin.test:${httpsOrigin.port}/tls`,
    ]);
    expect(res.stderr).toBe('');
    const parsed = curlHeadersAndBody(res.stdout);
    expect(parsed.blocks[0]?.status).toBe(200); // the CONNECT reply
    expect(parsed.status).toBe(200);
    expect(parsed.body).toBe('origin:GET:/tls');

    const target = `origin.test:${httpsOrigin.port}`;
    const entries = await squid.waitForLog((all) => find(all, 'CONNECT', target) !== undefined, 5000);
    expect(find(entries, 'CONNECT', target)).toMatchObject({
      status: 200,
      result: 'TCP_TUNNEL',
      serverAddress: '127.0.0.1',
      serverPort: httpsOrigin.port,
      user: 'alice',
    });
  });

  it('serves as an HTTPS proxy behind the TLS front (plain HTTP and CONNECT targets)', async () => {
    const frontProxy = `https://alice:s3cret@127.0.0.1:${front.port}`;
    const plainUrl = `http://origin.test:${origin.port}/front`;
    const plain = await runCurl(['-i', '--proxy', frontProxy, '--proxy-cacert', FRONT_PKI.caFile, plainUrl]);
    expect(plain.stderr).toBe('');
    const plainParsed = curlHeadersAndBody(plain.stdout);
    expect(plainParsed.status).toBe(200);
    expect(plainParsed.body).toBe('origin:GET:/front');

    const tunneled = await runCurl([
      '-i',
      '--proxy',
      frontProxy,
      '--proxy-cacert',
      FRONT_PKI.caFile,
      '--cacert',
      ORIGIN_PKI.caFile,
      `https://origin.test:${httpsOrigin.port}/front-tls`,
    ]);
    expect(tunneled.stderr).toBe('');
    expect(curlHeadersAndBody(tunneled.stdout).body).toBe('origin:GET:/front-tls');
    expect(front.connections).toBeGreaterThanOrEqual(2);

    // An untrusted proxy certificate must fail the handshake.
    const untrusted = await runCurl(['-i', '--proxy', frontProxy, plainUrl]);
    expect(untrusted.code).not.toBe(0);

    await squid.waitForLog((all) => find(all, 'GET', plainUrl)?.status === 200, 5000);
  });

  it('runs a second, unauthenticated squid side by side and close() stops it and removes its dir', async () => {
    const other = await startSquid({ hosts: { 'origin.test': '127.0.0.1' } });
    let closed = false;
    try {
      expect(other.port).not.toBe(squid.port);
      expect(other.dir).not.toBe(squid.dir);
      const url = `http://origin.test:${origin.port}/anon-ok`;
      const res = await runCurl(['-i', '-x', other.url, url]);
      expect(curlHeadersAndBody(res.stdout).body).toBe('origin:GET:/anon-ok');
      const entries = await other.waitForLog((all) => all.length >= 1, 5000);
      expect(entries).toHaveLength(1); // readiness-probe noise is filtered out
      expect(entries[0]).toMatchObject({ method: 'GET', url, status: 200, user: null });
      await other.close();
      closed = true;
      expect(existsSync(other.dir)).toBe(false);
      expect(await refusesConnections(other.port)).toBe(true);
      await other.close(); // idempotent
    } finally {
      if (!closed) await other.close();
    }
  });

  it('rejects non-loopback hosts entries before starting anything', async () => {
    await expect(startSquid({ hosts: { 'evil.test': '192.0.2.1' } })).rejects.toThrow(/not a loopback address/);
  });
});
