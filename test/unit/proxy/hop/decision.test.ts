// The decision of one hop (src/proxy/hop/decision.ts): one immutable value, built once, that is the decision
// audit record and that Proxy-Status, the denial body, metrics and explain all read. Threat: a value
// changed after it was recorded (the record and the answer disagree), a token or query in the target
// reaching the log, a pin reported for an address Sluice never checked or dialed (an upstream proxy
// that resolved the name), and a status that is not the reason table's.
import { describe, expect, it } from 'vitest';
import { DECISION_FIELDS, redactTarget } from '../../../../src/audit/index.js';
import { canonicalize } from '../../../../src/authority/index.js';
import { Reasons, type ClassifiedAddress, type PinnedAddress, type ReasonCode, type UpstreamProxy } from '../../../../src/core/index.js';
import { decisionOf } from '../../../../src/proxy/hop/decision.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { RouteHop } from '../../../../src/route/index.js';

const place = { id: 'c42', listener: 'shared' };
const DIRECT: RouteHop = { kind: 'direct' };
function proxy(options: Partial<UpstreamProxy> = {}): RouteHop {
  return { kind: 'proxy', proxy: { label: 'http://corp.test:3128', tls: false, host: 'corp.test', port: 3128, authorization: 'Basic c2VjcmV0', ca: null, inspectsTls: false, sendResolvedAddress: false, ...options } };
}
const pinned = (address: string, port = 443): PinnedAddress => ({ address, family: address.includes(':') ? 6 : 4, port, class: 'loopback' }) as PinnedAddress;

function routedHop(authority = 'api.example.test:443', routeHops: readonly RouteHop[] = [DIRECT]): Hop {
  const hop = new Hop(2, 'connect', 'CONNECT', authority);
  const dest = canonicalize(authority);
  if (!dest.ok) throw new Error('bad authority');
  hop.canonical = dest.value;
  hop.principal = { grantId: 'sandbox-a', via: 'token' };
  hop.rule = 'tcp://api.example.test:443';
  hop.addresses = [{ address: '127.0.0.5', family: 4, class: 'loopback', allowed: true } as ClassifiedAddress, { address: '10.0.0.1', family: 4, class: 'private', allowed: false } as ClassifiedAddress];
  hop.pinned = [pinned('127.0.0.5')];
  hop.route = { label: 'direct', mode: 'direct', hops: routeHops, pacAnswer: null };
  hop.routeHops = routeHops;
  hop.identifyUs = 10;
  hop.authorizeUs = 20;
  hop.routeUs = 30;
  hop.resolveUs = 40;
  return hop;
}

