// The hop cache (ADR 0018, src/proxy/hop/hop-cache.ts) through a running Sluice, as a hostile principal in a
// sandbox would probe it: keep using a remembered "allow" after its grant was revoked, expired or narrowed
// by a reload, or after the DNS answer it was checked against has changed to a forbidden address; send a
// keep-alive or fresh connection without credentials, or a mismatched Host, hoping a cached target skips
// identification or the Host check; use a dedicated listener whose grant does not allow a target another
// dedicated listener reached. Every hop, hit or miss, must still write exactly one decision record.
// Origins listen on 127.0.0.1 only; names map to loopback through dns.hosts or the injected lookup; the
// one forbidden answer (10.0.0.1) is refused before any dial.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type SluiceApp } from '../../src/app.js';
import type { DecisionRecordV1 } from '../../src/audit/index.js';
import { loadConfig } from '../../src/config/index.js';
import type { LookupAll } from '../../src/core/index.js';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { openConnectTunnel, parseResponseHead, roundTrip, type ConnectTunnel, type ParsedHead } from '../support/raw-client.js';
import { OWN_UID, silentLog, tokenHash } from '../support/sluice.js';
import { waitForClose, waitUntil, withTimeout } from '../support/wait.js';

const TOKEN = 'tok-hop-cache';
const BEARER = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface Running {
  readonly app: SluiceApp;
  readonly port: number;
  readonly file: string;
  /** The audit file's decision records (only complete once the app is closed: the sink batches). */
  decisions(): DecisionRecordV1[];
  /** sluice_decision_cache_lookups_total by result. */
  lookups(): Promise<{ hit: number; miss: number }>;
}

