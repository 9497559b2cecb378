// System mode: Sluice follows its own HTTP_PROXY/HTTPS_PROXY/ALL_PROXY/NO_PROXY, the way curl reads them,
// says at start and in `sluice explain` which route each request family takes, and a consulted but
// unparsable variable (socks5:// included) stops startup instead of being ignored or replaced by
// DIRECT (review 2026-12 finding 11). PAC fetched from a URL is refreshed, and a failed refresh keeps
// the last good script.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { buildRuntime } from '../../src/app.js';
import { parseConfigText } from '../../src/config/index.js';
import { explain, formatExplanation } from '../../src/explain/index.js';
import { startFixtureConnectProxy, type FixtureConnectProxy } from '../support/fault-servers.js';
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

describe('review 2026-12 finding 11: ALL_PROXY, and a proxy for one request family only', () => {
  let origin: Origin;
  let proxyA: FixtureConnectProxy;
  let proxyB: FixtureConnectProxy;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    proxyA = await startFixtureConnectProxy();
    proxyB = await startFixtureConnectProxy();
  });
  afterAll(async () => {
    await origin?.close();
    await proxyA?.close();
    await proxyB?.close();
  });

  // CONNECT is authorized by the tcp:// rule (curl --proxytunnel), absolute-form by the http:// rule.
  const config = (): Record<string, unknown> => ({
    route: { mode: 'system' },
    grants: [{ id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://origin.test:${origin.port}`, `http://origin.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
  });
  const lookup = tableLookup({ 'origin.test': ['127.0.0.1'] });

  /** One CONNECT (curl --proxytunnel) and one absolute-form GET; the decision of each. */
  async function both(env: Record<string, string>): Promise<{ connect: Record<string, unknown>; forward: Record<string, unknown>; connectBody: string }> {
    const sluice = await startSluice(config(), { lookup, env });
    try {
      const proxy = `http://s:${TOKEN}@127.0.0.1:${sluice.port}`;
      const tunnel = await runCurl(['--proxytunnel', '--proxy', proxy, `http://origin.test:${origin.port}/tunnel`]);
      const connect = sluice.decisions().at(-1) ?? {};
      await runCurl(['--proxy', proxy, `http://origin.test:${origin.port}/forward`]);
      const forward = sluice.decisions().at(-1) ?? {};
      return { connect, forward, connectBody: tunnel.stdout };
    } finally {
      await sluice.close();
    }
  }

  it('ALL_PROXY only: CONNECT and absolute-form both go through it', async () => {
    const before = proxyA.targets.length;
    const r = await both({ ALL_PROXY: proxyA.url });
    expect(r.connect).toMatchObject({ request: 'connect', reason: 'granted', route: `system proxy ${proxyA.url}`, attested: false });
    expect(r.connectBody).toBe('origin:GET:/tunnel');
    expect(proxyA.targets.slice(before)).toEqual([`origin.test:${origin.port}`]);
    // The fixture proxy answers absolute-form with 405: the request reached the proxy, not the origin.
    expect(r.forward).toMatchObject({ request: 'forward', route: `system proxy ${proxyA.url}`, upstream: proxyA.url });
    expect(origin.requests.some((x) => x.url === '/forward')).toBe(false);
  });

  it('HTTP_PROXY only: absolute-form through it, CONNECT direct, and the audit says system direct', async () => {
    const before = proxyA.targets.length;
    const r = await both({ HTTP_PROXY: proxyA.url });
    expect(r.connect).toMatchObject({ request: 'connect', reason: 'granted', route: 'system direct', attested: true, pinned: '127.0.0.1' });
    expect(r.connectBody).toBe('origin:GET:/tunnel');
    expect(proxyA.targets.length).toBe(before);
    expect(r.forward).toMatchObject({ request: 'forward', route: `system proxy ${proxyA.url}`, upstream: proxyA.url });
  });

  it('HTTPS_PROXY and ALL_PROXY: CONNECT uses HTTPS_PROXY, absolute-form uses ALL_PROXY', async () => {
    const beforeA = proxyA.targets.length;
    const beforeB = proxyB.targets.length;
    const r = await both({ HTTPS_PROXY: proxyA.url, ALL_PROXY: proxyB.url });
    expect(r.connect).toMatchObject({ route: `system proxy ${proxyA.url}`, upstream: proxyA.url });
    expect(proxyA.targets.slice(beforeA)).toEqual([`origin.test:${origin.port}`]);
    expect(proxyB.targets.length).toBe(beforeB);
    expect(r.forward).toMatchObject({ route: `system proxy ${proxyB.url}`, upstream: proxyB.url });
  });

  it('HTTP_PROXY only: the startup log warns once, and explain names the route of each family', async () => {
    const parsed = parseConfigText(stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state: os.tmpdir(), ...config() }), path.join(os.tmpdir(), 'sluice-test.yaml'), os.tmpdir());
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const logged: { level: string; fields: object; msg: string }[] = [];
    const log = {
      info: (fields: object, msg: string) => void logged.push({ level: 'info', fields, msg }),
      warn: (fields: object, msg: string) => void logged.push({ level: 'warn', fields, msg }),
      error: (fields: object, msg: string) => void logged.push({ level: 'error', fields, msg }),
    };
    const built = await buildRuntime(parsed.config, { env: { HTTP_PROXY: proxyA.url }, lookup, log, audit: { write: () => undefined, flush: () => Promise.resolve() } });
    if (!built.ok) throw new Error(JSON.stringify(built.issues));
    const rt = built.value.runtime;
    try {
      const direct = 'https, wss, tcp (CONNECT): system direct (no https_proxy, HTTPS_PROXY, all_proxy or ALL_PROXY set)';
      const proxied = `http, ws (absolute-form): system proxy ${proxyA.url} (from HTTP_PROXY)`;
      const routeLines = logged.filter((l) => 'route' in l.fields);
      expect(routeLines).toEqual([{ level: 'warn', fields: { route: 'system', routes: [direct, proxied] }, msg: `route system: ${direct}; ${proxied}` }]);
      const tunnel = await explain(rt, 's', `tcp://origin.test:${origin.port}`);
      expect(tunnel).toMatchObject({ route: 'system direct', routeSummary: [direct, proxied], decision: 'allow' });
      const text = formatExplanation(tunnel);
      expect(text).toContain(`route:      system direct\n            ${direct}\n            ${proxied}\n`);
      expect((await explain(rt, 's', `http://origin.test:${origin.port}/`)).route).toBe(`system proxy ${proxyA.url}`);
    } finally {
      rt.routes.close();
      await rt.forwardAgent.close();
      await rt.upstreamAgent.close();
    }
  });

  it('socks5:// in ALL_PROXY: start refuses with a config error naming ALL_PROXY, never goes direct', async () => {
    await expect(startSluice(config(), { lookup, env: { ALL_PROXY: 'socks5://127.0.0.1:1080' } })).rejects.toThrow(/route\.system \(ALL_PROXY\): socks5:\/\/127\.0\.0\.1:1080: proxy scheme socks5 is not supported/);
    await expect(startSluice(config(), { lookup, env: { HTTP_PROXY: proxyA.url, all_proxy: 'socks5h://127.0.0.1:1080' } })).rejects.toThrow(/all_proxy/);
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
