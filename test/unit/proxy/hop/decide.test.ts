// The policy stages of one hop (src/proxy/hop/decide.ts): grant liveness, then authorize → route → resolve,
// classify, pin → attestation. What a hostile principal tries here: a destination outside its grant, in
// the hope that Sluice resolves it anyway (a DNS side channel, principle A6 in docs/principles.md); a name
// that resolves to loopback, a private range or Sluice itself (SSRF, proxy loop); a name with one allowed
// and one forbidden answer behind an upstream proxy that resolves for itself; filling its own lookup share
// so that the local check is skipped and the proxy resolves unchecked; and a token whose grant has
// vanished, been revoked or just expired. The runtime is the one src/app.ts builds (buildRuntime: a real
// Resolver, RouteSelector and GrantRegistry); only the DNS port and, where a route mixes alternatives, the
// RouteSelector are small fakes.
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { buildRuntime } from '../../../../src/app.js';
import { canonicalize } from '../../../../src/authority/index.js';
import { parseConfigText } from '../../../../src/config/index.js';
import { ok, type LookupAll, type Principal, type RequestKind, type UpstreamProxy } from '../../../../src/core/index.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { checkGrantLive, decideDestination, isAttested } from '../../../../src/proxy/hop/decide.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import type { Route, RouteHop, RouteSelector } from '../../../../src/route/index.js';
import { silentLog, tableLookup } from '../../../support/sluice.js';

const NOW = Date.parse('2030-01-01T00:00:00Z');
/** A listener address in the config only: buildRuntime never binds it, but it makes port 18443 `self`. */
const SELF_PORT = 18443;
const runtimes: ProxyRuntime[] = [];
const releases: (() => void)[] = [];

afterEach(async () => {
  for (const release of releases.splice(0)) release();
  for (const rt of runtimes.splice(0)) {
    rt.registry.close();
    rt.routes.close();
    await rt.forwardAgent.close();
    await rt.upstreamAgent.close();
  }
});

/** A lookup that counts its calls and answers from `table` (anything else: no address). */
function countingLookup(table: Record<string, readonly string[]>): { lookup: LookupAll; calls: string[] } {
  const calls: string[] = [];
  const inner = tableLookup(table);
  return { calls, lookup: (host, signal) => (calls.push(host), inner(host, signal)) };
}

/** A lookup that never settles until the test ends (or its signal aborts): holds a lookup slot. */
function hangingLookup(calls: string[]): LookupAll {
  return (host, signal) => {
    calls.push(host);
    return new Promise((_resolve, reject) => {
      const release = (): void => reject(new Error('released'));
      releases.push(release);
      signal.addEventListener('abort', release, { once: true });
    });
  };
}

async function runtime(config: Record<string, unknown>, lookup: LookupAll): Promise<ProxyRuntime> {
  const text = stringify({ listeners: [{ name: 'shared', listen: `127.0.0.1:${SELF_PORT}`, identify: 'token' }], state: os.tmpdir(), ...config });
  const parsed = parseConfigText(text, path.join(os.tmpdir(), 'decide-test.yaml'), os.tmpdir());
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const built = await buildRuntime(parsed.config, { env: {}, lookup, audit: { write: () => undefined, flush: () => Promise.resolve() }, log: silentLog, hostInterfaces: () => ({}) });
  if (!built.ok) throw new Error(JSON.stringify(built.issues));
  runtimes.push(built.value.runtime);
  return { ...built.value.runtime, now: () => NOW };
}

function grantOf(rt: ProxyRuntime, id = 'g'): RuntimeGrant {
  const grant = rt.registry.grants.get(id);
  if (grant === undefined) throw new Error(`no grant ${id}`);
  return grant;
}

function hopTo(authority: string, kind: RequestKind = 'connect', principal: Principal = { grantId: 'g', via: 'token' }): Hop {
  const hop = new Hop(1, kind, kind === 'connect' ? 'CONNECT' : 'GET', authority);
  const dest = canonicalize(authority, kind === 'connect' ? undefined : 80);
  if (!dest.ok) throw new Error(`cannot canonicalize ${authority}`);
  hop.canonical = dest.value;
  if (kind === 'forward') hop.scheme = 'http';
  hop.principal = principal;
  return hop;
}

