// The address-class table as a specification, after smokescreen's TestClassifyAddr: every built-in range
// with the RFC that defines it, and every IPv6 form that embeds IPv4 taking the embedded address's class,
// so 127.0.0.1 or 169.254.169.254 cannot be reached by respelling it (GHSA-8rmm-gm28-pj8q).
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { classifyAddress, embeddedIpv4 } from '../../../src/resolve/address-class.js';

describe('classifyAddress: IPv4 ranges (RFC 6890 special-purpose registry)', () => {
  it.each([
    ['0.0.0.0', 'unspecified', 'RFC 1122 §3.2.1.3 this host'],
    ['0.255.255.255', 'unspecified', 'RFC 1122 §3.2.1.3 this network, last'],
    ['10.0.0.0', 'private', 'RFC 1918'],
    ['10.255.255.255', 'private', 'RFC 1918, last'],
    ['100.63.255.255', 'public', 'just below RFC 6598'],
    ['100.64.0.0', 'cgnat', 'RFC 6598 shared address space'],
    ['100.127.255.255', 'cgnat', 'RFC 6598, last'],
    ['100.128.0.0', 'public', 'just above RFC 6598'],
    ['127.0.0.1', 'loopback', 'RFC 1122 §3.2.1.3'],
    ['127.255.255.255', 'loopback', 'RFC 1122, last'],
    ['169.254.0.0', 'link_local', 'RFC 3927'],
    ['169.254.169.254', 'link_local', 'RFC 3927; cloud metadata service'],
    ['169.254.255.255', 'link_local', 'RFC 3927, last'],
    ['172.15.255.255', 'public', 'just below RFC 1918 172.16/12'],
    ['172.16.0.0', 'private', 'RFC 1918'],
    ['172.31.255.255', 'private', 'RFC 1918, last'],
    ['172.32.0.0', 'public', 'just above RFC 1918 172.16/12'],
    ['192.0.0.0', 'reserved', 'RFC 6890 IETF protocol assignments'],
    ['192.0.0.255', 'reserved', 'RFC 6890, last'],
    ['192.0.2.1', 'reserved', 'RFC 5737 TEST-NET-1'],
    ['192.88.99.1', 'reserved', 'RFC 7526 6to4 relay anycast'],
    ['192.168.0.0', 'private', 'RFC 1918'],
    ['192.168.255.255', 'private', 'RFC 1918, last'],
    ['198.18.0.0', 'reserved', 'RFC 2544 benchmarking'],
    ['198.19.255.255', 'reserved', 'RFC 2544, last'],
    ['198.51.100.7', 'reserved', 'RFC 5737 TEST-NET-2'],
    ['203.0.113.9', 'reserved', 'RFC 5737 TEST-NET-3'],
    ['224.0.0.0', 'multicast', 'RFC 5771'],
    ['239.255.255.255', 'multicast', 'RFC 5771, last'],
    ['240.0.0.0', 'reserved', 'RFC 1112 §4 class E'],
    ['255.255.255.254', 'reserved', 'RFC 1112 §4 class E, last before broadcast'],
    ['255.255.255.255', 'multicast', 'RFC 919 limited broadcast is one-to-all'],
  ])('%s is %s (%s)', (ip, cls) => {
    expect(classifyAddress(ip)).toEqual({ class: cls, effective: ip });
  });
});

describe('classifyAddress: IPv6 ranges (RFC 6890, IANA IPv6 special-purpose registry)', () => {
  it.each([
    ['::', 'unspecified', 'RFC 4291 §2.5.2'],
    ['::1', 'loopback', 'RFC 4291 §2.5.3'],
    ['64:ff9b:1::1', 'private', 'RFC 8215 local-use NAT64'],
    ['100::1', 'reserved', 'RFC 6666 discard-only'],
    ['2001:2::1', 'reserved', 'RFC 5180 benchmarking'],
    ['2001:10::1', 'reserved', 'RFC 4843 ORCHID'],
    ['2001:20::1', 'reserved', 'RFC 7343 ORCHIDv2'],
    ['2001:db8::1', 'reserved', 'RFC 3849 documentation'],
    ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved', 'RFC 3849, last'],
    ['3fff::1', 'reserved', 'RFC 9637 documentation'],
    ['5f00::1', 'reserved', 'RFC 9602 SRv6 SIDs'],
    ['fc00::', 'private', 'RFC 4193 unique local'],
    ['fd00::1', 'private', 'RFC 4193 unique local'],
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'private', 'RFC 4193, last'],
    ['fe80::1', 'link_local', 'RFC 4291 §2.5.6'],
    ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link_local', 'RFC 4291 §2.5.6, last'],
    ['fec0::1', 'private', 'RFC 3879 deprecated site-local'],
    ['ff02::1', 'multicast', 'RFC 4291 §2.7 all-nodes'],
    ['ff05::1:3', 'multicast', 'RFC 4291 §2.7'],
    ['4000::1', 'reserved', 'RFC 4291 §2.4: outside 2000::/3 is unassigned'],
    ['1::1', 'reserved', 'unassigned'],
    ['e000::1', 'reserved', 'unassigned'],
  ])('%s is %s (%s)', (ip, cls) => {
    expect(classifyAddress(ip).class).toBe(cls);
  });

  it('zone IDs do not change the class', () => {
    expect(classifyAddress('fe80::1%eth0').class).toBe('link_local');
  });
});

