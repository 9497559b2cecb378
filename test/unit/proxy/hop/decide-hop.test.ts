// lookupHop and decideHop (src/proxy/hop/decide-hop.ts): where the hop cache meets identification. What a
// hostile principal tries: to ride another connection's remembered principal by sending no credentials
// (a keep-alive request on a token listener), to reach a target through a dedicated listener whose grant
// does not allow it because another dedicated listener's hop to it was remembered, to have its denials or
// a TTL-0 answer remembered, to keep a decision made across a revocation, and to get a remembered "allow"
// applied under another grant. The runtime is the one src/app.ts builds (buildRuntime: real GrantRegistry,
// Resolver, RouteSelector and HopCache); the DNS port answers from a table with TTLs, and the metrics
// sink counts the cache's hits and misses. Each CONNECT is run the way on-connect.ts runs it.
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRuntime } from '../../../../src/app.js';
import { parseConnectTarget } from '../../../../src/authority/index.js';
import { parseConfigText } from '../../../../src/config/index.js';
import type { LookupAll, LookupAnswer } from '../../../../src/core/index.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { decideDestination } from '../../../../src/proxy/hop/decide.js';
import { decideHop, lookupHop, type HopLookup } from '../../../../src/proxy/hop/decide-hop.js';
import { HopCache, type HopStamp } from '../../../../src/proxy/hop/hop-cache.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { identifyPresented } from '../../../../src/proxy/hop/identify-hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import { NoopMetrics, type MetricsSink } from '../../../../src/telemetry/index.js';
import { silentLog, tokenHash } from '../../../support/sluice.js';

const TOKEN_G = 'tok-grant-g-0123456789';
const TOKEN_H = 'tok-grant-h-9876543210';
const AUTH_G = `Bearer ${TOKEN_G}`;
const AUTH_H = `Bearer ${TOKEN_H}`;
/** name → [address, TTL seconds] */
const ZONE: Record<string, readonly [string, number]> = {
  'a.test': ['127.0.0.1', 30],
  'b.test': ['127.0.0.1', 30],
  'zero.test': ['127.0.0.1', 0],
  // Never dialed: the hops here stop at the decision.
  'private.test': ['10.0.0.1', 30],
};

/** Counts nothing but the hop cache's lookups. */
function countingMetrics(): { sink: MetricsSink; counts: { hits: number; misses: number } } {
  const counts = { hits: 0, misses: 0 };
  const sink: MetricsSink = new NoopMetrics();
  sink.hopCache = (hit) => void (hit ? (counts.hits += 1) : (counts.misses += 1));
  return { sink, counts };
}

interface Fixture {
  readonly rt: ProxyRuntime;
  readonly metrics: { hits: number; misses: number };
  readonly lookups: string[];
}

let f: Fixture;
const sockets: net.Socket[] = [];

beforeEach(async () => {
  const lookups: string[] = [];
  const lookup: LookupAll = async (host) => {
    lookups.push(host);
    const [address, ttlSeconds] = ZONE[host] ?? ['', 0];
    if (address === '') throw new Error('no address');
    return [{ address, family: 4, ttlSeconds } satisfies LookupAnswer];
  };
  const text = stringify({
    listeners: [{ name: 'shared', listen: '127.0.0.1:18444', identify: 'token' }],
    state: os.tmpdir(),
    grants: [
      { id: 'g', tokenSha256: tokenHash(TOKEN_G), destinations: ['https://*.test'], allowAddressClasses: ['loopback'] },
      { id: 'h', tokenSha256: tokenHash(TOKEN_H), destinations: ['https://b.test'], allowAddressClasses: ['loopback'] },
    ],
  });
  const parsed = parseConfigText(text, path.join(os.tmpdir(), 'decide-hop-test.yaml'), os.tmpdir());
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const built = await buildRuntime(parsed.config, { env: {}, lookup, audit: { write: () => undefined, flush: () => Promise.resolve() }, log: silentLog, hostInterfaces: () => ({}) });
  if (!built.ok) throw new Error(JSON.stringify(built.issues));
  const metrics = countingMetrics();
  f = { rt: { ...built.value.runtime, metrics: metrics.sink }, metrics: metrics.counts, lookups };
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  f.rt.registry.close();
  f.rt.routes.close();
  await f.rt.forwardAgent.close();
  await f.rt.upstreamAgent.close();
});

/** A new client connection: on the token listener, or on a dedicated listener bound to `bound`. */
function connection(bound: string | null = null): ConnectionContext {
  const socket = new net.Socket();
  sockets.push(socket);
  return new ConnectionContext(socket, bound === null ? 'shared' : 'dedicated', { boundGrant: bound });
}