/** Starts Sluice from a config file (so reload reads it again) with its audit file sink, in a temp dir. */
async function start(config: Record<string, unknown>, lookup?: LookupAll): Promise<Running> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-hop-cache-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'sluice.yaml');
  const audit = path.join(dir, 'audit.jsonl');
  fs.writeFileSync(file, stringify({
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    admin: { metrics: '127.0.0.1:0' },
    state: path.join(dir, 'state'),
    audit: { file: audit },
    ...config,
  }));
  const loaded = await loadConfig(file, dir);
  if (!loaded.ok) throw new Error(`config: ${JSON.stringify(loaded.issues)}`);
  const app = await startApp(loaded.config, { env: {}, cwd: dir, uid: OWN_UID, log: silentLog, ...(lookup === undefined ? {} : { lookup }) });
  cleanups.push(() => app.close());
  return {
    app,
    file,
    port: Number(app.listeners[0]?.address.split(':').at(-1)),
    decisions: () => fs.readFileSync(audit, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { kind: string }).filter((r): r is DecisionRecordV1 => r.kind === 'decision'),
    lookups: async () => {
      const body = (await app.runtime.metrics.render()).body;
      const count = (result: string): number => Number(new RegExp(`^sluice_decision_cache_lookups_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(body)?.[1] ?? 0);
      return { hit: count('hit'), miss: count('miss') };
    },
  };
}

async function echo(): Promise<EchoServer> {
  const server = await startTcpEchoServer();
  cleanups.push(() => server.close());
  return server;
}

async function web(): Promise<Origin> {
  const server = await startHttpOrigin();
  cleanups.push(() => server.close());
  return server;
}

/** A CONNECT whose socket is closed after the test (or at once when `keep` is false). */
async function connect(port: number, target: string, headers: Record<string, string> = BEARER, keep = false): Promise<ConnectTunnel> {
  const tunnel = await openConnectTunnel(port, target, headers);
  if (keep) cleanups.push(() => void tunnel.socket.destroy());
  else tunnel.socket.destroy();
  return tunnel;
}

const details = (t: { head: string } | undefined): string | undefined => /details="([a-z_]+)"/.exec(t?.head ?? '')?.[1];

/** Fresh CONNECTs, polled (bounded) until one is refused; also when each allowed one was sent. */
async function firstRefusal(port: number, target: string, headers: Record<string, string>, timeoutMs: number): Promise<{ refused: ConnectTunnel | undefined; allowedSentAt: number[] }> {
  const allowedSentAt: number[] = [];
  let refused: ConnectTunnel | undefined;
  await waitUntil(async () => {
    const sentAt = Date.now();
    const t = await connect(port, target, headers);
    if (t.status === 200) allowedSentAt.push(sentAt);
    else refused = t;
    return refused !== undefined;
  }, { timeoutMs, label: `CONNECT ${target} refused` });
  return { refused, allowedSentAt };
}

describe('a remembered allow never outlives what it was derived from', () => {
  it('revocation: the second use is a hit; after revoke the same CONNECT is refused grant_revoked at once, and the live tunnel ends', async () => {
    const server = await echo();
    const s = await start({ dns: { hosts: { 'echo.test': ['127.0.0.1'] } } });
    const r = await s.app.control.issueGrant({ destinations: [`tcp://echo.test:${server.port}`], allowAddressClasses: ['loopback'] });
    if (!r.ok) throw new Error('issue');
    const auth = { 'Proxy-Authorization': `Bearer ${r.value.token}` };
    const live = await connect(s.port, `echo.test:${server.port}`, auth, true);
    expect(live.status).toBe(200);
    expect((await connect(s.port, `echo.test:${server.port}`, auth)).status).toBe(200);
    expect(await s.lookups()).toEqual({ hit: 1, miss: 1 });
    expect(s.app.runtime.hopCache.size).toBe(1);
    expect(await roundTrip(live.socket, 'before')).toBe('before');

    const ended = waitForClose(live.socket, 2000);
    await s.app.control.revokeGrant(r.value.id);
    const refused = await connect(s.port, `echo.test:${server.port}`, auth);
    expect([refused.status, details(refused)]).toEqual([403, 'grant_revoked']);
    await ended;
    expect(await s.lookups()).toEqual({ hit: 1, miss: 2 });
  });

  it('expiry: allowed from the cache until expiresAt, refused grant_expired from then on', async () => {
    const server = await echo();
    const s = await start({ dns: { hosts: { 'echo.test': ['127.0.0.1'] } } });
    const expiresAt = Date.now() + 1500;
    const r = await s.app.control.issueGrant({ destinations: [`tcp://echo.test:${server.port}`], allowAddressClasses: ['loopback'], limits: { expiresAt: new Date(expiresAt).toISOString() } });
    if (!r.ok) throw new Error('issue');
    const auth = { 'Proxy-Authorization': `Bearer ${r.value.token}` };
    expect((await connect(s.port, `echo.test:${server.port}`, auth)).status).toBe(200);
    expect((await connect(s.port, `echo.test:${server.port}`, auth)).status).toBe(200);
    expect((await s.lookups()).hit).toBe(1);
    const { refused, allowedSentAt } = await firstRefusal(s.port, `echo.test:${server.port}`, auth, 5000);
    expect([refused?.status, details(refused)]).toEqual([403, 'grant_expired']);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
    // No hop sent after expiresAt was allowed: a hit checks the grant's liveness like a miss does.
    expect(allowedSentAt.filter((t) => t >= expiresAt)).toEqual([]);
    expect((await s.lookups()).hit).toBeGreaterThanOrEqual(2);
  });

  it('DNS TTL: a changed answer is not used before its TTL ends, and a forbidden one is refused after it, before any dial', async () => {
    const server = await echo();
    let answer = '127.0.0.1';
    const asked: string[] = [];
    const lookup: LookupAll = async (host) => {
      asked.push(host);
      if (host !== 'ttl.test') throw new Error('no address');
      return [{ address: answer, family: 4, ttlSeconds: 1 }];
    };
    const s = await start({ grants: [{ id: 't', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://ttl.test:${server.port}`], allowAddressClasses: ['loopback'] }] }, lookup);
    const startedAt = performance.now();
    expect((await connect(s.port, `ttl.test:${server.port}`)).status).toBe(200);
    answer = '10.0.0.1';
    expect((await connect(s.port, `ttl.test:${server.port}`)).status).toBe(200);
    expect(asked).toEqual(['ttl.test']);
    expect((await s.lookups()).hit).toBe(1);
    const { refused } = await firstRefusal(s.port, `ttl.test:${server.port}`, BEARER, 4000);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(1000);
    expect([refused?.status, details(refused)]).toEqual([403, 'address_class_denied']);
    expect(asked).toEqual(['ttl.test', 'ttl.test']);
    const connections = server.connections;
    await s.app.close();
    const last = s.decisions().at(-1);
    expect(last).toMatchObject({ reason: 'address_class_denied', pinned: null, addresses: [expect.objectContaining({ address: '10.0.0.1', allowed: false })] });
    expect(server.connections).toBe(connections);
  });

  it('reload: a destination the new config removed is refused at the next hop', async () => {
    const server = await echo();
    const grant = (destinations: string[]): Record<string, unknown> => ({
      dns: { hosts: { 'echo.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] } },
      grants: [{ id: 'r', tokenSha256: tokenHash(TOKEN), destinations, allowAddressClasses: ['loopback'] }],
    });
    const s = await start(grant([`tcp://echo.test:${server.port}`, `tcp://other.test:${server.port}`]));
    expect((await connect(s.port, `other.test:${server.port}`)).status).toBe(200);
    expect((await connect(s.port, `other.test:${server.port}`)).status).toBe(200);
    expect((await s.lookups()).hit).toBe(1);
    const narrowed = parse(fs.readFileSync(s.file, 'utf8')) as { grants: { destinations: string[] }[] };
    for (const g of narrowed.grants) g.destinations = [`tcp://echo.test:${server.port}`];
    fs.writeFileSync(s.file, stringify(narrowed));
    expect((await s.app.control.reload()).ok).toBe(true);
    const refused = await connect(s.port, `other.test:${server.port}`);
    expect([refused.status, details(refused)]).toEqual([403, 'destination_not_granted']);
    expect((await connect(s.port, `echo.test:${server.port}`)).status).toBe(200);
  });

  it('dedicated listeners: a target remembered on one is decided afresh, under its own grant, on another', async () => {
    const server = await echo();
    const s = await start({ dns: { hosts: { 'echo.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] } } });
    const issue = async (host: string): Promise<number> => {
      const r = await s.app.control.issueGrant({ destinations: [`tcp://${host}:${server.port}`], allowAddressClasses: ['loopback'], listen: '127.0.0.1:0' });
      if (!r.ok || r.value.grant.listen === null) throw new Error('issue');
      return Number(r.value.grant.listen.split(':').at(-1));
    };
    const [portA, portB] = [await issue('echo.test'), await issue('other.test')];
    expect((await connect(portA, `echo.test:${server.port}`, {})).status).toBe(200);
    expect((await connect(portA, `echo.test:${server.port}`, {})).status).toBe(200);
    expect((await s.lookups()).hit).toBe(1);
    const onB = await connect(portB, `echo.test:${server.port}`, {});
    expect([onB.status, details(onB)]).toEqual([403, 'destination_not_granted']);
  });
});

/** One client connection that sends requests in turn and reads one complete (Content-Length) response each. */
function session(port: number): { send(text: string): Promise<ParsedHead> } {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  cleanups.push(() => void socket.destroy());
  let buf = Buffer.alloc(0);
  let waiting: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    waiting?.();
  });
  const send = (text: string): Promise<ParsedHead> =>
    withTimeout(new Promise<ParsedHead>((resolve) => {
      waiting = () => {
        const head = parseResponseHead(buf);
        const length = Number(head?.headers['content-length'] ?? 0);
        if (head === null || buf.length < head.headLength + length) return;
        buf = buf.subarray(head.headLength + length);
        waiting = null;
        resolve(head);
      };
      socket.write(text);
    }), 5000, `response to ${text.split('\r\n')[0] ?? ''}`);
  return { send };
}

describe('forward hops: the cache never stands in for identification or the Host check', () => {
  async function forwardSetup(): Promise<{ s: Running; origin: Origin; get: (host: string, auth: boolean, extra?: string) => string }> {
    const origin = await web();
    const s = await start({
      dns: { hosts: { 'web.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] } },
      grants: [{ id: 'f', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
    });
    const get = (host: string, auth: boolean, extra = ''): string =>
      `GET http://web.test:${origin.port}/p HTTP/1.1\r\nHost: ${host}\r\n${auth ? `Proxy-Authorization: Bearer ${TOKEN}\r\n` : ''}${extra}\r\n`;
    return { s, origin, get };
  }

  it('refuses a second connection without Proxy-Authorization token_missing although its target is remembered', async () => {
    const { s, origin, get } = await forwardSetup();
    const first = session(s.port);
    const host = `web.test:${origin.port}`;
    expect((await first.send(get(host, true))).status).toBe(200);
    expect((await first.send(get(host, true))).status).toBe(200);
    // The first connection's own principal carries a keep-alive request without credentials; uncached.
    expect((await first.send(get(host, false))).status).toBe(200);
    expect(await s.lookups()).toEqual({ hit: 1, miss: 1 });
    const served = origin.requests.length;
    const second = await session(s.port).send(get(host, false));
    expect([second.status, details(second)]).toEqual([407, 'token_missing']);
    expect(origin.requests.length).toBe(served);
    expect(await s.lookups()).toEqual({ hit: 1, miss: 1 });
  });

  it('still refuses a Host that disagrees with a remembered target, also after an agreeing Host was memoized', async () => {
    const { s, origin, get } = await forwardSetup();
    const host = `web.test:${origin.port}`;
    const c = session(s.port);
    expect((await c.send(get(host, true))).status).toBe(200);
    expect((await c.send(get(host, true))).status).toBe(200);
    const served = origin.requests.length;
    const mismatch = await session(s.port).send(get(`other.test:${origin.port}`, true));
    expect([mismatch.status, details(mismatch)]).toEqual([400, 'host_mismatch']);
    // Two Host lines whose first is the memoized agreeing value (RFC 9112 §3.2).
    const doubled = await session(s.port).send(get(host, true, `Host: other.test:${origin.port}\r\n`));
    expect([doubled.status, details(doubled)]).toEqual([400, 'host_mismatch']);
    expect(origin.requests.length).toBe(served);
    expect(await s.lookups()).toEqual({ hit: 3, miss: 1 });
  });
});

describe('the audit invariant holds across hits and misses', () => {
  it('writes exactly one decision record per hop, and a hit’s record says what the miss’s did', async () => {
    const [server, origin] = [await echo(), await web()];
    const s = await start({
      dns: { hosts: { 'echo.test': ['127.0.0.1'], 'web.test': ['127.0.0.1'] } },
      grants: [{ id: 'a', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://echo.test:${server.port}`, `http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
    });
    let hops = 0;
    for (const target of [`echo.test:${server.port}`, `echo.test:${server.port}`, `echo.test:${server.port}`, `web.test:${server.port}`, `web.test:${server.port}`]) {
      await connect(s.port, target);
      hops += 1;
    }
    const c = session(s.port);
    const host = `web.test:${origin.port}`;
    for (const [h, auth] of [[host, true], [host, true], [host, false], [`echo.test:${origin.port}`, true]] as const) {
      await c.send(`GET http://${host}/x HTTP/1.1\r\nHost: ${h}\r\n${auth ? `Proxy-Authorization: Bearer ${TOKEN}\r\n` : ''}\r\n`);
      hops += 1;
    }
    // Hits: two CONNECTs and two forward requests; the credential-less keep-alive request is not looked up.
    expect(await s.lookups()).toEqual({ hit: 4, miss: 4 });
    await s.app.close();
    const decisions = s.decisions();
    expect(decisions).toHaveLength(hops);
    expect(new Set(decisions.map((d) => `${d.connection}/${d.hop}`)).size).toBe(hops);
    const same = (d: DecisionRecordV1): unknown => [d.reason, d.canonical, d.rule, d.pinned, d.route, d.addresses];
    const tunnels = decisions.filter((d) => d.target === `echo.test:${server.port}`).map(same);
    expect(tunnels).toEqual(Array(3).fill(tunnels[0]));
    expect(decisions.filter((d) => d.target === `web.test:${server.port}`).map((d) => d.reason)).toEqual(['destination_not_granted', 'destination_not_granted']);
    expect(decisions.filter((d) => d.request === 'forward').map((d) => d.reason)).toEqual(['granted', 'granted', 'granted', 'host_mismatch']);
  });
});
