// Canonicalizes one host string (name, IPv4 in any WHATWG spelling, bracketed IPv6) to the form policy sees.
// WHATWG URL's host parser does IDNA (UTS #46) and IPv4 number parsing; we refuse everything it would
// silently repair (tabs, percent-encoding, userinfo) and names outside LDH, so policy and dialer agree.
import { deny, ok, type HostKind, type Verdict } from '../core/index.js';

export interface CanonicalHost {
  readonly host: string;
  readonly hostKind: HostKind;
}

// RFC 3986 §3.2.2 delimiters, ASCII controls, space, and `%` (zone IDs, RFC 6874; percent-encoded names).
// The URL parser strips tab/LF/CR and decodes %XX, so these must be refused before it sees the input.
const FORBIDDEN_RAW = /[\u0000-\u0020\u007f%@/\\?#<>^|"`{}]/u;
const NAME = /^(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;
const DOTTED_IPV4 = /^(?:\d{1,3}\.){3}\d{1,3}$/;
// IPv4-mapped IPv6 (RFC 4291 §2.5.5.2) as WHATWG serializes it: the address is the IPv4 one, so unwrap it.
const MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

// Already-canonical ASCII names skip the URL parser: lowercase LDH labels, no punycode (which the
// parser validates), and a last label that is not a number in any WHATWG spelling (which would make
// the whole host an IPv4 address). For these, UTS #46 mapping is the identity.
const PLAIN_NAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;
const NUMERIC_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/;

export function canonicalizeHost(raw: string): Verdict<CanonicalHost> {
  if (PLAIN_NAME.test(raw) && !NUMERIC_LABEL.test(raw) && !raw.includes('xn--')) {
    return ok({ host: raw.endsWith('.') ? raw.slice(0, -1) : raw, hostKind: 'name' });
  }
  if (raw.length === 0 || raw.length > 1024) return deny('destination_malformed', 'empty or oversized host');
  if (FORBIDDEN_RAW.test(raw)) return deny('destination_malformed', 'host contains a forbidden character');
  if (raw.startsWith('[')) return canonicalizeIpv6(raw);
  if (raw.includes(':') || raw.includes(']')) return deny('destination_malformed', 'IPv6 literals must be in brackets');
  let hostname: string;
  try {
    hostname = new URL(`http://${raw}/`).hostname;
  } catch {
    return deny('destination_malformed', 'not a valid host name or address');
  }
  if (hostname.startsWith('[')) return canonicalizeIpv6(hostname);
  if (hostname.endsWith('.')) hostname = hostname.slice(0, -1);
  if (DOTTED_IPV4.test(hostname)) return ok({ host: hostname, hostKind: 'ipv4' });
  if (!NAME.test(hostname)) return deny('destination_malformed', 'host name is not letters, digits, hyphens and dots');
  return ok({ host: hostname, hostKind: 'name' });
}

function canonicalizeIpv6(bracketed: string): Verdict<CanonicalHost> {
  if (!bracketed.endsWith(']')) return deny('destination_malformed', 'unterminated IPv6 literal');
  let hostname: string;
  try {
    hostname = new URL(`http://${bracketed}/`).hostname;
  } catch {
    return deny('destination_malformed', 'not a valid IPv6 address');
  }
  const inner = hostname.slice(1, -1);
  const mapped = MAPPED.exec(inner);
  if (mapped !== null) {
    const hi = Number.parseInt(mapped[1] ?? '0', 16);
    const lo = Number.parseInt(mapped[2] ?? '0', 16);
    return ok({ host: `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, hostKind: 'ipv4' });
  }
  return ok({ host: inner, hostKind: 'ipv6' });
}

export function formatHostPort(host: string, hostKind: HostKind, port: number): string {
  return hostKind === 'ipv6' ? `[${host}]:${port}` : `${host}:${port}`;
}
