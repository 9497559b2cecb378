// NTLM to the corporate proxy (issue 18, docs/routes.md#ntlm), against a fixture proxy that verifies
// NTLMv2 responses and binds authentication to the TCP connection as Squid and IIS do (the fixture is
// itself proven against curl's NTLM in test/unit/support/ntlm-proxy.test.ts), and a real Squid with
// ntlm_fake_auth for Squid's own connection-bound handshake. The threats: a wrong password or a proxy that
// drops the connection mid-handshake must end the hop (upstream_auth_failed), never go direct; one
// principal's authenticated connection must never carry another principal's hop; the credentials never
// reach an origin, an audit record or the client.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, expectBothRefused, runCurl } from '../support/curl.js';
import { startNtlmProxy, NTLM_PROXY_DOMAIN, type NtlmProxy } from '../support/ntlm-proxy.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { unavailableGss } from '../../src/egress/index.js';

const PASSWORD = 'Ntlm-Secret-Pw9';
const ORIGIN_PKI = createTestPki(['origin.test']);
const TOKENS = { a: 'tok-ntlm-a', b: 'tok-ntlm-b' };
// Negotiate is out of these tests: auto must pick NTLM from an offer that also lists Negotiate.
const NO_GSS = unavailableGss('not in this test');
type TestLog = NonNullable<Parameters<typeof startSluice>[1]>['log'];

