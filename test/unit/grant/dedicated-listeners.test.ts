// Dedicated listeners: every connection on one acts for its grant without a token, so one must never be
// opened where the network can reach it (review 2026-12 finding 12), even from a ledger written before
// the admin API refused such addresses; one grant holds at most one; and the real bound address becomes
// `self`, so no grant can dial Sluice's own listener (a proxy loop that would act for another grant).
// The listeners themselves are a fake ListenerPort that records what it is asked to open and stop.
import { afterEach, describe, expect, it } from 'vitest';
import { DedicatedListeners, type GrantListener, type ListenerPort } from '../../../src/grant/index.js';
import { HostAddresses, SelfAddresses } from '../../../src/resolve/index.js';

interface FakePort extends ListenerPort<GrantListener> {
  readonly opened: { grantId: string; listen: string }[];
  readonly stopped: { addresses: string[]; drainMs: number }[];
  /** The address a TCP listen on port 0 binds next. */
  nextPort: number;
  /** When set, open() rejects with this message. */
  failWith: string | null;
}

function fakePort(): FakePort {
  const port: FakePort = {
    opened: [],
    stopped: [],
    nextPort: 41_000,
    failWith: null,
    open: (grantId, listen) => {
      port.opened.push({ grantId, listen });
      if (port.failWith !== null) return Promise.reject(new Error(port.failWith));
      // A listen on port 0 binds an ephemeral port: the real address is what the port reports.
      const address = listen.endsWith(':0') ? `${listen.slice(0, -2)}:${port.nextPort++}` : listen;
      return Promise.resolve({ address });
    },
    stop: (listeners, drainMs) => {
      port.stopped.push({ addresses: listeners.map((l) => l.address), drainMs });
      return Promise.resolve();
    },
  };
  return port;
}

const NO_INTERFACES = new HostAddresses(() => ({}));

let setup: { port: FakePort; self: SelfAddresses; dedicated: DedicatedListeners } | null = null;
afterEach(async () => {
  await setup?.dedicated.closeAll(0);
  setup = null;
});

function build(): { port: FakePort; self: SelfAddresses; dedicated: DedicatedListeners } {
  const port = fakePort();
  const self = new SelfAddresses([], NO_INTERFACES);
  setup = { port, self, dedicated: new DedicatedListeners(port, self) };
  return setup;
}

describe('DedicatedListeners.open: only where this host alone can connect', () => {
  it.each([
    ['the wildcard', '0.0.0.0:9000'],
    ['the IPv6 wildcard', '[::]:9000'],
    ['a name, even localhost', 'localhost:9000'],
    ['a private address', '10.0.0.5:9000'],
    ['a LAN address', '192.168.1.20:9000'],
    ['a public address', '93.184.216.34:9000'],
    ['an IPv4-mapped loopback', '[::ffff:127.0.0.1]:9000'],
    ['a name that spells a loopback address', '127.0.0.1.nip.io:9000'],
  ])('refuses %s (%s): throws, and the port is never asked', async (_what, listen) => {
    const { port, dedicated } = build();
    await expect(dedicated.open('g', listen)).rejects.toThrow(/loopback/);
    expect(port.opened).toEqual([]);
    expect(dedicated.all()).toEqual([]);
    expect(dedicated.addressOf('g')).toBeNull();
  });

  it.each([['127.0.0.1:9000'], ['127.8.9.10:9000'], ['[::1]:9000'], ['unix:/run/sluice/g.sock']])('opens %s', async (listen) => {
    const { port, dedicated } = build();
    await expect(dedicated.open('g', listen)).resolves.toBe(listen);
    expect(port.opened).toEqual([{ grantId: 'g', listen }]);
    expect(dedicated.addressOf('g')).toBe(listen);
  });

  it('returns and records the real bound address of a port-0 listen', async () => {
    const { dedicated } = build();
    await expect(dedicated.open('g', '127.0.0.1:0')).resolves.toBe('127.0.0.1:41000');
    expect(dedicated.addressOf('g')).toBe('127.0.0.1:41000');
  });

  it('records nothing when the port fails to open', async () => {
    const { port, dedicated, self } = build();
    port.failWith = 'EADDRINUSE';
    await expect(dedicated.open('g', '127.0.0.1:9000')).rejects.toThrow('EADDRINUSE');
    expect(dedicated.addressOf('g')).toBeNull();
    expect(dedicated.isInUse('127.0.0.1:9000')).toBe(false);
    expect(self.has('127.0.0.1', 'loopback', 9000)).toBe(false);
  });
});

