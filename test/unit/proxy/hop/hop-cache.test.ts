// The hop cache (src/proxy/hop/hop-cache.ts) as a hostile principal inside a sandbox sees it: a store of
// "allowed" answers that it would like to be handed under someone else's key (another listener, another
// dedicated grant, no credentials, a target that differs only in case), or to keep using after the facts
// behind it changed (a revocation or reload, a new listener or interface address, a new PAC script, a DNS
// answer past its TTL), or to fill with its own denials. The sources are small mutable fakes: the cache
// reads only `revision`, `version`, `epoch()` and `now()` of them.
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/authority/index.js';
import type { ClassifiedAddress, PinnedAddress, RequestKind } from '../../../../src/core/index.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { applyRemembered, HopCache, type HopCacheSources } from '../../../../src/proxy/hop/hop-cache.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { Route } from '../../../../src/route/index.js';

interface FakeSources extends HopCacheSources {
  readonly registry: { revision: number };
  readonly self: { version: number };
  epoch: unknown;
  nowMs: number;
}

function sources(): FakeSources {
  const s: FakeSources = {
    registry: { revision: 1 },
    self: { version: 1 },
    epoch: 'pac script v1',
    nowMs: 1_000,
    routes: { epoch: () => s.epoch },
    now: () => s.nowMs,
  };
  return s;
}

// The cache only keeps and compares the grant object; its contents are the stages' business.
const GRANT = { id: 'g' } as unknown as RuntimeGrant;
const ROUTE: Route = { label: 'direct', mode: 'direct', hops: [{ kind: 'direct' }], pacAnswer: null };
const ADDRESS: ClassifiedAddress = { address: '127.0.0.1', family: 4, class: 'loopback', allowed: true };
const PINNED = { address: '127.0.0.1', family: 4, port: 443, class: 'loopback' } as unknown as PinnedAddress;

/** A hop as decideDestination leaves it when it allows `target`, with the DNS answer's TTL left. */
function allowedHop(answerTtlMs: number | null = 30_000, target = 'a.test:443'): Hop {
  const hop = new Hop(1, 'connect', 'CONNECT', target);
  const dest = canonicalize(target);
  if (!dest.ok) throw new Error(`cannot canonicalize ${target}`);
  hop.principal = { grantId: 'g', via: 'token' };
  hop.grant = GRANT;
  hop.canonical = dest.value;
  hop.rule = 'https://*.test';
  hop.addresses = [ADDRESS];
  hop.pinned = [PINNED];
  hop.route = ROUTE;
  hop.routeHops = ROUTE.hops;
  hop.answerTtlMs = answerTtlMs;
  return hop;
}

const KEY = HopCache.key('connect', 'shared', null, 'Bearer tok-a', 'a.test:443');

function remembered(cache: HopCache, key = KEY, hop = allowedHop()): void {
  cache.remember(key, hop, cache.stamp());
  expect(cache.get(key)).toBeDefined();
}

describe('HopCache.key: every input the remembered stages read separates entries', () => {
  type KeyParts = [RequestKind, string, string | null, string | undefined, string];
  const base: KeyParts = ['connect', 'shared', null, 'Bearer tok-a', 'a.test:443'];
  // Each row differs from `base` in one part; a collision would hand one key's allowed outcome to the other.
  it.each<[string, KeyParts]>([
    ['a forward hop to the same target', ['forward', 'shared', null, 'Bearer tok-a', 'a.test:443']],
    ['another listener', ['connect', 'internal', null, 'Bearer tok-a', 'a.test:443']],
    ['a dedicated listener (bound grant) under the same name', ['connect', 'shared', 'g', 'Bearer tok-a', 'a.test:443']],
    ['no Proxy-Authorization at all', ['connect', 'shared', null, undefined, 'a.test:443']],
    ['an empty Proxy-Authorization', ['connect', 'shared', null, '', 'a.test:443']],
    ['another token', ['connect', 'shared', null, 'Bearer tok-b', 'a.test:443']],
    ['the same token under another scheme name case', ['connect', 'shared', null, 'bearer tok-a', 'a.test:443']],
    ['the target in upper case', ['connect', 'shared', null, 'Bearer tok-a', 'A.test:443']],
    ['the target with a trailing dot', ['connect', 'shared', null, 'Bearer tok-a', 'a.test.:443']],
    ['another port', ['connect', 'shared', null, 'Bearer tok-a', 'a.test:8443']],
  ])('keeps %s apart', (_name, other) => {
    const cache = new HopCache(sources());
    remembered(cache, HopCache.key(...base));
    expect(HopCache.key(...other)).not.toBe(HopCache.key(...base));
    expect(cache.get(HopCache.key(...other))).toBeUndefined();
  });

  it('keeps two dedicated listeners apart although both are named "dedicated"', () => {
    const cache = new HopCache(sources());
    const forA = HopCache.key('connect', 'dedicated', 'grant-a', undefined, 'a.test:443');
    const forB = HopCache.key('connect', 'dedicated', 'grant-b', undefined, 'a.test:443');
    remembered(cache, forA);
    expect(cache.get(forB)).toBeUndefined();
  });

  it('keeps absent, empty and present credentials apart on the same listener', () => {
    const keys = [undefined, '', 'Bearer x'].map((c) => HopCache.key('forward', 'shared', null, c, 'http://web.test'));
    expect(new Set(keys).size).toBe(3);
  });
});

