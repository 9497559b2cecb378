// Properties of host canonicalization over generated input: it is idempotent, it agrees with the WHATWG
// URL host parser that undici and browsers use (so policy and dialer see one host), it never accepts what
// that parser rejects, its output has one shape per host kind, and no input makes any parser throw.
import net from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, parseAbsoluteTarget, parseConnectTarget } from '../../../src/authority/canonical-destination.js';
import { canonicalizeHost, formatHostPort, type CanonicalHost } from '../../../src/authority/canonical-host.js';
import { parseDestinationRule } from '../../../src/authority/destination-rule.js';

const RUNS = { numRuns: 2000 };

/** A 32-bit IPv4 address in one of the WHATWG spellings (RFC 791 dotted quad is only one of them). */
const ipv4Spelling = fc
  .tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 1, max: 4 }), fc.array(fc.constantFrom(8, 10, 16), { minLength: 4, maxLength: 4 }), fc.boolean())
  .map(([n, parts, radixes, trailingDot]) => {
    // 1 part: 32 bits; 2: 8.24; 3: 8.8.16; 4: 8.8.8.8 (WHATWG IPv4 parser).
    const widths = [[32], [8, 24], [8, 8, 16], [8, 8, 8, 8]][parts - 1] ?? [32];
    let rest = BigInt(n);
    const values: bigint[] = [];
    for (const width of [...widths].reverse()) {
      values.unshift(rest & ((1n << BigInt(width)) - 1n));
      rest >>= BigInt(width);
    }
    const text = values.map((v, i) => {
      const radix = radixes[i] ?? 10;
      if (radix === 16) return `0x${v.toString(16)}`;
      if (radix === 8) return `0${v.toString(8)}`;
      return v.toString(10);
    });
    return { raw: `${text.join('.')}${trailingDot ? '.' : ''}`, dotted: [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.') };
  });

const idnLabel = fc.string({ unit: fc.constantFrom(...'abcxyz019-_äöüßéñçøåæΩжк中文ＡＢ'), minLength: 1, maxLength: 12 });
const idnName = fc.array(idnLabel, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.'));

// Characters that have broken host parsers elsewhere: delimiters, controls, percent, IDNA look-alikes.
const hostile = fc.constantFrom('%', '%25', '@', ':', '[', ']', '/', '\\', '#', '?', ' ', '\t', '\n', '\r', '\u0000', '*', '.', '..', '。', '％', '＠', '：', '\u00ad', '\u200b', 'xn--', '0x', '_');
const mutated = fc.tuple(fc.oneof(fc.domain(), idnName, ipv4Spelling.map((s) => s.raw)), hostile, fc.nat()).map(([base, insert, at]) => {
  const i = base.length === 0 ? 0 : at % (base.length + 1);
  return base.slice(0, i) + insert + base.slice(i);
});

const anyHost = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.domain(),
  fc.mixedCase(fc.domain()),
  fc.domain().map((d) => `${d}.`),
  ipv4Spelling.map((s) => s.raw),
  fc.ipV4Extended(),
  fc.ipV6().map((a) => `[${a}]`),
  fc.ipV4().map((a) => `[::ffff:${a}]`),
  idnName,
  mutated,
);

function accepted(raw: string): CanonicalHost | null {
  const verdict = canonicalizeHost(raw);
  return verdict.ok ? verdict.value : null;
}

function urlHostname(raw: string): string | null {
  try {
    return new URL(`http://${raw}/`).hostname;
  } catch {
    return null;
  }
}

describe('canonicalizeHost properties', () => {
  it('is idempotent: a canonical host canonicalizes to itself', () => {
    fc.assert(
      fc.property(anyHost, (raw) => {
        const host = accepted(raw);
        if (host === null) return;
        const again = host.hostKind === 'ipv6' ? `[${host.host}]` : host.host;
        expect(canonicalizeHost(again)).toEqual({ ok: true, value: host });
      }),
      RUNS,
    );
  });

  it('agrees with new URL() on every host it accepts (one trailing dot removed)', () => {
    fc.assert(
      fc.property(anyHost, (raw) => {
        const host = accepted(raw);
        if (host === null) return;
        const parsed = urlHostname(raw);
        expect(parsed).not.toBeNull();
        const expected = (parsed ?? '').replace(/\.$/, '');
        if (host.hostKind === 'ipv6') expect(expected).toBe(`[${host.host}]`);
        else if (expected.startsWith('[')) expect(expected).toMatch(/^\[::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}\]$/); // mapped IPv4, unwrapped by us
        else expect(expected).toBe(host.host);
      }),
      RUNS,
    );
  });

  it('never accepts a host that new URL() rejects', () => {
    fc.assert(
      fc.property(anyHost, (raw) => {
        if (urlHostname(raw) === null) expect(canonicalizeHost(raw).ok).toBe(false);
      }),
      RUNS,
    );
  });

  it('reads every IPv4 spelling as the same dotted quad', () => {
    fc.assert(
      fc.property(ipv4Spelling, ({ raw, dotted }) => {
        expect(canonicalizeHost(raw)).toEqual({ ok: true, value: { host: dotted, hostKind: 'ipv4' } });
      }),
      RUNS,
    );
  });

  it('unwraps IPv4-mapped IPv6 and keeps every other IPv6 literal as RFC 5952 text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV6(), fc.ipV4().map((a) => `::ffff:${a}`)), (address) => {
        const host = accepted(`[${address}]`);
        expect(host).not.toBeNull();
        if (host?.hostKind === 'ipv4') expect(urlHostname(`[${address}]`)).toMatch(/^\[::ffff:/);
        else expect(`[${host?.host}]`).toBe(urlHostname(`[${address}]`));
      }),
      RUNS,
    );
  });

  it('emits one shape per host kind: LDH name, dotted quad, or valid unmapped IPv6', () => {
    fc.assert(
      fc.property(anyHost, (raw) => {
        const host = accepted(raw);
        if (host === null) return;
        if (host.hostKind === 'name') {
          expect(host.host).toMatch(/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/);
          expect(host.host.length).toBeLessThanOrEqual(253);
          expect(net.isIP(host.host)).toBe(0);
        } else if (host.hostKind === 'ipv4') {
          expect(net.isIPv4(host.host)).toBe(true);
        } else {
          expect(net.isIPv6(host.host)).toBe(true);
          expect(host.host).not.toMatch(/^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/);
        }
      }),
      RUNS,
    );
  });
});

