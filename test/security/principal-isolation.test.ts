// Threat: authority bleeding between principals (principle A5 in docs/principles.md; docs/scenarios.md
// scenario 4). Two principals with different grants, used at the same time, reach only their own destinations; a token presented on
// another grant's dedicated socket is refused; a connection cannot switch principal mid-stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import net from 'node:net';
import { rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN_A = 'tok-principal-a';
const TOKEN_B = 'tok-principal-b';

describe('principal isolation', () => {
  let originA: Origin;
  let originB: Origin;
  let sluice: TestSluice;
  let dir: string;
  let socketA: string;

  beforeAll(async () => {
    originA = await startHttpOrigin();
    originB = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-iso-'));
    socketA = path.join(dir, 'a.sock');
    sluice = await startSluice(
      {
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'sandbox-a', listen: `unix:${socketA}`, grant: 'a' },
          { name: 'sandbox-a-tcp', listen: '127.0.0.1:0', grant: 'a' },
        ],
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`http://a.test:${originA.port}`], allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`http://b.test:${originB.port}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await originA?.close();
    await originB?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const via = (grant: string, token: string): string => `http://${grant}:${token}@127.0.0.1:${sluice.port}`;
  const status = async (args: string[]): Promise<string> => (await runCurl(['-s', '-o', '/dev/null', '-w', '%{http_code}', ...args])).stdout;

  it('two principals used concurrently reach only their own destinations', async () => {
    const runs = [];
    for (let i = 0; i < 5; i += 1) {
      runs.push(status(['--proxy', via('a', TOKEN_A), `http://a.test:${originA.port}/a${i}`]));
      runs.push(status(['--proxy', via('b', TOKEN_B), `http://b.test:${originB.port}/b${i}`]));
      runs.push(status(['--proxy', via('a', TOKEN_A), `http://b.test:${originB.port}/cross-a${i}`]));
      runs.push(status(['--proxy', via('b', TOKEN_B), `http://a.test:${originA.port}/cross-b${i}`]));
    }
    const codes = await Promise.all(runs);
    for (let i = 0; i < codes.length; i += 4) expect(codes.slice(i, i + 4)).toEqual(['200', '200', '403', '403']);
    expect(originA.requests.some((r) => r.url.startsWith('/cross'))).toBe(false);
    expect(originB.requests.some((r) => r.url.startsWith('/cross'))).toBe(false);
  });

  it("a grant's token is refused with another grant's id (forged pairing)", async () => {
    expect(await status(['--proxy', via('b', TOKEN_A), `http://a.test:${originA.port}/`])).toBe('407');
  });

  const dedicatedPort = (): number => {
    const l = sluice.app.listeners.find((x) => x.name === 'sandbox-a-tcp');
    return Number(l?.address.split(':').at(-1));
  };

  // curl 7.88 ignores --proxy when given --unix-socket, so the Unix socket is driven with a raw client.
  const overUnixSocket = (request: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const socket = net.connect(socketA, () => socket.write(request));
      const timer = setTimeout(() => socket.destroy(new Error('unix socket request timed out')), 5000);
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(Buffer.concat(chunks).toString());
      });
    });

  it('the dedicated Unix socket acts for its grant without a token', async () => {
    const text = await overUnixSocket(`GET http://a.test:${originA.port}/sock HTTP/1.1\r\nHost: a.test:${originA.port}\r\nConnection: close\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1.1 200/);
    expect(text).toContain('origin:GET:/sock');
    expect(sluice.decisions().at(-1)).toMatchObject({ listener: 'sandbox-a', principal: 'a', via: 'listener' });
  });

  it('a dedicated loopback listener acts for its grant with curl and no token', async () => {
    const result = await runCurl(['--proxy', `http://127.0.0.1:${dedicatedPort()}`, `http://a.test:${originA.port}/tcp`]);
    expect(result.stdout).toBe('origin:GET:/tcp');
  });

  // Answered like any invalid token, so the answer does not reveal that B's token is live (review
  // 2026-12 finding 13, test/security/token-validity-oracle.test.ts); the audit record keeps the difference.
  it("refuses grant B's valid token on grant A's dedicated listeners", async () => {
    const result = await runCurl(['-i', '--proxy', `http://b:${TOKEN_B}@127.0.0.1:${dedicatedPort()}`, `http://b.test:${originB.port}/bleed`]);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.status).toBe(407);
    expect(response.headers['proxy-status']).toContain('details="token_invalid"');
    expect(sluice.decisions().at(-1)).toMatchObject({ listener: 'sandbox-a-tcp', principal: null, reason: 'token_grant_mismatch', status: 407 });
    const basic = Buffer.from(`b:${TOKEN_B}`).toString('base64');
    const text = await overUnixSocket(`CONNECT b.test:${originB.port} HTTP/1.1\r\nHost: b.test:${originB.port}\r\nProxy-Authorization: Basic ${basic}\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1.1 407/);
    expect(text).toContain('details="token_invalid"');
    expect(sluice.decisions().at(-1)).toMatchObject({ listener: 'sandbox-a', principal: null, reason: 'token_grant_mismatch' });
    expect(originB.requests.some((r) => r.url === '/bleed')).toBe(false);
  });

  it('refuses a second principal on one keep-alive connection and closes it', async () => {
    const basic = (g: string, t: string): string => `Basic ${Buffer.from(`${g}:${t}`).toString('base64')}`;
    const first = `GET http://a.test:${originA.port}/k1 HTTP/1.1\r\nHost: a.test:${originA.port}\r\nProxy-Authorization: ${basic('a', TOKEN_A)}\r\n\r\n`;
    const second = `GET http://b.test:${originB.port}/k2 HTTP/1.1\r\nHost: b.test:${originB.port}\r\nProxy-Authorization: ${basic('b', TOKEN_B)}\r\n\r\n`;
    const res = await rawRequest(sluice.port, first + second, { untilClose: true });
    expect(res.text).toContain('origin:GET:/k1');
    expect(res.text).toContain('details="principal_changed"');
    expect(originB.requests.some((r) => r.url === '/k2')).toBe(false);
  });

  it('answers a missing token with 407 and a Basic challenge, and a bad one with 407 too', async () => {
    const missing = curlHeadersAndBody((await runCurl(['-i', '--proxy', `http://127.0.0.1:${sluice.port}`, `http://a.test:${originA.port}/`])).stdout);
    expect(missing.status).toBe(407);
    expect(missing.headers['proxy-authenticate']).toBe('Basic realm="sluice"');
    expect(missing.headers['proxy-status']).toContain('details="token_missing"');
    const bad = curlHeadersAndBody((await runCurl(['-i', '--proxy', via('a', 'wrong'), `http://a.test:${originA.port}/`])).stdout);
    expect(bad.status).toBe(407);
    expect(bad.headers['proxy-status']).toContain('details="token_invalid"');
    const unknown = curlHeadersAndBody((await runCurl(['-i', '--proxy', via('nobody', 'wrong'), `http://a.test:${originA.port}/`])).stdout);
    expect(unknown.body).toBe(bad.body);
  });
});