describe('DedicatedListeners: one listener per grant, and Sluice never dials its own', () => {
  it('opening twice for one grant stops the first listener before opening the second', async () => {
    const { port, dedicated } = build();
    await dedicated.open('g', '127.0.0.1:9000');
    await dedicated.open('g', '127.0.0.1:9001');
    expect(port.stopped).toEqual([{ addresses: ['127.0.0.1:9000'], drainMs: 0 }]);
    expect(port.opened.map((o) => o.listen)).toEqual(['127.0.0.1:9000', '127.0.0.1:9001']);
    expect(dedicated.all().map((l) => l.address)).toEqual(['127.0.0.1:9001']);
    expect(dedicated.isInUse('127.0.0.1:9000')).toBe(false);
  });

  it('adds the real bound address to SelfAddresses: every loopback spelling of that port is self', async () => {
    const { dedicated, self } = build();
    expect(self.has('127.0.0.1', 'loopback', 41_000)).toBe(false);
    await dedicated.open('g', '127.0.0.1:0');
    expect(self.has('127.0.0.1', 'loopback', 41_000)).toBe(true);
    expect(self.has('127.0.0.2', 'loopback', 41_000)).toBe(true);
    expect(self.has('::1', 'loopback', 41_000)).toBe(true);
    expect(self.classOf('127.0.0.1', 'loopback', 41_000)).toBe('self');
    // The requested port 0 is not a listener: only the real one is self.
    expect(self.has('127.0.0.1', 'loopback', 0)).toBe(false);
    expect(self.has('127.0.0.1', 'loopback', 41_001)).toBe(false);
  });

  it('isInUse answers for host:port and unix:/path, for any grant, and no longer after close', async () => {
    const { dedicated } = build();
    await dedicated.open('a', '127.0.0.1:0');
    await dedicated.open('b', 'unix:/run/sluice/b.sock');
    expect(dedicated.isInUse('127.0.0.1:41000')).toBe(true);
    expect(dedicated.isInUse('unix:/run/sluice/b.sock')).toBe(true);
    expect(dedicated.isInUse('127.0.0.1:41001')).toBe(false);
    expect(dedicated.isInUse('unix:/run/sluice/a.sock')).toBe(false);
    await dedicated.close('b');
    expect(dedicated.isInUse('unix:/run/sluice/b.sock')).toBe(false);
  });

  it('isInUse matches a unix socket the port reports without its unix: prefix', async () => {
    const port = fakePort();
    const dedicated = new DedicatedListeners({ ...port, open: (grantId, listen) => port.open(grantId, listen).then(() => ({ address: listen.replace(/^unix:/, '') })) }, new SelfAddresses([], NO_INTERFACES));
    await dedicated.open('g', 'unix:/run/sluice/g.sock');
    expect(dedicated.isInUse('unix:/run/sluice/g.sock')).toBe(true);
    await dedicated.closeAll(0);
  });
});

describe('DedicatedListeners.close and closeAll', () => {
  it('close stops that grant’s listener at once (drainMs 0) and no other; an unknown grant stops nothing', async () => {
    const { port, dedicated } = build();
    await dedicated.open('a', '127.0.0.1:9000');
    await dedicated.open('b', '127.0.0.1:9001');
    await dedicated.close('a');
    await dedicated.close('a');
    await dedicated.close('nope');
    expect(port.stopped).toEqual([{ addresses: ['127.0.0.1:9000'], drainMs: 0 }]);
    expect(dedicated.addressOf('a')).toBeNull();
    expect(dedicated.addressOf('b')).toBe('127.0.0.1:9001');
    expect(dedicated.all().map((l) => l.address)).toEqual(['127.0.0.1:9001']);
  });

  it('closeAll stops every listener in one call with the drainMs given, and forgets them', async () => {
    const { port, dedicated } = build();
    await dedicated.open('a', '127.0.0.1:9000');
    await dedicated.open('b', 'unix:/run/sluice/b.sock');
    expect(dedicated.all().map((l) => l.address)).toEqual(['127.0.0.1:9000', 'unix:/run/sluice/b.sock']);
    await dedicated.closeAll(2500);
    expect(port.stopped).toEqual([{ addresses: ['127.0.0.1:9000', 'unix:/run/sluice/b.sock'], drainMs: 2500 }]);
    expect(dedicated.all()).toEqual([]);
    expect(dedicated.isInUse('127.0.0.1:9000')).toBe(false);
  });
});
