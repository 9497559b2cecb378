// The audit records encoded straight into bytes from a hop's facts (src/audit/encode-record.ts). Threat: a
// line that is not the documented record (a field missing, moved or misspelled), an escape missed (a
// quote or control character that ends the string early or splits the line: a forged record), a number
// or timestamp spelled other than JSON.stringify and toISOString spell it, and a line longer than the
// room reserved for it, cut short or written over the next. The property test
// test/property/record-encoding.test.ts holds the encoder to formatRecord for generated hops.
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  closeBytesBound,
  decisionBytesBound,
  encodeClose,
  encodeDecision,
  formatRecord,
  isoTimestamp,
  writeIsoTimestamp,
  type AuditPlace,
  type CloseOutcome,
  type DecisionRecordV1,
  type HopCloseFacts,
  type HopDecisionFacts,
} from '../../../src/audit/index.js';

const documented = fs.readFileSync(path.join(import.meta.dirname, '../../../docs/audit-log.md'), 'utf8');
function documentedLine(prefix: string): string {
  const line = documented.split('\n').find((l) => l.startsWith(prefix));
  if (line === undefined) throw new Error(`docs/audit-log.md has no line starting ${prefix}`);
  return `${line}\n`;
}

function encoded(bound: number, write: (out: Buffer, at: number) => number): string {
  const out = Buffer.alloc(bound + 8, 0xff);
  const end = write(out, 3);
  expect(end - 3).toBeLessThanOrEqual(bound);
  expect([...out.subarray(0, 3), ...out.subarray(end)].every((b) => b === 0xff)).toBe(true);
  return out.subarray(3, end).toString('utf8');
}

const tunnel: HopDecisionFacts & HopCloseFacts = {
  index: 1,
  kind: 'connect',
  method: 'CONNECT',
  target: 'api.internal.test:18080',
  scheme: null,
  principal: { grantId: 'sandbox-a', via: 'token' },
  canonical: { key: 'api.internal.test:18080' },
  isAllowed: true,
  reason: 'granted',
  detail: '',
  rule: 'tcp://api.internal.test:18080',
  addresses: [{ address: '127.0.0.2', class: 'loopback', allowed: true }],
  route: { label: 'direct' },
  identifyUs: 120,
  authorizeUs: 383,
  routeUs: 391,
  resolveUs: 445,
  dialUs: 3765,
  recordedPin: '127.0.0.2',
  upstream: null,
  attested: true,
  credentialObserving: false,
  dialed: { address: '127.0.0.2' },
  startedAtMs: Date.parse('2026-11-30T05:36:31.835Z'),
  firstByteUs: 5100,
};
const place: AuditPlace = { id: 'c2', listener: 'shared', auditSource: '127.0.0.1' };

describe('encodeDecision', () => {
  it('writes the documented line of an allowed tunnel (docs/audit-log.md, Examples)', () => {
    const nowMs = Date.parse('2026-11-30T05:36:31.839Z');
    expect(encoded(decisionBytesBound(tunnel, place), (out, at) => encodeDecision(out, at, tunnel, place, nowMs))).toBe(documentedLine('{"v":1,"kind":"decision","ts":"2026-11-30T05:36:31.839Z"'));
  });

  it('writes the documented line of a denial: nulls, an empty address list, the reason\'s status', () => {
    const denied: HopDecisionFacts = {
      ...tunnel,
      kind: 'forward',
      method: 'GET',
      target: 'http://example.org/',
      scheme: 'http',
      canonical: { key: 'example.org:80' },
      isAllowed: false,
      reason: 'destination_not_granted',
      rule: null,
      addresses: [],
      route: null,
      identifyUs: 90,
      authorizeUs: 350,
      routeUs: null,
      resolveUs: null,
      dialUs: null,
      recordedPin: null,
      attested: null,
      credentialObserving: null,
    };
    const nowMs = Date.parse('2026-11-30T05:36:11.689Z');
    const c3 = { ...place, id: 'c3' };
    expect(encoded(decisionBytesBound(denied, c3), (out, at) => encodeDecision(out, at, denied, c3, nowMs))).toBe(documentedLine('{"v":1,"kind":"decision","ts":"2026-11-30T05:36:11.689Z"'));
  });

  it('a place with no source, or a null one, writes "source":null', () => {
    for (const p of [{ id: 'c1', listener: 'l' }, { id: 'c1', listener: 'l', auditSource: null }]) {
      expect(encoded(decisionBytesBound(tunnel, p), (out, at) => encodeDecision(out, at, tunnel, p, 0))).toMatch(/,"source":null\}\n$/);
    }
  });

  it('redacts the target as the record does: no userinfo, query or fragment', () => {
    const hop = { ...tunnel, target: 'http://u:tok-SECRET@a.test/p?token=tok-SECRET#f' };
    const line = encoded(decisionBytesBound(hop, place), (out, at) => encodeDecision(out, at, hop, place, 0));
    expect(line).not.toContain('tok-SECRET');
    expect((JSON.parse(line) as DecisionRecordV1).target).toBe('http://***@a.test/p');
  });
});

describe('encodeClose', () => {
  it('writes the documented close line of a tunnel', () => {
    const outcome: CloseOutcome = { closedBy: 'client_closed', status: 200, bytesUp: 91, bytesDown: 128 };
    const nowMs = Date.parse('2026-11-30T05:36:31.871Z');
    expect(encoded(closeBytesBound(tunnel, place, outcome), (out, at) => encodeClose(out, at, tunnel, place, outcome, nowMs))).toBe(documentedLine('{"v":1,"kind":"close","ts":"2026-11-30T05:36:31.871Z"'));
  });
});

