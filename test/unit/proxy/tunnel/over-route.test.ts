// The one loop over a hop's route alternatives (src/proxy/tunnel/over-route.ts), for tunnels and forwards.
// Threat: a hop that reaches a destination through an alternative other than the one recorded
// (usedHop), one that falls through to DIRECT after a proxy refused it (a 407 or a policy refusal is
// final: only a connection-level failure may move on), and a pin that does not survive the hop to an
// upstream proxy (the authority sent upstream must be the checked IP literal with sendResolvedAddress).
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/authority/index.js';
import { deny, ok, type PinnedAddress, type UpstreamProxy, type Verdict } from '../../../../src/core/index.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { overRoute, upstreamAuthority, type ProxyHop } from '../../../../src/proxy/tunnel/over-route.js';
import { UpstreamHealth, type RouteHop } from '../../../../src/route/index.js';

function proxy(label: string, options: Partial<UpstreamProxy> = {}): ProxyHop {
  const url = new URL(label);
  return { kind: 'proxy', proxy: { label, tls: false, host: url.hostname, port: Number(url.port), authorization: null, ca: null, inspectsTls: false, sendResolvedAddress: false, ...options } };
}
const DIRECT: RouteHop = { kind: 'direct' };
const P1 = proxy('http://p1.corp.test:3128');
const P2 = proxy('http://p2.corp.test:3128');

function hopTo(authority: string, routeHops: readonly RouteHop[] = []): Hop {
  const hop = new Hop(1, 'connect', 'CONNECT', authority);
  const dest = canonicalize(authority);
  if (!dest.ok) throw new Error(`bad test authority ${authority}`);
  hop.canonical = dest.value;
  hop.routeHops = routeHops;
  return hop;
}
const pinned = (address: string, port: number): PinnedAddress => ({ address, family: address.includes(':') ? 6 : 4, port, class: 'loopback' }) as PinnedAddress;

/** An attempt that answers from a table, noting each alternative tried and the usedHop seen at the time. */
function scripted(hop: Hop, answers: ReadonlyMap<RouteHop, Verdict<string>>): { attempt: (h: RouteHop) => Promise<Verdict<string>>; tried: RouteHop[]; usedDuring: (RouteHop | null)[] } {
  const tried: RouteHop[] = [];
  const usedDuring: (RouteHop | null)[] = [];
  return {
    tried,
    usedDuring,
    attempt: async (h) => {
      tried.push(h);
      usedDuring.push(hop.usedHop);
      return answers.get(h) ?? deny('dial_refused');
    },
  };
}
const retryConnectionFailures = (f: { reason: string }): boolean => f.reason === 'dial_refused' || f.reason === 'upstream_unreachable';

describe('overRoute', () => {
  it('tries the alternatives in the route order, with usedHop set to the one being tried', async () => {
    const hop = hopTo('a.test:443', [P1, P2, DIRECT]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[P1, deny('upstream_unreachable')], [P2, deny('upstream_unreachable')], [DIRECT, ok('direct socket')]]));
    const result = await overRoute(hop, s.attempt, retryConnectionFailures);
    expect(s.tried).toEqual([P1, P2, DIRECT]);
    expect(s.usedDuring).toEqual([P1, P2, DIRECT]);
    expect(result).toEqual(ok('direct socket'));
    expect(hop.usedHop).toBe(DIRECT);
  });

  it('stops at the first success: later alternatives are never tried', async () => {
    const hop = hopTo('a.test:443', [P1, P2, DIRECT]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[P1, deny('upstream_unreachable')], [P2, ok('via p2')]]));
    expect(await overRoute(hop, s.attempt, retryConnectionFailures)).toEqual(ok('via p2'));
    expect(s.tried).toEqual([P1, P2]);
    expect(hop.usedHop).toBe(P2);
  });

  it('stops on a failure that may not be retried (a proxy refusal never falls through to DIRECT)', async () => {
    const hop = hopTo('a.test:443', [P1, DIRECT]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[P1, deny('upstream_refused', '403 from p1')], [DIRECT, ok('direct')]]));
    const result = await overRoute(hop, s.attempt, retryConnectionFailures);
    expect(result).toEqual(deny('upstream_refused', '403 from p1'));
    expect(s.tried).toEqual([P1]);
    expect(hop.usedHop).toBe(P1);
  });

  it('moves on only when mayRetry says so, and asks it about each failure', async () => {
    const hop = hopTo('a.test:443', [P1, P2]);
    const asked: string[] = [];
    const s = scripted(hop, new Map([[P1, deny('dial_refused')], [P2, deny('dial_refused', 'p2 too')]]));
    const never = (f: { reason: string }): boolean => {
      asked.push(f.reason);
      return false;
    };
    expect(await overRoute(hop, s.attempt, never)).toEqual(deny('dial_refused'));
    expect(s.tried).toEqual([P1]);
    expect(asked).toEqual(['dial_refused']);

    const hop2 = hopTo('a.test:443', [P1, P2]);
    const s2 = scripted(hop2, new Map([[P1, deny('dial_refused')], [P2, deny('dial_refused', 'p2 too')]]));
    // Every alternative failed retryably: the last failure is the hop's.
    expect(await overRoute(hop2, s2.attempt, () => true)).toEqual(deny('dial_refused', 'p2 too'));
    expect(s2.tried).toEqual([P1, P2]);
    expect(hop2.usedHop).toBe(P2);
  });

  it('route_none when there is no alternative left: nothing is attempted and nothing is used', async () => {
    const hop = hopTo('a.test:443', []);
    const s = scripted(hop, new Map());
    const result = await overRoute(hop, s.attempt, () => true);
    expect(result.ok).toBe(false);
    expect(result.ok ? null : result.reason).toBe('route_none');
    expect(s.tried).toEqual([]);
    expect(hop.usedHop).toBeNull();
  });
});

