// The byte budget of a grant (limits.maxBytes) is one counter per grant, which every tunnel and
// forwarded request of the grant takes from while its bytes stream (review 2026-12 finding 6). A take is
// synchronous, so of two hops racing for the last bytes only one gets them; the chunk that passes the
// budget is counted and refused. Further down: the connections acting under each grant (caps, revocation,
// narrowing reloads, expiry) and its token.
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { grantSpecSchema } from '../../../src/config/index.js';
import { canonicalize } from '../../../src/authority/index.js';
import { sha256 } from '../../../src/identity/index.js';
import { GrantRegistry, type GrantConnection } from '../../../src/grant/index.js';
import { compileAddressPolicy, HostAddresses, pin, SelfAddresses } from '../../../src/resolve/index.js';
import type { CanonicalDestination, CloseReason } from '../../../src/core/index.js';

function registryWith(limits: Record<string, number>): { registry: GrantRegistry; install: (next: Record<string, number>) => void } {
  const registry = new GrantRegistry(new SelfAddresses([]), Date.now);
  const install = (next: Record<string, number>): void => {
    const compiled = registry.compile({ id: 'g', spec: grantSpecSchema.parse({ destinations: ['http://a.test'], limits: next }), revoked: false, tokenSha256: null }, '');
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    registry.install([{ grant: compiled.value, tokenSha256: null }]);
  };
  install(limits);
  return { registry, install };
}

const grantOf = (registry: GrantRegistry) => {
  const grant = registry.grants.get('g');
  if (grant === undefined) throw new Error('grant g not installed');
  return grant;
};

describe('GrantRegistry byte budget', () => {
  it('has no budget for a grant without maxBytes: nothing is counted while streaming', () => {
    const { registry } = registryWith({});
    expect(registry.budgetOf(grantOf(registry))).toBeNull();
    expect(registry.bytesLeft('g')).toBe(Infinity);
  });

  it('relays up to maxBytes, refuses (but counts) the chunk that passes it, and is spent after', () => {
    const { registry } = registryWith({ maxBytes: 1000 });
    const budget = registry.budgetOf(grantOf(registry));
    expect(budget?.take(600)).toBe(true);
    expect(budget?.take(400)).toBe(true);
    expect(budget?.hasLeft()).toBe(false);
    expect(budget?.take(1)).toBe(false);
    expect(registry.usageOf('g').bytes).toBe(1001);
    expect(registry.bytesLeft('g')).toBe(0);
  });

  it('is one counter for every hop of the grant: tunnels (addBytes) and forwarded requests (budgetOf)', () => {
    const { registry } = registryWith({ maxBytes: 1000 });
    const first = registry.budgetOf(grantOf(registry));
    const second = registry.budgetOf(grantOf(registry));
    expect(first).toBe(second);
    expect(registry.addBytes('g', 900)).toBe(true);
    expect(first?.take(100)).toBe(true);
    expect(second?.take(1)).toBe(false);
    expect(registry.addBytes('g', 1)).toBe(false);
  });

  it('follows a reload: a raised maxBytes applies to the budget hops already hold', () => {
    const { registry, install } = registryWith({ maxBytes: 1000 });
    const budget = registry.budgetOf(grantOf(registry));
    expect(budget?.take(1500)).toBe(false);
    install({ maxBytes: 4000 });
    expect(budget?.hasLeft()).toBe(true);
    expect(budget?.take(100)).toBe(true);
    expect(registry.bytesLeft('g')).toBe(2400);
  });
});

// ---------------------------------------------------------------------------------------------------
// Connections under a grant. A hostile principal opens more connections than its grant allows, keeps a
// tunnel open past revocation, expiry or a narrowing reload, or rides on another grant's state; an admin
// action on one grant must end that grant's connections (with the reason on their close record) and
// touch no other grant's. Connections are fakes with the GrantConnection shape: `end` records its
// reason, and the socket closes only when a test says so, as a real socket closes some time after end().

interface FakeConnection extends GrantConnection {
  readonly ended: CloseReason[];
  readonly durations: number[];
  readonly socket: EventEmitter;
  /** The client socket closes (after end(), or the client hung up). */
  close(): void;
}

