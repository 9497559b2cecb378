// Grants over time with real sockets: run-time grants (token shown once), revocation and generation
// revocation acting on live tunnels within 100 ms while other grants keep working, expiry, budgets,
// dedicated listeners on demand, and config reload (principles A5, A7 in docs/principles.md;
// docs/scenarios.md scenarios 4-6).
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import net from 'node:net';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, rawRequest, roundTrip as echoRoundTrip } from '../support/raw-client.js';
import { waitForClose, waitUntil } from '../support/wait.js';
import { OWN_UID, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function setup(config: Record<string, unknown> = {}): Promise<{ sluice: TestSluice; echo: EchoServer }> {
  const echo = await startTcpEchoServer();
  const sluice = await startSluice(config, { lookup: tableLookup({ 'echo.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) });
  cleanups.push(() => echo.close(), () => sluice.close());
  return { sluice, echo };
}

function spec(echoPort: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { destinations: [`tcp://echo.test:${echoPort}`], allowAddressClasses: ['loopback'], ...extra };
}

async function issue(sluice: TestSluice, body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const r = await sluice.app.control.issueGrant(body);
  if (!r.ok) throw new Error(`issue failed: ${JSON.stringify(r)}`);
  return { id: r.value.id, token: r.value.token };
}

async function echoTunnel(port: number, echoPort: number, token: string): Promise<net.Socket> {
  const t = await openConnectTunnel(port, `echo.test:${echoPort}`, { 'Proxy-Authorization': `Bearer ${token}` });
  if (t.status !== 200) throw new Error(`tunnel refused: ${t.head}`);
  return t.socket;
}

/** The close record is written once both sides of the tunnel are closed, just after the client sees it. */
function closeRecorded(sluice: TestSluice, count = 1): Promise<void> {
  return waitUntil(() => sluice.closes().length >= count, { timeoutMs: 2000, label: 'close record written' });
}

const roundTrip = (socket: net.Socket, text: string): Promise<string> => echoRoundTrip(socket, text, 2000);

describe('run-time grants', () => {
  it('issues a working token that no listing, log line or state file ever shows', async () => {
    const { sluice, echo } = await setup();
    const { id, token } = await issue(sluice, spec(echo.port));
    expect(token).toMatch(/^sluice_[A-Za-z0-9_-]{43}$/);
    const socket = await echoTunnel(sluice.port, echo.port, token);
    expect(await roundTrip(socket, 'hello')).toBe('hello');
    socket.destroy();
    expect(JSON.stringify(sluice.app.control.listGrants())).not.toContain(token);
    expect(JSON.stringify(sluice.app.control.getGrant(id))).not.toContain(token);
    expect(JSON.stringify(sluice.records)).not.toContain(token);
    const state = fs.readFileSync(path.join(sluice.stateDir, 'ledger.json'), 'utf8');
    expect(state).toContain(id);
    expect(state).not.toContain(token);
    expect(fs.statSync(path.join(sluice.stateDir, 'ledger.json')).mode & 0o777).toBe(0o600);
  });

  it('refuses a forged token, and a grant id presented with another grant’s token', async () => {
    const { sluice, echo } = await setup();
    const a = await issue(sluice, spec(echo.port));
    const b = await issue(sluice, spec(echo.port));
    const forged = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer sluice_${'A'.repeat(43)}` });
    expect(forged.status).toBe(407);
    const crossed = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Basic ${Buffer.from(`${a.id}:${b.token}`).toString('base64')}` });
    expect(crossed.status).toBe(407);
    forged.socket.destroy();
    crossed.socket.destroy();
  });
});

describe('revocation acts on live traffic', () => {
  it('ends A’s tunnels within 100 ms while B’s keep echoing, and refuses A’s token afterwards', async () => {
    const { sluice, echo } = await setup();
    const a = await issue(sluice, spec(echo.port));
    const b = await issue(sluice, spec(echo.port));
    const tunnelsA = [await echoTunnel(sluice.port, echo.port, a.token), await echoTunnel(sluice.port, echo.port, a.token)];
    const tunnelB = await echoTunnel(sluice.port, echo.port, b.token);
    const closed = tunnelsA.map((s) => waitForClose(s, 2000));
    const started = performance.now();
    const result = await sluice.app.control.revokeGrant(a.id);
    // Reset, not closed: unread bytes are dropped (relay/end-socket.ts).
    expect(await Promise.all(closed)).toEqual(['ECONNRESET', 'ECONNRESET']);
    expect(performance.now() - started).toBeLessThan(100);
    await closeRecorded(sluice, 2);
    expect(result.ok && result.value.endedConnections).toBe(2);
    expect(await roundTrip(tunnelB, 'still-here')).toBe('still-here');
    const replay = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${a.token}` });
    expect(replay.status).toBe(403);
    expect(replay.head).toContain('details="grant_revoked"');
    replay.socket.destroy();
    tunnelB.destroy();
    expect(sluice.closes().filter((c) => c.principal === a.id).map((c) => c.closedBy)).toEqual(['revoked', 'revoked']);
  });

  it('generation revoke ends exactly that generation', async () => {
    const { sluice, echo } = await setup();
    const run7 = [await issue(sluice, spec(echo.port, { generation: 'run-7' })), await issue(sluice, spec(echo.port, { generation: 'run-7' }))];
    const run8 = await issue(sluice, spec(echo.port, { generation: 'run-8' }));
    const t7 = await Promise.all(run7.map((g) => echoTunnel(sluice.port, echo.port, g.token)));
    const t8 = await echoTunnel(sluice.port, echo.port, run8.token);
    const closed = t7.map((s) => waitForClose(s, 2000));
    const result = await sluice.app.control.revokeGeneration('run-7');
    expect(await Promise.all(closed)).toEqual(['ECONNRESET', 'ECONNRESET']);
    expect(result.ok && [...result.value.revoked].sort()).toEqual(run7.map((g) => g.id).sort());
    expect(await roundTrip(t8, 'run-8 lives')).toBe('run-8 lives');
    t8.destroy();
  });

  it('expiry ends live tunnels and refuses new ones', async () => {
    const { sluice, echo } = await setup();
    const g = await issue(sluice, spec(echo.port, { limits: { expiresAt: new Date(Date.now() + 400).toISOString() } }));
    const tunnel = await echoTunnel(sluice.port, echo.port, g.token);
    expect(await waitForClose(tunnel, 3000)).toBe('ECONNRESET');
    await closeRecorded(sluice);
    expect(sluice.closes().at(-1)).toMatchObject({ principal: g.id, closedBy: 'expired' });
    const again = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${g.token}` });
    expect(again.head).toContain('details="grant_expired"');
    again.socket.destroy();
  });
});

describe('budgets', () => {
  it('answers 429 connection_limit_reached past maxConcurrent and leaves the first connection working', async () => {
    const { sluice, echo } = await setup();
    const g = await issue(sluice, spec(echo.port, { limits: { maxConcurrent: 1 } }));
    const first = await echoTunnel(sluice.port, echo.port, g.token);
    const second = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${g.token}` });
    expect(second.status).toBe(429);
    expect(second.head).toContain('details="connection_limit_reached"');
    second.socket.destroy();
    expect(await roundTrip(first, 'one')).toBe('one');
    first.destroy();
    await waitUntil(() => sluice.app.control.getGrant(g.id)?.usage.activeConnections === 0, { timeoutMs: 2000, label: 'the first connection detached' });
    const third = await echoTunnel(sluice.port, echo.port, g.token);
    third.destroy();
  });

  it('ends a tunnel that passes maxBytes with reason byte_limit, then refuses with 429', async () => {
    const { sluice, echo } = await setup();
    const g = await issue(sluice, spec(echo.port, { limits: { maxBytes: 1000 } }));
    const tunnel = await echoTunnel(sluice.port, echo.port, g.token);
    const closed = waitForClose(tunnel, 3000);
    tunnel.on('data', () => undefined);
    tunnel.write('x'.repeat(2000));
    await closed;
    await closeRecorded(sluice);
    expect(sluice.closes().at(-1)).toMatchObject({ principal: g.id, closedBy: 'byte_limit' });
    const again = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${g.token}` });
    expect(again.status).toBe(429);
    expect(again.head).toContain('details="byte_limit_reached"');
    again.socket.destroy();
  });

  it('ends a connection at maxDurationMs', async () => {
    const { sluice, echo } = await setup();
    const g = await issue(sluice, spec(echo.port, { limits: { maxDurationMs: 300 } }));
    const tunnel = await echoTunnel(sluice.port, echo.port, g.token);
    expect(await waitForClose(tunnel, 3000)).toBe('ECONNRESET');
    await closeRecorded(sluice);
    expect(sluice.closes().at(-1)).toMatchObject({ closedBy: 'duration_limit' });
  });
});

