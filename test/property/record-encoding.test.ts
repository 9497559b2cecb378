// Threat: the file sink's fast path (audit/encode-record.ts writes a hop's records from the hop, straight
// into the batch buffer) drifting from the records every other sink sees: a field dropped or reordered,
// an escape missed (a quote or control character in a target or detail breaking the line, or a forged
// field inside it), a number or timestamp spelled differently, a line that outgrows the room it was
// given (cut short or overwriting the next). For generated hops (principals, targets with unicode,
// quotes, backslashes, control characters and lone surrogates, long targets, null and non-null fields,
// address lists, route alternatives, odd timings and times), the bytes the encoder writes are exactly
// formatRecord(decisionOf(hop, place)) and formatRecord(closeRecordOf(...)), newline included, within
// the bound reserved for them, at any offset; and through the file sink and its batch writer the file
// holds exactly those lines, in order. The seed is printed; rerun one with SLUICE_PROPERTY_SEED=<seed>
// (runs: SLUICE_PROPERTY_RUNS).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  closeBytesBound,
  createFileSink,
  decisionBytesBound,
  encodeClose,
  encodeDecision,
  formatRecord,
  type AuditPlace,
  type CloseOutcome,
} from '../../src/audit/index.js';
import { ADDRESS_CLASSES, CloseReasons, Reasons, type AddressClass, type CanonicalDestination, type ClassifiedAddress, type PinnedAddress, type ReasonCode, type UpstreamProxy } from '../../src/core/index.js';
import { closeRecordOf } from '../../src/proxy/hop/audit-hop.js';
import { decisionOf } from '../../src/proxy/hop/decision.js';
import { Hop } from '../../src/proxy/hop/hop.js';
import type { Route, RouteHop } from '../../src/route/index.js';

const SEED = Number(process.env['SLUICE_PROPERTY_SEED'] ?? 20261216);
const RUNS = Number(process.env['SLUICE_PROPERTY_RUNS'] ?? 3000);
console.log(`[property/record-encoding] seed=${SEED} numRuns=${RUNS} (rerun with SLUICE_PROPERTY_SEED=${SEED})`);

// Any string: plain ASCII most often (the char-by-char path), and quotes, backslashes, controls,
// non-ASCII, astral characters and lone surrogates (JSON.stringify's path).
const tricky = fc.constantFrom('', '"', '\\', '\u0000', '\r\n', '\u001f', '\u007f', '\u2028', '\ud800', '\udfff', '😀', 'é', '例え', '</script>', '\\u0022');
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...'abcXYZ019.-:/_[]@?#%~ '.split('')), maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: fc.oneof(fc.constantFrom('a', ':', '.'), tricky), maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }) },
  // The worst case for the bound: every unit written as \uXXXX.
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('\u0000', '\u001f', '\ud800', '\udfff'), maxLength: 30 }) },
);
// The longest `${n}` there is (24 characters), and the other odd spellings.
const wideNumber = fc.constantFrom(-1.7976931348623157e308, -2.2250738585072014e-308, -1.2345678901234567e-7, 5e-324, -(2 ** 53) + 1, 1e21, -0, 0.1);
const longText = fc.oneof(text, fc.string({ unit: fc.oneof(fc.constantFrom('a', '/', '?', '@', ':'), tricky), minLength: 250, maxLength: 600 }));
const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.option(arb, { nil: null });
// Timings are whole microseconds in practice; the encoder must still spell any number as `${n}` does.
const timing = maybe(fc.oneof(
  { weight: 4, arbitrary: fc.nat({ max: 10_000_000 }) },
  { weight: 1, arbitrary: fc.oneof(fc.integer(), fc.double(), fc.maxSafeInteger(), wideNumber, fc.constantFrom(2 ** 53, 2 ** 60, 1e-7, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY)) },
));
const count = fc.oneof(fc.nat(), fc.maxSafeInteger(), wideNumber, fc.constantFrom(0, 2 ** 32, 2 ** 53 - 1, 2 ** 53 + 2));
const classes = ADDRESS_CLASSES;
const reasons = Object.keys(Reasons) as ReasonCode[];
const closeReasons = Object.keys(CloseReasons) as (keyof typeof CloseReasons)[];
// Any time Date can write, including the six-digit years either side.
const nowMs = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) }) },
  { weight: 1, arbitrary: fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }) },
);