describe('overRoute failover back-off (route.proxy lists, PAC PROXY a; PROXY b)', () => {
  // A clock the test moves: back-off is 1 s doubling to 60 s.
  function clock(): { now: () => number; advance: (ms: number) => void } {
    let t = 1000;
    return { now: () => t, advance: (ms) => void (t += ms) };
  }
  function watched(label: string, now: () => number): ProxyHop {
    const base = proxy(label);
    return { ...base, health: new UpstreamHealth(label, now) };
  }

  it('skips a proxy backing off after a connection failure, then tries it again once its back-off ends', async () => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    const b = watched('http://b.corp.test:3128', c.now);
    const first = hopTo('x.test:443', [a, b]);
    const s1 = scripted(first, new Map<RouteHop, Verdict<string>>([[a, deny('upstream_unreachable', 'ECONNREFUSED')], [b, ok('via b')]]));
    expect(await overRoute(first, s1.attempt, retryConnectionFailures)).toEqual(ok('via b'));
    expect(s1.tried).toEqual([a, b]);
    expect(first.usedHop).toBe(b);

    // Within the back-off: a is not even tried, and the record names b.
    const second = hopTo('x.test:443', [a, b]);
    const s2 = scripted(second, new Map<RouteHop, Verdict<string>>([[a, ok('via a')], [b, ok('via b')]]));
    expect(await overRoute(second, s2.attempt, retryConnectionFailures)).toEqual(ok('via b'));
    expect(s2.tried).toEqual([b]);
    expect(second.usedHop).toBe(b);

    // After 1 s, the next hop is the check: a answers and is used again.
    c.advance(1000);
    const third = hopTo('x.test:443', [a, b]);
    const s3 = scripted(third, new Map<RouteHop, Verdict<string>>([[a, ok('via a')], [b, ok('via b')]]));
    expect(await overRoute(third, s3.attempt, retryConnectionFailures)).toEqual(ok('via a'));
    expect(s3.tried).toEqual([a]);
    expect(a.health?.isUp).toBe(true);
  });

  it('refuses with upstream_unreachable when every proxy is backing off, and never tries anything', async () => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    const b = watched('http://b.corp.test:3128', c.now);
    const first = hopTo('x.test:443', [a, b]);
    const s1 = scripted(first, new Map<RouteHop, Verdict<string>>([[a, deny('upstream_unreachable', 'ECONNREFUSED')], [b, deny('upstream_timeout')]]));
    expect(await overRoute(first, s1.attempt, retryConnectionFailures)).toMatchObject({ ok: false });
    const second = hopTo('x.test:443', [a, b]);
    const s2 = scripted(second, new Map());
    const result = await overRoute(second, s2.attempt, retryConnectionFailures);
    expect(s2.tried).toEqual([]);
    expect(second.usedHop).toBeNull();
    expect(result).toMatchObject({ ok: false, reason: 'upstream_unreachable' });
    if (!result.ok) {
      expect(result.detail).toContain('http://a.corp.test:3128 upstream_unreachable (ECONNREFUSED), retried in 1 s');
      expect(result.detail).toContain('http://b.corp.test:3128 upstream_timeout');
    }
  });

  it('goes DIRECT past a backing-off proxy only when the route lists DIRECT (a PAC answer)', async () => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    a.health?.markFailed('upstream_unreachable');
    const withDirect = hopTo('x.test:443', [a, DIRECT]);
    const s = scripted(withDirect, new Map<RouteHop, Verdict<string>>([[DIRECT, ok('direct')]]));
    expect(await overRoute(withDirect, s.attempt, retryConnectionFailures)).toEqual(ok('direct'));
    expect(s.tried).toEqual([DIRECT]);
  });

  it('always tries the only alternative, even while it backs off (nothing to fail over to)', async () => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    a.health?.markFailed('upstream_unreachable');
    const hop = hopTo('x.test:443', [a]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[a, ok('via a')]]));
    expect(await overRoute(hop, s.attempt, retryConnectionFailures)).toEqual(ok('via a'));
    expect(a.health?.isUp).toBe(true);
  });

  it.each([
    ['a 407', deny('upstream_auth_required', 'answered 407')],
    ['a refusal', deny('upstream_refused', 'answered 403')],
  ] as const)('%s is an answer: the hop ends there, no failover, and the proxy stays up', async (_name, answer) => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    const b = watched('http://b.corp.test:3128', c.now);
    const hop = hopTo('x.test:443', [a, b]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[a, answer], [b, ok('via b')]]));
    const retryAll = (f: { reason: string }): boolean => f.reason !== 'upstream_auth_required' && f.reason !== 'upstream_refused';
    expect(await overRoute(hop, s.attempt, retryAll)).toEqual(answer);
    expect(s.tried).toEqual([a]);
    expect(a.health?.isUp).toBe(true);
    expect(a.health?.isBackingOff).toBe(false);
  });

  it('marks a proxy down on a connection failure even when the hop may not move on (a request with a body)', async () => {
    const c = clock();
    const a = watched('http://a.corp.test:3128', c.now);
    const b = watched('http://b.corp.test:3128', c.now);
    const hop = hopTo('x.test:443', [a, b]);
    const s = scripted(hop, new Map<RouteHop, Verdict<string>>([[a, deny('upstream_tls_failed')]]));
    expect(await overRoute(hop, s.attempt, () => false)).toMatchObject({ ok: false, reason: 'upstream_tls_failed' });
    expect(s.tried).toEqual([a]);
    expect(a.health?.isBackingOff).toBe(true);
  });
});

