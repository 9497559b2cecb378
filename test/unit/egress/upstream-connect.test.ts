// The upstream proxy connector's failure report, for the operational log: every way an upstream hop
// fails (nothing listening, a 407, another refusal, garbage, a silent proxy) is reported once with the
// proxy's label and reason code, and the proxy's own credentials never appear in the report. Real
// loopback servers stand in for the corporate proxy.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { UpstreamProxy } from '../../../src/core/index.js';
import { connectThroughProxy, upstreamFailureLogger, UPSTREAM_FAILURE_LOG_INTERVAL_MS, type UpstreamFailure } from '../../../src/egress/index.js';
import { unusedPort } from '../../support/ports.js';

const CREDENTIALS = `Basic ${Buffer.from('corp-user:corp-secret-password').toString('base64')}`;
const servers: net.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

function proxyAt(port: number): UpstreamProxy {
  return { label: `http://127.0.0.1:${port}`, tls: false, host: '127.0.0.1', port, authorization: CREDENTIALS, ca: null, inspectsTls: false, sendResolvedAddress: false };
}

/** A fake upstream proxy that reads the CONNECT head and answers `answer` (null: says nothing). */
async function fakeProxy(answer: string | null): Promise<number> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => {
      if (answer !== null) socket.end(answer);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // Sockets left open by the silent proxy must not hold close() up.
  return (server.address() as net.AddressInfo).port;
}

describe('connectThroughProxy reports each failure once, with the label and never the credentials', () => {
  it.each([
    ['407', 'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="corp"\r\n\r\n', 'upstream_auth_required'],
    ['403', 'HTTP/1.1 403 Forbidden\r\n\r\n', 'upstream_refused'],
    ['garbage', 'SSH-2.0-OpenSSH\r\n\r\n', 'upstream_failed'],
  ] as const)('a proxy answering %s', async (_name, answer, reason) => {
    const port = await fakeProxy(answer);
    const reports: UpstreamFailure[] = [];
    const verdict = await connectThroughProxy(proxyAt(port), 'a.test:443', { timeoutMs: 2000, onFailure: (f) => void reports.push(f) });
    expect(verdict.ok).toBe(false);
    expect(reports.map((r) => [r.upstream, r.reason])).toEqual([[`http://127.0.0.1:${port}`, reason]]);
    expect(JSON.stringify(reports)).not.toMatch(/corp-secret-password|corp-user|Basic /);
  });

  it('nothing listening: upstream_unreachable, reported once (by the connect step, not twice)', async () => {
    const port = await unusedPort();
    const reports: UpstreamFailure[] = [];
    const verdict = await connectThroughProxy(proxyAt(port), 'a.test:443', { timeoutMs: 2000, onFailure: (f) => void reports.push(f) });
    expect(verdict).toMatchObject({ ok: false, reason: 'upstream_unreachable' });
    expect(reports.map((r) => r.reason)).toEqual(['upstream_unreachable']);
  });

  it('a proxy that never answers CONNECT: upstream_timeout', async () => {
    const port = await fakeProxy(null);
    const reports: UpstreamFailure[] = [];
    const verdict = await connectThroughProxy(proxyAt(port), 'a.test:443', { timeoutMs: 200, onFailure: (f) => void reports.push(f) });
    expect(verdict).toMatchObject({ ok: false, reason: 'upstream_timeout' });
    expect(reports.map((r) => r.reason)).toEqual(['upstream_timeout']);
  });

  it('a proxy that accepts reports nothing', async () => {
    const port = await fakeProxy('HTTP/1.1 200 Connection established\r\n\r\n');
    const reports: UpstreamFailure[] = [];
    const verdict = await connectThroughProxy(proxyAt(port), 'a.test:443', { timeoutMs: 2000, onFailure: (f) => void reports.push(f) });
    expect(verdict.ok).toBe(true);
    if (verdict.ok) verdict.value.socket.destroy();
    expect(reports).toEqual([]);
  });
});

describe('upstreamFailureLogger: a dead upstream under load is a line every ten seconds, not one per hop', () => {
  it('logs the first failure per upstream and reason, counts the rest, and logs again after the interval with the count', () => {
    let now = 0;
    const lines: { obj: object; msg: string }[] = [];
    const report = upstreamFailureLogger({ warn: (obj, msg) => void lines.push({ obj, msg }) }, () => now);
    const a = { upstream: 'http://corp.test:8080', reason: 'upstream_unreachable', detail: 'http://corp.test:8080: ECONNREFUSED' } as const;
    for (let i = 0; i < 100; i += 1) report(a);
    report({ ...a, reason: 'upstream_auth_required', detail: 'http://corp.test:8080 answered 407' });
    report({ ...a, upstream: 'http://other.test:3128' });
    expect(lines.map((l) => l.msg)).toEqual([
      'upstream proxy http://corp.test:8080 failed: upstream_unreachable',
      'upstream proxy http://corp.test:8080 failed: upstream_auth_required',
      'upstream proxy http://other.test:3128 failed: upstream_unreachable',
    ]);
    now = UPSTREAM_FAILURE_LOG_INTERVAL_MS;
    report(a);
    expect(lines.at(-1)?.obj).toEqual({ upstream: a.upstream, reason: a.reason, detail: a.detail, suppressed: 99 });
  });
});