const PROXY: UpstreamProxy = { label: 'http://127.0.0.1:3128', tls: false, host: '127.0.0.1', port: 3128, authorization: null, ca: null, inspectsTls: false, sendResolvedAddress: false };
const RESOLVING_PROXY: UpstreamProxy = { ...PROXY, label: 'http://127.0.0.1:3129', port: 3129, sendResolvedAddress: true };

/** A RouteSelector (as PAC would answer) with fixed alternatives; counts its calls. */
function fixedRoutes(hops: readonly RouteHop[], resolvesFirst = false): RouteSelector & { calls: number } {
  const route: Route = { label: `fake ${hops.map((h) => h.kind).join(', ')}`, mode: 'pac', hops, pacAnswer: null };
  const selector = {
    calls: 0,
    mode: 'pac' as const,
    resolvesFirst,
    select: () => {
      selector.calls += 1;
      return Promise.resolve(ok(route));
    },
    close: () => undefined,
  };
  return selector;
}

const grant = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: 'g',
  tokenSha256: '0'.repeat(64),
  destinations: ['https://*.test', 'http://web.test', `https://self.test:${SELF_PORT}`],
  allowAddressClasses: ['loopback'],
  ...extra,
});

describe('checkGrantLive: the grant must exist, be unrevoked and unexpired, checked on every hop', () => {
  it('answers grant_unknown for a dedicated listener whose grant is gone, token_invalid for a token principal', () => {
    const viaListener = hopTo('a.test:443', 'connect', { grantId: 'ghost', via: 'listener' });
    expect(checkGrantLive(viaListener, undefined, NOW)).toBe(false);
    expect(viaListener.reason).toBe('grant_unknown');
    // A token that named a grant which vanished since is not a live token: no oracle that the id existed.
    const viaToken = hopTo('a.test:443', 'connect', { grantId: 'ghost', via: 'token' });
    expect(checkGrantLive(viaToken, undefined, NOW)).toBe(false);
    expect(viaToken.reason).toBe('token_invalid');
    expect(viaToken.grant).toBeNull();
  });

  it('refuses a revoked grant', async () => {
    const rt = await runtime({ grants: [grant()] }, tableLookup({}));
    rt.registry.revoke('g');
    const hop = hopTo('a.test:443');
    expect(checkGrantLive(hop, grantOf(rt), NOW)).toBe(false);
    expect(hop.reason).toBe('grant_revoked');
    expect(hop.grant).toBeNull();
  });

  it('refuses a grant at exactly its expiresAt, and serves it one millisecond before', async () => {
    const expiresAt = new Date(NOW + 60_000).toISOString();
    const rt = await runtime({ grants: [grant({ limits: { expiresAt } })] }, tableLookup({}));
    const g = grantOf(rt);
    expect(g.expiresAtMs).toBe(NOW + 60_000);
    const before = hopTo('a.test:443');
    expect(checkGrantLive(before, g, NOW + 59_999)).toBe(true);
    expect(before.grant).toBe(g);
    expect(before.reason).toBe('granted');
    const at = hopTo('a.test:443');
    expect(checkGrantLive(at, g, NOW + 60_000)).toBe(false);
    expect(at.reason).toBe('grant_expired');
    expect(at.grant).toBeNull();
  });
});