describe('NTLM to the upstream proxy (fixture that verifies NTLMv2)', () => {
  let http: Origin;
  let https: Origin;
  let dir: string;
  let goodCreds: string;
  let badCreds: string;
  const proxies: NtlmProxy[] = [];
  const started: TestSluice[] = [];

  beforeAll(async () => {
    http = await startHttpOrigin();
    https = await startHttpsOrigin(ORIGIN_PKI);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ntlm-'));
    goodCreds = path.join(dir, 'good.txt');
    badCreds = path.join(dir, 'bad.txt');
    fs.writeFileSync(goodCreds, `${NTLM_PROXY_DOMAIN}\\alice:${PASSWORD}\n`);
    fs.writeFileSync(badCreds, `${NTLM_PROXY_DOMAIN}\\alice:not-the-password\n`);
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await http?.close();
    await https?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function proxy(opts: Partial<Parameters<typeof startNtlmProxy>[0]> = {}): Promise<NtlmProxy> {
    const p = await startNtlmProxy({ users: { [`${NTLM_PROXY_DOMAIN}\\alice`]: PASSWORD }, hosts: { 'origin.test': '127.0.0.1' }, ...opts });
    proxies.push(p);
    return p;
  }
  async function sluice(route: Record<string, unknown>, local: Record<string, string[]> = {}, log?: TestLog): Promise<TestSluice> {
    const destinations = [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`];
    const s = await startSluice(
      {
        route: { mode: 'proxy', proxy: route },
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations, allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKENS.b), destinations, allowAddressClasses: ['loopback'] },
        ],
      },
      // origin.test resolves locally to the origin: had Sluice gone direct, the origin would see it.
      { lookup: tableLookup(local), gss: NO_GSS, ...(log === undefined ? {} : { log }) },
    );
    started.push(s);
    return s;
  }
  const via = (s: TestSluice, who: 'a' | 'b' = 'a'): string => `http://${who}:${TOKENS[who]}@127.0.0.1:${s.port}`;
  const everything = (s: TestSluice): string => JSON.stringify([s.decisions(), s.closes()]);

  it('opens a CONNECT tunnel: negotiate, authenticate and CONNECT travel on one connection', async () => {
    const p = await proxy();
    const s = await sluice({ url: p.url, auth: 'ntlm', credentialsFile: goodCreds });
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/t`]);
    expect(result.stdout).toBe('origin:GET:/t');
    const conns = p.connections();
    expect(conns).toHaveLength(1);
    expect(conns[0]?.user).toMatch(/alice/i);
    expect(conns[0]?.requests.map((r) => [r.method, r.authorization, r.status])).toEqual([
      ['CONNECT', 'NTLM', 407],
      ['CONNECT', 'NTLM', 200],
    ]);
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', upstream: p.url });
    expect(everything(s)).not.toContain(PASSWORD);
  });

  it('forwards plain GET and a POST body once, with nothing of the handshake reaching the origin', async () => {
    const p = await proxy();
    const s = await sluice({ url: p.url, auth: 'ntlm', credentialsFile: goodCreds });
    const get = await runCurl(['--proxy', via(s), `http://origin.test:${http.port}/g?x=1`]);
    expect(get.stdout).toBe('origin:GET:/g?x=1');
    const before = http.requests.length;
    const post = await runCurl(['--proxy', via(s), '--data-binary', 'payload-123', `http://origin.test:${http.port}/p`]);
    expect(post.stdout).toBe('origin:POST:/p');
    // The probe leg is an OPTIONS the proxy answers itself (407); the origin sees the POST once, with its body.
    const seen = http.requests.slice(before);
    expect(seen.map((r) => [r.method, r.body])).toEqual([['POST', 'payload-123']]);
    for (const r of http.requests) {
      expect(r.headers['proxy-authorization']).toBeUndefined();
      expect(JSON.stringify(r.rawHeaders)).not.toMatch(/NTLM|Ntlm-Secret/);
    }
    const postConn = p.connections().find((c) => c.requests.some((r) => r.method === 'POST'));
    expect(postConn?.requests.map((r) => [r.method, r.status])).toEqual([
      ['OPTIONS', 407],
      ['POST', 200],
    ]);
  });

  it('never lets two principals share an authenticated connection; one principal reuses its own', async () => {
    const p = await proxy();
    const s = await sluice({ url: p.url, auth: 'ntlm', credentialsFile: goodCreds });
    // Keep-alive clients on both sides, interleaved: a shared pool would mix the two principals.
    const urls = (who: string): string[] => [1, 2, 3].map((i) => `http://origin.test:${http.port}/${who}/${i}`);
    const [a, b] = await Promise.all([runCurl(['--proxy', via(s, 'a'), ...urls('a')]), runCurl(['--proxy', via(s, 'b'), ...urls('b')])]);
    expect(a.stdout).toBe(urls('a').map((u) => `origin:GET:${new URL(u).pathname}`).join(''));
    expect(b.stdout).toBe(urls('b').map((u) => `origin:GET:${new URL(u).pathname}`).join(''));
    const byConnection = p.connections().map((c) => c.requests.filter((r) => r.status === 200).map((r) => new URL(r.target).pathname.split('/')[1]));
    expect(byConnection.flat().sort()).toEqual(['a', 'a', 'a', 'b', 'b', 'b']);
    for (const owners of byConnection) expect(new Set(owners).size).toBeLessThanOrEqual(1);
    // Each principal's sequential requests ride its one authenticated connection: one handshake each.
    expect(byConnection.filter((owners) => owners.length > 0)).toHaveLength(2);
    const handshakes = p.connections().flatMap((c) => c.requests.filter((r) => r.status === 407));
    expect(handshakes).toHaveLength(2);
  });

  it('a wrong password ends the hop with upstream_auth_failed, the origin sees nothing, the operator log says why', async () => {
    const p = await proxy();
    const warnings: { obj: object; msg: string }[] = [];
    const log = { info: () => undefined, warn: (obj: object, msg: string) => void warnings.push({ obj, msg }), error: () => undefined };
    const s = await sluice({ url: p.url, auth: 'ntlm', credentialsFile: badCreds }, { 'origin.test': ['127.0.0.1'] }, log);
    const before = http.connections + https.connections;
    await expectBothRefused(via(s), `https://origin.test:${https.port}/`, ORIGIN_PKI.caFile, `http://origin.test:${http.port}/`, 'upstream_auth_failed');
    expect(http.connections + https.connections).toBe(before);
    const last = s.decisions().at(-1);
    expect(last).toMatchObject({ reason: 'upstream_auth_failed', upstream: p.url });
    expect(String(last?.detail)).toMatch(/^ntlm: .*407/);
    expect(everything(s)).not.toContain('not-the-password');
    // One warning for the proxy and reason (the tunnel's and the request's are rate-limited into it).
    expect(warnings.map((w) => w.msg)).toEqual([`upstream proxy ${p.url} failed: upstream_auth_failed`]);
    expect(JSON.stringify(warnings)).not.toMatch(/not-the-password|TlRMTVNT/);
  });

  it('a proxy that closes the connection after its challenge ends the hop with upstream_auth_failed', async () => {
    const p = await proxy({ closeAfterChallenge: true });
    const s = await sluice({ url: p.url, auth: 'ntlm', credentialsFile: goodCreds });
    const tunnel = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/`])).stdout);
    expect(tunnel.blocks[0]?.headers['proxy-status']).toContain('details="upstream_auth_failed"');
    expect(String(s.decisions().at(-1)?.detail)).toMatch(/ntlm: .*closed the connection/);
  });

  it('auto follows the offer: NTLM when Negotiate is offered but unavailable, learned for the next hop', async () => {
    const p = await proxy({ offer: ['Negotiate', 'NTLM', 'Basic realm="corp"'] });
    const s = await sluice({ url: p.url, auth: 'auto', credentialsFile: goodCreds });
    const first = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/1`]);
    expect(first.stdout).toBe('origin:GET:/1');
    const second = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/2`]);
    expect(second.stdout).toBe('origin:GET:/2');
    const [c1, c2] = p.connections();
    // First: an anonymous CONNECT learns the offer, then NTLM on the same connection; never Basic.
    expect(c1?.requests.map((r) => r.authorization)).toEqual([null, 'NTLM', 'NTLM']);
    // Second: NTLM from the first leg.
    expect(c2?.requests.map((r) => r.authorization)).toEqual(['NTLM', 'NTLM']);
  });

  it('a SOCKS5 client tunnels through the NTLM proxy the same way', async () => {
    const p = await proxy();
    const s = await startSluice(
      {
        listeners: [{ name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' }],
        route: { mode: 'proxy', proxy: { url: p.url, auth: 'ntlm', credentialsFile: goodCreds } },
        grants: [{ id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations: [`https://origin.test:${https.port}`] }],
      },
      { gss: NO_GSS },
    );
    started.push(s);
    const result = await runCurl(['--proxy', `socks5h://a:${TOKENS.a}@127.0.0.1:${s.port}`, '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/socks`]);
    expect(result.stdout).toBe('origin:GET:/socks');
    expect(p.connections()[0]?.requests.map((r) => [r.method, r.authorization, r.status])).toEqual([
      ['CONNECT', 'NTLM', 407],
      ['CONNECT', 'NTLM', 200],
    ]);
  });

  it('a PAC route (PROXY host:port) authenticates with route.pac.auth, for tunnels and forwarded requests', async () => {
    const p = await proxy();
    const pac = path.join(dir, 'ntlm.pac');
    fs.writeFileSync(pac, `function FindProxyForURL(url, host) { return "PROXY 127.0.0.1:${p.port}"; }`);
    const destinations = [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`];
    const s = await startSluice(
      { route: { mode: 'pac', pac: { file: pac, auth: 'ntlm', credentialsFile: goodCreds, credentialProxies: [`127.0.0.1:${p.port}`] } }, grants: [{ id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations }] },
      { gss: NO_GSS },
    );
    started.push(s);
    const tunnel = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/pac-t`]);
    expect(tunnel.stdout).toBe('origin:GET:/pac-t');
    const plain = await runCurl(['--proxy', via(s), `http://origin.test:${http.port}/pac-p`]);
    expect(plain.stdout).toBe('origin:GET:/pac-p');
    expect(p.connections().every((c) => /alice/i.test(c.user ?? ''))).toBe(true);
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', route: `pac PROXY 127.0.0.1:${p.port}` });
  });

  it('auth basic against a proxy that offers only NTLM is upstream_auth_unsupported, naming both sides', async () => {
    const p = await proxy();
    const s = await sluice({ url: p.url, auth: 'basic', credentialsFile: goodCreds });
    const tunnel = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/`])).stdout);
    expect(tunnel.blocks[0]?.headers['proxy-status']).toContain('details="upstream_auth_unsupported"');
    expect(String(s.decisions().at(-1)?.detail)).toMatch(/offering ntlm.*configured for basic/);
  });
});

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('NTLM through a real Squid (ntlm_fake_auth: the connection-bound handshake)', () => {
  let http: Origin;
  let https: Origin;
  let squid: Squid;
  let dir: string;
  let creds: string;
  let s: TestSluice | undefined;

  beforeAll(async () => {
    http = await startHttpOrigin();
    https = await startHttpsOrigin(ORIGIN_PKI);
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, ntlm: true });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ntlm-squid-'));
    creds = path.join(dir, 'creds.txt');
    fs.writeFileSync(creds, `CORP\\dave:${PASSWORD}\n`);
  });
  afterAll(async () => {
    await s?.close();
    await squid?.close();
    await http?.close();
    await https?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('tunnels and forwards through Squid after its NTLM challenge, and Squid logs an authenticated user', async () => {
    const destinations = [`http://origin.test:${http.port}`, `https://origin.test:${https.port}`];
    s = await startSluice({ route: { mode: 'proxy', proxy: { url: squid.url, auth: 'ntlm', credentialsFile: creds } }, grants: [{ id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations }] }, { gss: NO_GSS });
    const proxyUrl = `http://a:${TOKENS.a}@127.0.0.1:${s.port}`;
    const plain = await runCurl(['--proxy', proxyUrl, `http://origin.test:${http.port}/squid-ntlm`]);
    expect(plain.stdout).toBe('origin:GET:/squid-ntlm');
    const tunneled = await runCurl(['--proxy', proxyUrl, '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/squid-tunnel`]);
    expect(tunneled.stdout).toBe('origin:GET:/squid-tunnel');
    // Squid logs a tunnel when it closes.
    const entries = await waitForLog(squid, (e) => e.some((x) => x.method === 'GET' && x.status === 200) && e.some((x) => x.method === 'CONNECT' && x.status === 200));
    // Each only after a 407 and Sluice's type 3. ntlm_fake_auth garbles the names it logs (curl's too).
    expect(entries.filter((x) => x.status === 407).map((x) => x.method).sort()).toEqual(['CONNECT', 'GET']);
    for (const x of entries.filter((e) => e.status === 200)) expect(x.user ?? '').toMatch(/\S/);
    expect(http.requests.every((r) => r.headers['proxy-authorization'] === undefined)).toBe(true);
  });
});
