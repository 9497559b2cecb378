// Fault: DNS that never answers, fails (SERVFAIL) or has no address (issue #5, item 3). Each ends only
// the affected hop with its reason code (dns_timeout 504 within dns.timeoutMs, dns_failed 502,
// dns_no_address 502), the process keeps serving, and nothing is left running. First through the
// LookupAll port, then through the real resolver path (dns.servers → node:dns) against a UDP DNS fixture.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startApp, type SluiceApp } from '../../src/app.js';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../src/audit/index.js';
import { parseConfigText } from '../../src/config/index.js';
import { ProxyError, type LookupAll } from '../../src/core/index.js';
import { startDnsFixture, type DnsFixture } from '../support/fault-servers.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, rawRequest, parseResponseHead, type ConnectTunnel, roundTrip } from '../support/raw-client.js';
import { OWN_UID, silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { expectResourcesSettle, expectSluiceIdle, resourceCounts } from './leak-check.js';

const TOKEN = 'tok-dns';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const TIMEOUT_MS = 300;
// The bound is dns.timeoutMs; the margin covers scheduling on a loaded CI machine, not a second lookup.
const MARGIN_MS = 700;

async function timedConnect(port: number, target: string): Promise<{ tunnel: ConnectTunnel; ms: number }> {
  const started = performance.now();
  const tunnel = await openConnectTunnel(port, target, AUTH);
  const ms = performance.now() - started;
  if (tunnel.status !== 200) tunnel.socket.destroy();
  return { tunnel, ms };
}

function grant(echoPort: number, names: readonly string[]): Record<string, unknown> {
  return {
    id: 'd',
    tokenSha256: tokenHash(TOKEN),
    destinations: names.flatMap((n) => [`https://${n}:${echoPort}`, `http://${n}:${echoPort}`]),
    allowAddressClasses: ['loopback'],
  };
}

describe('DNS faults through the LookupAll port', () => {
  let echo: EchoServer;
  let sluice: TestSluice;
  const calls = { hang: 0 };

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    const table = tableLookup({ 'ok.test': ['127.0.0.1'] });
    const lookup: LookupAll = (host, signal) => {
      if (host === 'hang.test') {
        calls.hang += 1;
        return new Promise(() => undefined); // never settles, ignores its signal
      }
      if (host === 'servfail.test') return Promise.reject(new ProxyError('ERR_DNS_FAILED', 'lookup failed (ESERVFAIL)'));
      return table(host, signal);
    };
    sluice = await startSluice(
      { dns: { timeoutMs: TIMEOUT_MS }, grants: [grant(echo.port, ['hang.test', 'servfail.test', 'ok.test', 'none.test'])] },
      { lookup },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  it('a lookup that never resolves ends the hop with dns_timeout 504 within dns.timeoutMs, for CONNECT and forward', async () => {
    const baseline = resourceCounts();
    const { tunnel, ms } = await timedConnect(sluice.port, `hang.test:${echo.port}`);
    expect(tunnel.status).toBe(504);
    expect(tunnel.head).toContain('Proxy-Status: sluice; error=dns_timeout; details="dns_timeout"');
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);

    const started = performance.now();
    const res = await rawRequest(sluice.port, `GET http://hang.test:${echo.port}/ HTTP/1.1\r\nHost: hang.test:${echo.port}\r\nProxy-Authorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`);
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    expect(parseResponseHead(res.data)?.status).toBe(504);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'dns_timeout', status: 504 });
    expect(echo.connections, 'nothing was dialed').toBe(0);

    await expectSluiceIdle(sluice, 'after dns_timeout');
    await expectResourcesSettle(baseline, { label: 'dns_timeout' });
  });

  it('a failed lookup (SERVFAIL) is dns_failed 502, an unknown name dns_no_address 502, and the next hop still works', async () => {
    const baseline = resourceCounts();
    const failed = await timedConnect(sluice.port, `servfail.test:${echo.port}`);
    expect(failed.tunnel.status).toBe(502);
    expect(failed.tunnel.head).toContain('details="dns_failed"');
    const none = await timedConnect(sluice.port, `none.test:${echo.port}`);
    expect(none.tunnel.status).toBe(502);
    expect(none.tunnel.head).toContain('details="dns_no_address"');

    const ok = await timedConnect(sluice.port, `ok.test:${echo.port}`);
    expect(ok.tunnel.status).toBe(200);
    expect(await roundTrip(ok.tunnel.socket, 'still-up')).toBe('still-up');
    ok.tunnel.socket.destroy();
    await expectSluiceIdle(sluice, 'after dns_failed');
    await expectResourcesSettle(baseline, { label: 'dns_failed' });
  });
});

interface RealDnsSluice {
  readonly app: SluiceApp;
  readonly port: number;
  readonly records: AuditRecordV1[];
  decisions(): DecisionRecordV1[];
  closes(): CloseRecordV1[];
  close(): Promise<void>;
}