describe('destination parsers never throw', () => {
  const anyText = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), anyHost, anyHost.map((h) => `${h}:443`), fc.webUrl(), fc.webAuthority());
  it.each([
    ['canonicalizeHost', (s: string): unknown => canonicalizeHost(s)],
    ['canonicalize', (s: string): unknown => canonicalize(s)],
    ['canonicalize with default port', (s: string): unknown => canonicalize(s, 443)],
    ['parseAbsoluteTarget', (s: string): unknown => parseAbsoluteTarget(s)],
    ['parseAbsoluteTarget (http://)', (s: string): unknown => parseAbsoluteTarget(`http://${s}`)],
    ['parseConnectTarget', (s: string): unknown => parseConnectTarget(s)],
    ['parseDestinationRule', (s: string): unknown => parseDestinationRule(`https://${s}`)],
  ])('%s returns a verdict for any string', (_name, parse) => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(parse(s)).toHaveProperty('ok');
      }),
      RUNS,
    );
  });

  it('canonicalize(key) of an accepted destination gives the same key', () => {
    fc.assert(
      fc.property(anyHost, fc.integer({ min: 1, max: 65535 }), (raw, port) => {
        const first = canonicalize(`${raw}:${port}`);
        if (!first.ok) return;
        expect(first.value.key).toBe(formatHostPort(first.value.host, first.value.hostKind, port));
        expect(canonicalize(first.value.key)).toEqual(first);
      }),
      RUNS,
    );
  });
});

describe('canonicalizeHost: IPv6 near the mapped form', () => {
  // fc.ipV6() almost never puts ffff next to the IPv4 tail, so the property above never tried addresses
  // that merely contain ::ffff:x:y (mutants 225 and 226 of the December 2026 mutation review).
  const group = fc.oneof(fc.constantFrom(0, 0, 0, 1, 0xffff, 0x7f00), fc.integer({ min: 0, max: 0xffff }));
  const nearMapped = fc
    .tuple(fc.array(group, { minLength: 8, maxLength: 8 }), fc.integer({ min: 3, max: 6 }))
    .map(([groups, at]) => groups.map((g, i) => (i === at ? 0xffff : g)).map((g) => g.toString(16)).join(':'));

  it('unwraps an address to IPv4 exactly when it is ::ffff:x:y as a whole, else keeps it as IPv6', () => {
    fc.assert(
      fc.property(nearMapped, (address) => {
        const parsed = urlHostname(`[${address}]`) ?? '';
        const mapped = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(parsed);
        const host = accepted(`[${address}]`);
        if (mapped === null) {
          expect(host).toEqual({ host: parsed.slice(1, -1), hostKind: 'ipv6' });
        } else {
          const [hi, lo] = [Number.parseInt(mapped[1] ?? '', 16), Number.parseInt(mapped[2] ?? '', 16)];
          expect(host).toEqual({ host: `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, hostKind: 'ipv4' });
        }
      }),
      RUNS,
    );
  });
});