const NO_INTERFACES = new HostAddresses(() => ({}));
const WIDE_POLICY = compileAddressPolicy(['private', 'loopback', 'link_local', 'cgnat', 'reserved'], [], new SelfAddresses([], NO_INTERFACES));

function destination(authority: string): CanonicalDestination {
  const d = canonicalize(authority);
  if (!d.ok) throw new Error(`bad test authority ${authority}`);
  return d.value;
}

/** A live CONNECT tunnel's hop: its destination and the address it dialed (pinned as production pins). */
function tunnelTo(authority: string, address: string | null): NonNullable<GrantConnection['tunnelHop']> {
  const canonical = destination(authority);
  if (address === null) return { canonical, dialed: null };
  if (!WIDE_POLICY.ok) throw new Error('policy');
  const pinned = pin(canonical, [{ address, family: address.includes(':') ? 6 : 4 }], WIDE_POLICY.value).verdict;
  if (!pinned.ok || pinned.value[0] === undefined) throw new Error(`cannot pin ${address}`);
  return { canonical, dialed: pinned.value[0] };
}

function connection(tunnelHop: GrantConnection['tunnelHop'] = null): FakeConnection {
  const socket = new EventEmitter();
  const ended: CloseReason[] = [];
  const durations: number[] = [];
  return {
    grantId: null,
    liveSlot: -1,
    tunnelHop,
    socket,
    ended,
    durations,
    end: (reason) => void ended.push(reason),
    limitDuration: (ms) => void durations.push(ms),
    close: () => void socket.emit('close'),
  };
}

const registries: GrantRegistry[] = [];
afterEach(() => {
  while (registries.length > 0) registries.pop()?.close();
  vi.useRealTimers();
});

function newRegistry(now: () => number = Date.now): GrantRegistry {
  const registry = new GrantRegistry(new SelfAddresses([], NO_INTERFACES), now);
  registries.push(registry);
  return registry;
}

function compileFor(registry: GrantRegistry, id: string, body: Record<string, unknown>, revoked = false) {
  const compiled = registry.compile({ id, spec: grantSpecSchema.parse(body), revoked, tokenSha256: null }, '');
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
  return compiled.value;
}

function installGrant(registry: GrantRegistry, id: string, body: Record<string, unknown>, options: { revoked?: boolean; token?: string | null } = {}): number {
  const token = options.token ?? null;
  return registry.install([{ grant: compileFor(registry, id, body, options.revoked ?? false), tokenSha256: token === null ? null : sha256(token) }]);
}

function attached(registry: GrantRegistry, id: string, tunnelHop: GrantConnection['tunnelHop'] = null): FakeConnection {
  const grant = registry.grants.get(id);
  if (grant === undefined) throw new Error(`grant ${id} not installed`);
  const ctx = connection(tunnelHop);
  const verdict = registry.attach(ctx, grant);
  if (!verdict.ok) throw new Error(`attach refused: ${verdict.reason}`);
  return ctx;
}

function attachVerdict(registry: GrantRegistry, id: string): { verdict: ReturnType<GrantRegistry['attach']>; ctx: FakeConnection } {
  const grant = registry.grants.get(id);
  if (grant === undefined) throw new Error(`grant ${id} not installed`);
  const ctx = connection();
  return { verdict: registry.attach(ctx, grant), ctx };
}

