// passedExpiry: the one comparison of a grant's limits.expiresAt with the clock, for config grants
// (load.ts) and run-time grants (admin/grant-spec.ts) alike: at or before now has passed, and is given
// back as written (a YAML timestamp, parsed to a Date, as ISO 8601).
import { describe, expect, it } from 'vitest';
import { passedExpiry } from '../../../src/config/passed-expiry.js';

const NOW_MS = Date.UTC(2026, 11, 4, 12, 0, 0);

describe('passedExpiry', () => {
  it.each([
    ['no expiry', undefined, null],
    ['a millisecond ahead', new Date(NOW_MS + 1).toISOString(), null],
    ['exactly now', new Date(NOW_MS).toISOString(), new Date(NOW_MS).toISOString()],
    ['an offset that puts it in the past', '2026-12-04T13:00:00+02:00', '2026-12-04T13:00:00+02:00'],
    ['an offset that puts it ahead', '2026-12-04T11:00:00-02:00', null],
    ['a Date from a YAML timestamp', new Date(NOW_MS - 1), new Date(NOW_MS - 1).toISOString()],
  ])('%s', (_name, expiresAt, passed) => {
    expect(passedExpiry(expiresAt, NOW_MS)).toBe(passed);
  });
});
