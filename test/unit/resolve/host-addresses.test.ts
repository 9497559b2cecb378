// The `host` class (security review 2026-12, finding 8; issue 13, finding 1): every address of the
// machine's own interfaces is `host` on every port, in every spelling that classifies to it (IPv4-mapped
// RFC 4291 §2.5.5.2, compatible §2.5.5.1, NAT64 RFC 6052, 6to4 RFC 3056, Teredo RFC 4380), refused
// unless a grant names `host`. Loopback stays `loopback`; `self` beats `host`; `host` beats the range
// class, so a grant naming `private` (or a CIDR) does not reach a private interface address. The
// interface list is injected, so the table does not depend on the machine the tests run on.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AddressClass } from '../../../src/core/index.js';
import { checkAddress, compileAddressPolicy, type AddressPolicy } from '../../../src/resolve/address-policy.js';
import { HOST_ADDRESS_REFRESH_MS, HostAddresses, type InterfaceList } from '../../../src/resolve/host-addresses.js';
import { SelfAddresses } from '../../../src/resolve/self-addresses.js';

/** The review's host: a public IPv4 and a global IPv6 address on eth0, a private one on eth1, lo. */
const INTERFACES: InterfaceList = {
  lo: [{ address: '127.0.0.1' }, { address: '::1' }],
  eth0: [{ address: '11.22.33.44' }, { address: '2a01:4f8:1:2::44' }, { address: 'fe80::1c:2ff:fe00:44' }],
  eth1: [{ address: '10.1.2.3' }],
};

const host = new HostAddresses(() => INTERFACES);
const self = new SelfAddresses(['127.0.0.1:3180'], host);

function policy(classes: readonly string[] = [], cidrs: readonly string[] = []): AddressPolicy {
  const compiled = compileAddressPolicy(classes, cidrs, self);
  if (!compiled.ok) throw new Error('test policy did not compile');
  return compiled.value;
}

const check = (p: AddressPolicy, address: string, port = 443): { class: AddressClass; allowed: boolean } => {
  const { class: cls, allowed } = checkAddress(p, { address, family: address.includes(':') ? 6 : 4 }, port);
  return { class: cls, allowed };
};

describe('finding 8: the host’s own addresses are class host, in every spelling', () => {
  it.each([
    ['11.22.33.44', 'the public IPv4 address of eth0'],
    ['2a01:4f8:1:2::44', 'the global IPv6 address of eth0'],
    ['2A01:04F8:0001:0002:0000:0000:0000:0044', 'the same, upper case and uncompressed'],
    ['::ffff:11.22.33.44', 'IPv4-mapped (RFC 4291 §2.5.5.2)'],
    ['::ffff:b16:212c', 'IPv4-mapped in hex'],
    ['::11.22.33.44', 'IPv4-compatible (RFC 4291 §2.5.5.1)'],
    ['64:ff9b::b16:212c', 'NAT64 well-known prefix (RFC 6052)'],
    ['64:ff9b::11.22.33.44', 'NAT64, dotted'],
    ['2002:b16:212c::', '6to4 (RFC 3056)'],
    ['2002:b16:212c:7::1', '6to4, another host of the same site'],
    ['2001:0:4136:e378:8000:63bf:f4e9:ded3', 'Teredo client (RFC 4380, obfuscated)'],
    ['10.1.2.3', 'the private address of eth1'],
    ['fe80::1c:2ff:fe00:44', 'the link-local address of eth0'],
  ])('%s (%s) is host and refused by a public-only grant', (address) => {
    expect(check(policy(), address)).toEqual({ class: 'host', allowed: false });
  });

  it('is host on every port, not only on Sluice’s', () => {
    for (const port of [1, 22, 80, 443, 5432, 21590, 65535]) expect(check(policy(), '11.22.33.44', port)).toEqual({ class: 'host', allowed: false });
  });

  it('a grant naming host reaches it, in every spelling', () => {
    for (const address of ['11.22.33.44', '::ffff:11.22.33.44', '64:ff9b::b16:212c', '2a01:4f8:1:2::44', '10.1.2.3']) {
      expect(check(policy(['host']), address), address).toEqual({ class: 'host', allowed: true });
    }
  });

  it('host wins over the range class: private, link_local and CIDRs do not reach a host address', () => {
    const ranges = policy(['private', 'link_local', 'cgnat', 'reserved', 'loopback'], ['0.0.0.0/0', '::/0', '10.0.0.0/8', '11.22.33.44/32']);
    for (const address of ['10.1.2.3', 'fe80::1c:2ff:fe00:44', '11.22.33.44', '2a01:4f8:1:2::44']) {
      expect(check(ranges, address), address).toEqual({ class: 'host', allowed: false });
    }
    // The same grant still reaches other private addresses: only the host's own are carved out.
    expect(check(ranges, '10.1.2.4')).toEqual({ class: 'private', allowed: true });
  });

  it('loopback interface addresses stay loopback (and are still refused without loopback)', () => {
    expect(check(policy(['host']), '127.0.0.1')).toEqual({ class: 'loopback', allowed: false });
    expect(check(policy(['host']), '::1')).toEqual({ class: 'loopback', allowed: false });
    expect(check(policy(['loopback']), '127.0.0.1')).toEqual({ class: 'loopback', allowed: true });
  });

  it('self beats host: a host address on Sluice’s own port is self, even for a grant naming host', () => {
    expect(check(policy(['host']), '11.22.33.44', 3180)).toEqual({ class: 'self', allowed: false });
    expect(check(policy(['host']), '::ffff:11.22.33.44', 3180)).toEqual({ class: 'self', allowed: false });
    expect(check(policy(['host']), '2a01:4f8:1:2::44', 3180)).toEqual({ class: 'self', allowed: false });
  });

  it('addresses that are not the host’s keep their range class', () => {
    expect(check(policy(), '11.22.33.45')).toEqual({ class: 'public', allowed: true });
    expect(check(policy(), '2a01:4f8:1:2::45')).toEqual({ class: 'public', allowed: true });
    expect(check(policy(), '10.1.2.4')).toEqual({ class: 'private', allowed: false });
  });

  it('reads interface addresses in any spelling the OS reports', () => {
    const odd = new HostAddresses(() => ({ eth0: [{ address: '2A01:4F8:0:0::9' }, { address: '::ffff:11.22.33.46' }], eth1: undefined }));
    expect(odd.has('2a01:4f8::9')).toBe(true);
    expect(odd.has('11.22.33.46')).toBe(true);
    expect(odd.has('127.0.0.1')).toBe(false);
  });
});