describe('GrantRegistry.attach: a principal gets no more connections than its grant allows', () => {
  it('refuses past maxConcurrent (connection_limit_reached) and admits again once a connection closes', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxConcurrent: 2 } });
    const first = attached(registry, 'a');
    attached(registry, 'a');
    const refused = attachVerdict(registry, 'a');
    expect(refused.verdict).toMatchObject({ ok: false, reason: 'connection_limit_reached' });
    expect(refused.ctx.grantId).toBeNull();
    expect(refused.ctx.socket.listenerCount('close')).toBe(0);
    expect(registry.activeConnections('a')).toBe(2);
    first.close();
    expect(registry.activeConnections('a')).toBe(1);
    expect(attachVerdict(registry, 'a').verdict.ok).toBe(true);
  });

  it('refuses past maxConnections (connection_quota_exhausted) for good: closing a connection refunds nothing', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxConnections: 2 } });
    attached(registry, 'a').close();
    attached(registry, 'a').close();
    expect(registry.activeConnections('a')).toBe(0);
    expect(attachVerdict(registry, 'a').verdict).toMatchObject({ ok: false, reason: 'connection_quota_exhausted' });
    expect(registry.usageOf('a').connections).toBe(2);
  });

  it('refuses a new connection once maxBytes is spent (byte_limit_reached)', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxBytes: 100 } });
    attached(registry, 'a');
    expect(registry.addBytes('a', 99)).toBe(true);
    expect(attachVerdict(registry, 'a').verdict.ok).toBe(true);
    expect(registry.addBytes('a', 1)).toBe(true);
    expect(attachVerdict(registry, 'a').verdict).toMatchObject({ ok: false, reason: 'byte_limit_reached' });
  });

  it('counts each grant apart: another grant’s connections take nothing from this one', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxConcurrent: 1, maxConnections: 1 } });
    installGrant(registry, 'b', { limits: { maxConcurrent: 1, maxConnections: 1 } });
    attached(registry, 'a');
    expect(attachVerdict(registry, 'b').verdict.ok).toBe(true);
    expect(attachVerdict(registry, 'a').verdict.ok).toBe(false);
    expect(registry.activeConnections('a')).toBe(1);
    expect(registry.activeConnections('b')).toBe(1);
  });

  it('sets the connection’s grant and hands it the grant’s maxDurationMs', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxDurationMs: 5000 } });
    installGrant(registry, 'b', {});
    const a = attached(registry, 'a');
    const b = attached(registry, 'b');
    expect(a.grantId).toBe('a');
    expect(a.durations).toEqual([5000]);
    expect(b.durations).toEqual([]);
  });

  it('detaches on the socket’s close, once: a second close or a detach of an unattached connection changes nothing', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', {});
    const one = attached(registry, 'a');
    attached(registry, 'a');
    one.close();
    one.close();
    registry.detach(one);
    registry.detach(connection());
    expect(registry.activeConnections('a')).toBe(1);
  });
});

describe('GrantRegistry.revoke, forget and remove: one grant’s connections end, no other grant’s', () => {
  it('revoke ends every connection of that grant with reason revoked, keeps the grant marked revoked and its token known', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { destinations: ['https://a.test'] }, { token: 'token-a' });
    installGrant(registry, 'b', { destinations: ['https://a.test'] }, { token: 'token-b' });
    const a1 = attached(registry, 'a', tunnelTo('a.test:443', '93.184.216.34'));
    const a2 = attached(registry, 'a');
    const b1 = attached(registry, 'b', tunnelTo('a.test:443', '93.184.216.34'));
    expect(registry.revoke('a')).toBe(2);
    expect(a1.ended).toEqual(['revoked']);
    expect(a2.ended).toEqual(['revoked']);
    expect(b1.ended).toEqual([]);
    expect(registry.grants.get('a')?.revoked).toBe(true);
    expect(registry.grants.get('b')?.revoked).toBe(false);
    // Kept, so the token answers grant_revoked rather than token_invalid.
    expect(registry.tokens.findByToken('token-a')).toBe('a');
  });

  it('revoke of an unknown grant ends nothing and installs nothing', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', {});
    const a1 = attached(registry, 'a');
    expect(registry.revoke('nope')).toBe(0);
    expect(registry.grants.has('nope')).toBe(false);
    expect(a1.ended).toEqual([]);
  });

  it('forget ends the grant’s connections and drops the grant, its token and its usage', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxConnections: 5 } }, { token: 'token-a' });
    installGrant(registry, 'b', {}, { token: 'token-b' });
    const a1 = attached(registry, 'a');
    const b1 = attached(registry, 'b');
    registry.addBytes('a', 10);
    expect(registry.forget('a')).toBe(1);
    expect(a1.ended[0]).toBe('revoked');
    expect(new Set(a1.ended)).toEqual(new Set(['revoked']));
    expect(b1.ended).toEqual([]);
    expect(registry.grants.has('a')).toBe(false);
    expect(registry.tokens.findByToken('token-a')).toBeUndefined();
    expect(registry.tokens.verify('a', 'token-a')).toBe(false);
    expect(registry.tokens.findByToken('token-b')).toBe('b');
    expect(registry.usageOf('a')).toMatchObject({ connections: 0, bytes: 0, maxBytes: Infinity });
  });

  it('remove ends the dropped grants’ connections with the reason given and forgets their tokens', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', {}, { token: 'token-a' });
    installGrant(registry, 'b', {}, { token: 'token-b' });
    installGrant(registry, 'c', {}, { token: 'token-c' });
    const a1 = attached(registry, 'a');
    const b1 = attached(registry, 'b');
    const c1 = attached(registry, 'c');
    expect(registry.remove(['a', 'b'], 'grant_changed')).toBe(2);
    expect(a1.ended).toEqual(['grant_changed']);
    expect(b1.ended).toEqual(['grant_changed']);
    expect(c1.ended).toEqual([]);
    expect([...registry.grants.keys()]).toEqual(['c']);
    expect(registry.tokens.findByToken('token-a')).toBeUndefined();
    expect(registry.tokens.findByToken('token-b')).toBeUndefined();
    expect(registry.tokens.findByToken('token-c')).toBe('c');
  });
});

