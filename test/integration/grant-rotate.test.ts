// Rotating a grant's token through a running Sluice, as a principal holding a leaked (old) token would
// try to keep using it: a CONNECT the hop cache remembers for exactly those credentials, a live tunnel
// or keep-alive connection opened before the rotation, curl with the old token in its proxy URL after
// the grace, and a fleet instance that has not heard of the rotation yet. The admin route is called
// over the real admin socket; the CLI wraps it. Traffic stays on 127.0.0.1.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runGrantCommand } from '../../src/cli/index.js';
import { startHttpOrigin, startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip, type ConnectTunnel } from '../support/raw-client.js';
import { runCurl } from '../support/curl.js';
import { redisSkip, startRedis } from '../support/redis.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { call } from '../unit/admin/fake-control.js';
import { waitForClose, waitUntil } from '../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function echo(): Promise<EchoServer> {
  const server = await startTcpEchoServer();
  cleanups.push(() => server.close());
  return server;
}

async function sluice(config: Record<string, unknown> = {}): Promise<TestSluice & { admin: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-rotate-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  // dns.hosts, not an injected lookup: its answers have a lifetime, so the hop cache remembers hops.
  const s = await startSluice({ admin: { listen: `unix:${path.join(dir, 'admin', 'admin.sock')}` }, dns: { hosts: { 'echo.test': ['127.0.0.1'] } }, ...config });
  cleanups.push(() => s.close());
  return Object.assign(s, { admin: path.join(dir, 'admin', 'admin.sock') });
}

const basic = (id: string, token: string): Record<string, string> => ({ 'Proxy-Authorization': `Basic ${Buffer.from(`${id}:${token}`).toString('base64')}` });
const details = (t: ConnectTunnel): string | undefined => /details="([a-z_]+)"/.exec(t.head)?.[1];

async function connect(port: number, target: string, headers: Record<string, string>): Promise<ConnectTunnel> {
  const tunnel = await openConnectTunnel(port, target, headers);
  cleanups.push(() => void tunnel.socket.destroy());
  return tunnel;
}

async function issue(s: TestSluice, server: EchoServer): Promise<{ id: string; token: string }> {
  const r = await s.app.control.issueGrant({ destinations: [`tcp://echo.test:${server.port}`], allowAddressClasses: ['loopback'] });
  if (!r.ok) throw new Error(JSON.stringify(r));
  return { id: r.value.id, token: r.value.token };
}