const proxy: fc.Arbitrary<RouteHop> = fc.record({ label: text, inspectsTls: fc.boolean(), sendResolvedAddress: fc.boolean() }).map(
  (p): RouteHop => ({ kind: 'proxy', proxy: { ...p, tls: false, host: 'corp.test', port: 3128, authorization: 'Basic c2VjcmV0', ca: null } satisfies UpstreamProxy }),
);
const routeHop: fc.Arbitrary<RouteHop> = fc.oneof(fc.constant<RouteHop>({ kind: 'direct' }), proxy);
const address = (arb: fc.Arbitrary<string>): fc.Arbitrary<{ address: string; class: AddressClass }> => fc.record({ address: arb, class: fc.constantFrom(...classes) });
const addressText = fc.oneof(fc.ipV4(), fc.ipV6(), text);

const hopArb = fc.record({
  index: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.maxSafeInteger()),
  kind: fc.constantFrom('connect' as const, 'forward' as const),
  method: fc.oneof(fc.constantFrom('CONNECT', 'GET', 'POST', '-'), text),
  target: longText,
  scheme: maybe(fc.constantFrom('http' as const, 'https' as const, 'ws' as const, 'wss' as const, 'tcp' as const)),
  canonical: maybe(fc.record({ key: text, hostKind: fc.constantFrom('name' as const, 'ipv4' as const, 'ipv6' as const) })),
  principal: maybe(fc.record({ grantId: text, via: fc.constantFrom('listener' as const, 'token' as const) })),
  denial: maybe(fc.record({ reason: fc.constantFrom(...reasons), detail: fc.oneof(fc.constant(''), text, fc.constant('1 address(es) tried, last error "ECONNREFUSED"\n\\')) })),
  rule: maybe(text),
  addresses: fc.array(fc.record({ address: addressText, class: fc.constantFrom(...classes), allowed: fc.boolean() }), { maxLength: 5 }),
  pinned: fc.array(address(addressText), { maxLength: 3 }),
  dialed: maybe(address(addressText)),
  route: maybe(text),
  routeHops: fc.array(routeHop, { maxLength: 3 }),
  used: fc.oneof(fc.constant<'none'>('none'), fc.constant<'first'>('first'), routeHop),
  identifyUs: timing,
  authorizeUs: timing,
  routeUs: timing,
  resolveUs: timing,
  dialUs: timing,
  firstByteUs: timing,
  startedAgoMs: fc.oneof(fc.nat({ max: 3_600_000 }), fc.integer(), wideNumber),
});
type HopSpec = typeof hopArb extends fc.Arbitrary<infer T> ? T : never;

const pin = (a: { address: string; class: AddressClass }): PinnedAddress => ({ address: a.address, family: 4, port: 443, class: a.class }) as PinnedAddress;

function hopOf(spec: HopSpec, now: number): Hop {
  const hop = new Hop(spec.index, spec.kind, spec.method, spec.target);
  hop.scheme = spec.scheme;
  hop.canonical = spec.canonical === null ? null : ({ host: spec.canonical.key, port: 443, ...spec.canonical } as unknown as CanonicalDestination);
  hop.principal = spec.principal;
  if (spec.denial !== null) hop.fail(spec.denial.reason, spec.denial.detail);
  hop.rule = spec.rule;
  hop.addresses = spec.addresses.map((a) => ({ ...a, family: 4 }) as ClassifiedAddress);
  hop.pinned = spec.pinned.map(pin);
  hop.dialed = spec.dialed === null ? null : pin(spec.dialed);
  hop.route = spec.route === null ? null : ({ label: spec.route, mode: 'direct', hops: spec.routeHops, pacAnswer: null } as unknown as Route);
  hop.routeHops = spec.routeHops;
  hop.usedHop = spec.used === 'none' ? null : spec.used === 'first' ? (spec.routeHops[0] ?? null) : spec.used;
  hop.identifyUs = spec.identifyUs;
  hop.authorizeUs = spec.authorizeUs;
  hop.routeUs = spec.routeUs;
  hop.resolveUs = spec.resolveUs;
  hop.dialUs = spec.dialUs;
  hop.firstByteUs = spec.firstByteUs;
  (hop as { startedAtMs: number }).startedAtMs = now - spec.startedAgoMs;
  return hop;
}