describe('GrantRegistry.install: a changed grant re-checks its live tunnels', () => {
  const WIDE = { destinations: ['https://a.test', 'https://b.test', 'tcp://db.test:5432'], allowAddressClasses: ['private'] };

  it('ends a tunnel whose destination or dialed address the narrowed grant no longer allows, and keeps the rest', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', WIDE);
    const stillAllowed = attached(registry, 'a', tunnelTo('a.test:443', '10.0.0.1'));
    const destinationDropped = attached(registry, 'a', tunnelTo('b.test:443', '10.0.0.1'));
    const addressDropped = attached(registry, 'a', tunnelTo('a.test:443', '10.0.0.2'));
    const notYetDialed = attached(registry, 'a', tunnelTo('a.test:443', null));
    const notDialedDropped = attached(registry, 'a', tunnelTo('db.test:5432', null));
    const keepAlive = attached(registry, 'a', null);
    expect(installGrant(registry, 'a', { destinations: ['https://a.test'], allowAddresses: ['10.0.0.1/32'] })).toBe(3);
    expect(destinationDropped.ended).toEqual(['grant_changed']);
    expect(addressDropped.ended).toEqual(['grant_changed']);
    expect(notDialedDropped.ended).toEqual(['grant_changed']);
    expect(stillAllowed.ended).toEqual([]);
    expect(notYetDialed.ended).toEqual([]);
    expect(keepAlive.ended).toEqual([]);
  });

  it('ends a tunnel whose address class the grant stops allowing', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', WIDE);
    const privateTunnel = attached(registry, 'a', tunnelTo('a.test:443', '192.168.1.10'));
    const publicTunnel = attached(registry, 'a', tunnelTo('a.test:443', '93.184.216.34'));
    expect(installGrant(registry, 'a', { destinations: ['https://a.test'] })).toBe(1);
    expect(privateTunnel.ended).toEqual(['grant_changed']);
    expect(publicTunnel.ended).toEqual([]);
  });

  it('ends nothing when the grant widens, and nothing of another grant when one narrows', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { destinations: ['https://a.test'] });
    installGrant(registry, 'b', { destinations: ['https://b.test'] });
    const a1 = attached(registry, 'a', tunnelTo('a.test:443', '93.184.216.34'));
    const b1 = attached(registry, 'b', tunnelTo('b.test:443', '93.184.216.34'));
    expect(installGrant(registry, 'a', WIDE)).toBe(0);
    expect(installGrant(registry, 'b', { destinations: ['https://b.test'] })).toBe(0);
    expect(installGrant(registry, 'a', { destinations: [] })).toBe(1);
    expect(a1.ended).toEqual(['grant_changed']);
    expect(b1.ended).toEqual([]);
  });

  it('ends every connection, tunnel or not, with revoked when the installed grant is revoked', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', WIDE);
    const tunnel = attached(registry, 'a', tunnelTo('a.test:443', '10.0.0.1'));
    const keepAlive = attached(registry, 'a');
    expect(installGrant(registry, 'a', WIDE, { revoked: true })).toBe(2);
    expect(tunnel.ended).toEqual(['revoked']);
    expect(keepAlive.ended).toEqual(['revoked']);
  });

  it('ends every connection with expired when the installed grant has expired by the injected clock', () => {
    let now = Date.UTC(2030, 0, 1, 12);
    const registry = newRegistry(() => now);
    installGrant(registry, 'a', { ...WIDE, limits: { expiresAt: '2030-01-01T13:00:00Z' } });
    const tunnel = attached(registry, 'a', tunnelTo('a.test:443', '10.0.0.1'));
    const keepAlive = attached(registry, 'a');
    now = Date.UTC(2030, 0, 1, 12, 30);
    expect(installGrant(registry, 'a', { ...WIDE, limits: { expiresAt: '2030-01-01T12:15:00Z' } })).toBe(2);
    expect(tunnel.ended).toEqual(['expired']);
    expect(keepAlive.ended).toEqual(['expired']);
  });

  it('applies a lowered maxBytes to a new connection: a reload that shrinks the budget below what was spent refuses it', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { limits: { maxBytes: 1000 } });
    registry.addBytes('a', 600);
    installGrant(registry, 'a', { limits: { maxBytes: 500 } });
    expect(attachVerdict(registry, 'a').verdict).toMatchObject({ ok: false, reason: 'byte_limit_reached' });
  });
});

