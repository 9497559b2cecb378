// Negotiate (Kerberos via SPNEGO, RFC 4559) to a real Squid parent with negotiate_kerberos_auth, against a
// real KDC on loopback (test/support/kdc.ts), with Sluice using the service's own ticket cache or client
// keytab through GSSAPI (issue 18, docs/routes.md#negotiate). The threats: an expired ticket or none must
// end the hop with upstream_auth_failed and never go direct (the origin resolves locally here, so a direct
// dial would be seen); the ticket never reaches the sandboxed client, an origin or the audit; two
// principals' hops never share a connection the proxy authenticated.
// GSSAPI reads KRB5_CONFIG and KRB5CCNAME from the process environment; vitest runs each file in its own
// forked process (vitest.config.ts), so setting them here reaches the library and no other file.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, expectBothRefused, runCurl } from '../support/curl.js';
import { kdcAvailable, startKdc, type Kdc } from '../support/kdc.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const ORIGIN_PKI = createTestPki(['origin.test']);
const TOKENS = { a: 'tok-krb-a', b: 'tok-krb-b' };
const KRB_ENV = ['KRB5_CONFIG', 'KRB5CCNAME', 'KRB5_CLIENT_KTNAME'] as const;

describe.skipIf(!(kdcAvailable() && squidAvailable()) && process.env.CI !== 'true')('Negotiate to a Kerberos-protected Squid (real krb5kdc, negotiate_kerberos_auth)', () => {
  let kdc: Kdc;
  let squid: Squid;
  let http: Origin;
  let https: Origin;
  let dir: string;
  let aliceCache: string;
  const saved = Object.fromEntries(KRB_ENV.map((k) => [k, process.env[k]]));
  const started: TestSluice[] = [];

  beforeAll(async () => {
    kdc = await startKdc();
    const keytab = await kdc.addService('HTTP/localhost');
    await kdc.addUser('svc', 'svc-pw-1');
    await kdc.addUser('brief', 'brief-pw-2', { maxLifeSeconds: 2 });
    await kdc.addUser('robot', 'robot-pw-3');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-krb-'));
    aliceCache = path.join(dir, 'svc.cc');
    await kdc.kinit('svc', 'svc-pw-1', aliceCache);
    http = await startHttpOrigin();
    https = await startHttpsOrigin(ORIGIN_PKI);
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, negotiate: { keytab, krb5Config: kdc.krb5Config } });
    process.env['KRB5_CONFIG'] = kdc.krb5Config;
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
    delete process.env['KRB5_CLIENT_KTNAME'];
  });
  afterAll(async () => {
    for (const k of KRB_ENV) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
    await squid?.close();
    await kdc?.close();
    await http?.close();
    await https?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function sluice(ccache: string, proxy: Record<string, unknown> = {}): Promise<TestSluice> {
    process.env['KRB5CCNAME'] = `FILE:${ccache}`;
    const destinations = [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`];
    const s = await startSluice(
      {
        // The SPN is derived from the proxy's host name: HTTP@localhost, the principal Squid holds.
        route: { mode: 'proxy', proxy: { url: `http://localhost:${squid.port}`, auth: 'negotiate', ...proxy } },
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations, allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKENS.b), destinations, allowAddressClasses: ['loopback'] },
        ],
      },
      // origin.test resolves locally to the origin: a direct dial would reach it.
      { lookup: tableLookup({ 'origin.test': ['127.0.0.1'] }) },
    );
    started.push(s);
    return s;
  }
  const via = (s: TestSluice, who: 'a' | 'b' = 'a'): string => `http://${who}:${TOKENS[who]}@127.0.0.1:${s.port}`;
  const upstream = (): string => `http://localhost:${squid.port}`;

  it('tunnels HTTPS through Squid with a Kerberos ticket, Squid logs the service principal', async () => {
    const s = await sluice(aliceCache);
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/krb-tunnel`]);
    expect(result.stdout).toBe('origin:GET:/krb-tunnel');
    const entries = await waitForLog(squid, (e) => e.some((x) => x.method === 'CONNECT' && x.status === 200 && x.url === `origin.test:${https.port}`));
    expect(entries.find((x) => x.method === 'CONNECT' && x.status === 200)?.user).toBe(`svc@${kdc.realm}`);
    // Preemptive: the token rides the first CONNECT, so Squid never had to challenge it.
    expect(entries.filter((x) => x.method === 'CONNECT' && x.status === 407)).toHaveLength(0);
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', upstream: upstream(), attested: false });
  });

  it('forwards GET and POST through Squid; the origin never sees the token', async () => {
    const s = await sluice(aliceCache);
    const get = await runCurl(['--proxy', via(s), `http://origin.test:${http.port}/krb-get`]);
    expect(get.stdout).toBe('origin:GET:/krb-get');
    const post = await runCurl(['--proxy', via(s), '--data-binary', 'krb-body', `http://origin.test:${http.port}/krb-post`]);
    expect(post.stdout).toBe('origin:POST:/krb-post');
    expect(http.requests.filter((r) => r.url === '/krb-post').map((r) => r.body)).toEqual(['krb-body']);
    for (const r of http.requests) expect(JSON.stringify(r.rawHeaders)).not.toMatch(/Negotiate|proxy-authorization/i);
    const entries = await waitForLog(squid, (e) => e.some((x) => x.url.endsWith('/krb-post') && x.status === 200));
    expect(entries.find((x) => x.url.endsWith('/krb-get') && x.status === 200)?.user).toBe(`svc@${kdc.realm}`);
    expect(JSON.stringify([s.decisions(), s.closes()])).not.toMatch(/Negotiate [A-Za-z0-9+/]{20}|YII/);
  });

  it('works from a client keytab (KRB5_CLIENT_KTNAME) with no ticket cache', async () => {
    process.env['KRB5_CLIENT_KTNAME'] = await kdc.userKeytab('robot');
    const s = await sluice(path.join(dir, 'robot-empty.cc'));
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/krb-keytab`]);
    expect(result.stdout).toBe('origin:GET:/krb-keytab');
    const entries = await waitForLog(squid, (e) => e.some((x) => x.method === 'CONNECT' && x.status === 200 && x.user === `robot@${kdc.realm}`));
    expect(entries.length).toBeGreaterThan(0);
  });

  it('an expired ticket ends the hop with upstream_auth_failed and never goes direct', async () => {
    const cache = path.join(dir, 'brief.cc');
    await kdc.kinit('brief', 'brief-pw-2', cache);
    await waitUntil(async () => !(await kdc.ticketValid(cache)), { timeoutMs: 10_000, label: 'the 2 s ticket to expire' });
    const s = await sluice(cache);
    const before = http.connections + https.connections;
    await expectBothRefused(via(s), `https://origin.test:${https.port}/`, ORIGIN_PKI.caFile, `http://origin.test:${http.port}/`, 'upstream_auth_failed');
    expect(http.connections + https.connections).toBe(before);
    const last = s.decisions().at(-1);
    expect(last).toMatchObject({ reason: 'upstream_auth_failed', upstream: upstream() });
    expect(String(last?.detail)).toMatch(/^negotiate: no Kerberos token for HTTP@localhost: .*expired/i);
  });

  it('no ticket at all is upstream_auth_failed too; a wrong SPN is refused by the KDC, never sent', async () => {
    const s = await sluice(path.join(dir, 'nobody.cc'));
    const res = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://origin.test:${http.port}/`])).stdout);
    expect(res.headers['proxy-status']).toContain('details="upstream_auth_failed"');
    const wrong = await sluice(aliceCache, { spn: 'HTTP@not-a-service.test' });
    const res2 = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(wrong), `http://origin.test:${http.port}/`])).stdout);
    expect(res2.headers['proxy-status']).toContain('details="upstream_auth_failed"');
    expect(String(wrong.decisions().at(-1)?.detail)).toMatch(/not-a-service/);
  });

  it('a PAC route (PROXY localhost:port) uses Negotiate with route.pac.auth, SPN from the PAC entry', async () => {
    process.env['KRB5CCNAME'] = `FILE:${aliceCache}`;
    const pac = path.join(dir, 'krb.pac');
    fs.writeFileSync(pac, `function FindProxyForURL(url, host) { return "PROXY localhost:${squid.port}"; }`);
    const s = await startSluice({
      route: { mode: 'pac', pac: { file: pac, auth: 'negotiate', credentialProxies: [`localhost:${squid.port}`] } },
      grants: [{ id: 'a', tokenSha256: tokenHash(TOKENS.a), destinations: [`https://origin.test:${https.port}`] }],
    });
    started.push(s);
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/krb-pac`]);
    expect(result.stdout).toBe('origin:GET:/krb-pac');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', upstream: `http://localhost:${squid.port}` });
  });

  it('two principals forwarding at once never share an authenticated upstream connection; each reuses its own', async () => {
    const s = await sluice(aliceCache);
    const urls = (who: string): string[] => [1, 2, 3].map((i) => `http://origin.test:${http.port}/krb-${who}-${i}`);
    const [a, b] = await Promise.all([runCurl(['--proxy', via(s, 'a'), ...urls('a')]), runCurl(['--proxy', via(s, 'b'), ...urls('b')])]);
    expect(a.stdout).toBe(urls('a').map((u) => `origin:GET:${new URL(u).pathname}`).join(''));
    expect(b.stdout).toBe(urls('b').map((u) => `origin:GET:${new URL(u).pathname}`).join(''));
    // Squid sees each upstream connection by its client port.
    const entries = await waitForLog(squid, (e) => e.filter((x) => /\/krb-[ab]-\d$/.test(x.url) && x.status === 200).length === 6);
    const portsOf = (who: string): Set<number> => new Set(entries.filter((x) => new RegExp(`/krb-${who}-\\d$`).test(x.url) && x.status === 200).map((x) => x.clientPort));
    const [pa, pb] = [portsOf('a'), portsOf('b')];
    expect([...pa].filter((port) => pb.has(port))).toEqual([]);
    // Sequential keep-alive requests of one principal reuse its authenticated connection.
    expect(pa.size).toBe(1);
    expect(pb.size).toBe(1);
  });
});