const placeArb: fc.Arbitrary<AuditPlace> = fc.oneof(
  fc.record({ id: text, listener: text }),
  fc.record({ id: text, listener: text, auditSource: maybe(fc.oneof(fc.ipV4(), fc.ipV6(), text)) }),
);
const outcomeArb: fc.Arbitrary<CloseOutcome> = fc.record({ closedBy: fc.constantFrom(...closeReasons), status: maybe(fc.oneof(fc.constantFrom(200, 404, 502), fc.integer(), wideNumber)), bytesUp: count, bytesDown: count });
/** Where in a batch the line starts. */
const offset = fc.oneof(fc.constant(0), fc.nat({ max: 4096 }));

function encodedAt<T extends unknown[]>(bound: number, at: number, encode: (out: Buffer, at: number, ...rest: T) => number, ...rest: T): Buffer {
  // The buffer ends where the bound does: a byte past the bound would throw or be lost.
  const out = Buffer.alloc(at + bound, 0xff);
  const end = encode(out, at, ...rest);
  expect(end - at).toBeLessThanOrEqual(bound);
  expect(out.subarray(0, at).every((b) => b === 0xff)).toBe(true);
  return out.subarray(at, end);
}

describe('the encoded audit records are formatRecord of the records, byte for byte', () => {
  it('decision: encodeDecision(hop, place) is formatRecord(decisionOf(hop, place)), within its bound', () => {
    fc.assert(
      fc.property(hopArb, placeArb, nowMs, offset, (spec, place, now, at) => {
        const hop = hopOf(spec, now);
        const bytes = encodedAt(decisionBytesBound(hop, place), at, encodeDecision, hop, place, now);
        const expected = Buffer.from(formatRecord(decisionOf(hop, place, now)), 'utf8');
        expect(bytes.equals(expected), `${bytes.toString('utf8')}\n!==\n${expected.toString('utf8')}`).toBe(true);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('close: encodeClose(hop, place, outcome) is formatRecord(closeRecordOf(...)), within its bound', () => {
    fc.assert(
      fc.property(hopArb, placeArb, outcomeArb, nowMs, offset, (spec, place, outcome, now, at) => {
        const hop = hopOf(spec, now);
        const bytes = encodedAt(closeBytesBound(hop, place, outcome), at, encodeClose, hop, place, outcome, now);
        const expected = Buffer.from(formatRecord(closeRecordOf(hop, place, outcome, now)), 'utf8');
        expect(bytes.equals(expected), `${bytes.toString('utf8')}\n!==\n${expected.toString('utf8')}`).toBe(true);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('through the file sink: the file is exactly the records\' lines, in order, across batches and oversized lines', async () => {
    const runs = Math.max(1, Math.floor(RUNS / 100));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(hopArb, placeArb, outcomeArb, nowMs, fc.boolean()), { minLength: 1, maxLength: 40 }),
        fc.constantFrom(64, 1000, 4096),
        async (hops, minBytes) => {
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-encoding-'));
          try {
            const file = path.join(dir, 'audit.jsonl');
            const sink = createFileSink(file, { onError: (e) => { throw e; }, onWarning: () => undefined }, { minBytes, flushEveryMs: 60_000 });
            const expected: string[] = [];
            for (const [spec, place, outcome, now, withClose] of hops) {
              const hop = hopOf(spec, now);
              sink.writeDecision?.(hop, place, now);
              expected.push(formatRecord(decisionOf(hop, place, now)));
              if (withClose) {
                sink.writeClose?.(hop, place, outcome, now);
                expected.push(formatRecord(closeRecordOf(hop, place, outcome, now)));
              }
              // The string path in between: both kinds of line share the batches and their order.
              sink.write(decisionOf(hop, place, now));
              expected.push(formatRecord(decisionOf(hop, place, now)));
            }
            await sink.flush();
            expect(fs.readFileSync(file).equals(Buffer.from(expected.join(''), 'utf8'))).toBe(true);
          } finally {
            fs.rmSync(dir, { recursive: true, force: true });
          }
        },
      ),
      { seed: SEED, numRuns: runs },
    );
  });
});