describe('GrantRegistry expiry: connections end at expiresAt', () => {
  it('ends the grant’s connections with expired at expiresAt, not a millisecond before, and no other grant’s', () => {
    vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
    const registry = newRegistry(Date.now);
    installGrant(registry, 'a', { limits: { expiresAt: new Date(Date.now() + 60_000) } });
    installGrant(registry, 'b', {});
    const a1 = attached(registry, 'a', tunnelTo('a.test:443', '93.184.216.34'));
    const b1 = attached(registry, 'b');
    vi.advanceTimersByTime(59_999);
    expect(a1.ended).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(a1.ended).toEqual(['expired']);
    expect(b1.ended).toEqual([]);
  });

  it('holds an expiry past setTimeout’s 24.8-day ceiling instead of firing at once, and ends it on time', () => {
    vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
    const registry = newRegistry(Date.now);
    const thirtyDays = 30 * 86_400_000;
    installGrant(registry, 'a', { limits: { expiresAt: new Date(Date.now() + thirtyDays) } });
    const a1 = attached(registry, 'a');
    vi.advanceTimersByTime(2_147_483_647);
    expect(a1.ended).toEqual([]);
    vi.advanceTimersByTime(thirtyDays - 2_147_483_647 - 1);
    expect(a1.ended).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(a1.ended).toEqual(['expired']);
  });

  it('follows a re-install: an extended expiry does not end the connection at the old time; a shortened one ends it at the new', () => {
    vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
    const registry = newRegistry(Date.now);
    const start = Date.now();
    installGrant(registry, 'a', { limits: { expiresAt: new Date(start + 10_000) } });
    const a1 = attached(registry, 'a');
    installGrant(registry, 'a', { limits: { expiresAt: new Date(start + 20_000) } });
    vi.advanceTimersByTime(15_000);
    expect(a1.ended).toEqual([]);
    installGrant(registry, 'a', { limits: { expiresAt: new Date(start + 16_000) } });
    vi.advanceTimersByTime(999);
    expect(a1.ended).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(a1.ended).toEqual(['expired']);
  });

  it('arms nothing for a revoked grant and disarms on revoke and remove: a revoked connection is not ended again as expired', () => {
    vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
    const registry = newRegistry(Date.now);
    const expiresAt = new Date(Date.now() + 1000);
    installGrant(registry, 'a', { limits: { expiresAt } });
    installGrant(registry, 'b', { limits: { expiresAt } });
    installGrant(registry, 'c', { limits: { expiresAt } }, { revoked: true });
    const a1 = attached(registry, 'a');
    const b1 = attached(registry, 'b');
    const c1 = attached(registry, 'c');
    registry.revoke('a');
    registry.remove(['b'], 'grant_changed');
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5000);
    expect(a1.ended).toEqual(['revoked']);
    expect(b1.ended).toEqual(['grant_changed']);
    expect(c1.ended).toEqual([]);
  });

  it('close() clears every expiry timer', () => {
    vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
    const registry = newRegistry(Date.now);
    installGrant(registry, 'a', { limits: { expiresAt: new Date(Date.now() + 1000) } });
    installGrant(registry, 'b', { limits: { expiresAt: new Date(Date.now() + 2000) } });
    expect(vi.getTimerCount()).toBe(2);
    registry.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('GrantRegistry tokens: a token finds exactly the grant in force that holds it', () => {
  it('installs a grant’s token hash, rotates it on re-install, and drops it when re-installed without one', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', {}, { token: 'first' });
    installGrant(registry, 'b', {}, { token: 'other' });
    expect(registry.tokens.findByToken('first')).toBe('a');
    expect(registry.tokens.verify('a', 'first')).toBe(true);
    expect(registry.tokens.verify('b', 'first')).toBe(false);
    installGrant(registry, 'a', {}, { token: 'second' });
    expect(registry.tokens.findByToken('first')).toBeUndefined();
    expect(registry.tokens.findByToken('second')).toBe('a');
    installGrant(registry, 'a', {}, { token: null });
    expect(registry.tokens.findByToken('second')).toBeUndefined();
    expect(registry.tokens.verify('a', 'second')).toBe(false);
    expect(registry.tokens.findByToken('other')).toBe('b');
  });
});

// Issue 28: a verified client certificate names its principal only through a grant that names it, one
// grant for one certificate; a revoked grant gives its certificate up, and nothing maps from the CN.
describe('GrantRegistry.grantForCertificate', () => {
  const SHA_A = 'a1'.repeat(32);
  const SHA_B = 'b2'.repeat(32);

  it('maps by SHA-256 or by one URI SAN, and nothing else', () => {
    const registry = newRegistry();
    installGrant(registry, 'by-sha', { clientCertificate: { sha256: SHA_A } });
    installGrant(registry, 'by-uri', { clientCertificate: { uriSan: 'spiffe://example.org/agent' } });
    installGrant(registry, 'plain', {});
    expect(registry.grantForCertificate(SHA_A, [])).toEqual({ grant: 'by-sha' });
    expect(registry.grantForCertificate(SHA_B, ['spiffe://example.org/other', 'spiffe://example.org/agent'])).toEqual({ grant: 'by-uri' });
    expect(registry.grantForCertificate(SHA_B, ['spiffe://example.org/agent/x', 'SPIFFE://example.org/agent'])).toEqual({ none: 'unknown' });
    expect(registry.grantForCertificate(SHA_B, [])).toEqual({ none: 'unknown' });
  });

  it('is no principal at all when the SHA-256 and a URI (or two URIs) name different grants', () => {
    const registry = newRegistry();
    installGrant(registry, 'a', { clientCertificate: { sha256: SHA_A } });
    installGrant(registry, 'b', { clientCertificate: { uriSan: 'spiffe://x/b' } });
    installGrant(registry, 'c', { clientCertificate: { uriSan: 'spiffe://x/c' } });
    expect(registry.grantForCertificate(SHA_A, ['spiffe://x/b'])).toEqual({ none: 'ambiguous' });
    expect(registry.grantForCertificate(SHA_B, ['spiffe://x/b', 'spiffe://x/c'])).toEqual({ none: 'ambiguous' });
  });

  it('follows installs, revocations and removals; a revoked grant gives its certificate to a new grant', () => {
    const registry = newRegistry();
    installGrant(registry, 'old', { clientCertificate: { sha256: SHA_A } });
    expect(registry.certificateHolder({ sha256: SHA_A })).toBe('old');
    expect(registry.certificateHolder({ sha256: SHA_A }, 'old')).toBeUndefined();
    registry.revoke('old');
    expect(registry.grantForCertificate(SHA_A, [])).toEqual({ none: 'unknown' });
    expect(registry.certificateHolder({ sha256: SHA_A })).toBeUndefined();
    installGrant(registry, 'new', { clientCertificate: { sha256: SHA_A } });
    expect(registry.grantForCertificate(SHA_A, [])).toEqual({ grant: 'new' });
    registry.remove(['new'], 'revoked');
    expect(registry.grantForCertificate(SHA_A, [])).toEqual({ none: 'unknown' });
  });
});