describe('decideDestination: authorization precedes routing and any DNS query', () => {
  it.each([
    ['another host', 'evil.example:443', 'connect'],
    ['the right host on another port', 'a.test:8443', 'connect'],
    ['the apex of a wildcard', 'test:443', 'connect'],
    ['a CONNECT to a host granted only for http', 'web.test:80', 'connect'],
  ] as const)('refuses %s with destination_not_granted before the route or resolver is asked', async (_label, authority, kind) => {
    const dns = countingLookup({ 'evil.example': ['127.0.0.1'], 'a.test': ['127.0.0.1'], 'web.test': ['127.0.0.1'], test: ['127.0.0.1'] });
    const base = await runtime({ grants: [grant()] }, dns.lookup);
    const routes = fixedRoutes([{ kind: 'direct' }], true);
    const rt = { ...base, routes };
    const hop = hopTo(authority, kind);
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('destination_not_granted');
    expect(dns.calls).toEqual([]);
    expect(routes.calls).toBe(0);
    expect(hop.route).toBeNull();
    expect(hop.addresses).toEqual([]);
  });

  it('allows a granted name that resolves to an allowed class, and pins that address for a direct route', async () => {
    const dns = countingLookup({ 'a.test': ['127.0.0.1'] });
    const rt = await runtime({ grants: [grant()] }, dns.lookup);
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(true);
    expect(hop.reason).toBe('granted');
    expect(hop.rule).toBe('https://*.test:443');
    expect(hop.pinned.map((p) => `${p.address}:${p.port}`)).toEqual(['127.0.0.1:443']);
    expect(hop.routeHops).toEqual([{ kind: 'direct' }]);
    expect(dns.calls).toEqual(['a.test']);
  });

  it.each([
    ['a private address without that class', ['10.0.0.1'], 'address_class_denied'],
    ['link-local metadata', ['169.254.169.254'], 'address_class_denied'],
    ['loopback spelled as IPv4-mapped IPv6', ['::ffff:127.0.0.2'], null],
    ['a private address spelled as IPv4-mapped IPv6', ['::ffff:10.0.0.1'], 'address_class_denied'],
    ['the unspecified address', ['0.0.0.0'], 'address_class_denied'],
  ])('a name resolving to %s is decided by its class', async (_label, answers, reason) => {
    const rt = await runtime({ grants: [grant()] }, tableLookup({ 'a.test': answers }));
    const hop = hopTo('a.test:443');
    const allowed = await decideDestination(rt, hop, grantOf(rt));
    expect(allowed).toBe(reason === null);
    expect(hop.reason).toBe(reason ?? 'granted');
    if (reason !== null) expect(hop.pinned).toEqual([]);
    expect(hop.addresses.length).toBe(answers.length);
  });

  it('refuses a name that resolves to Sluice’s own listener port with address_self, even with loopback granted', async () => {
    const rt = await runtime({ grants: [grant()] }, tableLookup({ 'self.test': ['127.0.0.1'] }));
    const hop = hopTo(`self.test:${SELF_PORT}`);
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('address_self');
    expect(hop.addresses).toMatchObject([{ address: '127.0.0.1', class: 'self', allowed: false }]);
  });

  it('drops a forbidden answer for a direct route and pins only the allowed one, never the forbidden one first', async () => {
    const rt = await runtime({ grants: [grant()] }, tableLookup({ 'a.test': ['10.0.0.1', '127.0.0.1'] }));
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(true);
    expect(hop.pinned.map((p) => p.address)).toEqual(['127.0.0.1']);
  });

  it('denies a mix of allowed and forbidden answers when an unattested proxy alternative would resolve the name itself', async () => {
    const rt = await runtime({ grants: [grant()], route: { mode: 'proxy', proxy: { url: 'http://127.0.0.1:3128' } } }, tableLookup({ 'a.test': ['127.0.0.1', '10.0.0.1'] }));
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('address_class_denied');
    expect(hop.detail).toContain('upstream proxy');
    expect(hop.routeHops).toEqual([]);
  });

  it('allows the same mix through a proxy sent the checked address (sendResolvedAddress): only the allowed one is pinned', async () => {
    const rt = await runtime(
      { grants: [grant()], route: { mode: 'proxy', proxy: { url: 'http://127.0.0.1:3128', sendResolvedAddress: true } } },
      tableLookup({ 'a.test': ['10.0.0.1', '127.0.0.1'] }),
    );
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(true);
    expect(hop.pinned.map((p) => p.address)).toEqual(['127.0.0.1']);
    expect(hop.routeHops).toHaveLength(1);
  });

  it.each(['lookup_limit_reached', 'dns_busy'] as const)('a lookup refused for capacity (%s) ends the hop even when an unattested proxy could go on', async (reason) => {
    const calls: string[] = [];
    const limits = reason === 'lookup_limit_reached' ? { maxConcurrentLookupsPerGrant: 1 } : { maxConcurrentLookups: 1 };
    const base = await runtime({ grants: [grant(), grant({ id: 'other', tokenSha256: '1'.repeat(64) })], limits }, hangingLookup(calls));
    for (const resolvesFirst of [false, true]) {
      const routes = fixedRoutes([{ kind: 'proxy', proxy: PROXY }], resolvesFirst);
      const rt = { ...base, routes };
      // Fill the share: the principal itself (per-grant) or another grant (process-wide) has a lookup in flight.
      const holder = reason === 'lookup_limit_reached' ? 'g' : 'other';
      const held = base.resolver.resolve(`slow-${String(resolvesFirst)}.test`, holder);
      const hop = hopTo('a.test:443');
      expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
      expect(hop.reason).toBe(reason);
      expect(hop.routeHops).toEqual([]);
      for (const release of releases.splice(0)) release();
      await held;
    }
    expect(calls).toEqual(['slow-false.test', 'slow-true.test']);
  });

  it('requireAttestedAddress drops unattested alternatives, and ends the hop route_unattested when none is left', async () => {
    const rt = await runtime({ grants: [grant({ requireAttestedAddress: true })], route: { mode: 'proxy', proxy: { url: 'http://127.0.0.1:3128' } } }, tableLookup({ 'a.test': ['127.0.0.1'] }));
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('route_unattested');

    const mixed = { ...rt, routes: fixedRoutes([{ kind: 'proxy', proxy: PROXY }, { kind: 'direct' }, { kind: 'proxy', proxy: RESOLVING_PROXY }]) };
    const kept = hopTo('a.test:443');
    expect(await decideDestination(mixed, kept, grantOf(rt))).toBe(true);
    expect(kept.routeHops).toEqual([{ kind: 'direct' }, { kind: 'proxy', proxy: RESOLVING_PROXY }]);
  });

  it('a failed lookup keeps only the unattested proxy alternatives, with nothing pinned', async () => {
    const base = await runtime({ grants: [grant()] }, tableLookup({}));
    const rt = { ...base, routes: fixedRoutes([{ kind: 'direct' }, { kind: 'proxy', proxy: PROXY }, { kind: 'proxy', proxy: RESOLVING_PROXY }]) };
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(true);
    expect(hop.routeHops).toEqual([{ kind: 'proxy', proxy: PROXY }]);
    expect(hop.pinned).toEqual([]);
    expect(hop.addresses).toEqual([]);
  });

  it('a failed lookup with only attested alternatives ends the hop with the dns code', async () => {
    const base = await runtime({ grants: [grant()] }, tableLookup({}));
    const rt = { ...base, routes: fixedRoutes([{ kind: 'direct' }, { kind: 'proxy', proxy: RESOLVING_PROXY }]) };
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('dns_no_address');
  });

  it('a failed lookup with requireAttestedAddress leaves no alternative: route_unattested', async () => {
    const base = await runtime({ grants: [grant({ requireAttestedAddress: true })] }, tableLookup({}));
    const rt = { ...base, routes: fixedRoutes([{ kind: 'direct' }, { kind: 'proxy', proxy: PROXY }]) };
    const hop = hopTo('a.test:443');
    expect(await decideDestination(rt, hop, grantOf(rt))).toBe(false);
    expect(hop.reason).toBe('route_unattested');
  });

  it('an IP-literal destination is its own answer: no DNS query, and a forbidden literal is refused', async () => {
    const dns = countingLookup({});
    const rt = await runtime({ grants: [grant({ destinations: ['https://127.0.0.1', 'https://10.0.0.1', 'https://[::1]'] })] }, dns.lookup);
    const loop = hopTo('127.0.0.1:443');
    expect(await decideDestination(rt, loop, grantOf(rt))).toBe(true);
    expect(loop.pinned.map((p) => p.address)).toEqual(['127.0.0.1']);
    const v6 = hopTo('[::1]:443');
    expect(await decideDestination(rt, v6, grantOf(rt))).toBe(true);
    const priv = hopTo('10.0.0.1:443');
    expect(await decideDestination(rt, priv, grantOf(rt))).toBe(false);
    expect(priv.reason).toBe('address_class_denied');
    expect(dns.calls).toEqual([]);
  });
});

describe('isAttested: does Sluice check the address the next hop dials?', () => {
  it.each([
    ['direct, a name', true, { kind: 'direct' } as RouteHop, 'a.test:443'],
    ['a proxy sent the name', false, { kind: 'proxy', proxy: PROXY } as RouteHop, 'a.test:443'],
    ['a proxy sent the checked IP (sendResolvedAddress)', true, { kind: 'proxy', proxy: RESOLVING_PROXY } as RouteHop, 'a.test:443'],
    ['a proxy, an IPv4 literal destination', true, { kind: 'proxy', proxy: PROXY } as RouteHop, '127.0.0.1:443'],
    ['a proxy, an IPv6 literal destination', true, { kind: 'proxy', proxy: PROXY } as RouteHop, '[::1]:443'],
  ] as const)('%s → attested %s', (_label, expected, routeHop, authority) => {
    expect(isAttested(routeHop, hopTo(authority))).toBe(expected);
  });
});
