// The token store from the threat: a rotated grant's previous token must stop at once without a grace,
// stop exactly at the grace's end with one (whatever way it is presented: Basic with the grant id or
// Bearer by hash), never verify for another grant, and never come back once dropped.
import { describe, expect, it } from 'vitest';
import { sha256, TokenStore } from '../../../src/identity/index.js';

const T0 = Date.parse('2026-06-01T00:00:00Z');

function store(): { tokens: TokenStore; clock: { now: number } } {
  const clock = { now: T0 };
  return { tokens: new TokenStore(() => clock.now), clock };
}

describe('TokenStore.rotate', () => {
  it('without a grace the previous token stops at once, by Basic and by Bearer', () => {
    const { tokens } = store();
    tokens.set('a', sha256('old'));
    tokens.rotate('a', sha256('new'), null);
    expect([tokens.verify('a', 'old'), tokens.findByToken('old')]).toEqual([false, undefined]);
    expect([tokens.verify('a', 'new'), tokens.findByToken('new')]).toEqual([true, 'a']);
  });

  it('with a grace the previous token verifies until untilMs and not one millisecond later', () => {
    const { tokens, clock } = store();
    tokens.set('a', sha256('old'));
    tokens.rotate('a', sha256('new'), { sha256: sha256('old'), untilMs: T0 + 1000 });
    clock.now = T0 + 999;
    expect([tokens.verify('a', 'old'), tokens.findByToken('old'), tokens.verify('a', 'new')]).toEqual([true, 'a', true]);
    clock.now = T0 + 1000;
    expect([tokens.verify('a', 'old'), tokens.findByToken('old'), tokens.verify('a', 'new')]).toEqual([false, undefined, true]);
  });

  it('a grace that already ended is not installed (a restart after the grace)', () => {
    const { tokens } = store();
    tokens.rotate('a', sha256('new'), { sha256: sha256('old'), untilMs: T0 });
    expect(tokens.previousUntil('a')).toBeNull();
    expect(tokens.verify('a', 'old')).toBe(false);
  });

  it('the previous token is the grant’s own: it never verifies under another grant id', () => {
    const { tokens } = store();
    tokens.set('a', sha256('old'));
    tokens.set('b', sha256('b-token'));
    tokens.rotate('a', sha256('new'), { sha256: sha256('old'), untilMs: T0 + 60_000 });
    expect(tokens.verify('b', 'old')).toBe(false);
    expect(tokens.verify('a', 'b-token')).toBe(false);
  });

  it('set (a reinstall), delete and dropPrevious end the grace for good', () => {
    for (const end of ['set', 'delete', 'drop'] as const) {
      const { tokens } = store();
      tokens.rotate('a', sha256('new'), { sha256: sha256('old'), untilMs: T0 + 60_000 });
      if (end === 'set') tokens.set('a', sha256('new'));
      else if (end === 'delete') tokens.delete('a');
      else expect(tokens.dropPrevious('a')).toBe(true);
      expect([end, tokens.verify('a', 'old'), tokens.findByToken('old')]).toEqual([end, false, undefined]);
    }
  });

  it('rotating again replaces the grace: the token before the previous one never comes back', () => {
    const { tokens } = store();
    tokens.set('a', sha256('t1'));
    tokens.rotate('a', sha256('t2'), { sha256: sha256('t1'), untilMs: T0 + 60_000 });
    tokens.rotate('a', sha256('t3'), null);
    expect(['t1', 't2', 't3'].map((t) => tokens.verify('a', t))).toEqual([false, false, true]);
    expect(['t1', 't2'].map((t) => tokens.findByToken(t))).toEqual([undefined, undefined]);
  });
});
