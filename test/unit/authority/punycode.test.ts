// Specifies Sluice's own RFC 3492 Punycode decoder and the A-label check built on it (RFC 5891 §5.4):
// whether an `xn--` label is valid must not depend on the Node version, because Node 20's URL parser
// refuses `xn--a.example` and Node 24's accepts it (issue 24 item 5). These run on both versions.
import { describe, expect, it } from 'vitest';
import { canonicalizeHost } from '../../../src/authority/canonical-host.js';
import { decodePunycode } from '../../../src/authority/punycode.js';

const cp = (...points: number[]): string => String.fromCodePoint(...points);

describe('decodePunycode: the RFC 3492 §7.1 sample strings', () => {
  it.each([
    ['(A) Arabic (Egyptian)', 'egbpdaj6bu4bxfgehfvwxn', cp(0x644, 0x64a, 0x647, 0x645, 0x627, 0x628, 0x62a, 0x643, 0x644, 0x645, 0x648, 0x634, 0x639, 0x631, 0x628, 0x64a, 0x61f)],
    ['(B) Chinese (simplified)', 'ihqwcrb4cv8a8dqg056pqjye', cp(0x4ed6, 0x4eec, 0x4e3a, 0x4ec0, 0x4e48, 0x4e0d, 0x8bf4, 0x4e2d, 0x6587)],
    ['(C) Chinese (traditional)', 'ihqwctvzc91f659drss3x8bo0yb', cp(0x4ed6, 0x5011, 0x7232, 0x4ec0, 0x9ebd, 0x4e0d, 0x8aaa, 0x4e2d, 0x6587)],
    ['(D) Czech', 'Proprostnemluvesky-uyb24dma41a', cp(0x50, 0x72, 0x6f, 0x10d, 0x70, 0x72, 0x6f, 0x73, 0x74, 0x11b, 0x6e, 0x65, 0x6d, 0x6c, 0x75, 0x76, 0xed, 0x10d, 0x65, 0x73, 0x6b, 0x79)],
    ['(E) Hebrew', '4dbcagdahymbxekheh6e0a7fei0b', cp(0x5dc, 0x5de, 0x5d4, 0x5d4, 0x5dd, 0x5e4, 0x5e9, 0x5d5, 0x5d8, 0x5dc, 0x5d0, 0x5de, 0x5d3, 0x5d1, 0x5e8, 0x5d9, 0x5dd, 0x5e2, 0x5d1, 0x5e8, 0x5d9, 0x5ea)],
    ['(F) Hindi (Devanagari)', 'i1baa7eci9glrd9b2ae1bj0hfcgg6iyaf8o0a1dig0cd', cp(0x92f, 0x939, 0x932, 0x94b, 0x917, 0x939, 0x93f, 0x928, 0x94d, 0x926, 0x940, 0x915, 0x94d, 0x92f, 0x94b, 0x902, 0x928, 0x939, 0x940, 0x902, 0x92c, 0x94b, 0x932, 0x938, 0x915, 0x924, 0x947, 0x939, 0x948, 0x902)],
    ['(G) Japanese (kanji and hiragana)', 'n8jok5ay5dzabd5bym9f0cm5685rrjetr6pdxa', cp(0x306a, 0x305c, 0x307f, 0x3093, 0x306a, 0x65e5, 0x672c, 0x8a9e, 0x3092, 0x8a71, 0x3057, 0x3066, 0x304f, 0x308c, 0x306a, 0x3044, 0x306e, 0x304b)],
    ['(H) Korean (Hangul syllables)', '989aomsvi5e83db1d2a355cv1e0vak1dwrv93d5xbh15a0dt30a5jpsd879ccm6fea98c', cp(0xc138, 0xacc4, 0xc758, 0xbaa8, 0xb4e0, 0xc0ac, 0xb78c, 0xb4e4, 0xc774, 0xd55c, 0xad6d, 0xc5b4, 0xb97c, 0xc774, 0xd574, 0xd55c, 0xb2e4, 0xba74, 0xc5bc, 0xb9c8, 0xb098, 0xc88b, 0xc744, 0xae4c)],
    // The RFC prints a capital D (a mixed-case annotation, Appendix A, at odds with its lowercase code
    // points: RFC errata 3026); digits are case-insensitive, so both spellings decode alike.
    ['(I) Russian (Cyrillic)', 'b1abfaaepdrnnbgefbaDotcwatmq2g4l', cp(0x43f, 0x43e, 0x447, 0x435, 0x43c, 0x443, 0x436, 0x435, 0x43e, 0x43d, 0x438, 0x43d, 0x435, 0x433, 0x43e, 0x432, 0x43e, 0x440, 0x44f, 0x442, 0x43f, 0x43e, 0x440, 0x443, 0x441, 0x441, 0x43a, 0x438)],
    ['(I) Russian, lowercase', 'b1abfaaepdrnnbgefbadotcwatmq2g4l', cp(0x43f, 0x43e, 0x447, 0x435, 0x43c, 0x443, 0x436, 0x435, 0x43e, 0x43d, 0x438, 0x43d, 0x435, 0x433, 0x43e, 0x432, 0x43e, 0x440, 0x44f, 0x442, 0x43f, 0x43e, 0x440, 0x443, 0x441, 0x441, 0x43a, 0x438)],
    ['(J) Spanish', 'PorqunopuedensimplementehablarenEspaol-fmd56a', `Porqu${cp(0xe9)}nopuedensimplementehablarenEspa${cp(0xf1)}ol`],
    ['(K) Vietnamese', 'TisaohkhngthchnitingVit-kjcr8268qyxafd2f1b9g', cp(0x54, 0x1ea1, 0x69, 0x73, 0x61, 0x6f, 0x68, 0x1ecd, 0x6b, 0x68, 0xf4, 0x6e, 0x67, 0x74, 0x68, 0x1ec3, 0x63, 0x68, 0x1ec9, 0x6e, 0xf3, 0x69, 0x74, 0x69, 0x1ebf, 0x6e, 0x67, 0x56, 0x69, 0x1ec7, 0x74)],
    ['(L) 3<nen>B<gumi><kinpachi><sensei>', '3B-ww4c5e180e575a65lsy2b', cp(0x33, 0x5e74, 0x42, 0x7d44, 0x91d1, 0x516b, 0x5148, 0x751f)],
    ['(M) <amuro><namie>-with-SUPER-MONKEYS', '-with-SUPER-MONKEYS-pc58ag80a8qai00g7n9n', `${cp(0x5b89, 0x5ba4, 0x5948, 0x7f8e, 0x6075)}-with-SUPER-MONKEYS`],
    ['(N) Hello-Another-Way-<sorezore><no><basho>', 'Hello-Another-Way--fc4qua05auwb3674vfr0b', `Hello-Another-Way-${cp(0x305d, 0x308c, 0x305e, 0x308c, 0x306e, 0x5834, 0x6240)}`],
    ['(O) <hitotsu><yane><no><shita>2', '2-u9tlzr9756bt3uc0v', cp(0x3072, 0x3068, 0x3064, 0x5c4b, 0x6839, 0x306e, 0x4e0b, 0x32)],
    ['(P) Maji<de>Koi<suru>5<byou><mae>', 'MajiKoi5-783gue6qz075azm5e', cp(0x4d, 0x61, 0x6a, 0x69, 0x3067, 0x4b, 0x6f, 0x69, 0x3059, 0x308b, 0x35, 0x79d2, 0x524d)],
    ['(Q) <pafii>de<runba>', 'de-jg4avhby1noc0d', cp(0x30d1, 0x30d5, 0x30a3, 0x30fc, 0x64, 0x65, 0x30eb, 0x30f3, 0x30d0)],
    ['(R) <sono><supiido><de>', 'd9juau41awczczp', cp(0x305d, 0x306e, 0x30b9, 0x30d4, 0x30fc, 0x30c9, 0x3067)],
    ['(S) -> $1.00 <-', '-> $1.00 <--', '-> $1.00 <-'],
  ])('%s: %s', (_name, encoded, decoded) => {
    expect(decodePunycode(encoded)).toBe(decoded);
  });

  it.each([
    ['bcher-kva', 'bücher'],
    ['tda', 'ü'],
    ['ls8h', '\u{1F4A9}'], // a code point above U+FFFF, one of the A-label tests of punycode.js
    ['', ''], // nothing: RFC 3492 decodes it; the A-label check refuses it as all ASCII
    ['abc-', 'abc'], // basic code points only: likewise
    ['a', '\u0080'], // `xn--a`: decodes (to a C1 control), UTS #46 disallows it
  ])('%j decodes to %j', (encoded, decoded) => {
    expect(decodePunycode(encoded)).toBe(decoded);
  });
});

