// Threat: SSRF by respelling a forbidden address. A sandbox asks for 127.0.0.1, the cloud metadata service
// 169.254.169.254, or Sluice's own listener, spelled so that a string-level check misses it: hex, octal,
// shortened or single-number IPv4 (WHATWG URL IPv4 parser; CVE-2023-42282 and CVE-2024-29415 in the `ip`
// package, CVE-2021-28918 in `netmask`), IPv4-mapped/compatible IPv6 (RFC 4291 §2.5.5), NAT64 (RFC 6052),
// 6to4 (RFC 3056), Teredo (RFC 4380), trailing dots and IDNA full-width digits. Every spelling must reach
// policy as one canonical destination and be refused by the address check before anything is dialed.
import { describe, expect, it } from 'vitest';
import { authorize, compileAuthoritySet } from '../../src/authority/authority-set.js';
import { canonicalize } from '../../src/authority/canonical-destination.js';
import type { CanonicalDestination } from '../../src/core/types.js';
import { compileAddressPolicy, type AddressPolicy } from '../../src/resolve/address-policy.js';
import { literalAnswer, pin } from '../../src/resolve/pin.js';
import { SelfAddresses } from '../../src/resolve/self-addresses.js';

const PROXY_PORT = 3180;
const SELF = new SelfAddresses([`127.0.0.1:${PROXY_PORT}`]);

function addressPolicy(classes: readonly string[] = [], cidrs: readonly string[] = []): AddressPolicy {
  const compiled = compileAddressPolicy(classes, cidrs, SELF);
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
  return compiled.value;
}

function destination(authority: string): CanonicalDestination {
  const verdict = canonicalize(authority);
  if (!verdict.ok) throw new Error(`${authority} was refused: ${verdict.detail}`);
  return verdict.value;
}

/** The verdict reason (or "pinned") for dialing a literal destination under a policy. */
function pinLiteral(authority: string, policy: AddressPolicy): string {
  const dest = destination(authority);
  const answer = literalAnswer(dest);
  if (answer === null) throw new Error(`${authority} is not a literal`);
  const { verdict } = pin(dest, [answer], policy);
  return verdict.ok ? 'pinned' : verdict.reason;
}

const LOOPBACK_SPELLINGS = [
  '127.0.0.1', '127.1', '127.0.1', '2130706433', '0x7f000001', '0x7f.1', '0x7F.0.0.1', '0177.0.0.1', '0177.1',
  '017700000001', '127.0.0.1.', '127.000.000.001', '１２７.０.０.１', '127.255.255.254',
  '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:7f00:1]', '[::127.0.0.1]', '[::1]', '[0:0::1]',
  '[64:ff9b::7f00:1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::]', '[2001:0:4136:e378:8000:63bf:80ff:fffe]',
];

const METADATA_SPELLINGS = [
  '169.254.169.254', '0xa9fea9fe', '2852039166', '0251.0376.0251.0376', '169.254.43518', '0xa9.0xfe.0xa9.0xfe',
  '[::ffff:169.254.169.254]', '[::ffff:a9fe:a9fe]', '[64:ff9b::a9fe:a9fe]', '[2002:a9fe:a9fe::]',
  '[fd00:ec2::254]', // AWS IMDS over IPv6 is unique-local (RFC 4193)
];

const PRIVATE_SPELLINGS = ['10.0.0.1', '012.1', '0xa.0.0.1', '167772161', '[::ffff:10.0.0.1]', '[2002:a00:1::]', '192.168.1.1', '0xc0a80101', '[fd00::1]'];

describe('every spelling of a forbidden address is refused by a public-only grant', () => {
  const publicOnly = addressPolicy();

  it.each(LOOPBACK_SPELLINGS)('loopback %s', (host) => {
    expect(pinLiteral(`${host}:443`, publicOnly)).toBe('address_class_denied');
  });

  it.each(METADATA_SPELLINGS)('metadata %s', (host) => {
    expect(pinLiteral(`${host}:80`, publicOnly)).toBe('address_class_denied');
  });

  it.each(PRIVATE_SPELLINGS)('private %s', (host) => {
    expect(pinLiteral(`${host}:443`, publicOnly)).toBe('address_class_denied');
  });

  it.each(['0', '0.0.0.0', '0x0', '[::]', '[::ffff:0.0.0.0]', '224.0.0.1', '0xffffffff', '255.255.255.255', '[ff02::1]'])(
    'unspecified or multicast %s, even with every class and 0.0.0.0/0',
    (host) => {
      const everything = addressPolicy(['private', 'loopback', 'link_local', 'cgnat', 'reserved', 'unspecified', 'multicast'], ['0.0.0.0/0', '::/0']);
      expect(pinLiteral(`${host}:443`, everything)).toBe('address_class_denied');
    },
  );
});

describe('no spelling reaches Sluice’s own listener, whatever the grant says', () => {
  const everything = addressPolicy(['private', 'loopback', 'link_local', 'cgnat', 'reserved'], ['0.0.0.0/0', '::/0']);

  it.each(LOOPBACK_SPELLINGS)('%s:3180 is self', (host) => {
    expect(pinLiteral(`${host}:${PROXY_PORT}`, everything)).toBe('address_self');
  });

  it('the same address on another port is only loopback, which this grant allows', () => {
    expect(pinLiteral('0x7f.1:3181', everything)).toBe('pinned');
  });
});

describe('spellings cannot dodge a destination rule either', () => {
  const compiled = compileAuthoritySet(['https://10.0.0.1', 'https://[::1]'], false);
  if (!compiled.ok) throw new Error('rules');
  const set = compiled.value;

  it.each(['10.0.0.1', '012.1', '0xa000001', '167772161', '[::ffff:10.0.0.1]', '[0:0::1]', '[::1]'])('%s:443 meets the one canonical rule', (host) => {
    expect(authorize(set, 'connect', destination(`${host}:443`)).ok).toBe(true);
  });

  it.each(['10.0.0.2', '012.2', '[::ffff:10.0.0.2]', '[::2]'])('%s:443 is not granted', (host) => {
    expect(authorize(set, 'connect', destination(`${host}:443`))).toEqual(expect.objectContaining({ reason: 'destination_not_granted' }));
  });
});

describe('a name that resolves to both public and forbidden addresses (DNS rebinding)', () => {
  it('pins only the public address; the forbidden one is never a dial candidate', () => {
    const dest = destination('rebind.test:443');
    const { verdict } = pin(dest, [{ address: '127.0.0.1', family: 4 }, { address: '93.184.216.34', family: 4 }, { address: '::ffff:169.254.169.254', family: 6 }], addressPolicy());
    expect(verdict.ok && verdict.value.map((p) => p.address)).toEqual(['93.184.216.34']);
  });
});
