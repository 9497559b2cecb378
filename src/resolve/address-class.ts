// The address-class table: which class every IPv4 and IPv6 address belongs to, with the RFC for each
// range. IPv6 forms that embed an IPv4 address take the embedded address's class, so a sandbox cannot
// reach 127.0.0.1 by spelling it ::ffff:127.0.0.1, 64:ff9b::7f00:1, 2002:7f00:1::, ::127.0.0.1 or as a
// Teredo client (the SSRF bypasses catalogued in smokescreen's classifier and GHSA-8rmm-gm28-pj8q).
import ipaddr from 'ipaddr.js';
import type { AddressClass } from '../core/index.js';

type Range = readonly [cidr: string, cls: AddressClass];

const IPV4_TABLE: readonly Range[] = [
  ['0.0.0.0/8', 'unspecified'], // RFC 1122 §3.2.1.3 "this network"; Linux dials 0.0.0.0 as loopback
  ['10.0.0.0/8', 'private'], // RFC 1918
  ['100.64.0.0/10', 'cgnat'], // RFC 6598 shared address space
  ['127.0.0.0/8', 'loopback'], // RFC 1122 §3.2.1.3
  ['169.254.0.0/16', 'link_local'], // RFC 3927; includes cloud metadata 169.254.169.254
  ['172.16.0.0/12', 'private'], // RFC 1918
  ['192.0.0.0/24', 'reserved'], // RFC 6890 IETF protocol assignments
  ['192.0.2.0/24', 'reserved'], // RFC 5737 TEST-NET-1
  ['192.88.99.0/24', 'reserved'], // RFC 7526 deprecated 6to4 relay anycast
  ['192.168.0.0/16', 'private'], // RFC 1918
  ['198.18.0.0/15', 'reserved'], // RFC 2544 benchmarking
  ['198.51.100.0/24', 'reserved'], // RFC 5737 TEST-NET-2
  ['203.0.113.0/24', 'reserved'], // RFC 5737 TEST-NET-3
  ['224.0.0.0/4', 'multicast'], // RFC 5771
  ['255.255.255.255/32', 'multicast'], // RFC 919 limited broadcast: one-to-all delivery, never granted
  ['240.0.0.0/4', 'reserved'], // RFC 1112 §4 reserved (class E)
];

const IPV6_TABLE: readonly Range[] = [
  ['::/128', 'unspecified'], // RFC 4291 §2.5.2
  ['::1/128', 'loopback'], // RFC 4291 §2.5.3
  ['64:ff9b:1::/48', 'private'], // RFC 8215 local-use NAT64: reaches the operator's own network
  ['100::/64', 'reserved'], // RFC 6666 discard-only
  ['2001:2::/48', 'reserved'], // RFC 5180 benchmarking
  ['2001:10::/28', 'reserved'], // RFC 4843 ORCHID
  ['2001:20::/28', 'reserved'], // RFC 7343 ORCHIDv2
  ['2001:db8::/32', 'reserved'], // RFC 3849 documentation
  ['3fff::/20', 'reserved'], // RFC 9637 documentation
  ['5f00::/16', 'reserved'], // RFC 9602 SRv6 SIDs
  ['fc00::/7', 'private'], // RFC 4193 unique local
  ['fe80::/10', 'link_local'], // RFC 4291 §2.5.6
  ['fec0::/10', 'private'], // RFC 3879 deprecated site-local
  ['ff00::/8', 'multicast'], // RFC 4291 §2.7
];

type ParsedRange = readonly [ipaddr.IPv4 | ipaddr.IPv6, number, AddressClass];

function compile(table: readonly Range[]): readonly ParsedRange[] {
  return table.map(([cidr, cls]) => {
    const [addr, bits] = ipaddr.parseCIDR(cidr);
    return [addr, bits, cls] as const;
  });
}

const V4 = compile(IPV4_TABLE);
const V6 = compile(IPV6_TABLE);
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3'); // RFC 4291 §2.4: everything else is unassigned

export interface AddressClassification {
  readonly class: AddressClass;
  /** The IPv4 address an IPv6 address embeds (mapped, compatible, NAT64, 6to4, Teredo), or the address itself. */
  readonly effective: string;
}

