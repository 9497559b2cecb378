// Fault: the origin resets the connection mid-stream (issue #5, item 3). For a forwarded response the
// hop ends with close reason response_error (or origin_failed before any response head); for a tunnel it
// ends with origin_reset. Only that connection ends: a bystander tunnel keeps echoing, the process keeps
// serving, and no socket or timer is left behind.
import type net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { startResettingTcpOrigin, type ResettingOrigin } from '../support/fault-servers.js';
import { openConnectTunnel, parseResponseHead, rawRequest, roundTrip } from '../support/raw-client.js';
import { silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';
import { expectResourcesSettle, expectSluiceIdle, resourceCounts, type ResourceCounts } from './leak-check.js';

const TOKEN = 'tok-reset';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

describe('origin resets mid-stream', () => {
  let origin: Origin;
  let echo: EchoServer;
  let resetter: ResettingOrigin;
  let sluice: TestSluice;
  let baseline: ResourceCounts;
  const logErrors: unknown[][] = [];

  beforeAll(async () => {
    vi.spyOn(silentLog, 'error').mockImplementation((...args: unknown[]) => void logErrors.push(args));
    origin = await startHttpOrigin({
      handler: (req, res) => {
        if (req.url === '/reset-mid-body') {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100_000 });
          res.write('x'.repeat(1000));
          setTimeout(() => req.socket.resetAndDestroy(), 50);
        } else if (req.url === '/reset-before-head') {
          req.socket.resetAndDestroy();
        } else {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2, connection: 'close' });
          res.end('ok');
        }
      },
    });
    echo = await startTcpEchoServer();
    resetter = await startResettingTcpOrigin({ reply: 'partial-reply', resetAfterMs: 30 });
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'r',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`http://origin.test:${origin.port}`, `https://reset.test:${resetter.port}`, `https://echo.test:${echo.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup: tableLookup({ 'origin.test': ['127.0.0.1'], 'reset.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await Promise.all([origin?.close(), echo?.close(), resetter?.close()]);
    vi.restoreAllMocks();
  });
  beforeEach(() => {
    baseline = resourceCounts();
  });

  async function bystander(): Promise<net.Socket> {
    const t = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    expect(t.status).toBe(200);
    expect(await roundTrip(t.socket, 'before')).toBe('before');
    return t.socket;
  }

  async function expectStillServing(by: net.Socket): Promise<void> {
    expect(by.destroyed, 'the bystander tunnel was not touched').toBe(false);
    expect(await roundTrip(by, 'after')).toBe('after');
    const ok = await rawRequest(sluice.port, `GET http://origin.test:${origin.port}/ok HTTP/1.1\r\nHost: origin.test:${origin.port}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`);
    expect(ok.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(ok.text.endsWith('ok')).toBe(true);
  }

  it('a forwarded response the origin resets mid-body ends that hop with response_error, and nothing else', async () => {
    const by = await bystander();
    const res = await rawRequest(
      sluice.port,
      `GET http://origin.test:${origin.port}/reset-mid-body HTTP/1.1\r\nHost: origin.test:${origin.port}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`,
      { untilClose: true },
    );
    const head = parseResponseHead(res.data);
    expect(head?.status).toBe(200);
    expect(res.closed).toBe(true);
    expect(res.data.length - (head?.headLength ?? 0), 'the client sees a truncated body, never a complete one').toBeLessThan(100_000);
    await waitUntil(() => sluice.closes().some((c) => c.canonical === `origin.test:${origin.port}` && c.closedBy === 'response_error'), { timeoutMs: 3000, label: 'close record response_error' });
    expect(sluice.closes().find((c) => c.closedBy === 'response_error')).toMatchObject({ request: 'forward', status: 200 });

    await expectStillServing(by);
    by.destroy();
    await expectSluiceIdle(sluice, 'after the reset');
    await expectResourcesSettle(baseline, { label: 'forward reset', timeoutMs: 6000 });
    expect(logErrors).toEqual([]);
  });

  it('an origin that resets before its response head is answered 502 origin_failed, and the connection stays usable', async () => {
    const by = await bystander();
    const res = await rawRequest(
      sluice.port,
      `GET http://origin.test:${origin.port}/reset-before-head HTTP/1.1\r\nHost: origin.test:${origin.port}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`,
    );
    const head = parseResponseHead(res.data);
    expect(head?.status).toBe(502);
    expect(head?.headers['proxy-status']).toBe('sluice; error=http_response_incomplete; details="origin_failed"');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'origin_failed', decision: 'deny', canonical: `origin.test:${origin.port}` });

    await expectStillServing(by);
    by.destroy();
    await expectSluiceIdle(sluice, 'after the reset');
    await expectResourcesSettle(baseline, { label: 'reset before head', timeoutMs: 6000 });
    expect(logErrors).toEqual([]);
  });

  it('a tunnel whose origin resets ends with origin_reset; the client connection closes and the bystander lives', async () => {
    const by = await bystander();
    const t = await openConnectTunnel(sluice.port, `reset.test:${resetter.port}`, AUTH);
    expect(t.status).toBe(200);
    const closed = new Promise<void>((resolve) => t.socket.once('close', () => resolve()));
    expect(await roundTrip(t.socket, 'hello')).toBe('partial-reply');
    await withTimeout(closed, 3000, 'client side of the reset tunnel closes');
    await waitUntil(() => sluice.closes().some((c) => c.canonical === `reset.test:${resetter.port}`), { timeoutMs: 3000, label: 'close record' });
    expect(sluice.closes().find((c) => c.canonical === `reset.test:${resetter.port}`)).toMatchObject({ request: 'connect', closedBy: 'origin_reset', bytesUp: 5, bytesDown: 13 });
    expect(resetter.live).toBe(0);

    await expectStillServing(by);
    by.destroy();
    await expectSluiceIdle(sluice, 'after the reset');
    await expectResourcesSettle(baseline, { label: 'tunnel reset', timeoutMs: 6000 });
    expect(logErrors).toEqual([]);
  });
});
