// isPlainName, the URL-parser bypass for already-canonical names, must accept exactly what the regular
// expressions it replaced accepted, and whatever it accepts must be what new URL() gives back.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isPlainIpv4, isPlainName } from '../../../src/authority/canonical-host.js';

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

// isPlainIpv4, the bypass for already-canonical dotted-decimal addresses: it accepts exactly the hosts
// the URL parser gives back unchanged as a dotted quad. Octal, hex, short forms and trailing dots, which
// the parser rewrites, must go through the parser.
const octet = fc.oneof(fc.integer({ min: 0, max: 255 }).map(String), fc.constantFrom('256', '999', '00', '01', '010', '0x7f', '1e1', '', ' 1', '1 ', '٣'), fc.string({ unit: fc.constantFrom('0', '1', '2', '5', '9', 'x'), maxLength: 4 }));
const quads = fc.oneof(
  fc.array(octet, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('.')),
  fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 })).map((p) => p.join('.')),
  fc.constantFrom('127.0.0.1', '127.0.0.1.', '127.1', '0177.0.0.1', '0x7f.0.0.1', '1.2.3.04', '255.255.255.255', '256.0.0.1', '1.2.3.4.5', '0.0.0.0'),
);

describe('isPlainIpv4', () => {
  it('accepts only what new URL() serializes back unchanged, and every canonical dotted quad', () => {
    let accepted = 0;
    fc.assert(
      fc.property(quads, (raw) => {
        let parsed: string | null = null;
        try {
          parsed = new URL(`http://${raw}/`).hostname;
        } catch {
          parsed = null;
        }
        const canonical = parsed === raw && /^(?:\d{1,3}\.){3}\d{1,3}$/.test(raw);
        expect(isPlainIpv4(raw)).toBe(canonical);
        if (canonical) accepted += 1;
      }),
      { numRuns: 10_000, seed: 20261216 },
    );
    expect(accepted).toBeGreaterThan(1000);
  });
});
