// Specifies pinning: every resolved address is checked against the grant's address policy, forbidden ones
// are dropped before any dial, and only checked addresses are pinned, in answer order (DNS rebinding
// defence; docs/decisions/0001-pin-before-dial.md). Addresses here are classification input only; nothing dials.
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/authority/canonical-destination.js';
import type { CanonicalDestination, ResolvedAddress } from '../../../src/core/types.js';
import { checkAddress, compileAddressPolicy, parseCidr, type AddressPolicy } from '../../../src/resolve/address-policy.js';
import { literalAnswer, pin } from '../../../src/resolve/pin.js';
import { SelfAddresses } from '../../../src/resolve/self-addresses.js';

const SELF = new SelfAddresses(['127.0.0.1:3180', 'unix:/tmp/sluice-test.sock']);
const EVERY_CLASS = ['public', 'private', 'loopback', 'link_local', 'cgnat', 'unspecified', 'multicast', 'reserved', 'self'];

function policy(classes: readonly string[] = [], cidrs: readonly string[] = []): AddressPolicy {
  const compiled = compileAddressPolicy(classes, cidrs, SELF);
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
  return compiled.value;
}

function dest(authority: string): CanonicalDestination {
  const verdict = canonicalize(authority);
  if (!verdict.ok) throw new Error(verdict.detail);
  return verdict.value;
}

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });
const answer = (address: string): ResolvedAddress => (address.includes(':') ? v6(address) : v4(address));

describe('checkAddress: what a grant may reach', () => {
  it.each([
    ['public by default', [], [], '93.184.216.34', true],
    ['public IPv6 by default', [], [], '2606:4700::1111', true],
    ['loopback denied by default', [], [], '127.0.0.1', false],
    ['mapped loopback denied by default', [], [], '::ffff:127.0.0.1', false],
    ['private denied by default', [], [], '10.0.0.1', false],
    ['metadata denied by default', [], [], '169.254.169.254', false],
    ['cgnat denied by default', [], [], '100.64.0.1', false],
    ['reserved denied by default', [], [], '192.0.2.1', false],
    ['loopback allowed by its class', ['loopback'], [], '127.0.0.1', true],
    ['mapped loopback allowed by the loopback class', ['loopback'], [], '::ffff:127.0.0.1', true],
    ['loopback allowed by a CIDR', [], ['127.0.0.2/32'], '127.0.0.2', true],
    ['a CIDR covers the mapped spelling too', [], ['127.0.0.2/32'], '::ffff:127.0.0.2', true],
    ['a CIDR admits only its own range', [], ['127.0.0.2/32'], '127.0.0.3', false],
    ['private class does not admit loopback', ['private'], [], '127.0.0.1', false],
    ['unknown class names grant nothing', ['everything', 'LOOPBACK'], [], '127.0.0.1', false],
  ] as const)('%s: %s', (_what, classes, cidrs, address, allowed) => {
    expect(checkAddress(policy(classes, cidrs), answer(address), 443).allowed).toBe(allowed);
  });

  // unspecified (Linux dials 0.0.0.0 as loopback), multicast/broadcast and Sluice's own listeners are
  // refused whatever the grant says (docs/threat-model.md).
  it.each([
    ['0.0.0.0', 443, 'unspecified'],
    ['0.1.2.3', 443, 'unspecified'],
    ['::', 443, 'unspecified'],
    ['::ffff:0.0.0.0', 443, 'unspecified'],
    ['224.0.0.1', 443, 'multicast'],
    ['255.255.255.255', 443, 'multicast'],
    ['ff02::1', 443, 'multicast'],
    ['127.0.0.1', 3180, 'self'],
    ['127.0.0.2', 3180, 'self'], // any loopback address reaches a loopback listener
    ['::1', 3180, 'self'],
    ['::ffff:127.0.0.1', 3180, 'self'],
  ] as const)('%s port %i is %s and never allowed, even with every class and 0.0.0.0/0', (address, port, cls) => {
    const everything = policy(EVERY_CLASS, ['0.0.0.0/0', '::/0']);
    expect(checkAddress(everything, answer(address), port)).toEqual(expect.objectContaining({ class: cls, allowed: false }));
  });

  it('127.0.0.1 on another port is loopback, not self', () => {
    expect(checkAddress(policy(['loopback']), v4('127.0.0.1'), 3181)).toEqual({ address: '127.0.0.1', family: 4, class: 'loopback', allowed: true });
  });
});

