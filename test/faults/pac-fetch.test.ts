// Fault: the PAC URL fails (issue #5, item 3; docs/routes.md: keep the last good PAC when a
// refresh fails; no PAC at all is an error). A PAC server that answers 500 or never answers leaves Sluice up, with every PAC
// hop refused as pac_unavailable 502 (never DIRECT); a refresh that fails keeps the last good script.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startPacServer, type PacServer } from '../support/fault-servers.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';
import { expectResourcesSettle, expectSluiceIdle, resourceCounts, type ResourceCounts } from './leak-check.js';

const TOKEN = 'tok-pac-fetch';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const PAC_TIMEOUT_MS = 100; // the fetch is bounded by 10 × timeoutMs
const DIRECT_PAC = 'function FindProxyForURL(url, host) { return "DIRECT"; }';

describe('PAC fetch failures', () => {
  let echo: EchoServer;
  let pac: PacServer;
  let sluice: TestSluice | undefined;
  let baseline: ResourceCounts;
  const logErrors: string[] = [];

  beforeEach(async () => {
    baseline = resourceCounts();
    logErrors.length = 0;
    // PAC failures are warnings (the route fails closed and the source retries), faults would be errors: both kept.
    vi.spyOn(silentLog, 'error').mockImplementation((...args: unknown[]) => void logErrors.push(String(args[1])));
    vi.spyOn(silentLog, 'warn').mockImplementation((...args: unknown[]) => void logErrors.push(String(args[1])));
    echo = await startTcpEchoServer();
  });
  afterEach(async () => {
    await sluice?.close();
    sluice = undefined;
    await pac?.close();
    await echo?.close();
    vi.restoreAllMocks();
    // The PAC worker, its refresh timer, the fetch sockets and the fixtures are all gone.
    await expectResourcesSettle(baseline, { label: 'after the PAC test', timeoutMs: 5000 });
  });

  async function start(refreshMs?: number): Promise<TestSluice> {
    sluice = await startSluice(
      {
        route: { mode: 'pac', pac: { url: pac.url, timeoutMs: PAC_TIMEOUT_MS, ...(refreshMs === undefined ? {} : { refreshMs }) } },
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`https://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
    return sluice;
  }

  async function expectPacUnavailable(s: TestSluice): Promise<void> {
    const t = await openConnectTunnel(s.port, `echo.test:${echo.port}`, AUTH);
    t.socket.destroy();
    expect(t.status).toBe(502);
    expect(t.head).toContain('Proxy-Status: sluice; error=proxy_configuration_error; details="pac_unavailable"');
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'pac_unavailable', decision: 'deny' });
    expect(echo.connections, 'no DIRECT fall-back').toBe(0);
  }

  it('a PAC URL answering 500 leaves Sluice up and every hop refused with pac_unavailable', async () => {
    pac = await startPacServer({ kind: 'status', status: 500 });
    const s = await start();
    expect(pac.fetches).toBe(1);
    expect(logErrors.some((m) => m.includes('HTTP 500')), logErrors.join('\n')).toBe(true);
    await expectPacUnavailable(s);
    await expectPacUnavailable(s); // and again: the process is still serving
    await expectSluiceIdle(s, 'after pac_unavailable');
  });

  it('a PAC URL that never answers is abandoned after 10 × timeoutMs; hops are refused with pac_unavailable', async () => {
    pac = await startPacServer({ kind: 'hang' });
    const started = performance.now();
    const s = await start();
    const startMs = performance.now() - started;
    expect(startMs, 'startup waits for the PAC fetch bound, not forever').toBeLessThan(PAC_TIMEOUT_MS * 10 + 2000);
    expect(logErrors.some((m) => /cannot load PAC/.test(m)), logErrors.join('\n')).toBe(true);
    await expectPacUnavailable(s);
    await expectSluiceIdle(s, 'after pac_unavailable');
  });

  it('a refresh that fails (500, then a hang) keeps the last good script in use', async () => {
    pac = await startPacServer({ kind: 'script', body: DIRECT_PAC });
    const s = await start(150);
    const first = await openConnectTunnel(s.port, `echo.test:${echo.port}`, AUTH);
    expect(first.status).toBe(200);
    expect(await roundTrip(first.socket, 'pac-direct')).toBe('pac-direct');
    first.socket.destroy();

    pac.set({ kind: 'status', status: 500 });
    const fetched = pac.fetches;
    await waitUntil(() => pac.fetches >= fetched + 2, { timeoutMs: 3000, label: 'two failed refreshes' });
    expect(logErrors.some((m) => m.includes('keeping the last good PAC')), logErrors.join('\n')).toBe(true);
    const second = await openConnectTunnel(s.port, `echo.test:${echo.port}`, AUTH);
    expect(second.status).toBe(200);
    second.socket.destroy();

    pac.set({ kind: 'hang' });
    const hung = pac.fetches;
    await waitUntil(() => pac.fetches >= hung + 1, { timeoutMs: 3000, label: 'a hanging refresh' });
    const third = await openConnectTunnel(s.port, `echo.test:${echo.port}`, AUTH);
    expect(third.status).toBe(200);
    third.socket.destroy();
    expect(s.decisions().filter((d) => d.reason === 'granted').every((d) => d.route === 'pac DIRECT')).toBe(true);
    await expectSluiceIdle(s, 'after the refreshes');
  });
});