describe('POST /v1/grants/{id}/rotate over the admin socket', () => {
  it('without a grace: a CONNECT the hop cache remembers with the old token is refused token_invalid at once, the live tunnel ends, the new token works', async () => {
    const server = await echo();
    const s = await sluice();
    const { id, token } = await issue(s, server);
    const target = `echo.test:${server.port}`;
    const live = await connect(s.port, target, basic(id, token));
    expect(live.status).toBe(200);
    expect((await connect(s.port, target, basic(id, token))).status).toBe(200);
    expect(s.app.runtime.hopCache.size).toBe(1);
    expect(await roundTrip(live.socket, 'before')).toBe('before');

    const ended = waitForClose(live.socket, 2000);
    const answer = await call({ socketPath: s.admin }, 'POST', `/v1/grants/${id}/rotate`, { body: '{}' });
    expect(answer.status).toBe(200);
    const body = answer.json as { id: string; token: string; previousTokenUntil: string | null; endedConnections: number };
    // Both tunnels opened with the old token (the first and the remembered one) end.
    expect([body.id, body.previousTokenUntil, body.endedConnections]).toEqual([id, null, 2]);
    const refused = await connect(s.port, target, basic(id, token));
    expect([refused.status, details(refused)]).toEqual([407, 'token_invalid']);
    const bearer = await connect(s.port, target, { 'Proxy-Authorization': `Bearer ${token}` });
    expect([bearer.status, details(bearer)]).toEqual([407, 'token_invalid']);
    await ended;
    const fresh = await connect(s.port, target, basic(id, body.token));
    expect(fresh.status).toBe(200);
    expect(await roundTrip(fresh.socket, 'after')).toBe('after');
    // The answer, the view and the state file hold no old token; the view and state file not the new one either.
    const state = fs.readFileSync(path.join(s.stateDir, 'ledger.json'), 'utf8');
    expect(state).not.toContain(body.token);
    expect(JSON.stringify((await call({ socketPath: s.admin }, 'GET', `/v1/grants/${id}`)).json)).not.toContain(body.token);
  });

  it('with a grace: curl with the old token in its proxy URL works until previousTokenUntil, then gets 407; curl with the new one keeps working', async () => {
    const origin = await startHttpOrigin();
    cleanups.push(() => origin.close());
    const s = await sluice();
    const r = await s.app.control.issueGrant({ destinations: [`http://echo.test:${origin.port}`], allowAddressClasses: ['loopback'] });
    if (!r.ok) throw new Error('issue');
    const { id, token } = r.value;
    const curl = (t: string): Promise<string> =>
      runCurl(['-o', '/dev/null', '-w', '%{http_code}', '-x', `http://${id}:${t}@127.0.0.1:${s.port}`, `http://echo.test:${origin.port}/`]).then((x) => x.stdout);
    expect(await curl(token)).toBe('200');
    const answer = await call({ socketPath: s.admin }, 'POST', `/v1/grants/${id}/rotate`, { body: '{"graceMs":1500}' });
    const body = answer.json as { token: string; previousTokenUntil: string };
    const until = Date.parse(body.previousTokenUntil);
    expect(answer.status).toBe(200);
    expect(await curl(body.token)).toBe('200');
    const allowedAt: number[] = [];
    await waitUntil(async () => {
      const sentAt = Date.now();
      const code = await curl(token);
      if (code === '200') allowedAt.push(sentAt);
      return code === '407';
    }, { timeoutMs: 8000, label: 'the old token refused after its grace' });
    expect(allowedAt.length).toBeGreaterThan(0);
    for (const at of allowedAt) expect(at).toBeLessThan(until);
    expect(await curl(body.token)).toBe('200');
  });

  it('refuses a config grant (409 grant_from_config), a bad body (400 rotation_invalid), an unknown id (404), and changes nothing', async () => {
    const server = await echo();
    const s = await sluice({ grants: [{ id: 'cfg', tokenSha256: tokenHash('cfg-token'), destinations: [`tcp://echo.test:${server.port}`], allowAddressClasses: ['loopback'] }] });
    const cases: [string, string, number, string][] = [
      ['cfg', '{}', 409, 'grant_from_config'],
      ['cfg', '{"graceMs":86400001}', 400, 'rotation_invalid'],
      ['cfg', '{"graceMs":-1}', 400, 'rotation_invalid'],
      ['cfg', '{"graceMs":1.5}', 400, 'rotation_invalid'],
      ['cfg', '{"grace":1000}', 400, 'rotation_invalid'],
      ['cfg', '[]', 400, 'rotation_invalid'],
      ['g-unknown', '{}', 404, 'grant_not_found'],
    ];
    for (const [id, body, status, error] of cases) {
      const answer = await call({ socketPath: s.admin }, 'POST', `/v1/grants/${id}/rotate`, { body });
      expect([id, body, answer.status, (answer.json as { error: string }).error]).toEqual([id, body, status, error]);
    }
    expect((await connect(s.port, `echo.test:${server.port}`, basic('cfg', 'cfg-token'))).status).toBe(200);
  });

  it('sluice grant rotate prints the new token once and the old one stops', async () => {
    const server = await echo();
    const s = await sluice();
    const { id, token } = await issue(s, server);
    let stdout = '';
    let stderr = '';
    const code = await runGrantCommand({ action: 'rotate', admin: `unix:${s.admin}`, id, graceMs: '0' }, { stdout: (x) => void (stdout += x), stderr: (x) => void (stderr += x) });
    expect(code).toBe(0);
    const fresh = /^token {2}(\S+)$/m.exec(stdout)?.[1] ?? '';
    expect(stderr).toMatch(/shown only this once.*previous token stopped now/);
    expect((await connect(s.port, `echo.test:${server.port}`, basic(id, fresh))).status).toBe(200);
    expect((await connect(s.port, `echo.test:${server.port}`, basic(id, token))).status).toBe(407);
    expect(await runGrantCommand({ action: 'rotate', admin: `unix:${s.admin}`, id, graceMs: 'soon' }, { stdout: () => undefined, stderr: () => undefined })).toBe(2);
  });
});

describe.skipIf(redisSkip())('rotation across a fleet on Redis', () => {
  it('a rotation on A stops the old token on B (and its live tunnel there); the new token works on B; a concurrent rotation is refused, not lost', async () => {
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    const server = await echo();
    const start = async (): Promise<TestSluice> => {
      const s = await startSluice({ ledger: { store: 'redis', redis: { url: redis.url, keyPrefix: 'rot:' }, maxStaleMs: 2000 } }, { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) });
      cleanups.push(() => s.close());
      return s;
    };
    const a = await start();
    const b = await start();
    const { id, token } = await issue(a, server);
    const target = `echo.test:${server.port}`;
    await waitUntil(async () => (await openConnectTunnel(b.port, target, basic(id, token)).then((t) => (t.socket.destroy(), t.status))) === 200, { timeoutMs: 2000, label: 'B knows the grant' });
    const live = await connect(b.port, target, basic(id, token));
    expect(live.status).toBe(200);
    const ended = waitForClose(live.socket, 2000);
    const rotated = await a.app.control.rotateGrant(id, 0);
    if (!rotated.ok) throw new Error(JSON.stringify(rotated));
    await ended;
    await waitUntil(async () => (await openConnectTunnel(b.port, target, basic(id, token)).then((t) => (t.socket.destroy(), t.status))) === 407, { timeoutMs: 2000, label: 'B refuses the old token' });
    expect((await connect(b.port, target, basic(id, rotated.value.token))).status).toBe(200);
    // B rotates from what it knows; then A, which has not applied B's rotation yet if it is quick, or has.
    const onB = await b.app.control.rotateGrant(id, 0);
    expect(onB.ok).toBe(true);
    if (a.app.ledger.get(id)?.tokenSha256 === tokenHash(rotated.value.token)) {
      expect(await a.app.control.rotateGrant(id, 0)).toMatchObject({ ok: false, status: 409, reason: 'rotation_conflict' });
    }
  });
});