/** startSluice without an injected lookup: the config's dns.servers reach node:dns for real. */
async function startWithRealResolver(config: Record<string, unknown>): Promise<RealDnsSluice> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-dns-'));
  const parsed = parseConfigText(
    stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state: stateDir, ...config }),
    path.join(stateDir, 'sluice.yaml'),
    stateDir,
  );
  if (!parsed.ok) throw new Error(parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; '));
  const records: AuditRecordV1[] = [];
  const app = await startApp(parsed.config, { env: {}, cwd: stateDir, uid: OWN_UID, audit: { write: (r) => void records.push(r), flush: () => Promise.resolve() }, log: silentLog });
  const address = app.listeners[0]?.address ?? '';
  return {
    app,
    port: Number(address.slice(address.lastIndexOf(':') + 1)),
    records,
    decisions: () => records.filter((r): r is DecisionRecordV1 => r.kind === 'decision'),
    closes: () => records.filter((r): r is CloseRecordV1 => r.kind === 'close'),
    close: async () => {
      await app.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

describe('DNS faults through the real resolver (dns.servers → UDP fixture on 127.0.0.1)', () => {
  let echo: EchoServer;
  let dns: DnsFixture;
  let sluice: RealDnsSluice;
  const logErrors: unknown[][] = [];

  beforeAll(async () => {
    vi.spyOn(silentLog, 'error').mockImplementation((...args: unknown[]) => void logErrors.push(args));
    echo = await startTcpEchoServer();
    dns = await startDnsFixture({
      'good.test': { kind: 'address', addresses: ['127.0.0.1'], ttlSeconds: 30 },
      'servfail.test': { kind: 'servfail' },
      'silent.test': { kind: 'drop' },
    });
    sluice = await startWithRealResolver({
      dns: { servers: [dns.server], timeoutMs: TIMEOUT_MS },
      grants: [grant(echo.port, ['good.test', 'servfail.test', 'silent.test', 'nx.test'])],
    });
  });
  afterAll(async () => {
    await sluice?.close();
    await dns?.close();
    await echo?.close();
    vi.restoreAllMocks();
  });

  it('resolves an A record, dials the answer and serves the second hop from the cache within its TTL', async () => {
    const first = await timedConnect(sluice.port, `good.test:${echo.port}`);
    expect(first.tunnel.status).toBe(200);
    expect(await roundTrip(first.tunnel.socket, 'resolved')).toBe('resolved');
    first.tunnel.socket.destroy();
    const queried = dns.queries.filter((q) => q.startsWith('good.test ')).length;
    expect(queried).toBeGreaterThanOrEqual(1);
    const second = await timedConnect(sluice.port, `good.test:${echo.port}`);
    expect(second.tunnel.status).toBe(200);
    second.tunnel.socket.destroy();
    expect(dns.queries.filter((q) => q.startsWith('good.test ')).length, 'cached within the TTL').toBe(queried);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', pinned: '127.0.0.1', addresses: [{ address: '127.0.0.1', class: 'loopback', allowed: true }] });
  });

  it('SERVFAIL is dns_failed 502 and NXDOMAIN is dns_no_address 502', async () => {
    const failed = await timedConnect(sluice.port, `servfail.test:${echo.port}`);
    expect(failed.tunnel.status).toBe(502);
    expect(failed.tunnel.head).toContain('details="dns_failed"');
    expect(dns.queries).toContain('servfail.test A');
    const nx = await timedConnect(sluice.port, `nx.test:${echo.port}`);
    expect(nx.tunnel.status).toBe(502);
    expect(nx.tunnel.head).toContain('details="dns_no_address"');
  });

  it('a server that never answers is dns_timeout 504 within dns.timeoutMs, and the process keeps serving', async () => {
    const baseline = resourceCounts();
    const { tunnel, ms } = await timedConnect(sluice.port, `silent.test:${echo.port}`);
    expect(tunnel.status).toBe(504);
    expect(tunnel.head).toContain('details="dns_timeout"');
    expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    expect(dns.queries).toContain('silent.test A');
    console.log(`[faults/dns] real resolver: silent server → dns_timeout after ${Math.round(ms)} ms (dns.timeoutMs ${TIMEOUT_MS})`);

    const ok = await timedConnect(sluice.port, `good.test:${echo.port}`);
    expect(ok.tunnel.status).toBe(200);
    ok.tunnel.socket.destroy();
    await expectSluiceIdle(sluice, 'after the silent server');
    // c-ares finishes its own query timer for the dropped query shortly after.
    await expectResourcesSettle(baseline, { label: 'real resolver timeout', timeoutMs: 3000 });
    expect(logErrors).toEqual([]);
  });
});
