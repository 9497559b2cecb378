// A fleet on one shared ledger (ledger.store: redis), three Sluice instances in this process and a real
// redis-server on loopback. What a fleet must not let slip: a grant revoked on one instance still
// working on another (a lost notification, a store outage, a store that comes back empty), an
// instance that keeps serving on what it knew while cut off from the store, or a store error that
// crashes it instead of failing closed with a reason.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ADMIN_ROUTES } from '../../src/admin/index.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { redisSkip, startRedis, type TestRedis } from '../support/redis.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';
import { killSluiceProcesses, startSluiceProcess } from '../support/sluice-process.js';
import { waitFor, waitForClose, waitUntil, withTimeout } from '../support/wait.js';

const MAX_STALE_MS = 300;
// The promise is 100 ms p99 (measured by `npm run bench -- --fleet`); a test on a loaded 2-core CI
// machine bounds it loosely, so that it proves propagation without flaking on scheduling.
const LAG_BOUND_MS = 1000;

describe.skipIf(redisSkip())('fleet: three instances share one ledger on Redis', () => {
  let redis: TestRedis;
  let echo: EchoServer;
  const fleet: TestSluice[] = [];
  const clients: Redis[] = [];

  beforeAll(async () => {
    echo = await startTcpEchoServer();
  });
  afterAll(async () => {
    await echo.close();
  });

  async function startFleet(n: number, prefix: string): Promise<TestSluice[]> {
    for (let i = 0; i < n; i += 1) {
      fleet.push(
        await startSluice(
          { ledger: { store: 'redis', redis: { url: redis.url, keyPrefix: prefix }, maxStaleMs: MAX_STALE_MS } },
          { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
        ),
      );
    }
    return fleet.slice(-n);
  }

  afterEach(async () => {
    for (const s of fleet.splice(0)) await s.close();
    for (const c of clients.splice(0)) c.disconnect();
    await redis?.stop();
  });

  async function issue(on: TestSluice): Promise<{ id: string; token: string }> {
    const r = await on.app.control.issueGrant({ destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] });
    if (!r.ok) throw new Error(`issue failed: ${r.status} ${r.reason} ${JSON.stringify(r.issues)}`);
    return { id: r.value.id, token: r.value.token };
  }

  const auth = (token: string): Record<string, string> => ({ 'Proxy-Authorization': `Bearer ${token}` });

  async function liveTunnel(on: TestSluice, token: string): Promise<import('node:net').Socket> {
    const tunnel = await openConnectTunnel(on.port, `echo.test:${echo.port}`, auth(token));
    expect(tunnel.status).toBe(200);
    expect(await roundTrip(tunnel.socket, 'ping')).toBe('ping');
    return tunnel.socket;
  }

  it('a grant issued on A works on B and C within 100 ms', async () => {
    redis = await startRedis();
    const [a, b, c] = await startFleet(3, 'f1:');
    const started = Date.now();
    const grant = await issue(a!);
    await waitUntil(() => b!.app.runtime.registry.grants.has(grant.id) && c!.app.runtime.registry.grants.has(grant.id), { timeoutMs: 2000, label: 'B and C know the grant' });
    expect(Date.now() - started).toBeLessThan(LAG_BOUND_MS);
    (await liveTunnel(b!, grant.token)).destroy();
    (await liveTunnel(c!, grant.token)).destroy();
  });

  it('a revoke on C ends the live tunnels on A and B within 100 ms, each with a close record, and refuses the next hop', async () => {
    redis = await startRedis();
    const [a, b, c] = await startFleet(3, 'f2:');
    const grant = await issue(a!);
    await waitUntil(() => b!.app.runtime.registry.grants.has(grant.id), { timeoutMs: 2000, label: 'B knows the grant' });
    const onA = await liveTunnel(a!, grant.token);
    const onB = await liveTunnel(b!, grant.token);
    const started = Date.now();
    const revoked = await c!.app.control.revokeGrant(grant.id);
    expect(revoked.ok).toBe(true);
    await Promise.all([waitForClose(onA, 2000), waitForClose(onB, 2000)]);
    expect(Date.now() - started).toBeLessThan(LAG_BOUND_MS);
    for (const s of [a!, b!]) {
      await waitUntil(() => s.closes().some((r) => r.principal === grant.id && r.closedBy === 'revoked'), { timeoutMs: 2000, label: 'close record revoked' });
    }
    const again = await openConnectTunnel(b!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(again.status).toBe(403);
    expect(again.head).toContain('details="grant_revoked"');
    again.socket.destroy();
  });

  it('a lost notification (CLIENT KILL TYPE pubsub) still reaches every instance, by the revision poll', async () => {
    redis = await startRedis();
    const [a, b] = await startFleet(2, 'f3:');
    const grant = await issue(a!);
    await waitUntil(() => b!.app.runtime.registry.grants.has(grant.id), { timeoutMs: 2000, label: 'B knows the grant' });
    const onB = await liveTunnel(b!, grant.token);
    const admin = await redis.client();
    clients.push(admin);
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    const started = Date.now();
    expect((await a!.app.control.revokeGrant(grant.id)).ok).toBe(true);
    await waitForClose(onB, 2000);
    expect(Date.now() - started).toBeLessThan(LAG_BOUND_MS);
  });

  it('cut off from the store past maxStaleMs an instance refuses every hop with 503 ledger_unavailable, then resynchronises revocations before it serves again', async () => {
    redis = await startRedis();
    const [a, b] = await startFleet(2, 'f4:');
    const kept = await issue(a!);
    const doomed = await issue(a!);
    await waitUntil(() => b!.app.runtime.registry.grants.has(doomed.id), { timeoutMs: 2000, label: 'B knows both grants' });
    const onB = await liveTunnel(b!, doomed.token);

    await redis.kill();
    await waitUntil(() => !b!.app.runtime.ledgerFresh(), { timeoutMs: MAX_STALE_MS * 10, label: 'B goes stale' });
    const refused = await openConnectTunnel(b!.port, `echo.test:${echo.port}`, auth(kept.token));
    expect(refused.status).toBe(503);
    expect(refused.head).toContain('details="ledger_unavailable"');
    refused.socket.destroy();
    expect(b!.app.control.readiness().ready).toBe(false);
    const issuedWhileAway = await b!.app.control.issueGrant({ destinations: ['https://a.test'] });
    expect(issuedWhileAway).toMatchObject({ ok: false, status: 503, reason: 'ledger_unavailable' });
    // Nor does it show a table it cannot vouch for: the admin API's grant listing answers 503 too.
    const route = ADMIN_ROUTES.find((r) => r.method === 'GET' && r.template === '/v1/grants');
    const listed = await route!.action(b!.app.control, { params: {}, body: undefined });
    expect(listed.status).toBe(503);
    expect(listed.body).toMatchObject({ error: 'ledger_unavailable' });
    // A revokes while the store is away: it takes effect on A now and reaches B once the store is back.
    const revokedAway = await a!.app.control.revokeGrant(doomed.id);
    expect(revokedAway).toMatchObject({ ok: false, status: 503, reason: 'ledger_unavailable' });

    await redis.start();
    await waitForClose(onB, 5000);
    await waitUntil(() => b!.app.runtime.ledgerFresh(), { timeoutMs: 5000, label: 'B fresh again' });
    expect(b!.app.runtime.registry.grants.get(doomed.id)?.revoked).toBe(true);
    (await liveTunnel(b!, kept.token)).destroy();
    const stillRevoked = await openConnectTunnel(b!.port, `echo.test:${echo.port}`, auth(doomed.token));
    expect(stillRevoked.status).toBe(403);
    stillRevoked.socket.destroy();
  });

  it('a store that comes back empty never brings a revoked grant back: each instance writes its tombstones back', async () => {
    redis = await startRedis({ persistent: false });
    const [a, b] = await startFleet(2, 'f5:');
    const grant = await issue(a!);
    await waitUntil(() => b!.app.runtime.registry.grants.has(grant.id), { timeoutMs: 2000, label: 'B knows the grant' });
    expect((await a!.app.control.revokeGrant(grant.id)).ok).toBe(true);
    await waitUntil(() => b!.app.runtime.registry.grants.get(grant.id)?.revoked === true, { timeoutMs: 2000, label: 'B revoked it' });

    await redis.kill({ wipe: true });
    await redis.start();
    const admin = await redis.client();
    clients.push(admin);
    await waitUntil(async () => (await admin.hexists('f5:revoked', grant.id)) === 1, { timeoutMs: 5000, label: 'the tombstone is written back' });
    await waitUntil(() => b!.app.runtime.ledgerFresh() && a!.app.runtime.ledgerFresh(), { timeoutMs: 5000, label: 'both fresh' });
    const refused = await openConnectTunnel(b!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(refused.status).not.toBe(200);
    refused.socket.destroy();
    // A third instance started now learns the revocation from the store.
    const [c] = await startFleet(1, 'f5:');
    expect(c!.app.runtime.registry.grants.has(grant.id)).toBe(false);
    expect(c!.app.ledger.get(grant.id)).toBeUndefined();
  });

  async function issueLimited(on: TestSluice, limits: Record<string, number>): Promise<{ id: string; token: string }> {
    const r = await on.app.control.issueGrant({ destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'], limits });
    if (!r.ok) throw new Error(`issue failed: ${r.status} ${r.reason}`);
    await waitUntil(() => fleet.every((s) => s.app.runtime.registry.grants.has(r.value.id)), { timeoutMs: 2000, label: 'every instance knows the grant' });
    return { id: r.value.id, token: r.value.token };
  }

  it('maxConcurrent is exact across the fleet, and a closed connection gives its slot back on any instance', async () => {
    redis = await startRedis();
    const [a, b, c] = await startFleet(3, 'f7:');
    const grant = await issueLimited(a!, { maxConcurrent: 3 });
    const held = [await liveTunnel(a!, grant.token), await liveTunnel(a!, grant.token), await liveTunnel(b!, grant.token)];
    const fourth = await openConnectTunnel(c!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(fourth.status).toBe(429);
    expect(fourth.head).toContain('details="connection_limit_reached"');
    fourth.socket.destroy();
    held[0]!.destroy();
    await waitUntil(async () => {
      const t = await openConnectTunnel(c!.port, `echo.test:${echo.port}`, auth(grant.token));
      t.socket.destroy();
      return t.status === 200;
    }, { timeoutMs: 3000, label: 'the slot is back' });
    for (const h of held) h.destroy();
  });

  it('maxConnections is exact across the fleet and survives a restart of every instance', async () => {
    redis = await startRedis();
    const [a, b] = await startFleet(2, 'f8:');
    const grant = await issueLimited(a!, { maxConnections: 2 });
    (await liveTunnel(a!, grant.token)).destroy();
    (await liveTunnel(b!, grant.token)).destroy();
    const third = await openConnectTunnel(a!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(third.status).toBe(429);
    expect(third.head).toContain('details="connection_quota_exhausted"');
    third.socket.destroy();
    for (const s of fleet.splice(0)) await s.close();
    const [c] = await startFleet(1, 'f8:');
    const afterRestart = await openConnectTunnel(c!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(afterRestart.status).toBe(429);
    afterRestart.socket.destroy();
  });

  it('the slots of an instance killed with SIGKILL come back within ledger.redis.leaseTtlMs', async () => {
    redis = await startRedis();
    const ledgerConfig = { store: 'redis', redis: { url: redis.url, keyPrefix: 'f9:', leaseTtlMs: 1000 }, maxStaleMs: MAX_STALE_MS };
    fleet.push(await startSluice({ ledger: ledgerConfig }, { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) }));
    const b = fleet[0]!;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-fleet-kill-'));
    try {
      const child = await startSluiceProcess({
        config: { listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state: path.join(dir, 'state'), audit: { file: path.join(dir, 'audit.log') }, dns: { hosts: { 'echo.test': ['127.0.0.1'] } }, ledger: ledgerConfig },
        cwd: dir,
        name: 'the child',
      });
      expect(child.port, child.stderr()).toBeGreaterThan(0);
      const grant = await issueLimited(b, { maxConcurrent: 1 });
      await waitUntil(async () => {
        const t = await openConnectTunnel(child.port, `echo.test:${echo.port}`, auth(grant.token));
        if (t.status === 200) return true;
        t.socket.destroy();
        return false;
      }, { timeoutMs: 3000, label: 'the child holds the grant’s only slot' });
      const onB = await openConnectTunnel(b.port, `echo.test:${echo.port}`, auth(grant.token));
      expect(onB.head).toContain('details="connection_limit_reached"');
      onB.socket.destroy();
      await child.kill9();
      const killedAt = Date.now();
      await waitUntil(async () => {
        const t = await openConnectTunnel(b.port, `echo.test:${echo.port}`, auth(grant.token));
        t.socket.destroy();
        return t.status === 200;
      }, { timeoutMs: 5000, label: 'the lease expired and the slot is back' });
      expect(Date.now() - killedAt).toBeLessThan(1000 + LAG_BOUND_MS + 500);
    } finally {
      await killSluiceProcesses();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('maxBytes holds across the fleet within one reserved chunk per instance', async () => {
    redis = await startRedis();
    const [a, b] = await startFleet(2, 'f10:');
    const max = 200 * 1024;
    const grant = await issueLimited(a!, { maxBytes: max });
    let relayed = 0;
    const payload = Buffer.alloc(8 * 1024, 0x61);
    for (let round = 0; round < 100; round += 1) {
      const on = round % 2 === 0 ? a! : b!;
      const t = await openConnectTunnel(on.port, `echo.test:${echo.port}`, auth(grant.token));
      if (t.status !== 200) {
        t.socket.destroy();
        break;
      }
      const echoed = await withTimeout(
        new Promise<number>((resolve) => {
          let got = 0;
          t.socket.on('data', (c: Buffer) => {
            got += c.length;
            if (got >= payload.length) resolve(got);
          });
          t.socket.once('close', () => resolve(got));
          t.socket.write(payload);
        }),
        3000,
        'echo',
      );
      relayed += payload.length + echoed;
      t.socket.destroy();
      await waitFor(t.socket, 'close', 2000).catch(() => undefined);
    }
    // Up and down both count. Each instance may go one chunk (16 KiB here) past the budget while a
    // reservation is in flight, and may stop short by what it reserved and did not use (under two chunks).
    const chunk = 16 * 1024;
    expect(relayed).toBeLessThanOrEqual(max + 2 * chunk + 2 * payload.length);
    expect(relayed).toBeGreaterThanOrEqual(max - 2 * 2 * chunk - 2 * payload.length);
    // And the store counted no more than that either.
    const admin = await redis.client();
    clients.push(admin);
    expect(Number(await admin.hget(`f10:usage:${grant.id}`, 'bytes'))).toBeLessThanOrEqual(max);
  });

  it('a fast tunnel of a budgeted grant is held while a reservation is in flight, not cut: it relays what the budget allows', async () => {
    redis = await startRedis();
    const [a] = await startFleet(1, 'f11:');
    const grant = await issueLimited(a!, { maxBytes: 4 << 20 });
    const t = await openConnectTunnel(a!.port, `echo.test:${echo.port}`, auth(grant.token));
    expect(t.status).toBe(200);
    const sent = Buffer.alloc(1536 * 1024, 0x62);
    const echoed = await withTimeout(
      new Promise<number>((resolve) => {
        let got = 0;
        t.socket.on('data', (c: Buffer) => {
          got += c.length;
          if (got >= sent.length) resolve(got);
        });
        t.socket.once('close', () => resolve(got));
        t.socket.write(sent);
      }),
      10_000,
      'the whole echo',
    );
    t.socket.destroy();
    // 3 MiB of a 4 MiB budget, both directions: nothing was cut.
    expect(echoed).toBe(sent.length);
  });

  it('store errors are refusals with a reason, never a crash: no server, wrong password, a key of the wrong type', async () => {
    redis = await startRedis({ password: 'right-password' });
    const wrong = redis.url.replace('right-password', 'wrong-password');
    const config = (url: string): Record<string, unknown> => ({ ledger: { store: 'redis', redis: { url, keyPrefix: 'f6:' } } });
    const failure = (p: Promise<unknown>): Promise<string> => withTimeout(p.then(() => 'started', (e: Error) => e.message), 10_000, 'start outcome');
    const badPassword = await failure(startSluice(config(wrong)));
    // Sluice's words for the cause, and the store as redis://host:port/db (UX review 2026-12-04 finding 8).
    expect(badPassword).toBe(`cannot use the ledger store redis://127.0.0.1:${redis.port}/0: authentication failed: wrong user name or password (WRONGPASS)`);
    expect(badPassword).not.toContain('wrong-password');
    const admin = await redis.client();
    clients.push(admin);
    await admin.set('f6:grants', 'not a hash');
    expect(await failure(startSluice(config(redis.url)))).toMatch(/key f6:grants is a string, expected a hash/);
    await redis.kill();
    expect(await failure(startSluice(config(redis.url)))).toBe(`cannot use the ledger store redis://127.0.0.1:${redis.port}/0: connection refused`);
  });
});
