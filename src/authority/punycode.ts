// RFC 3492 Punycode decoding, in our own few lines (the `punycode` module is deprecated, DEP0040), so
// that whether an A-label is valid is decided by Sluice and not by the Node version: Node 20's URL
// parser (ada 2.9) refuses `xn--a`, Node 24's (ada 4) passes every `xn--` label through unchecked.

const BASE = 36;
const TMIN = 1;
const TMAX = 26;
const SKEW = 38;
const DAMP = 700;
const INITIAL_BIAS = 72;
const INITIAL_N = 0x80;
// RFC 3492 §6.4: the decoder must detect overflow of its integers. JavaScript numbers are exact up to
// 2^53, so every check against 2^31 - 1 below is itself exact.
const MAXINT = 0x7fffffff;
const MAX_CODE_POINT = 0x10ffff;

/** RFC 3492 §5: `a`-`z` and `A`-`Z` are 0-25, `0`-`9` are 26-35; anything else is not a digit. */
function digitOf(c: number): number {
  if (c >= 0x61 && c <= 0x7a) return c - 0x61;
  if (c >= 0x41 && c <= 0x5a) return c - 0x41;
  if (c >= 0x30 && c <= 0x39) return c - 0x30 + 26;
  return BASE;
}

/** RFC 3492 §6.1. */
function adapt(delta: number, numPoints: number, firstTime: boolean): number {
  let d = firstTime ? Math.floor(delta / DAMP) : delta >> 1;
  d += Math.floor(d / numPoints);
  let k = 0;
  while (d > ((BASE - TMIN) * TMAX) >> 1) {
    d = Math.floor(d / (BASE - TMIN));
    k += BASE;
  }
  return k + Math.floor(((BASE - TMIN + 1) * d) / (d + SKEW));
}

/**
 * Decodes a Punycode string (an A-label without its `xn--` prefix) to Unicode per RFC 3492 §6.2, or
 * returns undefined where the RFC says "fail": a non-basic code point before the last delimiter, a
 * character that is not a digit, a truncated digit sequence, or an integer overflow. Decoded code points
 * outside Unicode (above U+10FFFF) and surrogates (not scalar values) also fail. Basic code points are copied
 * as they are; mixed-case annotations (RFC 3492 Appendix A) are ignored, as the RFC allows.
 */
export function decodePunycode(input: string): string | undefined {
  const output: number[] = [];
  const last = input.lastIndexOf('-');
  const basic = last < 0 ? 0 : last;
  for (let j = 0; j < basic; j++) {
    const c = input.charCodeAt(j);
    if (c >= INITIAL_N) return undefined;
    output.push(c);
  }
  let n = INITIAL_N;
  let i = 0;
  let bias = INITIAL_BIAS;
  for (let at = basic > 0 ? basic + 1 : 0; at < input.length; ) {
    const oldi = i;
    let w = 1;
    for (let k = BASE; ; k += BASE) {
      if (at >= input.length) return undefined;
      const digit = digitOf(input.charCodeAt(at++));
      if (digit >= BASE) return undefined;
      if (digit > Math.floor((MAXINT - i) / w)) return undefined;
      i += digit * w;
      const t = k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias;
      if (digit < t) break;
      if (w > Math.floor(MAXINT / (BASE - t))) return undefined;
      w *= BASE - t;
    }
    const points = output.length + 1;
    bias = adapt(i - oldi, points, oldi === 0);
    if (Math.floor(i / points) > MAXINT - n) return undefined;
    n += Math.floor(i / points);
    i %= points;
    // RFC 3492 §6.2 fails on a basic n; n starts at 0x80 and only grows, so only the top is checked.
    if (n > MAX_CODE_POINT || (n >= 0xd800 && n <= 0xdfff)) return undefined;
    output.splice(i, 0, n);
    i += 1;
  }
  return String.fromCodePoint(...output);
}
