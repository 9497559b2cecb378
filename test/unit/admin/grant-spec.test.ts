// parseGrantSpec's clock (UX review 2026-12-04 finding 10; issue 25): a POST /v1/grants spec whose
// limits.expiresAt is at or before now is refused at limits.expiresAt, beside any other issue of the
// body, as a config grant with a past expiresAt is a config error; one a millisecond ahead is a spec.
// Fixed clocks, no waiting.
import { describe, expect, it } from 'vitest';
import { parseGrantSpec } from '../../../src/admin/grant-spec.js';

const NOW_MS = Date.UTC(2026, 11, 4, 12, 0, 0);
const iso = (ms: number): string => new Date(ms).toISOString();

describe('parseGrantSpec: limits.expiresAt against the clock', () => {
  it.each([
    ['exactly now', iso(NOW_MS)],
    ['a millisecond ago', iso(NOW_MS - 1)],
    ['years ago, with an offset', '2020-01-01T02:00:00+02:00'],
  ])('refuses %s, by key path', (_when, expiresAt) => {
    expect(parseGrantSpec({ destinations: ['https://a.test'], limits: { expiresAt } }, NOW_MS)).toEqual({
      ok: false,
      issues: [{ path: 'limits.expiresAt', message: `${expiresAt} has passed: the grant would be expired when issued; set a later expiresAt` }],
    });
  });

  it('accepts an expiresAt a millisecond ahead, and a grant without one', () => {
    const ahead = parseGrantSpec({ destinations: ['https://a.test'], limits: { expiresAt: iso(NOW_MS + 1) } }, NOW_MS);
    expect(ahead.ok && ahead.spec.limits.expiresAt).toBe(iso(NOW_MS + 1));
    expect(parseGrantSpec({ destinations: ['https://a.test'] }, NOW_MS).ok).toBe(true);
  });

  it('names a past expiresAt beside the fields sluice assigns itself', () => {
    const result = parseGrantSpec({ id: 'mine', limits: { expiresAt: '2020-01-01T00:00:00Z' } }, NOW_MS);
    expect(result.ok ? [] : result.issues.map((i) => i.path)).toEqual(['id', 'limits.expiresAt']);
  });
});