describe('decisionOf', () => {
  it('is frozen, and so are its addresses (each one) and its timings: nothing can change it after it is recorded', () => {
    const d = decisionOf(routedHop(), place);
    expect(Object.isFrozen(d)).toBe(true);
    expect(Object.isFrozen(d.addresses)).toBe(true);
    for (const a of d.addresses) expect(Object.isFrozen(a)).toBe(true);
    expect(Object.isFrozen(d.timings)).toBe(true);
    expect(() => {
      (d as { reason: string }).reason = 'granted';
    }).toThrow(TypeError);
  });

  it('is a snapshot: changing the hop afterwards does not change it', () => {
    const hop = routedHop();
    const d = decisionOf(hop, place);
    hop.fail('destination_not_granted');
    hop.addresses = [];
    hop.dialUs = 99;
    expect(d).toMatchObject({ decision: 'allow', reason: 'granted', timings: { dialUs: null } });
    expect(d.addresses).toHaveLength(2);
  });

  it('takes every field from the hop and its place', () => {
    const hop = routedHop();
    hop.dialUs = 50;
    hop.dialed = pinned('127.0.0.5');
    hop.usedHop = DIRECT;
    const d = decisionOf(hop, place);
    // Every declared field is present (checked below); these are the ones a hop fills in.
    expect(d).toMatchObject({
      v: 1,
      kind: 'decision',
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown as string,
      connection: 'c42',
      hop: 2,
      listener: 'shared',
      principal: 'sandbox-a',
      via: 'token',
      request: 'connect',
      method: 'CONNECT',
      target: 'api.example.test:443',
      scheme: null,
      canonical: 'api.example.test:443',
      decision: 'allow',
      reason: 'granted',
      status: 200,
      detail: null,
      rule: 'tcp://api.example.test:443',
      addresses: [
        { address: '127.0.0.5', class: 'loopback', allowed: true },
        { address: '10.0.0.1', class: 'private', allowed: false },
      ],
      pinned: '127.0.0.5',
      route: 'direct',
      upstream: null,
      attested: true,
      credentialObserving: false,
      timings: { identifyUs: 10, authorizeUs: 20, routeUs: 30, resolveUs: 40, dialUs: 50 },
    });
    // Every field of the record, always present, in the declared order (docs/audit-log.md).
    expect(Object.keys(d)).toEqual([...DECISION_FIELDS]);
  });

  it('a hop denied before identification has null principal, via, canonical and route, and its detail', () => {
    const hop = new Hop(1, 'forward', '-', '');
    hop.fail('request_malformed', 'HPE_INVALID_METHOD');
    expect(decisionOf(hop, place)).toMatchObject({ principal: null, via: null, canonical: null, route: null, rule: null, addresses: [], pinned: null, attested: null, credentialObserving: null, decision: 'deny', reason: 'request_malformed', status: 400, detail: 'HPE_INVALID_METHOD' });
  });

  it('redacts the target: no userinfo, query or fragment, control characters escaped (docs/audit-log.md, Redaction)', () => {
    for (const target of ['http://sandbox:tok-SECRET@api.example.test/v1?token=tok-SECRET#frag', 'sandbox:tok-SECRET@api.example.test:443', 'http://api.example.test/\r\nX-Injected: 1', `http://api.example.test/${'a'.repeat(400)}`]) {
      const hop = new Hop(1, 'forward', 'GET', target);
      const d = decisionOf(hop, place);
      expect(d.target).toBe(redactTarget(target));
      expect(JSON.stringify(d)).not.toContain('tok-SECRET');
      expect(d.target).not.toMatch(/[\r\n]/);
      expect(d.target.length).toBeLessThanOrEqual(257);
    }
  });

  it('reports a pin only when it was dialed or checked for the route that uses it', () => {
    // Direct, not dialed yet: the checked address is the one a direct dial uses.
    expect(decisionOf(routedHop(), place).pinned).toBe('127.0.0.5');
    // A proxy that resolves the name itself: checked here, but not what the proxy will use.
    expect(decisionOf(routedHop('api.example.test:443', [proxy()]), place).pinned).toBeNull();
    // The same proxy sent the checked IP literal: attested, so the pin holds.
    expect(decisionOf(routedHop('api.example.test:443', [proxy({ sendResolvedAddress: true })]), place).pinned).toBe('127.0.0.5');
    // Dialed: the address dialed, whatever else was pinned.
    const dialed = routedHop();
    dialed.pinned = [pinned('127.0.0.5'), pinned('127.0.0.6')];
    dialed.dialed = pinned('127.0.0.6');
    dialed.usedHop = DIRECT;
    expect(decisionOf(dialed, place).pinned).toBe('127.0.0.6');
    // Nothing pinned, nothing dialed.
    const none = routedHop();
    none.pinned = [];
    expect(decisionOf(none, place).pinned).toBeNull();
  });

  it('attested and credentialObserving before dialing: every alternative attested, any one inspecting TLS; null with none left', () => {
    const inspecting = proxy({ inspectsTls: true });
    const cases: [readonly RouteHop[], boolean | null, boolean | null][] = [
      [[], null, null],
      [[DIRECT], true, false],
      [[proxy()], false, false],
      [[proxy({ sendResolvedAddress: true })], true, false],
      [[DIRECT, inspecting], false, true],
      [[proxy({ sendResolvedAddress: true, inspectsTls: true }), DIRECT], true, true],
    ];
    for (const [routeHops, attested, observing] of cases) {
      const d = decisionOf(routedHop('api.example.test:443', routeHops), place);
      expect([d.attested, d.credentialObserving], JSON.stringify(routeHops)).toEqual([attested, observing]);
    }
    // An IP-literal destination is attested through any proxy: there is no name to resolve differently.
    expect(decisionOf(routedHop('127.0.0.5:443', [proxy()]), place).attested).toBe(true);
  });

  it('attested and credentialObserving after dialing: the alternative that carried the hop', () => {
    const inspecting = proxy({ inspectsTls: true });
    const hop = routedHop('api.example.test:443', [DIRECT, inspecting]);
    hop.usedHop = inspecting;
    expect(hop.attested).toBe(false);
    expect(decisionOf(hop, place)).toMatchObject({ attested: false, credentialObserving: true, upstream: 'http://corp.test:3128', pinned: null });
    hop.usedHop = DIRECT;
    hop.dialed = pinned('127.0.0.5');
    expect(decisionOf(hop, place)).toMatchObject({ attested: true, credentialObserving: false, upstream: null, pinned: '127.0.0.5' });
  });

  it('the status is the reason table\'s, for every reason; an audit-only code keeps its own reason', () => {
    for (const reason of Object.keys(Reasons) as ReasonCode[]) {
      const hop = new Hop(1, 'connect', 'CONNECT', 'a.test:443');
      hop.fail(reason);
      const d = decisionOf(hop, place);
      expect(d.reason).toBe(reason);
      expect(d.status).toBe(Reasons[reason].status);
      expect(d.decision).toBe(reason === 'granted' ? 'allow' : 'deny');
    }
    const mismatch = new Hop(1, 'connect', 'CONNECT', 'a.test:443');
    mismatch.fail('token_grant_mismatch', 'token of grant b');
    expect(decisionOf(mismatch, place)).toMatchObject({ reason: 'token_grant_mismatch', status: Reasons.token_invalid.status });
  });

  it('ts is the time it was decided at, when given', () => {
    expect(decisionOf(routedHop(), place, Date.UTC(2026, 10, 30, 5, 36, 31, 813)).ts).toBe('2026-11-30T05:36:31.813Z');
  });

  it('never holds the upstream proxy credentials', () => {
    const hop = routedHop('api.example.test:443', [proxy({ authorization: 'Basic dXNlcjpwcm94eS1zZWNyZXQ=' })]);
    hop.usedHop = hop.routeHops[0] ?? null;
    expect(JSON.stringify(decisionOf(hop, place))).not.toContain('dXNlcjpwcm94eS1zZWNyZXQ');
  });
});
