// Threat: credential capture through a rewritten PAC (review 2026-12-04 finding 10, issue 24). Whoever can
// alter the PAC script (on the path of an http:// PAC URL, or by answering a WPAD lookup: Microsoft
// security bulletin MS16-077) names a proxy of their own, and Sluice would send it the service's Basic
// credential in the clear, or run an NTLM handshake with it that can be relayed to a real server. Now only
// the proxies in route.pac.credentialProxies get credentials; any other proxy a PAC names is dialed with
// none, its 407 ends the hop (502 upstream_auth_required), and the hop never moves on to a listed proxy
// (a 407 is not a connection failure). A real PAC file names two loopback fixture proxies that record
// every Proxy-Authorization they receive.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { startNtlmProxy, NTLM_PROXY_DOMAIN, type NtlmProxy } from '../support/ntlm-proxy.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { unavailableGss } from '../../src/egress/index.js';

const PASSWORD = 'Pac-Secret-Pw7';
const NAMES = ['viacorp.test', 'viarogue.test', 'roguefirst.test'];
const ORIGIN_PKI = createTestPki(NAMES);
const TOKEN = 'tok-pac-cred';
const BASIC = `Basic ${Buffer.from(`svc:${PASSWORD}`).toString('base64')}`;

interface Seen {
  readonly method: string;
  readonly target: string;
  readonly authorization: string | null;
}

interface BasicProxy {
  readonly port: number;
  readonly seen: Seen[];
  close(): Promise<void>;
}

const PROXY_407 = 'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="corp"\r\nProxy-Authenticate: NTLM\r\nContent-Length: 0\r\n\r\n';

/**
 * An HTTP proxy on 127.0.0.1 that records each request's Proxy-Authorization, answers 407 (offering Basic
 * and NTLM, as a credential-harvesting proxy would) unless it is `expected`, and otherwise relays CONNECT
 * and absolute-form requests to 127.0.0.1 at the target's port.
 */