describe('pin', () => {
  it('pins only the allowed answers, in answer order, with the destination port', () => {
    const { verdict, classified } = pin(dest('mixed.test:443'), [v4('127.0.0.1'), v4('93.184.216.34'), v6('::1'), v6('2606:4700::1111')], policy());
    expect(classified.map((c) => [c.address, c.class, c.allowed])).toEqual([
      ['127.0.0.1', 'loopback', false],
      ['93.184.216.34', 'public', true],
      ['::1', 'loopback', false],
      ['2606:4700::1111', 'public', true],
    ]);
    expect(verdict).toEqual({
      ok: true,
      value: [
        { address: '93.184.216.34', family: 4, port: 443, class: 'public' },
        { address: '2606:4700::1111', family: 6, port: 443, class: 'public' },
      ],
    });
  });

  it('refuses with address_class_denied when every answer is forbidden', () => {
    const { verdict } = pin(dest('rebind.test:443'), [v4('127.0.0.1'), v4('10.0.0.1'), v4('169.254.169.254')], policy());
    expect(verdict).toEqual(expect.objectContaining({ ok: false, reason: 'address_class_denied' }));
  });

  it('refuses with address_self when an answer is one of Sluice’s listeners', () => {
    const { verdict } = pin(dest('loop.test:3180'), [v4('127.0.0.1'), v6('::1')], policy(['loopback']));
    expect(verdict).toEqual(expect.objectContaining({ ok: false, reason: 'address_self' }));
  });

  it('refuses an empty answer list', () => {
    expect(pin(dest('none.test:443'), [], policy()).verdict.ok).toBe(false);
  });

  it('a literal destination is its own single answer', () => {
    expect(literalAnswer(dest('[::ffff:127.0.0.1]:443'))).toEqual(v4('127.0.0.1'));
    expect(literalAnswer(dest('[::1]:443'))).toEqual(v6('::1'));
    expect(literalAnswer(dest('a.test:443'))).toBeNull();
    expect(pin(dest('0x7f.1:443'), [v4('127.0.0.1')], policy()).verdict).toEqual(expect.objectContaining({ reason: 'address_class_denied' }));
  });
});

describe('SelfAddresses', () => {
  it.each([
    ['127.0.0.1', 'loopback', 3180, true],
    ['127.0.0.2', 'loopback', 3180, true],
    ['::1', 'loopback', 3180, true],
    ['0.0.0.0', 'unspecified', 3180, true],
    ['127.0.0.1', 'loopback', 3181, false],
    ['93.184.216.34', 'public', 3180, false],
  ] as const)('%s (%s) port %i is self: %s', (address, cls, port, isSelf) => {
    expect(SELF.has(address, cls, port)).toBe(isSelf);
  });

  it('a listener on an address that is not local is self only for that address and port', () => {
    const self = new SelfAddresses(['192.0.2.10:9464']);
    expect(self.has('192.0.2.10', 'reserved', 9464)).toBe(true);
    expect(self.has('192.0.2.11', 'reserved', 9464)).toBe(false);
    expect(self.has('127.0.0.1', 'loopback', 9464)).toBe(false);
  });
});

describe('compileAddressPolicy and parseCidr', () => {
  it('reports every bad CIDR with its index', () => {
    const compiled = compileAddressPolicy([], ['10.0.0.0/8', '1.2.3.4/33', 'x', '::1/129'], SELF);
    expect(compiled.ok).toBe(false);
    if (!compiled.ok) expect(compiled.issues.map((i) => i.index)).toEqual([1, 2, 3]);
  });

  it.each([
    ['10.0.0.0/8', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    ['127.0.0.2', { address: '127.0.0.2', prefix: 32, family: 'ipv4' }],
    ['fd00::/8', { address: 'fd00::', prefix: 8, family: 'ipv6' }],
  ])('parses %j', (text, cidr) => expect(parseCidr(text)).toEqual(cidr));

  it.each(['', '10.0.0.0/', '10.0.0.0/-1', 'a.test/8', '::/1e2'])('refuses %j', (text) => {
    expect(parseCidr(text)).toBeNull();
  });
});