interface Attempt {
  readonly hop: Hop;
  readonly lookup: HopLookup;
  /** decideHop's own return value, not awaited: a hit must be a plain boolean. */
  readonly result: boolean | Promise<boolean> | null;
  readonly canonicalized: () => number;
}

/** One CONNECT as on-connect.ts runs it; `grantFor` replaces the identified grant (to test decideHop's check). */
function connect(ctx: ConnectionContext, credential: string | undefined, target: string, options: { grantFor?: (g: RuntimeGrant) => RuntimeGrant; stamp?: HopStamp } = {}): Attempt {
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', target);
  const lookup = lookupHop(f.rt, ctx, hop, credential, target, options.stamp);
  let canonicalized = 0;
  const grant = identifyPresented(f.rt, ctx, hop, credential, 3, lookup.remembered?.principal ?? null);
  if (grant instanceof Promise) throw new Error('identification waited without a fleet');
  const result = grant === null ? null : decideHop(f.rt, hop, options.grantFor?.(grant) ?? grant, lookup, () => {
    canonicalized += 1;
    const dest = parseConnectTarget(target);
    if (!dest.ok) return hop.fail(dest.reason, dest.detail);
    hop.canonical = dest.value;
    return true;
  });
  return { hop, lookup, result, canonicalized: () => canonicalized };
}

async function decided(a: Attempt): Promise<boolean> {
  if (a.result === null) return false;
  return a.result;
}

const filled = (hop: Hop): Record<string, unknown> => ({ scheme: hop.scheme, canonical: hop.canonical, rule: hop.rule, addresses: hop.addresses, pinned: hop.pinned, route: hop.route, routeHops: hop.routeHops });

describe('decideHop on a hit: synchronous, and the same hop as the stages would make', () => {
  it('answers a repeated hop with a plain true, without canonicalizing, resolving or routing again', async () => {
    const first = connect(connection(), AUTH_G, 'a.test:443');
    expect(first.result).toBeInstanceOf(Promise);
    expect(await decided(first)).toBe(true);
    const second = connect(connection(), AUTH_G, 'a.test:443');
    expect(second.lookup.remembered).toBeDefined();
    expect(second.result).toBe(true);
    expect(second.canonicalized()).toBe(0);
    expect(f.lookups).toEqual(['a.test']);
    expect([f.metrics.misses, f.metrics.hits]).toEqual([1, 1]);
    expect(filled(second.hop)).toEqual(filled(first.hop));
    expect(second.hop.principal).toEqual({ grantId: 'g', via: 'token' });
    expect(second.hop.grant).toBe(first.hop.grant);
  });

  it('fills the hop exactly as decideDestination fills a fresh one', async () => {
    await decided(connect(connection(), AUTH_G, 'a.test:443'));
    const hit = connect(connection(), AUTH_G, 'a.test:443');
    const fresh = new Hop(1, 'connect', 'CONNECT', 'a.test:443');
    const dest = parseConnectTarget('a.test:443');
    if (!dest.ok) throw new Error('target');
    fresh.canonical = dest.value;
    expect(await decideDestination(f.rt, fresh, f.rt.registry.grants.get('g') as RuntimeGrant)).toBe(true);
    expect(filled(hit.hop)).toEqual(filled(fresh));
    expect(hit.hop.pinned).toEqual([expect.objectContaining({ address: '127.0.0.1', port: 443 })]);
    expect([hit.hop.authorizeUs, hit.hop.routeUs, hit.hop.resolveUs].every((t) => typeof t === 'number')).toBe(true);
  });

  it('runs the stages when the remembered grant is not the grant object the hop was identified under', async () => {
    await decided(connect(connection(), AUTH_G, 'a.test:443'));
    // Another grant that does not allow the target: the remembered "allow" must not be applied to it.
    const other = connect(connection(), AUTH_G, 'a.test:443', { grantFor: () => f.rt.registry.grants.get('h') as RuntimeGrant });
    expect(other.lookup.remembered).toBeDefined();
    expect(other.result).toBeInstanceOf(Promise);
    expect(await decided(other)).toBe(false);
    expect(other.hop.reason).toBe('destination_not_granted');
    expect(other.canonicalized()).toBe(1);
    // An equal copy is still not the same object: decided afresh, and nothing new is remembered.
    const copy = connect(connection(), AUTH_G, 'a.test:443', { grantFor: (g) => ({ ...g }) });
    expect(copy.result).toBeInstanceOf(Promise);
    expect(await decided(copy)).toBe(true);
    expect(f.rt.hopCache.size).toBe(1);
  });
});