describe('HopCache.get: an entry is served only while everything it came from is unchanged', () => {
  it('serves the remembered outcome while nothing changed', () => {
    const cache = new HopCache(sources());
    const hop = allowedHop();
    cache.remember(KEY, hop, cache.stamp());
    expect(cache.get(KEY)).toMatchObject({ principal: hop.principal, grant: GRANT, canonical: hop.canonical, pinned: [PINNED], route: ROUTE });
  });

  it.each<[string, (s: FakeSources) => void]>([
    ['the grant table changed (issue, revoke, reload, expiry)', (s) => void (s.registry.revision += 1)],
    ['Sluice’s own addresses changed (a new listener or interface address)', (s) => void (s.self.version += 1)],
    ['the PAC script was replaced', (s) => void (s.epoch = 'pac script v2')],
  ])('is not served after %s, and stays forgotten', (_name, change) => {
    const s = sources();
    const cache = new HopCache(s);
    remembered(cache);
    change(s);
    expect(cache.get(KEY)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('is served until just before validUntil (now + the answer’s TTL left), and not at or after it', () => {
    const s = sources();
    const cache = new HopCache(s);
    cache.remember(KEY, allowedHop(500), cache.stamp());
    s.nowMs += 499;
    expect(cache.get(KEY)).toBeDefined();
    s.nowMs += 1;
    expect(cache.get(KEY)).toBeUndefined();
    s.nowMs -= 1;
    // Dropped at expiry: a clock read that goes back (it should not) cannot revive it.
    expect(cache.get(KEY)).toBeUndefined();
  });

  it('keeps a literal or dns.hosts answer (TTL Infinity) until a source changes', () => {
    const s = sources();
    const cache = new HopCache(s);
    cache.remember(KEY, allowedHop(Infinity), cache.stamp());
    s.nowMs += 365 * 24 * 3_600_000;
    expect(cache.get(KEY)).toBeDefined();
    s.registry.revision += 1;
    expect(cache.get(KEY)).toBeUndefined();
  });

  it('works for a route selector without an epoch (routes that never change while it lives)', () => {
    const s = sources();
    const cache = new HopCache({ registry: s.registry, self: s.self, routes: {}, now: s.now });
    remembered(cache);
    s.self.version += 1;
    expect(cache.get(KEY)).toBeUndefined();
  });
});

describe('HopCache.remember: only allowed outcomes, only as of the stamp taken when the hop started', () => {
  it.each<[string, (hop: Hop) => void]>([
    ['a denied hop', (hop) => void hop.fail('destination_not_granted')],
    ['a hop denied for its address class', (hop) => void hop.fail('address_class_denied')],
    ['a hop whose name an upstream proxy resolves (no TTL: answerTtlMs null)', (hop) => void (hop.answerTtlMs = null)],
    ['a TTL-0 answer', (hop) => void (hop.answerTtlMs = 0)],
    ['an answer whose TTL ran out', (hop) => void (hop.answerTtlMs = -1)],
    ['a hop with no principal', (hop) => void (hop.principal = null)],
    ['a hop with no route', (hop) => void (hop.route = null)],
  ])('does not remember %s', (_name, spoil) => {
    const cache = new HopCache(sources());
    const hop = allowedHop();
    spoil(hop);
    cache.remember(KEY, hop, cache.stamp());
    expect(cache.get(KEY)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it.each<[string, (s: FakeSources) => void]>([
    ['a grant revoked while the hop waited on DNS or PAC', (s) => void (s.registry.revision += 1)],
    ['a listener added meanwhile', (s) => void (s.self.version += 1)],
    ['a PAC script replaced meanwhile', (s) => void (s.epoch = { script: 'v2' })],
  ])('makes an outcome stale at once after %s', (_name, change) => {
    const s = sources();
    const cache = new HopCache(s);
    const stamp = cache.stamp();
    change(s);
    cache.remember(KEY, allowedHop(), stamp);
    expect(cache.get(KEY)).toBeUndefined();
  });

  it('counts the TTL from when the outcome is remembered, never from a later read', () => {
    const s = sources();
    const cache = new HopCache(s);
    cache.remember(KEY, allowedHop(100), cache.stamp());
    s.nowMs += 60;
    expect(cache.get(KEY)).toBeDefined();
    s.nowMs += 40;
    expect(cache.get(KEY)).toBeUndefined();
  });
});

describe('HopCache bounds: an LRU of maxEntries; 0 disables it', () => {
  it('evicts the least recently used entry past maxEntries, so a principal churning targets cannot grow it', () => {
    const cache = new HopCache(sources(), 2);
    const keys = ['a.test:443', 'b.test:443', 'c.test:443'].map((t) => HopCache.key('connect', 'shared', null, 'Bearer tok-a', t));
    const [a, b, c] = keys as [string, string, string];
    cache.remember(a, allowedHop(30_000, 'a.test:443'), cache.stamp());
    cache.remember(b, allowedHop(30_000, 'b.test:443'), cache.stamp());
    expect(cache.get(a)).toBeDefined();
    cache.remember(c, allowedHop(30_000, 'c.test:443'), cache.stamp());
    expect(cache.size).toBe(2);
    expect(cache.get(b)).toBeUndefined();
    expect(cache.get(a)).toBeDefined();
    expect(cache.get(c)).toBeDefined();
  });

  it('gives an entry served since the last eviction one more round, and evicts the oldest when every entry was served', () => {
    const cache = new HopCache(sources(), 3);
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map((h) => HopCache.key('connect', 'shared', null, 'Bearer tok-a', `${h}.test:443`)) as [string, string, string, string, string];
    for (const k of [a, b, c]) cache.remember(k, allowedHop(30_000, 'x.test:443'), cache.stamp());
    for (const k of [a, b, c]) expect(cache.get(k)).toBeDefined();
    // Every entry served: the marks are cleared in one pass and the oldest (a) goes.
    cache.remember(d, allowedHop(30_000, 'x.test:443'), cache.stamp());
    expect([a, b, c, d].map((k) => cache.get(k) !== undefined)).toEqual([false, true, true, true]);
    // b, c and d were just served again; e pushes out b, the oldest of them, after one pass.
    cache.remember(e, allowedHop(30_000, 'x.test:443'), cache.stamp());
    expect(cache.size).toBe(3);
    expect([b, c, d, e].map((k) => cache.get(k) !== undefined)).toEqual([false, true, true, true]);
  });

  it('remembers nothing with maxEntries 0', () => {
    const cache = new HopCache(sources(), 0);
    cache.remember(KEY, allowedHop(), cache.stamp());
    expect(cache.get(KEY)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('forgets everything on clear()', () => {
    const cache = new HopCache(sources());
    remembered(cache);
    cache.clear();
    expect(cache.get(KEY)).toBeUndefined();
  });
});

describe('applyRemembered: a hit fills the hop as decideDestination would have', () => {
  it('sets scheme, canonical, rule, addresses, pinned, route and alternatives, and stamps the stage timings', () => {
    const cache = new HopCache(sources());
    const source = allowedHop();
    cache.remember(KEY, source, cache.stamp());
    const entry = cache.get(KEY);
    if (entry === undefined) throw new Error('not remembered');
    const hop = new Hop(2, 'connect', 'CONNECT', 'a.test:443');
    applyRemembered(hop, entry);
    expect({ scheme: hop.scheme, canonical: hop.canonical, rule: hop.rule, addresses: hop.addresses, pinned: hop.pinned, route: hop.route, routeHops: hop.routeHops }).toEqual({
      scheme: source.scheme, canonical: source.canonical, rule: source.rule, addresses: source.addresses, pinned: source.pinned, route: source.route, routeHops: source.routeHops,
    });
    expect([hop.authorizeUs, hop.routeUs, hop.resolveUs].every((t) => typeof t === 'number')).toBe(true);
    // The principal and grant are identify's to set (it checks liveness on every hop), never the cache's.
    expect(hop.principal).toBeNull();
    expect(hop.grant).toBeNull();
    expect(hop.isAllowed).toBe(true);
  });
});
