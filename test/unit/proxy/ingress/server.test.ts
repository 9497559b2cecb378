// startListeners / stopListeners (src/proxy/ingress/server.ts): the ingress. What a hostile client tries here,
// before any hop runs: to open more connections than Sluice allows (exhaustion), to hold a connection
// without ever sending a head (slowloris, RFC 9112 §9.5), to use request lines that are not HTTP/1.x
// (HTTP/0.9 lines let a CR LF in a target smuggle header lines, RFC 9112 §3), an Expect that node:http
// would answer on its own (RFC 9110 §10.1.1), an Upgrade on an absolute-form request (a tunnel that
// skips CONNECT), and a malformed head pipelined behind a good request so that its 400 overtakes the
// earlier response (RFC 9112 §9.3.2). And at shutdown, a tunnel must not outlive the drain. The runtime
// is the one src/app.ts builds (buildRuntime); the listeners are started here on 127.0.0.1 and in a
// temp dir.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { buildRuntime } from '../../../../src/app.js';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../../../src/audit/index.js';
import { parseConfigText, type ListenerSection } from '../../../../src/config/index.js';
import { proxyStatus } from '../../../../src/core/index.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import { startListeners, stopListeners, type BoundListener, type HttpLimits } from '../../../../src/proxy/ingress/server.js';
import { openConnectTunnel, parseResponseHead, rawRequest, roundTrip } from '../../../support/raw-client.js';
import { silentLog, tableLookup, tokenHash } from '../../../support/sluice.js';
import { waitFor, waitUntil } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const TOKEN = 'token-server-0123456789';
const AUTH = `Basic ${Buffer.from(`a:${TOKEN}`).toString('base64')}`;
const LIMITS: HttpLimits = { headersTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, maxHeaderBytes: 16_384 };

let rt: ProxyRuntime;
const records: AuditRecordV1[] = [];
const decisions = (): DecisionRecordV1[] => records.filter((r): r is DecisionRecordV1 => r.kind === 'decision');
const closes = (): CloseRecordV1[] => records.filter((r): r is CloseRecordV1 => r.kind === 'close');
let origin: { port: number; server: http.Server; echo: net.Server; echoPort: number; hold: Promise<void> | null };
const started: BoundListener[][] = [];
const clients: net.Socket[] = [];
const tempDirs: string[] = [];

