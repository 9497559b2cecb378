// GET /v1/events through a running Sluice (issue 27 item 2): a supervisor follows decisions and grant
// changes on the admin socket. What it must be able to rely on: every decision appears with the fields it
// acts on (grant, generation, canonical destination, reason, status) and matches the audit record; a
// reader that reconnects with Last-Event-ID gets every event once, or an explicit gap when the ring no
// longer holds them; a reader that stops reading never holds up a hop; no event ever carries a token.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest } from '../support/admin-socket.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { openStream, type SseStream } from '../support/sse-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitFor } from '../support/wait.js';
import { EventRing } from '../../src/telemetry/index.js';

const TOKEN_A = 'tok-events-a-5e1f0c';
const TOKEN_B = 'tok-events-b-77d2aa';
const RING_CAPACITY = 50;

interface DecisionData {
  readonly ts: string;
  readonly decision: 'allow' | 'deny';
  readonly reason: string;
  readonly grant: string | null;
  readonly generation: string | null;
  readonly destination: string | null;
  readonly request: string;
  readonly listener: string;
  readonly connection: string;
  readonly hop: number;
  readonly status: number;
}

describe('GET /v1/events on a running Sluice', () => {
  let echo: EchoServer;
  let dir: string;
  let sluice: TestSluice;
  let socketPath: string;
  const streams: SseStream[] = [];
  const issuedTokens: string[] = [];

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-events-'));
    socketPath = path.join(dir, 'admin.sock');
    sluice = await startSluice(
      {
        admin: { listen: `unix:${socketPath}` },
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`https://allowed.test:${echo.port}`], allowAddressClasses: ['loopback'], generation: 'gen-a' },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`https://allowed.test:${echo.port}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'allowed.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }), events: new EventRing(RING_CAPACITY) },
    );
  });
  afterAll(async () => {
    for (const stream of streams) if (!stream.isEnded) await stream.close();
    await sluice?.close();
    await echo?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function watch(query = '', headers: Record<string, string> = {}): Promise<SseStream> {
    const stream = await openStream({ socketPath }, `/v1/events${query}`, headers);
    streams.push(stream);
    return stream;
  }

  const basic = (grant: string, token: string): Record<string, string> => ({ 'Proxy-Authorization': `Basic ${Buffer.from(`${grant}:${token}`).toString('base64')}` });

  /** A CONNECT the grant refuses: answered 403 at once, one decision. */
  async function deniedConnect(grant = 'a', token = TOKEN_A): Promise<void> {
    const auth = basic(grant, token)['Proxy-Authorization'];
    const answer = await rawRequest(sluice.port, `CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\nProxy-Authorization: ${auth}\r\n\r\n`, { timeoutMs: 10_000 });
    expect(answer.text).toMatch(/^HTTP\/1\.1 403 /);
  }

  /** An allowed CONNECT to the echo server: the tunnel carries bytes both ways, then closes. */
  async function allowedConnect(grant = 'a', token = TOKEN_A): Promise<void> {
    const tunnel = await openConnectTunnel(sluice.port, `allowed.test:${echo.port}`, basic(grant, token), { timeoutMs: 10_000 });
    expect(tunnel.status).toBe(200);
    const echoed = waitFor<Buffer>(tunnel.socket, 'data', 5000);
    tunnel.socket.write('ping');
    expect((await echoed).toString()).toBe('ping');
    tunnel.socket.destroy();
  }

  it('shows an allowed and a denied CONNECT with grant, generation, canonical destination, reason and status, as the audit records them', async () => {
    const stream = await watch('?kind=decision');
    await allowedConnect();
    await deniedConnect();
    await stream.until((s) => s.events.length >= 2, 5000, 'two decision events');
    const [allowed, denied] = stream.data<DecisionData>('decision');
    expect(allowed).toMatchObject({ decision: 'allow', reason: 'granted', grant: 'a', generation: 'gen-a', destination: `https://allowed.test:${echo.port}`, request: 'connect', listener: 'shared', hop: 1, status: 200 });
    expect(denied).toMatchObject({ decision: 'deny', reason: 'destination_not_granted', grant: 'a', generation: 'gen-a', destination: 'https://other.test:443', request: 'connect', listener: 'shared', hop: 1, status: 403 });
    for (const event of [allowed!, denied!]) {
      const record = sluice.decisions().find((d) => d.connection === event.connection && d.hop === event.hop);
      expect(record, `the audit record of ${event.connection}`).toMatchObject({ decision: event.decision, reason: event.reason, principal: event.grant, status: event.status, ts: event.ts });
    }
    expect(Number(stream.events[1]!.id)).toBe(Number(stream.events[0]!.id) + 1);
  });

  it('filters by grant, generation and kind', async () => {
    const byGrant = await watch('?grant=b');
    const byGeneration = await watch('?generation=gen-a&kind=decision');
    const grantsOnly = await watch('?kind=grant');
    await deniedConnect('a', TOKEN_A);
    await deniedConnect('b', TOKEN_B);
    const issued = await adminRequest(socketPath, 'POST', '/v1/grants', { destinations: ['https://x.example'], generation: 'gen-a' });
    expect(issued.status).toBe(201);
    issuedTokens.push(String(issued.body['token']));
    await byGeneration.until((s) => s.events.length >= 1, 5000, 'the gen-a decision');
    await byGrant.until((s) => s.events.length >= 1, 5000, 'the grant b decision');
    await grantsOnly.until((s) => s.events.length >= 1, 5000, 'the grant event');
    // One more event that each filter passes closes the window: nothing else arrived before it.
    await deniedConnect('b', TOKEN_B);
    await deniedConnect('a', TOKEN_A);
    await byGrant.until((s) => s.events.length >= 2, 5000, 'the second grant b decision');
    await byGeneration.until((s) => s.events.length >= 2, 5000, 'the second gen-a decision');
    expect(byGrant.events.map((e) => e.event)).toEqual(['decision', 'decision']);
    expect(byGrant.data<DecisionData>('decision').map((d) => d.grant)).toEqual(['b', 'b']);
    expect(byGeneration.data<DecisionData>('decision').map((d) => [d.grant, d.generation])).toEqual([['a', 'gen-a'], ['a', 'gen-a']]);
    expect(grantsOnly.events.map((e) => e.event)).toEqual(['grant']);
    expect(grantsOnly.data('grant')[0]).toMatchObject({ action: 'issue', grant: issued.body['id'], generation: 'gen-a' });
  });

  it('a reader that drops mid-stream resumes with Last-Event-ID and receives every event exactly once', async () => {
    const first = await watch('?kind=decision&grant=a');
    for (let i = 0; i < 5; i++) await deniedConnect();
    await first.until((s) => s.events.length === 5, 5000, 'five events');
    await first.close();
    const lastSeen = first.events.at(-1)!.id!;
    for (let i = 0; i < 10; i++) await deniedConnect();
    // Decisions of another grant in between: filtered out of the backlog too.
    await deniedConnect('b', TOKEN_B);
    const resumed = await watch('?kind=decision&grant=a', { 'last-event-id': lastSeen });
    for (let i = 0; i < 5; i++) await deniedConnect();
    await resumed.until((s) => s.events.length === 15, 5000, 'the ten missed and five live events');
    const all = [...first.events, ...resumed.events];
    const ids = all.map((e) => Number(e.id));
    expect(new Set(ids).size).toBe(20);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    const hops = all.map((e) => JSON.parse(e.data) as DecisionData).map((d) => `${d.connection}/${d.hop}`);
    expect(new Set(hops).size).toBe(20);
    const recorded = new Set(sluice.decisions().filter((d) => d.principal === 'a').map((d) => `${d.connection}/${d.hop}`));
    for (const hop of hops) expect(recorded.has(hop), hop).toBe(true);
    expect(resumed.events.some((e) => e.event === 'gap')).toBe(false);
  });

  it('a reader that missed more than the ring holds gets a ring gap naming the ids, then what is held', async () => {
    const first = await watch('?kind=decision');
    await deniedConnect();
    await first.until((s) => s.events.length === 1, 5000, 'one event');
    await first.close();
    const seen = Number(first.events[0]!.id);
    for (let i = 0; i < RING_CAPACITY + 20; i++) await deniedConnect();
    const newest = seen + RING_CAPACITY + 20;
    const resumed = await watch('?kind=decision', { 'last-event-id': String(seen) });
    await resumed.until((s) => s.events.length === RING_CAPACITY + 1, 5000, 'the gap and the held events');
    expect(resumed.events[0]).toEqual({ id: String(newest - RING_CAPACITY), event: 'gap', data: JSON.stringify({ from: seen + 1, to: newest - RING_CAPACITY, reason: 'ring' }) });
    expect(resumed.events.slice(1).map((e) => Number(e.id))).toEqual(Array.from({ length: RING_CAPACITY }, (_, k) => newest - RING_CAPACITY + 1 + k));
  });

  it('a reader that stops reading while 5,000 decisions are made holds up no hop, and gets a gap and then live events', async () => {
    const stalled = await watch();
    stalled.pause();
    const firstId = sluice.app.runtime.events.lastId + 1;
    const started = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 5000) {
        next += 1;
        await deniedConnect();
      }
    };
    await Promise.all(Array.from({ length: 32 }, () => worker()));
    // A tunnel set up while the reader is still stalled carries its bytes.
    await allowedConnect();
    const elapsedMs = performance.now() - started;
    const lastId = sluice.app.runtime.events.lastId;
    expect(lastId - firstId + 1).toBe(5001);
    expect(elapsedMs).toBeLessThan(60_000);
    stalled.resume();
    await stalled.until((s) => s.events.some((e) => e.event === 'gap'), 15_000, 'the slow_reader gap');
    await allowedConnect('b', TOKEN_B);
    await stalled.until((s) => (JSON.parse(s.events.at(-1)!.data) as { grant?: string }).grant === 'b', 5000, 'the live event after the gap');
    const gapAt = stalled.events.findIndex((e) => e.event === 'gap');
    const gap = JSON.parse(stalled.events[gapAt]!.data) as { from: number; to: number; reason: string };
    const before = stalled.events.slice(0, gapAt).map((e) => Number(e.id));
    // Every id is either received (in order, once) or named by the gap: none is lost silently.
    expect(before).toEqual(Array.from({ length: before.length }, (_, k) => firstId + k));
    expect(gap).toEqual({ from: firstId + before.length, to: lastId, reason: 'slow_reader' });
    expect(stalled.events.slice(gapAt + 1).map((e) => Number(e.id))).toEqual([lastId + 1]);
  });

  it('no event carries a token, whatever the hop presented', async () => {
    const stream = await watch();
    const forward = `GET http://other.test/?token=${TOKEN_A} HTTP/1.1\r\nHost: other.test\r\nProxy-Authorization: ${basic('a', TOKEN_A)['Proxy-Authorization']}\r\nConnection: close\r\n\r\n`;
    expect((await rawRequest(sluice.port, forward, { timeoutMs: 10_000 })).text).toMatch(/^HTTP\/1\.1 403 /);
    const wrongToken = await rawRequest(sluice.port, `CONNECT allowed.test:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Bearer ${TOKEN_A}-forged\r\n\r\n`, { timeoutMs: 10_000 });
    expect(wrongToken.text).toMatch(/^HTTP\/1\.1 407 /);
    const issued = await adminRequest(socketPath, 'POST', '/v1/grants', { destinations: ['https://y.example'] });
    const rotated = await adminRequest(socketPath, 'POST', `/v1/grants/${String(issued.body['id'])}/rotate`, {});
    expect([issued.status, rotated.status]).toEqual([201, 200]);
    issuedTokens.push(String(issued.body['token']), String(rotated.body['token']));
    await stream.until((s) => s.events.filter((e) => e.event === 'grant').length === 2, 5000, 'the issue and rotate events');
    expect(stream.data<DecisionData>('decision').map((d) => d.reason)).toEqual(['destination_not_granted', 'token_invalid']);
    for (const s of streams) {
      for (const token of [TOKEN_A, TOKEN_B, ...issuedTokens]) expect(s.raw).not.toContain(token);
      expect(s.raw).not.toMatch(/proxy-authorization|basic |bearer /i);
    }
  });
});