describe('strings and numbers are spelled as JSON.stringify spells them', () => {
  const hopWith = (detail: string, dialUs: number): HopDecisionFacts => ({ ...tunnel, isAllowed: false, reason: 'dial_refused', detail, dialUs });
  const fields = (detail: string, dialUs: number): { detail: string; dialUs: string } => {
    const hop = hopWith(detail, dialUs);
    const line = encoded(decisionBytesBound(hop, place), (out, at) => encodeDecision(out, at, hop, place, 0));
    return { detail: /,"detail":(.*),"rule":/s.exec(line)?.[1] ?? '', dialUs: /,"dialUs":(.*)\},"source"/s.exec(line)?.[1] ?? '' };
  };

  it.each([
    ['plain ASCII, copied char by char', 'getaddrinfo ENOTFOUND a.test'],
    ['a quote', 'said "no"'],
    ['a backslash', 'C:\\path'],
    ['control characters', 'a\u0000b\r\n\t\u001f'],
    ['DEL, which JSON leaves alone', 'a\u007fb'],
    ['non-ASCII', 'bücher 例え'],
    ['an astral character', 'ok 😀'],
    ['a lone surrogate (well-formed JSON.stringify)', 'x\ud800y\udfff'],
    ['U+2028', 'a\u2028b'],
  ])('%s', (_, detail) => {
    expect(fields(detail, 1).detail).toBe(JSON.stringify(detail));
  });

  it.each([0, -0, 7, -7, 9, 10, 99, 100, 12345, 2 ** 31, 2 ** 32 + 1, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 2 ** 60, 1e21, 0.5, -1.5e-7, 5e-324, -1.7976931348623157e308])('the number %d', (n) => {
    expect(fields('x', n).dialUs).toBe(JSON.stringify(n));
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])('%d is null', (n) => {
    expect(fields('x', n).dialUs).toBe('null');
  });
});

describe('the bound', () => {
  // Every string all escapes (6 bytes a unit), every number the longest there is, the longest timestamp.
  const worst = '\u0000'.repeat(40);
  const wide = -1.7976931348623157e308;
  const worstHop: HopDecisionFacts & HopCloseFacts = {
    index: wide,
    kind: 'connect',
    method: worst,
    target: '\ud800'.repeat(400),
    scheme: 'https',
    principal: { grantId: worst, via: 'listener' },
    canonical: { key: worst },
    isAllowed: true,
    reason: 'granted',
    detail: worst,
    rule: worst,
    addresses: Array.from({ length: 8 }, () => ({ address: worst, class: 'unspecified', allowed: false })),
    route: { label: worst },
    identifyUs: wide,
    authorizeUs: wide,
    routeUs: wide,
    resolveUs: wide,
    dialUs: wide,
    recordedPin: worst,
    upstream: worst,
    attested: false,
    credentialObserving: false,
    dialed: { address: worst },
    startedAtMs: -wide,
    firstByteUs: wide,
  };
  const worstPlace: AuditPlace = { id: worst, listener: worst, auditSource: worst };
  const latest = 8_640_000_000_000_000;
  // What the bound gives beyond the worst line, exactly, so that no part of it can shrink unseen:
  // identifiers from closed sets are bounded as any string (6 bytes a unit) but take 1 byte a unit.
  const identifiers = (...words: string[]): number => words.reduce((sum, s) => sum + 5 * s.length, 0);

  it('holds for the worst decision line, with nothing to spare but what is accounted for', () => {
    const bound = decisionBytesBound(worstHop, worstPlace);
    const out = Buffer.alloc(bound);
    const end = encodeDecision(out, 0, worstHop, worstPlace, latest);
    expect(end).toBeLessThanOrEqual(bound);
    // Beyond the identifiers: the status (3 digits, bounded as any number: 25), the cut target's mark
    // (bounded as 6 bytes, takes 3), the first address's missing comma, and 1 for each of 6 numbers.
    expect(bound - end).toBe(identifiers('connect', 'listener', 'https', 'granted', ...worstHop.addresses.map((a) => a.class)) + 22 + 3 + 1 + 6);
    expect(JSON.parse(out.subarray(0, end).toString('utf8'))).toMatchObject({ ts: '+275760-09-13T00:00:00.000Z', detail: worst });
  });

  it('holds for the worst close line, with nothing to spare but what is accounted for', () => {
    const outcome: CloseOutcome = { closedBy: 'grant_changed', status: wide, bytesUp: wide, bytesDown: wide };
    const bound = closeBytesBound(worstHop, worstPlace, outcome);
    const out = Buffer.alloc(bound);
    const end = encodeClose(out, 0, worstHop, worstPlace, outcome, latest);
    expect(end).toBeLessThanOrEqual(bound);
    expect(bound - end).toBe(identifiers('connect', 'grant_changed') + 6);
  });

  it('the documented line is formatRecord of its own record (the examples are what the encoder must write)', () => {
    const line = documentedLine('{"v":1,"kind":"decision","ts":"2026-11-30T05:36:31.839Z"');
    expect(formatRecord(JSON.parse(line) as DecisionRecordV1)).toBe(line);
  });
});

describe('writeIsoTimestamp', () => {
  it('writes isoTimestamp (Date#toISOString) of any millisecond, cached minute or not', () => {
    fc.assert(
      fc.property(fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }), fc.integer({ min: 0, max: 120_000 }), (ms, later) => {
        for (const t of [ms, Math.min(ms + later, 8_640_000_000_000_000)]) {
          const out = Buffer.alloc(32);
          const end = writeIsoTimestamp(out, 2, t);
          expect(out.subarray(2, end).toString('latin1')).toBe(new Date(t).toISOString());
          expect(out.subarray(2, end).toString('latin1')).toBe(isoTimestamp(t));
        }
      }),
      { seed: 20261216, numRuns: 3000 },
    );
  });
});
