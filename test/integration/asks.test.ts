// Asks through a running Sluice (issue 27): a grant with `ask` holds a hop to a destination none of its
// rules names, before anything is dialed, until the supervisor answers on the admin API. What a held
// principal must not get: a byte to the origin before an allow, a second prompt for a concurrent hop,
// an ask about an address class its grant refuses, or a hop that outlives its grant's revocation.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest } from '../support/admin-socket.js';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitForClose, waitUntil } from '../support/wait.js';

const TOKEN = 'tok-asks-3c9d';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

describe('asks: a grant with ask holds a miss until the supervisor answers', () => {
  let origin: Origin;
  let echo: EchoServer;
  let dir: string;
  let sluice: TestSluice | null = null;
  let adminSocket: string;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    echo = await startTcpEchoServer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-asks-'));
  });
  afterEach(async () => {
    await sluice?.close();
    sluice = null;
  });
  afterAll(async () => {
    await origin?.close();
    await echo?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function start(grant: Record<string, unknown> = {}): Promise<TestSluice> {
    adminSocket = path.join(dir, `admin-${Date.now()}-${Math.random().toString(36).slice(2)}.sock`);
    sluice = await startSluice(
      {
        admin: { listen: `unix:${adminSocket}` },
        grants: [{ id: 'agent', tokenSha256: tokenHash(TOKEN), destinations: ['https://granted.test:443'], allowAddressClasses: ['loopback'], ask: { timeoutMs: 5000 }, generation: 'run-1', ...grant }],
      },
      { lookup: tableLookup({ 'asked.test': ['127.0.0.1'], 'granted.test': ['127.0.0.1'] }) },
    );
    return sluice;
  }

  const pending = async (): Promise<Record<string, unknown>[]> => (await adminRequest(adminSocket, 'GET', '/v1/asks')).body['asks'] as Record<string, unknown>[];
  const waitForAsk = async (): Promise<Record<string, unknown>> => {
    await waitUntil(async () => (await pending()).length > 0, { timeoutMs: 5000, label: 'an ask is pending' });
    return (await pending())[0]!;
  };
  const answer = (id: unknown, decision: string, scope = 'once') => adminRequest(adminSocket, 'POST', `/v1/asks/${String(id)}`, { decision, scope });

  it('curl through a held CONNECT: nothing reaches the origin until allow once; then the request completes and the next hop asks again', async () => {
    const s = await start();
    const before = origin.requests.length;
    const curl = runCurl(['-p', '-x', `http://127.0.0.1:${s.port}`, '--proxy-header', `Proxy-Authorization: Bearer ${TOKEN}`, '-i', `http://asked.test:${origin.port}/held`], { timeoutMs: 15_000 });
    const ask = await waitForAsk();
    expect(ask).toMatchObject({ grant: 'agent', generation: 'run-1', destination: `https://asked.test:${origin.port}`, waiting: 1 });
    expect(origin.requests.length).toBe(before);
    expect((await answer(ask['ask'], 'allow')).status).toBe(200);
    const result = await curl;
    expect(result.code).toBe(0);
    expect(curlHeadersAndBody(result.stdout).status).toBe(200);
    expect(origin.requests.some((r) => r.url === '/held')).toBe(true);
    const allowed = s.decisions().find((d) => d.canonical === `asked.test:${origin.port}`);
    expect(allowed).toMatchObject({ decision: 'allow', reason: 'granted', rule: `ask:${String(ask['ask'])}` });
    // Once means once: the next hop to it is held again (never served from the hop cache).
    const again = openConnectTunnel(s.port, `asked.test:${origin.port}`, AUTH, { timeoutMs: 10_000 });
    const second = await waitForAsk();
    expect(second['ask']).not.toBe(ask['ask']);
    expect((await answer(second['ask'], 'deny')).status).toBe(200);
    const denied = await again;
    expect(denied.status).toBe(403);
    expect(denied.head).toMatch(/details="approval_denied"/);
    denied.socket.destroy();
  });

  it('deny: the client gets 403 approval_denied with its fix, and a second answer is 409', async () => {
    const s = await start();
    const curl = runCurl(['-x', `http://127.0.0.1:${s.port}`, '--proxy-header', `Proxy-Authorization: Bearer ${TOKEN}`, '-i', `http://asked.test:${origin.port}/denied`], { timeoutMs: 15_000 });
    const ask = await waitForAsk();
    expect(ask['destination']).toBe(`http://asked.test:${origin.port}`);
    expect((await answer(ask['ask'], 'deny')).status).toBe(200);
    const second = await answer(ask['ask'], 'allow');
    expect(second).toMatchObject({ status: 409, body: { error: 'ask_answered' } });
    expect((await answer('ask-0000000000000000', 'allow')).status).toBe(404);
    const response = curlHeadersAndBody((await curl).stdout);
    expect(response.status).toBe(403);
    expect(response.headers['proxy-status']).toMatch(/details="approval_denied"/);
    expect(response.body).toMatch(/approval_denied.*fix: ask the supervisor to allow http:\/\/asked\.test/);
    expect(origin.requests.some((r) => r.url === '/denied')).toBe(false);
    expect(s.decisions().find((d) => d.reason === 'approval_denied')).toMatchObject({ decision: 'deny', status: 403 });
  });

  it('no answer: approval_timeout after timeoutMs, not before, and the ask is gone', async () => {
    const s = await start({ ask: { timeoutMs: 400 } });
    const startedAt = Date.now();
    const tunnel = await openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 5000 });
    const waited = Date.now() - startedAt;
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toMatch(/details="approval_timeout"/);
    expect(waited).toBeGreaterThanOrEqual(390);
    expect(waited).toBeLessThan(4000);
    expect(await pending()).toEqual([]);
    tunnel.socket.destroy();
  });

  it('100 concurrent CONNECTs to one destination raise exactly one ask, and one allow releases them all', async () => {
    const s = await start();
    const tunnels = Array.from({ length: 100 }, () => openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 15_000 }));
    await waitUntil(async () => ((await pending())[0]?.['waiting'] as number | undefined) === 100, { timeoutMs: 10_000, label: '100 hops held on one ask' });
    const asks = await pending();
    expect(asks).toHaveLength(1);
    expect((await answer(asks[0]!['ask'], 'allow')).status).toBe(200);
    const opened = await Promise.all(tunnels);
    expect(opened.map((t) => t.status)).toEqual(Array(100).fill(200));
    expect(await roundTrip(opened[0]!.socket, 'ping', 3000)).toBe('ping');
    for (const t of opened) t.socket.destroy();
  });

  it('allow for the grant: later hops to it go without asking; another destination still asks', async () => {
    const s = await start();
    const first = openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 10_000 });
    expect((await answer((await waitForAsk())['ask'], 'allow', 'grant')).status).toBe(200);
    (await first).socket.destroy();
    const later = await openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 3000 });
    expect(later.status).toBe(200);
    later.socket.destroy();
    expect(await pending()).toEqual([]);
    const other = openConnectTunnel(s.port, `asked.test:${origin.port}`, AUTH, { timeoutMs: 10_000 });
    const ask = await waitForAsk();
    expect(ask['destination']).toBe(`https://asked.test:${origin.port}`);
    await answer(ask['ask'], 'deny', 'grant');
    expect((await other).status).toBe(403);
    (await other).socket.destroy();
    const refused = await openConnectTunnel(s.port, `asked.test:${origin.port}`, AUTH, { timeoutMs: 3000 });
    expect(refused.status).toBe(403);
    expect(refused.head).toMatch(/details="approval_denied"/);
    refused.socket.destroy();
  });

  it('never asks about an address class the grant refuses: loopback without allowAddressClasses is refused at once', async () => {
    const s = await start({ allowAddressClasses: [] });
    const tunnel = await openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 3000 });
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toMatch(/details="address_class_denied"/);
    expect(await pending()).toEqual([]);
    tunnel.socket.destroy();
  });

  it('a grant without ask refuses a miss at once, as before (destination_not_granted)', async () => {
    const s = await start({ ask: undefined });
    const tunnel = await openConnectTunnel(s.port, `asked.test:${echo.port}`, AUTH, { timeoutMs: 3000 });
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toMatch(/details="destination_not_granted"/);
    tunnel.socket.destroy();
  });

  it('revoking the grant while a hop is held ends the hop and the ask at once; the origin is never dialed', async () => {
    const s = await start({ tokenSha256: undefined, id: 'cfg', destinations: [] });
    const issued = await adminRequest(adminSocket, 'POST', '/v1/grants', { destinations: ['https://granted.test:443'], allowAddressClasses: ['loopback'], ask: { timeoutMs: 10_000 } });
    expect(issued.status).toBe(201);
    const token = String(issued.body['token']);
    const connections = echo.connections;
    const held = openConnectTunnel(s.port, `asked.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${token}` }, { timeoutMs: 10_000 }).catch((error: Error) => error);
    await waitForAsk();
    const startedAt = Date.now();
    expect((await adminRequest(adminSocket, 'DELETE', `/v1/grants/${String(issued.body['id'])}`)).status).toBe(200);
    const outcome = await held;
    expect(Date.now() - startedAt).toBeLessThan(2000);
    // The revocation resets the held connection (relay/end-socket.ts); had the answer won the race, it is the refusal.
    if (outcome instanceof Error) expect(outcome.message).toMatch(/ECONNRESET|closed before the response head/);
    else {
      expect(outcome.status).toBe(403);
      expect(outcome.head).toMatch(/details="grant_revoked"/);
      await waitForClose(outcome.socket, 3000);
    }
    expect(await pending()).toEqual([]);
    expect(echo.connections).toBe(connections);
    expect(s.decisions().filter((d) => d.canonical === `asked.test:${echo.port}`).map((d) => d.reason)).toEqual(['grant_revoked']);
  });
});
