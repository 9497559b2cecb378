// One hop's state (src/proxy/hop/hop.ts). Threat: a later stage, a fault, or a second failure rewriting a
// hop's outcome after its first denial or after its decision, so the record, the answer and what
// happened disagree. The first denial is final, and nothing changes the outcome once it is decided.
import { describe, expect, it } from 'vitest';
import type { PinnedAddress } from '../../../../src/core/index.js';
import { canonicalize } from '../../../../src/authority/index.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { RouteHop } from '../../../../src/route/index.js';

describe('Hop', () => {
  it('starts allowed and undecided, every stage field empty', () => {
    const hop = new Hop(3, 'forward', 'GET', 'http://a.test/');
    expect(hop).toMatchObject({ index: 3, kind: 'forward', method: 'GET', target: 'http://a.test/', reason: 'granted', detail: '', isDecided: false, decision: null, principal: null, canonical: null, dialed: null, usedHop: null });
    expect(hop.isAllowed).toBe(true);
    expect([hop.identifyUs, hop.authorizeUs, hop.routeUs, hop.resolveUs, hop.dialUs, hop.firstByteUs]).toEqual([null, null, null, null, null, null]);
  });

  it('fail denies the hop, returns false, and is no longer allowed', () => {
    const hop = new Hop(1, 'connect', 'CONNECT', 'a.test:443');
    expect(hop.fail('destination_not_granted', 'not in grant a')).toBe(false);
    expect(hop.isAllowed).toBe(false);
    expect([hop.reason, hop.detail]).toEqual(['destination_not_granted', 'not in grant a']);
  });

  it('the first denial is final: a later failure (or a fault turned internal_error) changes neither reason nor detail', () => {
    const hop = new Hop(1, 'connect', 'CONNECT', 'a.test:443');
    hop.fail('token_invalid');
    expect(hop.fail('internal_error', 'handling the hop failed')).toBe(false);
    expect(hop.fail('destination_not_granted', 'later')).toBe(false);
    expect([hop.reason, hop.detail]).toEqual(['token_invalid', '']);
  });

  it('a failure after the decision changes nothing: an allowed, decided hop stays allowed', () => {
    const hop = new Hop(1, 'forward', 'GET', 'http://a.test/');
    hop.isDecided = true;
    expect(hop.fail('internal_error', 'after the decision')).toBe(false);
    expect(hop.isAllowed).toBe(true);
    expect([hop.reason, hop.detail]).toEqual(['granted', '']);
  });

  it('what the decision record reports of the route: pin, upstream, attested, credential-observing', () => {
    const proxy = (inspectsTls: boolean, sendResolvedAddress: boolean): RouteHop => ({
      kind: 'proxy',
      proxy: { label: 'http://corp.test:3128', tls: false, host: 'corp.test', port: 3128, authorization: null, ca: null, inspectsTls, sendResolvedAddress },
    });
    const hop = new Hop(1, 'connect', 'CONNECT', 'api.example.test:443');
    const dest = canonicalize('api.example.test:443');
    if (!dest.ok) throw new Error('bad authority');
    hop.canonical = dest.value;
    hop.pinned = [{ address: '127.0.0.5', family: 4, port: 443, class: 'loopback' } as PinnedAddress];
    expect([hop.recordedPin, hop.upstream, hop.attested, hop.credentialObserving]).toEqual([null, null, null, null]);
    hop.routeHops = [{ kind: 'direct' }, proxy(true, true)];
    expect([hop.recordedPin, hop.upstream, hop.attested, hop.credentialObserving]).toEqual(['127.0.0.5', null, true, true]);
    hop.routeHops = [{ kind: 'direct' }, proxy(false, false)];
    expect([hop.recordedPin, hop.upstream, hop.attested, hop.credentialObserving]).toEqual([null, null, false, false]);
    hop.usedHop = hop.routeHops[1] ?? null;
    expect([hop.recordedPin, hop.upstream, hop.attested, hop.credentialObserving]).toEqual([null, 'http://corp.test:3128', false, false]);
    hop.usedHop = { kind: 'direct' };
    hop.dialed = { address: '127.0.0.6', family: 4, port: 443, class: 'loopback' } as PinnedAddress;
    expect([hop.recordedPin, hop.upstream, hop.attested, hop.credentialObserving]).toEqual(['127.0.0.6', null, true, false]);
  });

  it('isAllowed is exactly "no denial yet"', () => {
    const hop = new Hop(1, 'forward', 'GET', '');
    expect(hop.isAllowed).toBe(true);
    hop.fail('request_malformed');
    expect(hop.isAllowed).toBe(false);
  });

  it('elapsedUs is a whole number of microseconds since the head, never going back', () => {
    const hop = new Hop(1, 'forward', 'GET', '');
    const readings: number[] = [];
    const until = performance.now() + 3;
    while (performance.now() < until) readings.push(hop.elapsedUs());
    readings.push(hop.elapsedUs());
    for (const r of readings) {
      expect(Number.isInteger(r)).toBe(true);
      expect(r).toBeGreaterThanOrEqual(0);
    }
    for (let i = 1; i < readings.length; i++) expect(readings[i]).toBeGreaterThanOrEqual(readings[i - 1] ?? 0);
    expect(readings.at(-1)).toBeGreaterThanOrEqual(2900);
  });
});
