// The `self` class: which address and port pairs reach one of Sluice's own listeners (proxy loops,
// SSRF into the admin API; RFC 9209 proxy_loop_detected). Closes the gaps the December 2026 mutation
// review found in resolve/self-addresses.ts: only 127.0.0.1 listeners were tested, and 127.0.0.1 is an
// interface address too, so the wildcard, `localhost`, other-127, [::1] and interface-address branches
// hid behind each other. Here the interface list is injected (empty, or one LAN address), so each
// branch alone decides its case.
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import type { AddressClass } from '../../../src/core/index.js';
import { HostAddresses } from '../../../src/resolve/host-addresses.js';
import { SelfAddresses } from '../../../src/resolve/self-addresses.js';

/** A host whose only interface addresses are loopback, so no address is self merely for being local. */
const LOOPBACK_ONLY = new HostAddresses(() => ({ lo: [{ address: '127.0.0.1' }, { address: '::1' }] }));
/** A host with one LAN address, as a container or workstation has. */
const WITH_LAN = new HostAddresses(() => ({ lo: [{ address: '127.0.0.1' }], eth0: [{ address: '192.168.7.20' }, { address: 'fd00::20' }] }));

describe('SelfAddresses: a listener on a wildcard, a name or a loopback address is every local address on its port', () => {
  it.each<[string, string, AddressClass, boolean]>([
    // Mutation review, ids 1141–1159: 0.0.0.0, [::] and localhost listeners.
    ['0.0.0.0:3180', '127.0.0.1', 'loopback', true],
    ['0.0.0.0:3180', '0.0.0.0', 'unspecified', true],
    ['0.0.0.0:3180', '::1', 'loopback', true],
    ['[::]:3180', '::1', 'loopback', true],
    ['[::]:3180', '127.0.0.1', 'loopback', true],
    ['[::]:3180', '::', 'unspecified', true],
    ['localhost:3180', '127.0.0.5', 'loopback', true],
    ['localhost:3180', '::1', 'loopback', true],
    ['sluice.internal:3180', '127.0.0.1', 'loopback', true],
    // Ids 1163–1169: another 127 address and [::1], which are not interface addresses.
    ['127.0.0.2:3180', '127.0.0.1', 'loopback', true],
    ['127.0.0.2:3180', '127.0.0.2', 'loopback', true],
    ['[::1]:3180', '127.0.0.1', 'loopback', true],
    ['[::1]:3180', '::1', 'loopback', true],
    ['[::ffff:127.0.0.1]:3180', '127.0.0.1', 'loopback', true],
    // Only that port.
    ['0.0.0.0:3180', '127.0.0.1', 'loopback', false],
    ['localhost:3180', '127.0.0.1', 'loopback', false],
  ])('a listener on %s: %s (%s) is self: %s', (listen, address, cls, isSelf) => {
    const port = isSelf ? 3180 : 3181;
    expect(new SelfAddresses([listen], LOOPBACK_ONLY).has(address, cls, port)).toBe(isSelf);
  });

  it('a public address is not self on a wildcard listener’s port unless it is the host’s', () => {
    expect(new SelfAddresses(['0.0.0.0:3180'], LOOPBACK_ONLY).has('93.184.216.34', 'public', 3180)).toBe(false);
    expect(new SelfAddresses(['[::]:3180'], LOOPBACK_ONLY).has('2606:4700::1111', 'public', 3180)).toBe(false);
  });
});

describe('SelfAddresses: the host’s interface addresses (ids 1116, 1117, 1119)', () => {
  it.each(['0.0.0.0:3180', '[::]:3180', '127.0.0.1:3180', 'localhost:3180', '192.168.7.20:3180'])('a listener on %s makes the host’s LAN addresses self on its port', (listen) => {
    const self = new SelfAddresses([listen], WITH_LAN);
    expect(self.has('192.168.7.20', 'private', 3180)).toBe(true);
    expect(self.has('fd00::20', 'private', 3180)).toBe(true);
    expect(self.has('192.168.7.21', 'private', 3180)).toBe(false);
    expect(self.has('192.168.7.20', 'private', 3181)).toBe(false);
  });

  it('classOf: self on the listener’s port, host on every other port, the range class for other addresses', () => {
    const self = new SelfAddresses(['0.0.0.0:3180'], WITH_LAN);
    expect(self.classOf('192.168.7.20', 'private', 3180)).toBe('self');
    expect(self.classOf('192.168.7.20', 'private', 22)).toBe('host');
    expect(self.classOf('127.0.0.1', 'loopback', 22)).toBe('loopback');
    expect(self.classOf('192.168.7.21', 'private', 3180)).toBe('private');
  });

  it('a listener added after the interface list changed still sees the new address (the set is live)', () => {
    const list: Record<string, { address: string }[]> = { lo: [{ address: '127.0.0.1' }] };
    const host = new HostAddresses(() => list);
    const self = new SelfAddresses(['0.0.0.0:3180'], host);
    expect(self.has('192.168.9.9', 'private', 3180)).toBe(false);
    list['eth0'] = [{ address: '192.168.9.9' }];
    host.refresh();
    expect(self.has('192.168.9.9', 'private', 3180)).toBe(true);
  });

  // As the review asked: this machine's own non-internal IPv4 address, read by the default constructor.
  const lan = Object.values(os.networkInterfaces()).flatMap((infos) => infos ?? []).find((i) => !i.internal && i.family === 'IPv4');
  it.skipIf(lan === undefined)('this machine’s non-internal IPv4 address is self on a 0.0.0.0 listener’s port (default interface list)', () => {
    const address = lan?.address ?? '';
    const self = new SelfAddresses(['0.0.0.0:3180']);
    expect(self.has(address, 'private', 3180)).toBe(true);
    expect(self.classOf(address, 'private', 443)).toBe('host');
  });
});

describe('SelfAddresses: a listener on any other address is self only for that address and port', () => {
  it('matches an upper-case, bracketed IPv6 listener in the lower-case form classifyAddress gives (ids 1126, 1130)', () => {
    const self = new SelfAddresses(['[FD00::5]:9464'], LOOPBACK_ONLY);
    expect(self.has('fd00::5', 'private', 9464)).toBe(true);
    expect(self.has('fd00::6', 'private', 9464)).toBe(false);
    expect(self.has('fd00::5', 'private', 9465)).toBe(false);
    expect(self.has('127.0.0.1', 'loopback', 9464)).toBe(false);
  });

  it('matches an uncompressed IPv6 listener in its compressed form', () => {
    expect(new SelfAddresses(['[2001:0db8:0000:0000:0000:0000:0000:0005]:8443'], LOOPBACK_ONLY).has('2001:db8::5', 'reserved', 8443)).toBe(true);
  });

  it('two listeners on one port keep both addresses', () => {
    const self = new SelfAddresses(['192.0.2.10:9464', '192.0.2.11:9464'], LOOPBACK_ONLY);
    expect(self.has('192.0.2.10', 'reserved', 9464)).toBe(true);
    expect(self.has('192.0.2.11', 'reserved', 9464)).toBe(true);
    expect(self.has('192.0.2.12', 'reserved', 9464)).toBe(false);
  });

  it('ignores unix: listeners and ports that are not listening ports', () => {
    const self = new SelfAddresses(['unix:/tmp/x.sock', '0.0.0.0:0', '0.0.0.0:abc'], LOOPBACK_ONLY);
    expect(self.has('127.0.0.1', 'loopback', 0)).toBe(false);
    expect(self.classOf('127.0.0.1', 'loopback', 0)).toBe('loopback');
  });
});