describe('decodePunycode: where RFC 3492 §6.2 says fail', () => {
  it.each([
    ['a non-basic code point before the last delimiter', 'ü-abc'],
    ['a character that is not a base-36 digit', 'ab_c'],
    ['a delimiter where a digit must be (nothing before it to copy)', '-abc'],
    ['a digit sequence cut short', 'zz'],
    ['a digit sequence cut short, longer', 'aaa0'],
    ['an integer overflow (RFC 3492 §6.4)', '99999999a'],
    ['a code point above U+10FFFF', '99999a'],
    ['a surrogate, which is not a Unicode scalar value', 'bb0c'],
  ])('%s: %j', (_what, encoded) => {
    expect(decodePunycode(encoded)).toBeUndefined();
  });
});

describe('canonicalizeHost: an xn-- label must be an A-label (RFC 5891 §5.4), on every Node version', () => {
  const NOT_A_HOST = { ok: false, reason: 'destination_malformed', detail: 'not a valid host name or address' };

  it.each([
    ['xn--bcher-kva.example', 'xn--bcher-kva.example'],
    ['XN--BCHER-KVA.EXAMPLE.', 'xn--bcher-kva.example'],
    ['xn--ls8h.la', 'xn--ls8h.la'],
    ['xn--fa-hia.de', 'xn--fa-hia.de'], // faß, nontransitional
    ['xn--d1acpjx3f.xn--p1ai', 'xn--d1acpjx3f.xn--p1ai'],
    ['_srv.xn--bcher-kva.a.test', '_srv.xn--bcher-kva.a.test'],
    ['axn--b.test', 'axn--b.test'], // `xn--` inside a label is not a prefix
  ])('accepts %s as %s', (raw, host) => {
    expect(canonicalizeHost(raw)).toEqual({ ok: true, value: { host, hostKind: 'name' } });
  });

  it.each([
    ['Punycode that decodes to a disallowed code point (U+0080)', 'xn--a.example'],
    ['the same, only the last label', 'bücher.xn--a'],
    ['the same, spelled in full-width letters that map to `xn--a`', '\uff58\uff4e--a.example'],
    ['an empty Punycode part', 'xn--.example'],
    ['all ASCII: a second spelling of `abc`', 'xn--abc-.example'],
    ['a truncated digit sequence', 'xn--zz.example'],
    ['an integer overflow', 'xn--99999999a.example'],
    ['a code point above U+10FFFF', 'xn--99999a.example'],
    ['a surrogate', 'xn--bb0c.example'],
    ['a capital Ü, which UTS #46 maps to ü (its A-label is xn--tda)', 'xn--wca.example'],
    ['u + U+0308, not NFC (the NFC form is ü)', 'xn--u-ccb.example'],
    ['ⅳ U+2173, which UTS #46 maps to "iv"', 'xn--94g.example'],
    ['a lone ZERO WIDTH JOINER (CheckJoiners, RFC 5892 Appendix A.2)', 'xn--1ug.example'],
    ['a U-label that itself begins with `xn--`', 'xn--xn---3ra.example'],
  ])('refuses %s: %s, with the words of the parser refusal', (_what, raw) => {
    expect(canonicalizeHost(raw)).toEqual(NOT_A_HOST);
  });
});