describe('upstreamAuthority', () => {
  it('sends the canonical name when the proxy resolves it itself', () => {
    const hop = hopTo('api.example.test:8443');
    hop.pinned = [pinned('127.0.0.1', 8443)];
    expect(upstreamAuthority(hop, P1)).toBe('api.example.test:8443');
  });

  it('with sendResolvedAddress, sends the checked IP literal, never the name', () => {
    const hop = hopTo('api.example.test:8443');
    hop.pinned = [pinned('127.0.0.7', 8443), pinned('127.0.0.8', 8443)];
    expect(upstreamAuthority(hop, proxy('http://p.test:3128', { sendResolvedAddress: true }))).toBe('127.0.0.7:8443');
  });

  it('brackets an IPv6 pin (RFC 3986 §3.2.2), and keeps the bracketed key of an IPv6 destination', () => {
    const hop = hopTo('api.example.test:443');
    hop.pinned = [pinned('::1', 443)];
    expect(upstreamAuthority(hop, proxy('http://p.test:3128', { sendResolvedAddress: true }))).toBe('[::1]:443');
    const v6 = hopTo('[::1]:443');
    expect(upstreamAuthority(v6, P1)).toBe('[::1]:443');
  });

  it('is null without a pin when the pin must survive the hop, and without a destination', () => {
    const hop = hopTo('api.example.test:443');
    expect(upstreamAuthority(hop, proxy('http://p.test:3128', { sendResolvedAddress: true }))).toBeNull();
    const none = new Hop(1, 'connect', 'CONNECT', '');
    expect(upstreamAuthority(none, P1)).toBeNull();
  });
});
