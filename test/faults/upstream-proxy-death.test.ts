// Fault: the upstream proxy dies mid-tunnel (issue #5, item 3; docs/routes.md). The live tunnel
// through it ends with a recorded close reason, a new hop fails closed with
// upstream_unreachable (never DIRECT instead), and the process keeps serving. Run against a tiny fixture
// CONNECT proxy (killed with RST) and against a real Squid (stopped), when Squid is installed.
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startFixtureConnectProxy, type FixtureConnectProxy } from '../support/fault-servers.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { squidAvailable, startSquid, type Squid } from '../support/squid.js';
import { waitUntil, withTimeout } from '../support/wait.js';
import { expectResourcesSettle, expectSluiceIdle, resourceCounts } from './leak-check.js';

const TOKEN = 'tok-upstream-death';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

/** The client's view of a tunnel end: resolves once the socket closes; a FIN is answered with our own. */
function endOf(socket: net.Socket): Promise<void> {
  socket.once('end', () => socket.end());
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

async function startProxySluice(proxyUrl: string, echo: EchoServer): Promise<TestSluice> {
  return startSluice(
    {
      route: { mode: 'proxy', proxy: { url: proxyUrl } },
      timeouts: { upstreamMs: 2000 },
      grants: [{ id: 'u', tokenSha256: tokenHash(TOKEN), destinations: [`https://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
    },
    { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
  );
}

describe('upstream proxy dies mid-tunnel (fixture CONNECT proxy)', () => {
  let echo: EchoServer;
  let proxy: FixtureConnectProxy;
  let sluice: TestSluice;
  const logErrors: unknown[][] = [];

  beforeAll(async () => {
    vi.spyOn(silentLog, 'error').mockImplementation((...args: unknown[]) => void logErrors.push(args));
    echo = await startTcpEchoServer();
    proxy = await startFixtureConnectProxy();
    sluice = await startProxySluice(proxy.url, echo);
  });
  afterAll(async () => {
    await sluice?.close();
    await Promise.all([proxy?.close(), echo?.close()]);
    vi.restoreAllMocks();
  });

  it('ends the live tunnel with origin_reset, refuses the next hop with upstream_unreachable, and keeps serving', async () => {
    const baseline = resourceCounts();
    const t = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    expect(t.status).toBe(200);
    expect(proxy.targets).toEqual([`echo.test:${echo.port}`]); // the canonical name went upstream
    expect(await roundTrip(t.socket, 'through-proxy')).toBe('through-proxy');
    const ended = endOf(t.socket);

    await proxy.kill();
    await withTimeout(ended, 3000, 'client side of the tunnel closes after the proxy died');
    await waitUntil(() => sluice.closes().length === 1, { timeoutMs: 3000, label: 'close record' });
    expect(sluice.closes()[0]).toMatchObject({ request: 'connect', canonical: `echo.test:${echo.port}`, closedBy: 'origin_reset', bytesUp: 13, bytesDown: 13 });

    const next = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    next.socket.destroy();
    expect(next.status).toBe(502);
    expect(next.head).toContain('details="upstream_unreachable"');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'upstream_unreachable', upstream: proxy.url });
    expect(echo.connections, 'no DIRECT fall-back: the echo server saw only the proxied tunnel').toBe(1);

    await expectSluiceIdle(sluice, 'after the proxy died');
    await expectResourcesSettle(baseline, { label: 'proxy death', timeoutMs: 5000 });
    expect(logErrors).toEqual([]);
  });
});

describe.skipIf(!squidAvailable() && process.env['CI'] !== 'true')('upstream proxy dies mid-tunnel (real Squid)', () => {
  let echo: EchoServer;
  let squid: Squid | undefined;
  let sluice: TestSluice;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    squid = await startSquid({ hosts: { 'echo.test': '127.0.0.1' } });
    sluice = await startProxySluice(squid.url, echo);
  }, 30_000);
  afterAll(async () => {
    await sluice?.close();
    await squid?.close();
    await echo?.close();
  });

  it('ends the live tunnel when Squid stops, refuses the next hop with upstream_unreachable, and keeps serving', async () => {
    const running = squid;
    if (running === undefined) throw new Error('squid did not start');
    const url = running.url;
    const t = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    expect(t.status).toBe(200);
    expect(await roundTrip(t.socket, 'through-squid')).toBe('through-squid');
    const ended = endOf(t.socket);

    await running.close(); // SIGTERM (shutdown_lifetime 0), SIGKILL after 5 s
    squid = undefined;
    await withTimeout(ended, 8000, 'client side of the tunnel closes after Squid stopped');
    await waitUntil(() => sluice.closes().length === 1, { timeoutMs: 3000, label: 'close record' });
    const close = sluice.closes()[0];
    console.log(`[faults/upstream-proxy-death] Squid stopped mid-tunnel: closedBy ${close?.closedBy}`);
    expect(['origin_closed', 'origin_reset'], `closedBy ${close?.closedBy}`).toContain(close?.closedBy);
    expect(close).toMatchObject({ request: 'connect', bytesUp: 13, bytesDown: 13 });

    const next = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    next.socket.destroy();
    expect(next.status).toBe(502);
    expect(next.head).toContain('details="upstream_unreachable"');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'upstream_unreachable', upstream: url });
    await expectSluiceIdle(sluice, 'after Squid stopped');
  }, 30_000);
});