function classifyV4(addr: ipaddr.IPv4): AddressClass {
  for (const [range, bits, cls] of V4) if (addr.match(range as ipaddr.IPv4, bits)) return cls;
  return 'public';
}

function v4FromBytes(bytes: readonly number[], at: number, xor = 0): ipaddr.IPv4 {
  const b = (i: number): number => ((bytes[at + i] ?? 0) ^ xor) & 255;
  return new ipaddr.IPv4([b(0), b(1), b(2), b(3)]);
}

/** The IPv4 address embedded in an IPv6 address, if any (RFC 4291 §2.5.5, RFC 6052, RFC 3056, RFC 4380). */
export function embeddedIpv4(addr: ipaddr.IPv6): ipaddr.IPv4 | null {
  const bytes = addr.toByteArray();
  const parts = addr.parts;
  const zeros = (from: number, to: number): boolean => parts.slice(from, to).every((p) => p === 0);
  if (zeros(0, 5) && parts[5] === 0xffff) return v4FromBytes(bytes, 12); // ::ffff:a.b.c.d mapped
  if (zeros(0, 6) && !(parts[6] === 0 && (parts[7] === 0 || parts[7] === 1))) return v4FromBytes(bytes, 12); // ::a.b.c.d compatible
  if (parts[0] === 0x64 && parts[1] === 0xff9b && zeros(2, 6)) return v4FromBytes(bytes, 12); // 64:ff9b::/96 NAT64
  if (parts[0] === 0x2002) return v4FromBytes(bytes, 2); // 2002::/16 6to4
  if (parts[0] === 0x2001 && parts[1] === 0) return v4FromBytes(bytes, 12, 0xff); // 2001::/32 Teredo client, obfuscated
  return null;
}

// The IPv4 table as integer ranges, for the common case of a dotted-quad answer (no parsing library).
const V4_INT: readonly (readonly [base: number, mask: number, cls: AddressClass])[] = IPV4_TABLE.map(([cidr, cls]) => {
  const [address = '', bits = '32'] = cidr.split('/');
  const mask = Number(bits) === 0 ? 0 : (0xffffffff << (32 - Number(bits))) >>> 0;
  return [((dottedToInt(address) ?? 0) & mask) >>> 0, mask, cls] as const;
});

function dottedToInt(ip: string): number | null {
  let value = 0;
  let octet = -1;
  let dots = 0;
  for (let i = 0; i < ip.length; i += 1) {
    const c = ip.charCodeAt(i);
    if (c === 46) {
      if (octet < 0 || ++dots > 3) return null;
      value = value * 256 + octet;
      octet = -1;
    } else if (c >= 48 && c <= 57) {
      // Canonical dotted decimal only: no leading zeros (they are octal in other parsers).
      if (octet === 0) return null;
      octet = (octet < 0 ? 0 : octet * 10) + (c - 48);
      if (octet > 255) return null;
    } else return null;
  }
  if (dots !== 3 || octet < 0) return null;
  return value * 256 + octet;
}

/** Classifies one IP address string (no brackets). Unparseable input is `reserved`, which is never public. */
export function classifyAddress(ip: string): AddressClassification {
  const v4 = dottedToInt(ip);
  if (v4 !== null) {
    for (const [base, mask, cls] of V4_INT) if (((v4 & mask) >>> 0) === base) return { class: cls, effective: ip };
    return { class: 'public', effective: ip };
  }
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(ip);
  } catch {
    return { class: 'reserved', effective: ip };
  }
  if (addr.kind() === 'ipv4') return { class: classifyV4(addr as ipaddr.IPv4), effective: addr.toString() };
  const v6 = addr as ipaddr.IPv6;
  for (const [range, bits, cls] of V6) if (v6.match(range as ipaddr.IPv6, bits)) return { class: cls, effective: v6.toString() };
  const embedded = embeddedIpv4(v6);
  if (embedded !== null) return { class: classifyV4(embedded), effective: embedded.toString() };
  if (!v6.match(GLOBAL_UNICAST)) return { class: 'reserved', effective: v6.toString() };
  return { class: 'public', effective: v6.toString() };
}
