// formatRecord must be JSON.stringify, byte for byte, for every record the types allow: consumers parse
// the audit log with any JSON parser, and docs/audit-log.md documents JSON.stringify's field order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CloseReasons, Reasons } from '../../../src/core/index.js';
import { formatRecord } from '../../../src/audit/format-record.js';
import { isoTimestamp } from '../../../src/audit/timestamp.js';
import { redactTarget, type CloseRecordV1, type DecisionRecordV1 } from '../../../src/audit/index.js';

// Any string at all: quotes, backslashes, controls, non-ASCII, lone surrogates.
const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', '"', '\\', '\u2028', '\ud800', 'a\u0000b', 'é'));
const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.option(arb, { nil: null });
const number = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -0, 1e21, Number.NaN, Number.POSITIVE_INFINITY));

const decision: fc.Arbitrary<DecisionRecordV1> = fc.record({
  v: fc.constant(1 as const),
  kind: fc.constant('decision' as const),
  ts: text,
  connection: text,
  hop: number,
  listener: text,
  principal: maybe(text),
  via: maybe(fc.constantFrom('listener' as const, 'token' as const)),
  request: fc.constantFrom('connect' as const, 'forward' as const),
  method: text,
  target: text,
  scheme: maybe(fc.constantFrom('http' as const, 'https' as const, 'ws' as const, 'wss' as const, 'tcp' as const)),
  canonical: maybe(text),
  decision: fc.constantFrom('allow' as const, 'deny' as const),
  reason: fc.constantFrom(...(Object.keys(Reasons) as (keyof typeof Reasons)[])),
  status: number,
  detail: maybe(text),
  rule: maybe(text),
  addresses: fc.array(fc.record({ address: text, class: fc.constantFrom('public' as const, 'loopback' as const, 'private' as const), allowed: fc.boolean() }), { maxLength: 4 }),
  pinned: maybe(text),
  route: maybe(text),
  upstream: maybe(text),
  attested: maybe(fc.boolean()),
  credentialObserving: maybe(fc.boolean()),
  timings: fc.record({ identifyUs: maybe(number), authorizeUs: maybe(number), routeUs: maybe(number), resolveUs: maybe(number), dialUs: maybe(number) }),
  source: maybe(text),
}) as fc.Arbitrary<DecisionRecordV1>;

const close: fc.Arbitrary<CloseRecordV1> = fc.record({
  v: fc.constant(1 as const),
  kind: fc.constant('close' as const),
  ts: text,
  connection: text,
  hop: number,
  listener: text,
  principal: maybe(text),
  request: fc.constantFrom('connect' as const, 'forward' as const),
  canonical: maybe(text),
  pinned: maybe(text),
  closedBy: fc.constantFrom(...(Object.keys(CloseReasons) as (keyof typeof CloseReasons)[])),
  status: maybe(number),
  bytesUp: number,
  bytesDown: number,
  durationMs: number,
  firstByteUs: maybe(number),
});

/** The redaction as first written, without the fast path: the reference the fast path must agree with. */
function referenceRedact(target: string): string {
  let out = target;
  const cut = out.search(/[?#]/);
  if (cut >= 0) out = out.slice(0, cut);
  const at = out.lastIndexOf('@');
  if (at >= 0) {
    const schemeEnd = out.indexOf('://');
    out = `${schemeEnd >= 0 && schemeEnd < at ? out.slice(0, schemeEnd + 3) : ''}***${out.slice(at)}`;
  }
  out = out.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return out.length > 256 ? `${out.slice(0, 256)}…` : out;
}

describe('formatRecord', () => {
  it('is JSON.stringify for any decision record', () => {
    fc.assert(fc.property(decision, (r) => formatRecord(r) === `${JSON.stringify(r)}\n`), { numRuns: 2000 });
  });

  it('is JSON.stringify for any close record', () => {
    fc.assert(fc.property(close, (r) => formatRecord(r) === `${JSON.stringify(r)}\n`), { numRuns: 2000 });
  });
});

describe('values written unescaped', () => {
  it('reason codes and close reasons are plain identifiers (formatRecord quotes them without escaping)', () => {
    for (const code of [...Object.keys(Reasons), ...Object.keys(CloseReasons)]) expect(code).toMatch(/^[a-z0-9_]+$/);
  });
});

describe('redactTarget fast path', () => {
  const targets = fc.oneof(
    text,
    fc.webUrl({ withQueryParameters: true, withFragments: true, authoritySettings: { withUserInfo: true } }),
    fc.string({ unit: fc.constantFrom('a', ':', '/', '?', '#', '@', '%', '\r', '\u007f', 'é'), maxLength: 300 }),
  );
  it('agrees with the full redaction for any target', () => {
    fc.assert(fc.property(targets, (t) => redactTarget(t) === referenceRedact(t)), { numRuns: 5000 });
  });
});

describe('isoTimestamp', () => {
  it('is Date#toISOString of the millisecond asked for, cached or not', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62_198_755_200_000, max: 8_639_999_999_999_999 }), (ms) => {
        expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
        expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
        expect(isoTimestamp(ms + 1)).toBe(new Date(ms + 1).toISOString());
      }),
      { numRuns: 5000 },
    );
  });

  it('is right at every millisecond across minute boundaries, forwards and backwards', () => {
    const start = Date.UTC(2026, 10, 30, 23, 59, 59, 990);
    for (let ms = start; ms < start + 20; ms += 1) expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
    for (let ms = start + 20; ms >= start; ms -= 1) expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
  });
});
