// One hop's state (src/proxy/hop.ts). Threat: a later stage, a fault, or a second failure rewriting a
// hop's outcome after its first denial or after its decision, so the record, the answer and what
// happened disagree. The first denial is final, and nothing changes the outcome once it is decided.
import { describe, expect, it } from 'vitest';
import { Hop } from '../../../src/proxy/hop.js';
import { decisionOf } from '../../../src/proxy/decision.js';

const place = { id: 'c-hop', listener: 'shared' };

describe('Hop', () => {
  it('starts allowed and undecided, every stage field empty', () => {
    const hop = new Hop(3, 'forward', 'GET', 'http://a.test/');
    expect(hop).toMatchObject({ index: 3, kind: 'forward', method: 'GET', target: 'http://a.test/', reason: 'granted', detail: '', decision: null, principal: null, canonical: null, dialed: null, usedHop: null });
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
    hop.decision = decisionOf(hop, place);
    expect(hop.fail('internal_error', 'after the decision')).toBe(false);
    expect(hop.isAllowed).toBe(true);
    expect([hop.reason, hop.detail]).toEqual(['granted', '']);
    expect(hop.decision.reason).toBe('granted');
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