async function startBasicProxy(expected: string): Promise<BasicProxy> {
  const seen: Seen[] = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const server = http.createServer((req, res) => {
    const authorization = req.headers['proxy-authorization'] ?? null;
    seen.push({ method: req.method ?? '', target: req.url ?? '', authorization });
    if (authorization !== expected) {
      req.resume();
      res.writeHead(407, { 'proxy-authenticate': ['Basic realm="corp"', 'NTLM'], 'content-length': '0' });
      res.end();
      return;
    }
    const url = new URL(req.url ?? '/');
    const { 'proxy-authorization': _a, 'proxy-connection': _c, ...headers } = req.headers;
    const upstream = http.request({ host: '127.0.0.1', port: Number(url.port), method: req.method, path: `${url.pathname}${url.search}`, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connection', track);
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const authorization = req.headers['proxy-authorization'] ?? null;
    seen.push({ method: 'CONNECT', target: req.url ?? '', authorization });
    client.on('error', () => client.destroy());
    if (authorization !== expected) {
      client.end(PROXY_407);
      return;
    }
    const upstream = net.connect(Number((req.url ?? '').split(':').pop()), '127.0.0.1');
    track(upstream);
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('route.pac.credentialProxies: a PAC-named proxy outside the list never receives the credentials', () => {
  let httpOrigin: Origin;
  let httpsOrigin: Origin;
  let dir: string;
  const started: TestSluice[] = [];
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    httpOrigin = await startHttpOrigin();
    httpsOrigin = await startHttpsOrigin(ORIGIN_PKI);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-cred-'));
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
    await Promise.all(closers.splice(0).map((close) => close()));
  });
  afterAll(async () => {
    await httpOrigin?.close();
    await httpsOrigin?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A PAC file: viacorp.test through corp, viarogue.test through rogue, roguefirst.test through rogue then corp. */
  function writePac(name: string, corp: number, rogue: number): string {
    const file = path.join(dir, name);
    fs.writeFileSync(
      file,
      `function FindProxyForURL(url, host) {
        if (host == "viacorp.test") return "PROXY 127.0.0.1:${corp}";
        if (host == "viarogue.test") return "PROXY 127.0.0.1:${rogue}";
        if (host == "roguefirst.test") return "PROXY 127.0.0.1:${rogue}; PROXY 127.0.0.1:${corp}";
        return "DIRECT";
      }`,
    );
    return file;
  }

  async function sluice(pac: Record<string, unknown>): Promise<TestSluice> {
    const destinations = NAMES.flatMap((n) => [`https://${n}:${httpsOrigin.port}`, `http://${n}:${httpOrigin.port}`]);
    // No name resolves for Sluice: had it gone direct, the hop would fail, not reach the origin.
    const s = await startSluice({ route: { mode: 'pac', pac }, grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations }] }, { gss: unavailableGss('not in this test') });
    started.push(s);
    return s;
  }
  const via = (s: TestSluice): string => `http://p:${TOKEN}@127.0.0.1:${s.port}`;
  const tunnel = async (s: TestSluice, host: string, p: string): Promise<ReturnType<typeof curlHeadersAndBody>> =>
    curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://${host}:${httpsOrigin.port}${p}`])).stdout);
  const forward = async (s: TestSluice, host: string, p: string): Promise<ReturnType<typeof curlHeadersAndBody>> =>
    curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://${host}:${httpOrigin.port}${p}`])).stdout);

  it('Basic: the listed proxy gets the credential; the other sees no Proxy-Authorization and its 407 is 502 upstream_auth_required', async () => {
    const corp = await startBasicProxy(BASIC);
    const rogue = await startBasicProxy(BASIC);
    closers.push(corp.close, rogue.close);
    const creds = path.join(dir, 'basic.txt');
    fs.writeFileSync(creds, `svc:${PASSWORD}\n`);
    const s = await sluice({ file: writePac('basic.pac', corp.port, rogue.port), credentialsFile: creds, credentialProxies: [`127.0.0.1:${corp.port}`] });

    expect((await tunnel(s, 'viacorp.test', '/t')).body).toBe('origin:GET:/t');
    expect((await forward(s, 'viacorp.test', '/f')).body).toBe('origin:GET:/f');
    expect(corp.seen.map((x) => [x.method, x.authorization])).toEqual([
      ['CONNECT', BASIC],
      ['GET', BASIC],
    ]);

    const t = await tunnel(s, 'viarogue.test', '/t');
    expect(t.blocks[0]?.headers['proxy-status']).toContain('details="upstream_auth_required"');
    expect(s.decisions().at(-1)).toMatchObject({
      reason: 'upstream_auth_required',
      upstream: `http://127.0.0.1:${rogue.port}`,
      detail: expect.stringContaining('it is not in route.pac.credentialProxies, so Sluice sends it no credentials'),
    });
    const f = await forward(s, 'viarogue.test', '/f');
    expect(f.headers['proxy-status']).toContain('details="upstream_auth_required"');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'upstream_auth_required', upstream: `http://127.0.0.1:${rogue.port}` });
    expect(rogue.seen.map((x) => x.method)).toEqual(['CONNECT', 'GET']);
    expect(rogue.seen.every((x) => x.authorization === null)).toBe(true);

    // A 407 from the unlisted proxy ends the hop: the listed proxy behind it in the answer is never tried.
    const before = corp.seen.length;
    const first = await forward(s, 'roguefirst.test', '/r');
    expect(first.headers['proxy-status']).toContain('details="upstream_auth_required"');
    expect(corp.seen.length).toBe(before);
    expect(rogue.seen.every((x) => x.authorization === null)).toBe(true);
    expect(JSON.stringify([s.decisions(), s.closes()])).not.toContain(PASSWORD);
  });

  it('NTLM: only the listed proxy gets the handshake; the other sees no NTLM message at all', async () => {
    const users = { [`${NTLM_PROXY_DOMAIN}\\alice`]: PASSWORD };
    const hosts = Object.fromEntries(NAMES.map((n) => [n, '127.0.0.1']));
    const corp: NtlmProxy = await startNtlmProxy({ users, hosts });
    const rogue: NtlmProxy = await startNtlmProxy({ users, hosts });
    closers.push(corp.close, rogue.close);
    const creds = path.join(dir, 'ntlm.txt');
    fs.writeFileSync(creds, `${NTLM_PROXY_DOMAIN}\\alice:${PASSWORD}\n`);
    const s = await sluice({ file: writePac('ntlm.pac', corp.port, rogue.port), auth: 'ntlm', credentialsFile: creds, credentialProxies: [`127.0.0.1:${corp.port}`] });

    expect((await tunnel(s, 'viacorp.test', '/t')).body).toBe('origin:GET:/t');
    expect((await forward(s, 'viacorp.test', '/f')).body).toBe('origin:GET:/f');
    expect(corp.connections().every((c) => /alice/i.test(c.user ?? ''))).toBe(true);
    // The fixture records the scheme of each Proxy-Authorization.
    expect(corp.connections().flatMap((c) => c.requests).some((q) => q.authorization === 'NTLM')).toBe(true);

    const t = await tunnel(s, 'viarogue.test', '/t');
    expect(t.blocks[0]?.headers['proxy-status']).toContain('details="upstream_auth_required"');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'upstream_auth_required', detail: expect.stringContaining('not in route.pac.credentialProxies') });
    const f = await forward(s, 'viarogue.test', '/f');
    expect(f.headers['proxy-status']).toContain('details="upstream_auth_required"');
    const rogueRequests = rogue.connections().flatMap((c) => c.requests);
    expect(rogueRequests.length).toBeGreaterThanOrEqual(2);
    expect(rogueRequests.map((q) => q.authorization)).toEqual(rogueRequests.map(() => null));
    expect(rogue.connections().every((c) => c.user === null)).toBe(true);
  });
});
