// Upstream failover (issue 17 item 7, docs/routes.md#failover): route.proxy lists several corporate
// proxies, tried in order with back-off. Threats: a dead first proxy that makes Sluice go DIRECT (or
// lets the origin see a direct connection) instead of through the second (principle A2 in
// docs/principles.md; docs/scenarios.md scenario 7), a 407 from the first proxy "failed over" to a
// second one the operator never meant to carry that traffic, an audit record that names a proxy other
// than the one that carried the hop, and a proxy that came back never being used again. Real clients
// (curl) through a real Squid and a fixture CONNECT proxy, loopback only.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { loadCheckedConfig } from '../../src/app.js';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { startFixtureConnectProxy, type FixtureConnectProxy } from '../support/fault-servers.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { unusedPort } from '../support/ports.js';
import { waitUntil, withTimeout } from '../support/wait.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-failover';
const ORIGIN_PKI = createTestPki(['origin.test']);

/** A TCP relay listening on `port` to the fixture proxy behind it: the "first proxy came back" on its old port. */
async function relayOnPort(port: number, to: number): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: to });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => sockets.delete(s));
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('route.proxy failover through real proxies', () => {
  let https: Origin;
  let http: Origin;
  let squid: Squid;
  let authSquid: Squid;
  let dir: string;
  let creds: string;
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    https = await startHttpsOrigin(ORIGIN_PKI);
    http = await startHttpOrigin();
    [squid, authSquid] = await Promise.all([
      startSquid({ hosts: { 'origin.test': '127.0.0.1' } }),
      startSquid({ hosts: { 'origin.test': '127.0.0.1' }, users: { alice: 's3cret' } }),
    ]);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-failover-'));
    creds = path.join(dir, 'wrong.txt');
    fs.writeFileSync(creds, 'alice:wrong\n');
  }, 60_000);
  afterEach(async () => {
    await Promise.all(cleanups.splice(0).map((c) => c()));
  });
  afterAll(async () => {
    await Promise.all([squid?.close(), authSquid?.close(), https?.close(), http?.close()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function sluiceWith(proxy: unknown): Promise<TestSluice> {
    const s = await startSluice({
      route: { mode: 'proxy', proxy },
      grants: [{ id: 'g', tokenSha256: tokenHash(TOKEN), destinations: [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`] }],
    });
    cleanups.push(() => s.close());
    return s;
  }
  async function fixtureProxy(): Promise<FixtureConnectProxy> {
    const p = await startFixtureConnectProxy();
    cleanups.push(() => p.close());
    return p;
  }
  const via = (s: TestSluice): string => `http://g:${TOKEN}@127.0.0.1:${s.port}`;
  const curlTunnel = async (s: TestSluice, pathName: string): Promise<ReturnType<typeof curlHeadersAndBody>> =>
    curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}${pathName}`])).stdout);
  const directConnections = (): number => https.connections + http.connections;

  it('first proxy down: the hop goes through the second, whose name is in the audit record (absolute-form too)', async () => {
    const dead = `http://127.0.0.1:${await unusedPort()}`;
    const s = await sluiceWith([{ url: dead }, { url: squid.url }]);
    const first = await curlTunnel(s, '/one');
    expect(first.body).toBe('origin:GET:/one');
    await waitForLog(squid, (entries) => entries.some((e) => e.method === 'CONNECT' && e.url === `origin.test:${https.port}`));
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', route: `proxy ${dead}, ${squid.url}`, upstream: squid.url, attested: false });
    // Plain HTTP is forwarded in absolute form through the same failover.
    const plain = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://origin.test:${http.port}/plain`])).stdout);
    expect(plain.body).toBe('origin:GET:/plain');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', upstream: squid.url });
  });

  it('every proxy down: refused with upstream_unreachable, never DIRECT (the origin sees no connection), then refused at once while both back off', async () => {
    const deadA = `http://127.0.0.1:${await unusedPort()}`;
    const deadB = `http://127.0.0.1:${await unusedPort()}`;
    const s = await sluiceWith([{ url: deadA }, { url: deadB }]);
    const before = directConnections();
    const tunnel = await curlTunnel(s, '/');
    expect(tunnel.blocks[0]?.status).toBe(502);
    expect(tunnel.blocks[0]?.headers['proxy-status']).toContain('details="upstream_unreachable"');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'upstream_unreachable', upstream: deadB });
    const plain = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://origin.test:${http.port}/`])).stdout);
    expect(plain.status).toBe(502);
    expect(plain.headers['proxy-status']).toContain('details="upstream_unreachable"');
    const skipped = s.decisions().at(-1);
    expect(skipped).toMatchObject({ reason: 'upstream_unreachable', upstream: null });
    expect(skipped?.detail).toContain('backing off');
    expect(directConnections()).toBe(before);
  });

  it('the first proxy comes back: used again once its back-off has passed', async () => {
    const port = await unusedPort();
    const first = `http://127.0.0.1:${port}`;
    const second = await fixtureProxy();
    const s = await sluiceWith([{ url: first }, { url: second.url }]);
    expect((await curlTunnel(s, '/a')).body).toBe('origin:GET:/a');
    expect(s.decisions().at(-1)).toMatchObject({ upstream: second.url });
    // The first proxy returns on its old port (a relay to a fresh fixture proxy).
    const revived = await fixtureProxy();
    const relay = await relayOnPort(port, revived.port);
    cleanups.push(() => relay.close());
    // Within its back-off (1 s) hops keep going through the second; then the next hop checks the first.
    await waitUntil(
      async () => {
        expect((await curlTunnel(s, '/b')).body).toBe('origin:GET:/b');
        return s.decisions().at(-1)?.upstream === first;
      },
      { timeoutMs: 8000, label: 'a hop carried by the revived first proxy' },
    );
    expect(revived.targets).toContain(`origin.test:${https.port}`);
  }, 20_000);

  it('a 407 from the first proxy is an answer: the hop ends with upstream_auth_required and the second proxy sees nothing', async () => {
    const second = await fixtureProxy();
    const s = await sluiceWith([{ url: authSquid.url, credentialsFile: creds }, { url: second.url }]);
    const before = directConnections();
    const tunnel = await curlTunnel(s, '/');
    expect(tunnel.blocks[0]?.status).toBe(502);
    expect(tunnel.blocks[0]?.headers['proxy-status']).toContain('details="upstream_auth_required"');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'upstream_auth_required', upstream: authSquid.url });
    expect(second.targets).toEqual([]);
    expect(directConnections()).toBe(before);
    // Not marked down: the next hop asks the first proxy again (and gets the 407 again).
    await curlTunnel(s, '/');
    expect(second.targets).toEqual([]);
  });

  it('a proxy that dies under load is failed over and live traffic continues through the second', async () => {
    const first = await fixtureProxy();
    const second = await fixtureProxy();
    const s = await sluiceWith([{ url: first.url }, { url: second.url }]);
    expect((await curlTunnel(s, '/1')).body).toBe('origin:GET:/1');
    expect(s.decisions().at(-1)).toMatchObject({ upstream: first.url });
    await withTimeout(first.kill(), 5000, 'first proxy killed');
    expect((await curlTunnel(s, '/2')).body).toBe('origin:GET:/2');
    expect(s.decisions().at(-1)).toMatchObject({ upstream: second.url });
    expect(second.targets).toEqual([`origin.test:${https.port}`]);
  });
});

describe('route.proxy forms and check-config', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-failover-cfg-'));
    fs.writeFileSync(path.join(dir, 'creds.txt'), 'alice:s3cret\n');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function check(proxy: unknown): Promise<Awaited<ReturnType<typeof loadCheckedConfig>>> {
    const file = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(file, stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state: path.join(dir, 'state'), audit: { file: 'stderr' }, route: { mode: 'proxy', proxy } }));
    return loadCheckedConfig(file, { cwd: dir, env: {} });
  }

  it('accepts the single form and the list form, resolving each entry\'s files against the config', async () => {
    const single = await check({ url: 'http://127.0.0.1:3128', credentialsFile: 'creds.txt' });
    expect(single.ok).toBe(true);
    const list = await check([{ url: 'http://127.0.0.1:3128', credentialsFile: 'creds.txt' }, { url: 'https://127.0.0.1:3129' }]);
    expect(list.ok).toBe(true);
    if (list.ok) expect(list.config.route.proxy).toEqual([expect.objectContaining({ credentialsFile: path.join(dir, 'creds.txt') }), expect.objectContaining({ url: 'https://127.0.0.1:3129' })]);
  });

  it.each([
    ['a bad URL in the second entry', [{ url: 'http://127.0.0.1:3128' }, { url: 'socks5://127.0.0.1:1080' }], ['route.proxy[1].url']],
    ['credentials in a URL and an unreadable file, both named in one pass', [{ url: 'http://u:p@127.0.0.1:3128' }, { url: 'http://127.0.0.1:3129', credentialsFile: 'missing.txt' }], ['route.proxy[0].url', 'route.proxy[1].credentialsFile']],
    ['an unknown key in an entry', [{ url: 'http://127.0.0.1:3128' }, { url: 'http://127.0.0.1:3129', credentialFile: 'x' }], ['route.proxy[1]']],
    ['an empty list', [], ['route.proxy']],
    ['the single form with a bad URL', { url: 'ftp://127.0.0.1:21' }, ['route.proxy.url']],
  ])('%s is reported by path', async (_name, proxy, paths) => {
    const result = await check(proxy);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const reported = result.issues.map((i) => i.path);
    for (const p of paths) expect(reported.some((r) => r === p || r.startsWith(`${p}.`))).toBe(true);
    // Never the credentials of a URL in a message.
    expect(JSON.stringify(result.issues)).not.toContain('u:p@');
  });
});
