// Asks across a fleet (issue 27): two Sluice instances on one shared ledger (a real redis-server), one
// grant with `ask` in both configs. What a fleet must not let slip: two prompts for one destination
// because the hops landed on different instances, an answer given on one instance that leaves the other's
// hops waiting (or lets a second answer win there), or a deny "for the grant's life" that only the
// answering instance remembers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest } from '../support/admin-socket.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { redisSkip, startRedis, type TestRedis } from '../support/redis.js';
import { openSse, type SseStream } from '../support/sse-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const TOKEN = 'tok-asks-fleet-71e2';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

describe.skipIf(redisSkip())('asks in a fleet: one ask per grant and destination, answered on any instance', () => {
  let redis: TestRedis;
  let echo: EchoServer;
  let dir: string;
  const fleet: { sluice: TestSluice; admin: string }[] = [];
  const streams: SseStream[] = [];

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-asks-fleet-'));
  });
  afterEach(async () => {
    for (const s of streams.splice(0)) await s.close();
    for (const { sluice } of fleet.splice(0)) await sluice.close();
    await redis?.stop();
  });
  afterAll(async () => {
    await echo?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function instance(prefix: string): Promise<{ sluice: TestSluice; admin: string }> {
    const admin = path.join(dir, `admin-${fleet.length}-${Math.random().toString(36).slice(2)}.sock`);
    const sluice = await startSluice(
      {
        admin: { listen: `unix:${admin}` },
        ledger: { store: 'redis', redis: { url: redis.url, keyPrefix: prefix }, maxStaleMs: 2000 },
        grants: [{ id: 'agent', tokenSha256: tokenHash(TOKEN), destinations: ['https://granted.test:443'], allowAddressClasses: ['loopback'], ask: { timeoutMs: 10_000 }, generation: 'run-7' }],
      },
      { lookup: tableLookup({ 'asked.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
    const member = { sluice, admin };
    fleet.push(member);
    return member;
  }

  const pending = async (admin: string): Promise<Record<string, unknown>[]> => (await adminRequest(admin, 'GET', '/v1/asks')).body['asks'] as Record<string, unknown>[];
  const answer = (admin: string, id: unknown, decision: string, scope = 'once') => adminRequest(admin, 'POST', `/v1/asks/${String(id)}`, { decision, scope });
  const connect = (on: TestSluice, host = 'asked.test') => openConnectTunnel(on.port, `${host}:${echo.port}`, AUTH, { timeoutMs: 15_000 });

  it('hops on two instances wait on one ask; an answer on a third releases both, and a second answer anywhere is 409', async () => {
    redis = await startRedis();
    const [a, b, c] = [await instance('af1:'), await instance('af1:'), await instance('af1:')];
    const watchC = await openSse({ socketPath: c!.admin }, '/v1/events?kind=ask,ask_answered');
    if (watchC.kind !== 'stream') throw new Error(`events refused: ${watchC.status}`);
    streams.push(watchC);
    const onA = connect(a!.sluice);
    await waitUntil(async () => (await pending(a!.admin)).length === 1, { timeoutMs: 5000, label: 'A raised the ask' });
    const onB = connect(b!.sluice);
    const onB2 = connect(b!.sluice);
    // B joins A's ask: the fleet lists one ask, the same on every instance.
    await waitUntil(async () => (await pending(b!.admin)).length === 1 && b!.sluice.app.runtime.asks!.list().length === 1, { timeoutMs: 5000, label: 'B holds its hops on the ask' });
    const listed = await Promise.all([a, b, c].map(async (m) => (await pending(m!.admin)).map((v) => v['ask'])));
    expect(listed[0]).toHaveLength(1);
    expect(listed[1]).toEqual(listed[0]);
    expect(listed[2]).toEqual(listed[0]);
    const id = listed[0]![0];
    expect(b!.sluice.app.runtime.asks!.list()[0]).toMatchObject({ ask: id, waiting: 2 });
    // The supervisor watching C sees the ask A raised.
    await watchC.until((s) => s.events.some((e) => e.event === 'ask' && JSON.parse(e.data).ask === id), 5000, 'C announced the ask');

    const answered = await answer(c!.admin, id, 'allow');
    expect(answered.status).toBe(200);
    const tunnels = await Promise.all([onA, onB, onB2]);
    expect(tunnels.map((t) => t.status)).toEqual([200, 200, 200]);
    for (const t of tunnels) {
      expect(await roundTrip(t.socket, 'ping\n')).toBe('ping\n');
      t.socket.destroy();
    }
    for (const m of [a, b]) expect(m!.sluice.decisions().find((d) => d.canonical === `asked.test:${echo.port}`)).toMatchObject({ decision: 'allow', rule: `ask:${String(id)}` });
    for (const m of [a, b, c]) {
      const late = await answer(m!.admin, id, 'deny');
      expect(late.status).toBe(409);
      expect(late.body['error']).toBe('ask_answered');
    }
    expect((await answer(a!.admin, 'ask-0000000000000000', 'allow')).status).toBe(404);
    await watchC.until((s) => s.events.some((e) => e.event === 'ask_answered' && JSON.parse(e.data).ask === id), 5000, 'C announced the answer');
    expect(watchC.events.filter((e) => e.event === 'ask').length).toBe(1);
    expect(watchC.events.filter((e) => e.event === 'ask_answered').length).toBe(1);
  });

  it('grant changes made on one instance reach another instance’s event stream, marked via fleet', async () => {
    redis = await startRedis();
    const [a, b] = [await instance('af3:'), await instance('af3:')];
    const watchB = await openSse({ socketPath: b!.admin }, '/v1/events?kind=grant');
    if (watchB.kind !== 'stream') throw new Error(`events refused: ${watchB.status}`);
    streams.push(watchB);
    const issued = await adminRequest(a!.admin, 'POST', '/v1/grants', { destinations: ['https://x.test'], generation: 'gen-f' });
    expect(issued.status).toBe(201);
    const id = issued.body['id'] as string;
    expect((await adminRequest(a!.admin, 'DELETE', `/v1/grants/${id}`)).status).toBe(200);
    const actions = (): string[] => watchB.events.filter((e) => JSON.parse(e.data).grant === id).map((e) => `${JSON.parse(e.data).action} ${JSON.parse(e.data).via} ${JSON.parse(e.data).generation}`);
    await watchB.until(() => actions().length === 2, 5000, 'B announced the issue and the revoke');
    expect(actions()).toEqual(['issue fleet gen-f', 'revoke fleet gen-f']);
    // Never the token.
    expect(watchB.raw).not.toContain(issued.body['token'] as string);
  });

  it('a deny for the grant’s life given on B refuses the hop held on A, and later hops on every instance without asking; a restart keeps it', async () => {
    redis = await startRedis();
    const [a, b] = [await instance('af2:'), await instance('af2:')];
    const onA = connect(a!.sluice, 'other.test');
    await waitUntil(async () => (await pending(b!.admin)).length === 1, { timeoutMs: 5000, label: 'B lists the ask A raised' });
    const [ask] = await pending(b!.admin);
    const answered = await answer(b!.admin, ask!['ask'], 'deny', 'grant');
    expect(answered.status).toBe(200);
    expect(answered.body).toMatchObject({ answered: true, decision: 'deny', scope: 'grant', kept: true });
    const refused = await onA;
    expect(refused.status).toBe(403);
    expect(refused.head).toContain('approval_denied');
    // The answer is a ledger revision: A applies it and refuses at once, with no new ask.
    await waitUntil(() => a!.sluice.app.ledger.standingAnswer('agent', `https://other.test:${echo.port}`) === 'deny', { timeoutMs: 5000, label: 'A applied the standing deny' });
    for (const m of [a, b]) {
      const again = await connect(m!.sluice, 'other.test');
      expect(again.status).toBe(403);
      expect(again.head).toContain('approval_denied');
      expect(await pending(m!.admin)).toEqual([]);
    }
    // A new instance reads it from the store.
    const c = await instance('af2:');
    const fromStore = await connect(c.sluice, 'other.test');
    expect(fromStore.status).toBe(403);
    expect(fromStore.head).toContain('approval_denied');
    // Another destination still asks.
    const elsewhere = connect(c.sluice);
    await waitUntil(async () => (await pending(c.admin)).length === 1, { timeoutMs: 5000, label: 'another destination asks' });
    const [next] = await pending(a!.admin);
    expect(next!['destination']).toBe(`https://asked.test:${echo.port}`);
    expect((await answer(a!.admin, next!['ask'], 'deny')).status).toBe(200);
    expect((await elsewhere).status).toBe(403);
  });
});
