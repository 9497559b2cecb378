// /healthz and /readyz answer alike on the admin socket and on the metrics listener (UX review
// 2026-12-04 finding 9): the same status, content type and body, byte for byte, in the shape docs/admin-api.md and
// docs/fleet.md document (`{"status":"ready"|"not_ready","detail":…}`), whichever a balancer probes:
// ready, draining on shutdown, and cut off from the shared ledger store past ledger.maxStaleMs.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { redisSkip, startRedis, type TestRedis } from '../support/redis.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const TOKEN = 'tok-probes';

interface Probe {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly body: string;
}

function get(target: { socketPath: string } | { host: string; port: number }, route: string): Promise<Probe> {
  return withTimeout(
    new Promise<Probe>((resolve, reject) => {
      const req = http.request({ ...target, path: route, method: 'GET', agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    }),
    3000,
    `GET ${route}`,
  );
}

describe('/healthz and /readyz: one answer on the admin socket and the metrics listener', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function start(extra: Record<string, unknown> = {}): Promise<{ sluice: TestSluice; echo: EchoServer; both: (route: string) => Promise<[Probe, Probe]> }> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-probes-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const echo = await startTcpEchoServer();
    cleanups.push(() => echo.close());
    const socketPath = path.join(dir, 'admin.sock');
    const sluice = await startSluice(
      {
        admin: { listen: `unix:${socketPath}`, metrics: '127.0.0.1:0' },
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
        ...extra,
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
    cleanups.push(() => sluice.close());
    const metrics = sluice.app.metricsAddress ?? '';
    const port = Number(metrics.slice(metrics.lastIndexOf(':') + 1));
    expect(port).toBeGreaterThan(0);
    const both = (route: string): Promise<[Probe, Probe]> => Promise.all([get({ socketPath }, route), get({ host: '127.0.0.1', port }, route)]);
    return { sluice, echo, both };
  }

  it('ready, then draining: the same status and body on both', async () => {
    const { sluice, echo, both } = await start();
    const [adminReady, metricsReady] = await both('/readyz');
    expect(adminReady).toEqual({ status: 200, contentType: 'application/json; charset=utf-8', body: '{"status":"ready","detail":"listening"}\n' });
    expect(metricsReady).toEqual(adminReady);
    const [adminHealth, metricsHealth] = await both('/healthz');
    expect(adminHealth).toEqual({ status: 200, contentType: 'application/json; charset=utf-8', body: '{"status":"ok"}\n' });
    expect(metricsHealth).toEqual(adminHealth);

    // A live tunnel holds the drain open while both listeners are asked.
    const tunnel = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${TOKEN}` });
    cleanups.push(() => tunnel.socket.destroy());
    expect(tunnel.status).toBe(200);
    const closing = sluice.app.close(10_000);
    const [adminDraining, metricsDraining] = await both('/readyz');
    expect(adminDraining).toEqual({ status: 503, contentType: 'application/json; charset=utf-8', body: '{"status":"not_ready","detail":"draining: shutting down"}\n' });
    expect(metricsDraining).toEqual(adminDraining);
    expect(await roundTrip(tunnel.socket, 'still')).toBe('still');
    tunnel.socket.end();
    await withTimeout(closing, 5000, 'the drain ends with the tunnel');
  });

  describe.skipIf(redisSkip())('with the shared ledger store', () => {
    let redis: TestRedis | null = null;
    afterEach(async () => {
      await redis?.stop();
      redis = null;
    });

    it('past ledger.maxStaleMs without the store: the same 503 and body on both, and 200 on both once it is back', async () => {
      redis = await startRedis();
      const { sluice, both } = await start({ ledger: { store: 'redis', redis: { url: redis.url, keyPrefix: 'probes:' }, maxStaleMs: 200 } });
      const [adminReady, metricsReady] = await both('/readyz');
      expect(adminReady.status).toBe(200);
      expect(metricsReady).toEqual(adminReady);

      await redis.kill();
      await waitUntil(() => !sluice.app.runtime.ledgerFresh(), { timeoutMs: 5000, label: 'the instance goes stale' });
      const [adminStale, metricsStale] = await both('/readyz');
      expect(adminStale).toEqual({ status: 503, contentType: 'application/json; charset=utf-8', body: '{"status":"not_ready","detail":"the shared ledger store is out of reach (ledger.maxStaleMs)"}\n' });
      expect(metricsStale).toEqual(adminStale);

      await redis.start();
      await waitUntil(() => sluice.app.runtime.ledgerFresh(), { timeoutMs: 5000, label: 'the instance is fresh again' });
      const [adminBack, metricsBack] = await both('/readyz');
      expect(adminBack.status).toBe(200);
      expect(metricsBack).toEqual(adminBack);
    });
  });
});
