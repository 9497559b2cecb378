// PAC routes with a real PAC file and a real Squid: per-destination PROXY vs DIRECT decisions, proven
// by where the bytes went (Squid's access log, origin connection counts); failover in order; DIRECT
// only when the PAC lists it; hostile PACs (endless loop, memory bomb) fail fast with pac_failed while
// other traffic keeps flowing (docs/routes.md; principle A2 in docs/principles.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { unusedPort } from '../support/ports.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-pac';

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('PAC route', () => {
  let origin: Origin;
  let squid: Squid;
  let dir: string;
  let sluice: TestSluice;
  let dead: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    squid = await startSquid({ hosts: { 'viaproxy.test': '127.0.0.1', 'failover.test': '127.0.0.1', 'shexp.test': '127.0.0.1' }, users: { pacuser: 'pacpass' } });
    dead = await unusedPort();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-'));
    fs.writeFileSync(path.join(dir, 'creds.txt'), 'pacuser:pacpass\n');
    const pac = `
      function FindProxyForURL(url, host) {
        if (host == "viaproxy.test") return "PROXY 127.0.0.1:${squid.port}";
        if (host == "failover.test") return "PROXY 127.0.0.1:${dead}; PROXY 127.0.0.1:${squid.port}";
        if (host == "onlydead.test") return "PROXY 127.0.0.1:${dead}";
        if (host == "socks.test") return "SOCKS5 127.0.0.1:${dead}";
        if (host == "garbage.test") return 42;
        if (host == "loop.test") { while (true) {} }
        if (host == "bomb.test") { var a = []; while (true) a.push(new Array(100000).join("x")); }
        if (shExpMatch(dnsResolve(host), "127.0.0.3")) return "PROXY 127.0.0.1:${squid.port}";
        if (isInNet(dnsResolve(host), "127.0.0.0", "255.255.255.0")) return "DIRECT";
        return "PROXY 127.0.0.1:${dead}";
      }`;
    fs.writeFileSync(path.join(dir, 'corp.pac'), pac);
    const hosts = ['viaproxy.test', 'failover.test', 'onlydead.test', 'socks.test', 'garbage.test', 'loop.test', 'bomb.test', 'direct.test', 'shexp.test', 'unknown.test'];
    sluice = await startSluice(
      {
        route: { mode: 'pac', pac: { file: path.join(dir, 'corp.pac'), timeoutMs: 200, credentialsFile: path.join(dir, 'creds.txt'), credentialProxies: [`127.0.0.1:${squid.port}`] } },
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: hosts.map((h) => `http://${h}:${origin.port}`), allowAddressClasses: ['loopback'] }],
      },
      // viaproxy.test and failover.test do not resolve locally (only Squid knows them): unattested is fine.
      { lookup: tableLookup({ 'direct.test': ['127.0.0.1'], 'shexp.test': ['127.0.0.3'], 'loop.test': ['127.0.0.1'], 'bomb.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await squid?.close();
    await origin?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const get = async (host: string, p = '/'): Promise<ReturnType<typeof curlHeadersAndBody>> =>
    curlHeadersAndBody((await runCurl(['-i', '--proxy', `http://p:${TOKEN}@127.0.0.1:${sluice.port}`, `http://${host}:${origin.port}${p}`])).stdout);

  it('sends a PROXY destination through Squid and a DIRECT one straight to the origin', async () => {
    const proxied = await get('viaproxy.test', '/through-squid');
    expect(proxied.body).toBe('origin:GET:/through-squid');
    await waitForLog(squid, (e) => e.some((x) => x.url.startsWith(`http://viaproxy.test:${origin.port}/through-squid`)));
    expect(sluice.decisions().at(-1)).toMatchObject({ route: `pac PROXY 127.0.0.1:${squid.port}`, upstream: `http://127.0.0.1:${squid.port}`, attested: false });

    const direct = await get('direct.test', '/direct');
    expect(direct.body).toBe('origin:GET:/direct');
    expect((await squid.accessLog()).some((x) => x.url.includes('/direct'))).toBe(false);
    expect(sluice.decisions().at(-1)).toMatchObject({ route: 'pac DIRECT', upstream: null, attested: true, pinned: '127.0.0.1' });
  });

  it('evaluates shExpMatch(dnsResolve(host)) from Sluice’s own resolver', async () => {
    // shexp.test resolves (for Sluice) to 127.0.0.3, so the PAC picks Squid, which knows it as 127.0.0.1.
    expect((await get('shexp.test', '/shexp')).body).toBe('origin:GET:/shexp');
    await waitForLog(squid, (e) => e.some((x) => x.url.includes('/shexp')));
    expect(sluice.decisions().at(-1)).toMatchObject({ route: `pac PROXY 127.0.0.1:${squid.port}`, addresses: [{ address: '127.0.0.3', class: 'loopback', allowed: true }] });
  });

  it('fails over in order on a connection failure', async () => {
    expect((await get('failover.test', '/failover')).body).toBe('origin:GET:/failover');
    expect(sluice.decisions().at(-1)).toMatchObject({ upstream: `http://127.0.0.1:${squid.port}` });
  });

  it('never goes DIRECT when the PAC does not list it', async () => {
    const before = origin.connections;
    const r = await get('onlydead.test');
    expect(r.status).toBe(502);
    expect(r.headers['proxy-status']).toContain('details="upstream_unreachable"');
    const unknown = await get('unknown.test');
    expect(unknown.headers['proxy-status']).toContain('details="upstream_unreachable"');
    expect(origin.connections).toBe(before);
  });

  it('refuses SOCKS-only answers and garbage answers with their reasons', async () => {
    expect((await get('socks.test')).headers['proxy-status']).toContain('details="pac_unsupported_entry"');
    expect((await get('garbage.test')).headers['proxy-status']).toContain('details="pac_failed"');
  });

  it('fails an endless-loop PAC and a memory-bomb PAC fast with pac_failed, while other traffic keeps flowing', async () => {
    const started = Date.now();
    const [loop, direct, bomb] = await Promise.all([get('loop.test'), get('direct.test', '/during'), get('bomb.test')]);
    expect(loop.status).toBe(502);
    expect(loop.headers['proxy-status']).toContain('details="pac_failed"');
    expect(bomb.headers['proxy-status']).toContain('details="pac_failed"');
    expect(direct.body).toBe('origin:GET:/during');
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await get('direct.test', '/after')).body).toBe('origin:GET:/after');
  });
});

describe('PAC that cannot be loaded', () => {
  it('fails every hop closed with pac_unavailable, never DIRECT', async () => {
    const origin = await startHttpOrigin();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-bad-'));
    fs.writeFileSync(path.join(dir, 'broken.pac'), 'function FindProxyForURL(url, host) { return "DIRECT" ');
    const s = await startSluice(
      { route: { mode: 'pac', pac: { file: path.join(dir, 'broken.pac') } }, grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`http://direct.test:${origin.port}`], allowAddressClasses: ['loopback'] }] },
      { lookup: tableLookup({ 'direct.test': ['127.0.0.1'] }) },
    );
    try {
      const r = curlHeadersAndBody((await runCurl(['-i', '--proxy', `http://p:${TOKEN}@127.0.0.1:${s.port}`, `http://direct.test:${origin.port}/`])).stdout);
      expect(r.status).toBe(502);
      expect(r.headers['proxy-status']).toContain('details="pac_unavailable"');
      expect(origin.connections).toBe(0);
    } finally {
      await s.close();
      await origin.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