beforeAll(async () => {
  const server = http.createServer(async (req, res) => {
    req.resume();
    if (origin.hold !== null) await origin.hold;
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const echo = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const echoPort = (echo.address() as net.AddressInfo).port;
  origin = { port, server, echo, echoPort, hold: null };
  const text = stringify({
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    state: os.tmpdir(),
    grants: [{ id: 'a', tokenSha256: tokenHash(TOKEN), destinations: [`http://a.test:${port}`, `https://a.test:${echoPort}`], allowAddressClasses: ['loopback'] }],
  });
  const parsed = parseConfigText(text, path.join(os.tmpdir(), 'server-test.yaml'), os.tmpdir());
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const built = await buildRuntime(parsed.config, {
    env: {},
    lookup: tableLookup({ 'a.test': ['127.0.0.1'] }),
    audit: { write: (r) => void records.push(r), flush: () => Promise.resolve() },
    log: silentLog,
    hostInterfaces: () => ({}),
  });
  if (!built.ok) throw new Error(JSON.stringify(built.issues));
  rt = built.value.runtime;
});

afterAll(async () => {
  rt?.registry.close();
  rt?.routes.close();
  await rt?.forwardAgent.close();
  await rt?.upstreamAgent.close();
  origin?.server.closeAllConnections();
  await new Promise<void>((resolve) => origin?.server.close(() => resolve()));
  await new Promise<void>((resolve) => origin?.echo.close(() => resolve()));
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const listeners of started.splice(0)) await stopListeners(listeners);
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  records.length = 0;
  origin.hold = null;
});

async function listen(sections: Partial<ListenerSection>[], limits: HttpLimits = LIMITS): Promise<BoundListener[]> {
  const full = sections.map((s, i) => ({ name: `l${i}`, listen: '127.0.0.1:0', identify: 'token' as const, protocol: 'http' as const, ...s }) as ListenerSection);
  const listeners = await startListeners(rt, full, limits);
  started.push(listeners);
  return listeners;
}

const portOf = (l: BoundListener | undefined): number => Number(l?.address.split(':').at(-1));

function client(port: number): { socket: net.Socket; data: () => Buffer; closed: () => boolean } {
  const socket = net.connect(port, '127.0.0.1');
  clients.push(socket);
  socket.on('error', () => undefined);
  let buffer = Buffer.alloc(0);
  let isClosed = false;
  socket.on('data', (c: Buffer) => (buffer = Buffer.concat([buffer, c])));
  socket.on('close', () => (isClosed = true));
  return { socket, data: () => buffer, closed: () => isClosed };
}

const get = (extra = ''): string => `GET http://a.test:${origin.port}/ HTTP/1.1\r\nHost: a.test:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\n${extra}\r\n`;

describe('startListeners: binding and the accept gate', () => {
  it('serves a Unix socket listener only once its file is 0600, and stopListeners removes the file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-server-test-'));
    tempDirs.push(dir);
    const file = path.join(dir, 'proxy.sock');
    const [listener] = await startListeners(rt, [{ name: 'unix', listen: `unix:${file}`, identify: 'token', protocol: 'http' } as ListenerSection], LIMITS);
    if (listener === undefined) throw new Error('no listener');
    expect(listener.address).toBe(`unix:${file}`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const answer = await new Promise<string>((resolve, reject) => {
      const s = net.connect(file);
      let text = '';
      s.on('data', (c: Buffer) => (text += c.toString('latin1')));
      s.on('error', reject);
      s.on('close', () => resolve(text));
      s.write(`GET http://a.test:${origin.port}/ HTTP/1.1\r\nHost: a.test:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`);
    });
    expect(answer.startsWith('HTTP/1.1 200 ')).toBe(true);
    await stopListeners([listener]);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('stops accepting at once on stopListeners: a later connection is refused', async () => {
    const [listener] = await listen([{}]);
    const port = portOf(listener);
    await stopListeners(started.pop() ?? []);
    await expect(rawRequest(port, get())).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('startListeners: admission at maxConnections', () => {
  it('answers an http connection past maxConnections 429 connections_exhausted, once, and keeps the first', async () => {
    const [listener] = await listen([{ maxConnections: 1 }]);
    const first = client(portOf(listener));
    await waitUntil(() => listener?.sockets.size === 1, { timeoutMs: TIMEOUT_MS, label: 'the first connection admitted' });
    const second = await rawRequest(portOf(listener), '', { untilClose: true });
    const head = parseResponseHead(second.data);
    expect(head?.status).toBe(429);
    expect(head?.headers['proxy-status']).toBe(proxyStatus('connections_exhausted'));
    expect(decisions()).toMatchObject([{ reason: 'connections_exhausted', listener: 'l0' }]);
    // The admitted connection still works.
    first.socket.write(get());
    await waitUntil(() => first.data().includes('\r\n\r\nok'), { timeoutMs: TIMEOUT_MS, label: 'the first connection served' });
    expect(decisions()).toHaveLength(2);
  });

  it('closes a socks5 connection past maxConnections without a byte, with one record', async () => {
    const [listener] = await listen([{ maxConnections: 1, protocol: 'socks5' }]);
    client(portOf(listener));
    await waitUntil(() => listener?.sockets.size === 1, { timeoutMs: TIMEOUT_MS, label: 'the first connection admitted' });
    const second = await rawRequest(portOf(listener), Buffer.from([5, 1, 2]), { untilClose: true });
    expect(second.data.length).toBe(0);
    expect(decisions()).toMatchObject([{ reason: 'connections_exhausted' }]);
    expect(decisions()).toHaveLength(1);
  });
});

describe('startListeners: the first request head', () => {
  it.each([
    ['says nothing', ''],
    ['sends half a head', 'GET http://a.test/ HTTP/1.1\r\nHost: a'],
  ])('answers a client that %s 408 request_timeout within headersTimeoutMs', async (_label, partial) => {
    const [listener] = await listen([{}], { ...LIMITS, headersTimeoutMs: 300 });
    const c = client(portOf(listener));
    if (partial !== '') c.socket.write(partial);
    await waitUntil(() => c.closed(), { timeoutMs: TIMEOUT_MS, label: 'Sluice to close' });
    const head = parseResponseHead(c.data());
    expect(head?.status).toBe(408);
    expect(head?.headers['proxy-status']).toBe(proxyStatus('request_timeout'));
    expect(decisions()).toMatchObject([{ reason: 'request_timeout' }]);
    expect(decisions()).toHaveLength(1);
  });

  it.each([
    ['an HTTP/0.9 request line', `GET http://a.test:PORT/\r\n\r\n`],
    ['an HTTP/0.9 line smuggling a header', `GET http://a.test:PORT/\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['an HTTP/2.0 request line', `GET http://a.test:PORT/ HTTP/2.0\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['an HTTP/2.0 CONNECT', `CONNECT a.test:PORT HTTP/2.0\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
  ])('refuses %s with 400 request_malformed; the origin is never reached', async (_label, raw) => {
    const [listener] = await listen([{}]);
    const answer = await rawRequest(portOf(listener), raw.replaceAll('PORT', String(origin.port)), { untilClose: true });
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(400);
    expect(decisions()).toMatchObject([{ reason: 'request_malformed', decision: 'deny' }]);
    expect(answer.text).not.toContain('\r\n\r\nok');
  });

  it('answers Expect: foo with 417 expectation_unsupported, not node:http’s own answer', async () => {
    const [listener] = await listen([{}]);
    const answer = await rawRequest(portOf(listener), get('Expect: foo\r\n'), { untilClose: true });
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(417);
    expect(head?.headers['proxy-status']).toBe(proxyStatus('expectation_unsupported'));
    expect(decisions()).toMatchObject([{ reason: 'expectation_unsupported' }]);
  });

  it('refuses an absolute-form Upgrade with 400 upgrade_unsupported, before identification', async () => {
    const [listener] = await listen([{}]);
    const upgrade = `GET http://a.test:${origin.port}/ HTTP/1.1\r\nHost: a.test:${origin.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`;
    const answer = await rawRequest(portOf(listener), upgrade, { untilClose: true });
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(400);
    expect(head?.headers['proxy-status']).toBe(proxyStatus('upgrade_unsupported'));
    expect(decisions()).toMatchObject([{ reason: 'upgrade_unsupported', principal: null }]);
  });

  it('answers a malformed head pipelined after a complete request only after that request’s response, in order', async () => {
    const [listener] = await listen([{}]);
    let release = (): void => undefined;
    origin.hold = new Promise<void>((resolve) => (release = resolve));
    const c = client(portOf(listener));
    c.socket.write(get() + 'NOT A REQUEST\r\n\r\n');
    // The origin holds its response: the 400 for the second head must not overtake it.
    await waitUntil(() => decisions().length === 0 && rt.registry.activeConnections('a') === 1, { timeoutMs: TIMEOUT_MS, label: 'the first request in flight' });
    release();
    await waitUntil(() => c.closed(), { timeoutMs: TIMEOUT_MS, label: 'Sluice to close after the 400' });
    const text = c.data().toString('latin1');
    const ok = text.indexOf('HTTP/1.1 200 ');
    const bad = text.indexOf('HTTP/1.1 400 ');
    expect(ok).toBe(0);
    expect(bad).toBeGreaterThan(ok);
    expect(decisions().map((d) => d.reason).sort()).toEqual(['granted', 'request_malformed']);
  });
});

describe('stopListeners: drain, then end', () => {
  it('lets a tunnel that ends during the drain close on its own, and ends the rest with proxy_shutdown', async () => {
    const [listener] = await listen([{}]);
    const port = portOf(listener);
    const staying = await openConnectTunnel(port, `a.test:${origin.echoPort}`, { 'Proxy-Authorization': AUTH });
    const leaving = await openConnectTunnel(port, `a.test:${origin.echoPort}`, { 'Proxy-Authorization': AUTH });
    clients.push(staying.socket, leaving.socket);
    expect([staying.status, leaving.status]).toEqual([200, 200]);
    expect(await roundTrip(staying.socket, 'x')).toBe('x');
    const idle = client(port);
    await waitUntil(() => listener?.sockets.size === 3, { timeoutMs: TIMEOUT_MS, label: 'three connections' });
    const stopping = stopListeners(started.pop() ?? [], 1_000);
    // A connection that never sent a head is not waited for.
    await waitUntil(() => idle.closed(), { timeoutMs: TIMEOUT_MS, label: 'the idle connection closed at once' });
    expect(staying.socket.destroyed).toBe(false);
    leaving.socket.end();
    await waitUntil(() => closes().length === 1, { timeoutMs: TIMEOUT_MS, label: 'the leaving tunnel’s close record' });
    expect(closes()[0]).toMatchObject({ closedBy: 'client_closed' });
    const stayingClosed = waitFor(staying.socket, 'close', TIMEOUT_MS);
    await stopping;
    await stayingClosed;
    await waitUntil(() => closes().length === 2, { timeoutMs: TIMEOUT_MS, label: 'the staying tunnel’s close record' });
    expect(closes()[1]).toMatchObject({ closedBy: 'proxy_shutdown', bytesUp: 1, bytesDown: 1 });
    expect(decisions().filter((d) => d.reason === 'granted')).toHaveLength(2);
  });
});