describe('lookupHop: a hop without credentials on a token listener is never served nor remembered', () => {
  it('does not hand a keep-alive request without Proxy-Authorization a remembered outcome, and remembers none', async () => {
    await decided(connect(connection(), AUTH_G, 'a.test:443'));
    const ctx = connection();
    expect(await decided(connect(ctx, AUTH_G, 'b.test:443'))).toBe(true);
    const counted = f.metrics.hits + f.metrics.misses;
    // The connection's own principal (identified by the first request) carries it; the cache plays no part.
    const bare = connect(ctx, undefined, 'a.test:443');
    expect(bare.lookup).toMatchObject({ key: '', remembered: undefined, stamp: null });
    expect(bare.result).toBeInstanceOf(Promise);
    expect(await decided(bare)).toBe(true);
    expect(f.metrics.hits + f.metrics.misses).toBe(counted);
    expect(f.rt.hopCache.get(HopCache.key('connect', 'shared', null, undefined, 'a.test:443'))).toBeUndefined();
  });

  it('refuses a fresh connection without credentials token_missing even when the target is remembered', async () => {
    await decided(connect(connection(), AUTH_G, 'a.test:443'));
    const bare = connect(connection(), undefined, 'a.test:443');
    expect(bare.lookup.remembered).toBeUndefined();
    expect(bare.result).toBeNull();
    expect(bare.hop.reason).toBe('token_missing');
    expect(bare.hop.principal).toBeNull();
  });

  it('does cache a dedicated listener’s hops, separately for each bound grant', async () => {
    expect(await decided(connect(connection('h'), undefined, 'b.test:443'))).toBe(true);
    const again = connect(connection('h'), undefined, 'b.test:443');
    expect(again.result).toBe(true);
    expect(again.hop.principal).toEqual({ grantId: 'h', via: 'listener' });
    // The same target on another dedicated listener (same name "dedicated"): g's own decision, not h's.
    const onG = connect(connection('g'), undefined, 'b.test:443');
    expect(onG.lookup.remembered).toBeUndefined();
    expect(await decided(onG)).toBe(true);
    expect(onG.hop.principal).toEqual({ grantId: 'g', via: 'listener' });
    expect(await decided(connect(connection('g'), undefined, 'a.test:443'))).toBe(true);
    const onH = connect(connection('h'), undefined, 'a.test:443');
    expect(onH.lookup.remembered).toBeUndefined();
    expect(await decided(onH)).toBe(false);
    expect(onH.hop.reason).toBe('destination_not_granted');
  });
});

describe('decideHop remembers only allowed outcomes, as of the hop’s start', () => {
  it.each([
    ['a destination outside the grant', 'c.example:443', false, 'destination_not_granted'],
    ['a name that resolves to a private address', 'private.test:443', false, 'address_class_denied'],
    ['a TTL-0 answer', 'zero.test:443', true, 'granted'],
  ])('does not remember %s', async (_name, target, allowed, reason) => {
    const first = connect(connection(), AUTH_G, target);
    expect(await decided(first)).toBe(allowed);
    expect(first.hop.reason).toBe(reason);
    expect(f.rt.hopCache.size).toBe(0);
    expect(connect(connection(), AUTH_G, target).lookup.remembered).toBeUndefined();
  });

  it('never serves an outcome decided while the grant table changed (taken at lookup, or passed in as SOCKS5 does)', async () => {
    const ctx = connection();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const early = f.rt.hopCache.stamp();
    f.rt.registry.revoke('h');
    // As socks5.ts does: the stamp from before identification, the lookup once the target is known.
    const lookup = lookupHop(f.rt, ctx, hop, AUTH_G, 'a.test:443', early);
    expect(lookup.stamp).toBe(early);
    const grant = identifyPresented(f.rt, ctx, hop, AUTH_G, 3);
    if (grant === null || grant instanceof Promise) throw new Error('not identified');
    const dest = parseConnectTarget('a.test:443');
    expect(await decideHop(f.rt, hop, grant, lookup, () => (dest.ok ? ((hop.canonical = dest.value), true) : false))).toBe(true);
    expect(connect(connection(), AUTH_G, 'a.test:443').lookup.remembered).toBeUndefined();

    const pending = connect(connection(), AUTH_G, 'b.test:443');
    f.rt.registry.revoke('h');
    expect(await decided(pending)).toBe(true);
    expect(connect(connection(), AUTH_G, 'b.test:443').lookup.remembered).toBeUndefined();
  });

  it('identifies afresh after a revocation: the remembered principal is not reused, the hop is refused', async () => {
    await decided(connect(connection(), AUTH_H, 'b.test:443'));
    expect(connect(connection(), AUTH_H, 'b.test:443').result).toBe(true);
    f.rt.registry.revoke('h');
    const after = connect(connection(), AUTH_H, 'b.test:443');
    expect(after.lookup.remembered).toBeUndefined();
    expect(after.result).toBeNull();
    expect(after.hop.reason).toBe('grant_revoked');
  });
});