describe('finding 8: the interface list is read again while Sluice runs', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('refreshes every HOST_ADDRESS_REFRESH_MS by default (1 s, as docs/configuration.md says)', () => {
    expect(HOST_ADDRESS_REFRESH_MS).toBe(1_000);
    expect(new HostAddresses(() => ({})).refreshMs).toBe(HOST_ADDRESS_REFRESH_MS);
  });

  it('an interface address added later becomes host within the interval, and stops being host once removed', () => {
    vi.useFakeTimers();
    const list: Record<string, { address: string }[]> = { eth0: [{ address: '11.22.33.44' }] };
    const live = new HostAddresses(() => list, 200);
    const livePolicy = compileAddressPolicy([], [], new SelfAddresses([], live));
    if (!livePolicy.ok) throw new Error('policy');
    live.start();
    list['eth1'] = [{ address: '2a01:4f8:1:2::99' }];
    expect(check(livePolicy.value, '2a01:4f8:1:2::99').class).toBe('public');
    vi.advanceTimersByTime(199);
    expect(check(livePolicy.value, '2a01:4f8:1:2::99').class).toBe('public');
    vi.advanceTimersByTime(1);
    expect(check(livePolicy.value, '2a01:4f8:1:2::99')).toEqual({ class: 'host', allowed: false });
    delete list['eth1'];
    vi.advanceTimersByTime(200);
    expect(check(livePolicy.value, '2a01:4f8:1:2::99').class).toBe('public');
    live.stop();
    list['eth2'] = [{ address: '11.22.33.99' }];
    vi.advanceTimersByTime(1_000);
    expect(live.has('11.22.33.99')).toBe(false);
  });

  it('the refresh timer never keeps the process alive, and start() twice makes one timer', () => {
    const spy = vi.spyOn(globalThis, 'setInterval');
    const live = new HostAddresses(() => ({}), 50);
    live.start();
    live.start();
    expect(spy).toHaveBeenCalledTimes(1);
    const timer = spy.mock.results[0]?.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    live.stop();
    spy.mockRestore();
  });

  it('a failed read keeps the last set: an address is never dropped by an error', () => {
    let fail = false;
    const live = new HostAddresses(() => {
      if (fail) throw new Error('getifaddrs failed');
      return { eth0: [{ address: '11.22.33.44' }] };
    });
    fail = true;
    live.refresh();
    expect(live.has('11.22.33.44')).toBe(true);
  });
});
