// isPlainName, the URL-parser bypass for already-canonical names, must accept exactly what the regular
// expressions it replaced accepted, and whatever it accepts must be what new URL() gives back.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isPlainName } from '../../../src/authority/canonical-host.js';

const PLAIN_NAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;
const NUMERIC_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/;
const reference = (raw: string): boolean => PLAIN_NAME.test(raw) && !NUMERIC_LABEL.test(raw) && !raw.includes('xn--');

const label = fc.string({ unit: fc.constantFrom('a', 'z', '0', '9', 'x', 'n', '-', '_', 'f', 'A', 'é', '.'), minLength: 0, maxLength: 70 });
const names = fc.oneof(
  fc.array(label, { minLength: 1, maxLength: 6 }).map((labels) => labels.join('.')),
  fc.domain(),
  fc.string(),
  fc.constantFrom('', '.', 'a.', 'a..b', '-a', 'a-', '0x', '0x1f', 'a.0x', 'a.0xg', '1.2.3.4', 'xn--a', 'a.xn--b', 'a'.repeat(63), 'a'.repeat(64), `${'a.'.repeat(126)}a`, `${'a.'.repeat(126)}ab`),
);

describe('isPlainName', () => {
  it('agrees with the regular expressions it replaced', () => {
    fc.assert(fc.property(names, (raw) => isPlainName(raw) === reference(raw)), { numRuns: 20_000 });
  });

  it('accepts only hosts that new URL() returns unchanged (less a trailing dot)', () => {
    fc.assert(
      fc.property(names, (raw) => {
        if (!isPlainName(raw)) return true;
        const parsed = new URL(`http://${raw}/`).hostname;
        expect(parsed.replace(/\.$/, '')).toBe(raw.replace(/\.$/, ''));
        return true;
      }),
      { numRuns: 5_000 },
    );
  });
});
