// System mode: Sluice follows its own HTTP_PROXY/HTTPS_PROXY/NO_PROXY, the way curl reads them, and a
// set-but-unparsable variable stops startup instead of being ignored. PAC fetched from a URL is
// refreshed, and a failed refresh keeps the last good script.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { waitUntil } from '../support/wait.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-system';
const PKI = createTestPki(['origin.test']);

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('system proxy route', () => {
  let http: Origin;
  let https: Origin;
  let squid: Squid;
  let sluice: TestSluice;

  beforeAll(async () => {
    http = await startHttpOrigin();
    https = await startHttpsOrigin(PKI);
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, users: { sys: 'pw@1' } });
    sluice = await startSluice(
      {
        route: { mode: 'system' },
        grants: [{ id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`, `http://local.test:${http.port}`], allowAddressClasses: ['loopback'] }],
      },
      {
        lookup: tableLookup({ 'local.test': ['127.0.0.1'] }),
        env: { https_proxy: `http://sys:pw%401@127.0.0.1:${squid.port}`, HTTP_PROXY: `127.0.0.1:${squid.port}`, NO_PROXY: 'local.test,.internal.test' },
      },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await squid?.close();
    await http?.close();
    await https?.close();
  });

  const via = `http://s:${TOKEN}`;

  it('tunnels through https_proxy with its URL credentials', async () => {
    const r = await runCurl(['--proxy', `${via}@127.0.0.1:${sluice.port}`, '--cacert', PKI.caFile, `https://origin.test:${https.port}/sys`]);
    expect(r.stdout).toBe('origin:GET:/sys');
    await waitForLog(squid, (e) => e.some((x) => x.method === 'CONNECT' && x.user === 'sys'));
    expect(sluice.decisions().at(-1)).toMatchObject({ route: `system proxy http://127.0.0.1:${squid.port}`, attested: false });
  });

  it('sends plain HTTP to HTTP_PROXY (no credentials: Squid answers 407, which fails closed)', async () => {
    const r = curlHeadersAndBody((await runCurl(['-i', '--proxy', `${via}@127.0.0.1:${sluice.port}`, `http://origin.test:${http.port}/x`])).stdout);
    expect(r.headers['proxy-status']).toContain('details="upstream_auth_required"');
  });

  it('goes direct for NO_PROXY destinations, and only those', async () => {
    const r = await runCurl(['--proxy', `${via}@127.0.0.1:${sluice.port}`, `http://local.test:${http.port}/np`]);
    expect(r.stdout).toBe('origin:GET:/np');
    expect(sluice.decisions().at(-1)).toMatchObject({ route: 'system direct', attested: true, pinned: '127.0.0.1' });
    expect((await squid.accessLog()).some((x) => x.url.includes('/np'))).toBe(false);
  });
});

describe('system proxy variables that cannot be honoured', () => {
  it('stop startup with an error naming the variable', async () => {
    await expect(startSluice({ route: { mode: 'system' } }, { env: { HTTPS_PROXY: 'socks5://127.0.0.1:1080' } })).rejects.toThrow(/HTTPS_PROXY/);
    await expect(startSluice({ route: { mode: 'system' } }, { env: { no_proxy: '10.0.0.0/99' } })).rejects.toThrow(/no_proxy/);
  });
});

describe('PAC from a URL', () => {
  let served: string;
  let pacServer: Origin;
  let origin: Origin;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    served = 'function FindProxyForURL(url, host) { return "DIRECT"; }';
    pacServer = await startHttpOrigin({
      handler: (_req, res) => {
        if (served === '') {
          res.writeHead(500);
          res.end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/x-ns-proxy-autoconfig' });
        res.end(served);
      },
    });
  });
  afterAll(async () => {
    await pacServer?.close();
    await origin?.close();
  });

  it('loads it, refreshes it, and keeps the last good script when a refresh fails', async () => {
    const s = await startSluice(
      {
        route: { mode: 'pac', pac: { url: `${pacServer.url}/proxy.pac`, refreshMs: 50 } },
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`http://direct.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'direct.test': ['127.0.0.1'] }) },
    );
    const get = async (): Promise<string> =>
      (await runCurl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '--proxy', `http://p:${TOKEN}@127.0.0.1:${s.port}`, `http://direct.test:${origin.port}/`])).stdout;
    try {
      expect(await get()).toBe('200');
      served = '';
      const failedFetches = pacServer.requests.length;
      await waitUntil(() => pacServer.requests.length >= failedFetches + 2, { timeoutMs: 5000, label: 'two failed PAC refreshes' });
      expect(await get()).toBe('200');
      served = 'function FindProxyForURL(url, host) { return "PROXY 127.0.0.1:9"; }';
      // The new script is compiled after it is fetched: wait for the route to change, bounded.
      await waitUntil(async () => (await get()) === '502', { timeoutMs: 5000, label: 'the refreshed PAC routes through its proxy' });
    } finally {
      await s.close();
    }
  });
});