describe('dedicated listeners on demand', () => {
  it('opens a Unix socket that acts for the grant, and revoking removes it', async () => {
    const { sluice, echo } = await setup();
    const sock = path.join(sluice.stateDir, 'sandbox.sock');
    const g = await issue(sluice, spec(echo.port, { listen: `unix:${sock}` }));
    expect(fs.statSync(sock).isSocket()).toBe(true);
    const reply = await new Promise<string>((resolve, reject) => {
      const s = net.connect(sock, () => s.write(`CONNECT echo.test:${echo.port} HTTP/1.1\r\nHost: echo.test\r\n\r\n`));
      s.once('data', (d: Buffer) => {
        resolve(d.toString());
        s.destroy();
      });
      s.once('error', reject);
    });
    expect(reply).toMatch(/^HTTP\/1.1 200/);
    expect(sluice.decisions().at(-1)).toMatchObject({ principal: g.id, via: 'listener' });
    await sluice.app.control.revokeGrant(g.id);
    expect(fs.existsSync(sock)).toBe(false);
  });

  it('forgets a run-time grant: its tunnel and socket end, its token is refused, and no listing, ledger or restart knows it', async () => {
    const { sluice, echo } = await setup();
    const sock = path.join(sluice.stateDir, 'run.sock');
    const g = await issue(sluice, spec(echo.port, { listen: `unix:${sock}`, generation: 'run-1' }));
    const other = await issue(sluice, spec(echo.port));
    const tunnel = await echoTunnel(sluice.port, echo.port, g.token);
    const closed = waitForClose(tunnel, 2000);
    const result = await sluice.app.control.forgetGrant(g.id);
    expect(await closed).toBe('ECONNRESET');
    expect(result.ok && result.value.endedConnections).toBe(1);
    expect(fs.existsSync(sock)).toBe(false);
    expect(sluice.app.control.getGrant(g.id)).toBeUndefined();
    expect(sluice.app.control.listGrants().map((v) => v.id)).toEqual([other.id]);
    const ledger = fs.readFileSync(path.join(sluice.stateDir, 'ledger.json'), 'utf8');
    expect(ledger).not.toContain(g.id);
    expect(ledger).toContain(other.id);
    const replay = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Basic ${Buffer.from(`${g.id}:${g.token}`).toString('base64')}` });
    expect(replay.status).toBe(407);
    replay.socket.destroy();
    expect((await sluice.app.control.forgetGrant(g.id)).ok).toBe(false);
  });

  it('refuses to forget a config grant (the file would bring it back) and leaves it working', async () => {
    const { sluice, echo } = await setup({ grants: [{ id: 'cfg', tokenSha256: tokenHash('cfg-token'), destinations: ['tcp://echo.test:1'] }] });
    const result = await sluice.app.control.forgetGrant('cfg');
    expect(result).toMatchObject({ ok: false, status: 409, reason: 'grant_from_config' });
    expect(sluice.app.control.getGrant('cfg')?.revokedAt).toBeNull();
    expect(echo.port).toBeGreaterThan(0);
  });
});

describe('config reload', () => {
  it('keeps serving the old config when the new file is invalid, and narrows live tunnels when valid', async () => {
    const echo = await startTcpEchoServer();
    cleanups.push(() => echo.close());
    const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'sluice-reload-'));
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    const token = 'tok-reload';
    const file = path.join(dir, 'sluice.yaml');
    const base = (destinations: string[]): Record<string, unknown> => ({
      listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
      state: path.join(dir, 'state'),
      dns: { hosts: { 'echo.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] } },
      grants: [{ id: 'r', tokenSha256: tokenHash(token), destinations, allowAddressClasses: ['loopback'] }],
    });
    fs.writeFileSync(file, stringify(base([`tcp://echo.test:${echo.port}`, `tcp://other.test:${echo.port}`])));
    const { loadConfig } = await import('../../src/config/index.js');
    const { startApp } = await import('../../src/app.js');
    const loaded = await loadConfig(file, dir);
    if (!loaded.ok) throw new Error('config');
    const records: { kind: string; closedBy?: string; canonical?: string | null }[] = [];
    const app = await startApp(loaded.config, { env: {}, cwd: dir, uid: OWN_UID, audit: { write: (r) => void records.push(r), flush: async () => undefined }, log: { info: () => undefined, warn: () => undefined, error: () => undefined } });
    cleanups.push(() => app.close());
    const port = Number(app.listeners[0]?.address.split(':').at(-1));
    const echoT = await echoTunnel(port, echo.port, token);
    const otherT = (await openConnectTunnel(port, `other.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${token}` })).socket;

    fs.writeFileSync(file, 'grants: [ {id: 1}');
    const bad = await app.control.reload();
    expect(bad.ok).toBe(false);
    expect(await roundTrip(echoT, 'still old')).toBe('still old');

    fs.writeFileSync(file, stringify(base([`tcp://echo.test:${echo.port}`])));
    const closed = waitForClose(otherT, 2000);
    const good = await app.control.reload();
    expect(good.ok && good.value.endedConnections).toBe(1);
    expect(await closed).toBe('ECONNRESET');
    expect(await roundTrip(echoT, 'kept')).toBe('kept');
    expect(records.filter((r) => r.kind === 'close').at(-1)).toMatchObject({ closedBy: 'grant_changed', canonical: `other.test:${echo.port}` });
    echoT.destroy();
    const denied = await rawRequest(port, `CONNECT other.test:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Bearer ${token}\r\n\r\n`);
    expect(denied.text).toContain('details="destination_not_granted"');
  });
});