describe('classifyAddress: public addresses', () => {
  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700::1111', '2001:4860:4860::8888', '2a00:1450:4001::1'])('%s is public', (ip) => {
    expect(classifyAddress(ip).class).toBe('public');
  });
});

describe('classifyAddress: IPv6 that embeds IPv4 takes the embedded class', () => {
  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1', 'loopback', 'RFC 4291 §2.5.5.2 IPv4-mapped'],
    ['::ffff:7f00:1', '127.0.0.1', 'loopback', 'IPv4-mapped in hex'],
    ['::ffff:10.0.0.1', '10.0.0.1', 'private', 'IPv4-mapped'],
    ['::ffff:169.254.169.254', '169.254.169.254', 'link_local', 'IPv4-mapped metadata'],
    ['::ffff:0.0.0.0', '0.0.0.0', 'unspecified', 'IPv4-mapped this-host'],
    ['::ffff:8.8.8.8', '8.8.8.8', 'public', 'IPv4-mapped public stays public'],
    ['::127.0.0.1', '127.0.0.1', 'loopback', 'RFC 4291 §2.5.5.1 IPv4-compatible (deprecated)'],
    ['::10.0.0.1', '10.0.0.1', 'private', 'IPv4-compatible'],
    ['64:ff9b::7f00:1', '127.0.0.1', 'loopback', 'RFC 6052 NAT64 well-known prefix'],
    ['64:ff9b::127.0.0.1', '127.0.0.1', 'loopback', 'RFC 6052, dotted tail'],
    ['64:ff9b::a9fe:a9fe', '169.254.169.254', 'link_local', 'RFC 6052 NAT64 to metadata'],
    ['64:ff9b::808:808', '8.8.8.8', 'public', 'RFC 6052 NAT64 to a public address'],
    ['2002:7f00:1::', '127.0.0.1', 'loopback', 'RFC 3056 6to4'],
    ['2002:a00:1::1', '10.0.0.1', 'private', 'RFC 3056 6to4'],
    ['2002:a9fe:a9fe::1', '169.254.169.254', 'link_local', 'RFC 3056 6to4 metadata'],
    ['2002:808:808::1', '8.8.8.8', 'public', 'RFC 3056 6to4 public'],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1', 'loopback', 'RFC 4380 §4 Teredo: client = last 32 bits XOR 0xffffffff'],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', '10.0.0.1', 'private', 'RFC 4380 Teredo'],
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', '8.8.8.8', 'public', 'RFC 4380 Teredo public client'],
  ])('%s embeds %s → %s (%s)', (ip, effective, cls) => {
    expect(classifyAddress(ip)).toEqual({ class: cls, effective });
  });

  it('embeddedIpv4 is null for native IPv6', () => {
    for (const ip of ['2606:4700::1111', 'fe80::1', '::1', '::']) {
      expect(embeddedIpv4(ipaddr.IPv6.parse(ip))).toBeNull();
    }
  });
});

describe('classifyAddress: input that is not one address', () => {
  it.each(['', 'localhost', 'example.com', '1.2.3.4.5', '::g', '[::1]', '127.0.0.1:80'])('%j is reserved, never public', (ip) => {
    expect(classifyAddress(ip).class).toBe('reserved');
  });
});

describe('classifyAddress: near misses of the NAT64 prefix and IPv4-compatible forms', () => {
  // NAT64 is exactly 64:ff9b::/96 (RFC 6052 §2.1): both leading groups must match. Mutants 922 (`||`),
  // 923 (first group ignored) and 925 (second group ignored) read these as NAT64 and change the class.
  it.each([
    ['64:1::808:808', 'reserved', 'first group is NAT64’s, second is not: unassigned, not public 8.8.8.8 (mutants 922, 925)'],
    ['e000:ff9b::808:808', 'reserved', 'second group is NAT64’s, first is not: unassigned, not public 8.8.8.8 (mutants 922, 923)'],
    ['2600:ff9b::7f00:1', 'public', 'global unicast with ff9b second: native IPv6, not loopback 127.0.0.1 (mutants 922, 923)'],
  ])('%s is %s (%s)', (ip, cls) => {
    expect(classifyAddress(ip).class).toBe(cls);
  });

  // Every ::/96 address but :: and ::1 is IPv4-compatible (RFC 4291 §2.5.5.1): ::2 is 0.0.0.2, never allowed.
  // Mutant 912 (`parts[7] === 0 || parts[7] === 1` → true) made every ::0.0.x.y `reserved`, which a grant can allow.
  it.each([
    ['::2', '0.0.0.2'],
    ['::100', '0.0.1.0'], // written in hex: ipaddr.js reads the dotted ::0.0.1.0 as mapped ::ffff:0:100
  ])('%s embeds %s and is unspecified', (ip, effective) => {
    expect(classifyAddress(ip)).toEqual({ class: 'unspecified', effective });
  });

  // Mutant 969 (every character counts as a digit in the dotted-quad fast path) read this as 49.50.51.52: public.
  it('a dotted string of letters is not an address: reserved', () => {
    expect(classifyAddress('a.b.c.d').class).toBe('reserved');
  });
});
