// PAC builtins: every pac-resolver default is overridden by a synchronous function of ours; semantics
// follow the Netscape PAC spec examples and Chromium; name lookups go to the port and nowhere else.
import { readFileSync } from 'node:fs';
import { sandbox as pacResolverSandbox } from 'pac-resolver';
import { describe, expect, it, vi } from 'vitest';
import { PAC_BUILTIN_NAMES, createPacBuiltins, type PacHostPort } from '../../../src/route/pac-builtins.js';

const KNOWN: Readonly<Record<string, readonly string[]>> = {
  'intranet.corp': ['10.1.2.3'],
  'dual.corp': ['2001:db8::7', '10.9.8.7'],
  'v6only.corp': ['2001:db8::9'],
};
/** Wednesday 12 June 2024, 14:30:15 UTC. */
const NOW = new Date(Date.UTC(2024, 5, 12, 14, 30, 15));

function portWith(overrides: Partial<PacHostPort> = {}): PacHostPort & { readonly asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    lookupSync: (host) => {
      asked.push(host);
      return KNOWN[host] ?? null;
    },
    myIpAddress: () => '192.0.2.10',
    now: () => NOW,
    ...overrides,
  };
}
const b = createPacBuiltins(portWith());

describe('the builtin set', () => {
  it('overrides every builtin in pac-resolver’s sandbox (no default DNS or 8.8.8.8 dial survives)', () => {
    const ours = Object.keys(createPacBuiltins(portWith()));
    expect(Object.keys(pacResolverSandbox).filter((name) => !ours.includes(name))).toEqual([]);
    for (const name of Object.keys(pacResolverSandbox)) {
      expect(ours).toContain(name);
      expect(b[name as keyof typeof b]).not.toBe(pacResolverSandbox[name as keyof typeof pacResolverSandbox]);
    }
  });

  it('includes the Microsoft IPv6 extensions and nothing unlisted', () => {
    expect(Object.keys(b).sort()).toEqual([...PAC_BUILTIN_NAMES].sort());
    for (const name of ['dnsResolveEx', 'isResolvableEx', 'myIpAddressEx', 'isInNetEx', 'sortIpAddressList', 'getClientVersion']) {
      expect(Object.keys(b)).toContain(name);
    }
  });

  it('is synchronous, so degenerator inserts no awaits (pac-resolver’s isAsyncFunction is false for all)', () => {
    for (const fn of Object.values(b)) {
      expect(fn.constructor.name).toBe('Function');
      expect(String(fn)).not.toContain('__awaiter(');
      expect((fn as { async?: unknown }).async).toBeUndefined();
      expect(fn('intranet.corp', '10.0.0.0', '255.0.0.0')).not.toBeInstanceOf(Promise);
    }
  });

  it('imports nothing that can do I/O (only node:net for isIPv6)', () => {
    const source = readFileSync(new URL('../../../src/route/pac-builtins.ts', import.meta.url), 'utf8');
    expect([...source.matchAll(/from '([^']+)'/g)].map((m) => m[1])).toEqual(['node:net']);
  });
});

describe('name lookups (the port is the only source)', () => {
  it('dnsResolve answers the first IPv4 address the port knows, or null', () => {
    const port = portWith();
    const own = createPacBuiltins(port);
    expect(own.dnsResolve('intranet.corp')).toBe('10.1.2.3');
    expect(own.dnsResolve('INTRANET.Corp')).toBe('10.1.2.3');
    expect(own.dnsResolve('dual.corp')).toBe('10.9.8.7');
    expect(own.dnsResolve('v6only.corp')).toBeNull();
    expect(own.dnsResolve('localhost')).toBeNull(); // the machine would resolve it; the port does not
    expect(own.dnsResolve('unknown.example')).toBeNull();
    expect(port.asked).toEqual(['intranet.corp', 'intranet.corp', 'dual.corp', 'v6only.corp', 'localhost', 'unknown.example']);
  });

  it('dnsResolve answers an IPv4 literal itself without asking the port, and null for nonsense', () => {
    const port = portWith();
    const own = createPacBuiltins(port);
    expect(own.dnsResolve('192.0.2.1')).toBe('192.0.2.1');
    for (const nonsense of [42, null, undefined, {}, '', 'x'.repeat(300)]) expect(own.dnsResolve(nonsense)).toBeNull();
    expect(port.asked).toEqual([]);
  });

  it('isResolvable, dnsResolveEx and isResolvableEx see every family', () => {
    expect([b.isResolvable('intranet.corp'), b.isResolvable('v6only.corp'), b.isResolvable('unknown.example'), b.isResolvable('::1')]).toEqual([true, true, false, true]);
    expect(b.dnsResolveEx('dual.corp')).toBe('2001:db8::7;10.9.8.7');
    expect(b.dnsResolveEx('unknown.example')).toBe('');
    expect(b.isResolvableEx('v6only.corp')).toBe(true);
  });

  it('turns a port that throws into "not resolvable", never into a script exception', () => {
    const own = createPacBuiltins(portWith({ lookupSync: () => { throw new Error('boom'); } }));
    expect(own.dnsResolve('intranet.corp')).toBeNull();
    expect(own.isResolvable('intranet.corp')).toBe(false);
    expect(own.isInNet('intranet.corp', '10.0.0.0', '255.0.0.0')).toBe(false);
  });
});

describe('shExpMatch: * and ? only, anchored, everything else literal', () => {
  it.each([
    ['http://home.netscape.com/people/ari/index.html', '*/ari/*', true], // Netscape spec example
    ['http://home.netscape.com/people/montulli/index.html', '*/ari/*', false], // Netscape spec example
    ['10.1.2.3', '10.*', true],
    ['110.1.2.3', '10.*', false],
    ['a.b.c', 'a?b?c', true],
    ['axbxc', 'a.b.c', false],
    ['a[b]c', 'a[b]c', true],
    ['abc', 'a[b]c', false],
    ['a+b', 'a+b', true],
    ['aab', 'a+b', false],
    ['(x)|$^\\', '(x)|$^\\', true],
    ['abc', 'ab', false],
    ['xabc', 'abc', false],
    ['abc', '*c', true],
    ['abc', '**', true],
    ['', '*', true],
    ['', '', true],
    ['a', '', false],
    ['a\nb', 'a?b', true],
    ['aaa', '*a*a*a*a', false],
    ['www.example.com', '*.example.com', true],
    ['example.com', '*.example.com', false],
  ])('shExpMatch(%j, %j) is %s', (text, pattern, expected) => {
    expect(b.shExpMatch(text, pattern)).toBe(expected);
  });

  it('is false for non-strings', () => {
    expect([b.shExpMatch(null, '*'), b.shExpMatch('x', 42), b.shExpMatch(undefined, undefined)]).toEqual([false, false, false]);
  });

  it('gives up quickly on a pathological pattern instead of backtracking for seconds', () => {
    const start = performance.now();
    expect(b.shExpMatch('a'.repeat(65_536), `*${'a'.repeat(1000)}b`)).toBe(false);
    expect(performance.now() - start).toBeLessThan(200);
  });
});

describe('isInNet(host, pattern, mask) — IPv4, host resolved through the port when not a literal', () => {
  it.each([
    ['10.1.2.3', '10.0.0.0', '255.0.0.0', true],
    ['11.1.2.3', '10.0.0.0', '255.0.0.0', false],
    ['198.95.249.79', '198.95.249.79', '255.255.255.255', true], // Netscape spec example
    ['198.95.6.8', '198.95.0.0', '255.255.0.0', true], // Netscape spec example
    ['198.94.6.8', '198.95.0.0', '255.255.0.0', false],
    ['172.31.5.4', '172.16.0.0', '255.240.0.0', true],
    ['172.32.0.1', '172.16.0.0', '255.240.0.0', false],
    ['255.255.255.7', '255.255.255.0', '255.255.255.0', true],
    ['1.2.3.4', '0.0.0.0', '0.0.0.0', true],
    ['intranet.corp', '10.0.0.0', '255.0.0.0', true],
    ['dual.corp', '10.9.0.0', '255.255.0.0', true],
    ['v6only.corp', '0.0.0.0', '0.0.0.0', false],
    ['unknown.example', '0.0.0.0', '0.0.0.0', false],
    ['010.1.2.3', '10.0.0.0', '255.0.0.0', false], // leading zeros are not a literal (inet_aton would say octal)
    ['10.1.2.3', '10.0.0', '255.0.0.0', false],
    ['10.1.2.3', '10.0.0.0', 'ff.0.0.0', false],
    ['10.1.2.3', '10.0.0.256', '255.0.0.0', false],
  ])('isInNet(%j, %j, %j) is %s', (host, pattern, mask, expected) => {
    expect(b.isInNet(host, pattern, mask)).toBe(expected);
  });

  it('is false for non-strings', () => {
    expect([b.isInNet(null, '10.0.0.0', '255.0.0.0'), b.isInNet({}, '10.0.0.0', '255.0.0.0'), b.isInNet('10.1.2.3', 10, '255.0.0.0')]).toEqual([false, false, false]);
  });
});

describe('Microsoft IPv6 extensions', () => {
  it.each([
    ['198.95.249.79', '198.95.249.79/32', true],
    ['198.95.6.8', '198.95.0.0/16', true],
    ['198.94.6.8', '198.95.0.0/16', false],
    ['3ffe:8311:ffff:abcd:1234:dead:beef:101', '3ffe:8311:ffff::/48', true],
    ['3ffe:8311:fffe::1', '3ffe:8311:ffff::/48', false],
    ['2001:db8::1', '2001:db8::/33', true],
    ['::ffff:10.1.2.3', '10.0.0.0/8', true],
    ['10.1.2.3', '::ffff:10.0.0.0/104', true],
    ['1.2.3.4', '0.0.0.0/0', true],
    ['10.1.2.3', '10.0.0.0/33', false],
    ['10.1.2.3', '10.0.0.0', false],
    ['10.1.2.3', '10.0.0.0/8/1', false],
    ['intranet.corp', '10.0.0.0/8', false], // a name is not an address here; nothing is resolved
    ['fe80::1%eth0', 'fe80::/10', false],
  ])('isInNetEx(%j, %j) is %s', (address, prefix, expected) => {
    expect(b.isInNetEx(address, prefix)).toBe(expected);
  });

  it('sortIpAddressList puts IPv6 first, then ascending; false if any entry is not an address', () => {
    expect(b.sortIpAddressList('10.2.0.1;10.1.0.1; 2001:db8::2 ;2001:db8::1')).toBe('2001:db8::1;2001:db8::2;10.1.0.1;10.2.0.1');
    expect(b.sortIpAddressList('::ffff:1.2.3.4;::1')).toBe('::1;::ffff:1.2.3.4');
    expect([b.sortIpAddressList('x;10.0.0.1'), b.sortIpAddressList(''), b.sortIpAddressList(42)]).toEqual([false, false, false]);
  });

  it('myIpAddress and myIpAddressEx are the port’s address; getClientVersion is 1.0', () => {
    expect([b.myIpAddress(), b.myIpAddressEx(), b.getClientVersion()]).toEqual(['192.0.2.10', '192.0.2.10', '1.0']);
    expect(createPacBuiltins(portWith({ myIpAddress: () => { throw new Error('x'); } })).myIpAddress()).toBe('127.0.0.1');
  });
});

describe('host name helpers (Netscape spec examples)', () => {
  it('dnsDomainIs', () => {
    expect([b.dnsDomainIs('www.netscape.com', '.netscape.com'), b.dnsDomainIs('WWW.Netscape.COM', '.netscape.com')]).toEqual([true, true]);
    expect([b.dnsDomainIs('www', '.netscape.com'), b.dnsDomainIs('www.mcom.com', '.netscape.com'), b.dnsDomainIs(1, '.com')]).toEqual([false, false, false]);
  });

  it('localHostOrDomainIs', () => {
    expect(b.localHostOrDomainIs('www.netscape.com', 'www.netscape.com')).toBe(true);
    expect(b.localHostOrDomainIs('www', 'www.netscape.com')).toBe(true);
    expect(b.localHostOrDomainIs('www.mcom.com', 'www.netscape.com')).toBe(false);
    expect(b.localHostOrDomainIs('home.netscape.com', 'www.netscape.com')).toBe(false);
    expect(b.localHostOrDomainIs('www.netscape', 'www.netscape.com')).toBe(false);
  });

  it('isPlainHostName and dnsDomainLevels', () => {
    expect([b.isPlainHostName('www'), b.isPlainHostName('www.netscape.com'), b.isPlainHostName(7)]).toEqual([true, false, false]);
    expect([b.dnsDomainLevels('www'), b.dnsDomainLevels('www.netscape.com'), b.dnsDomainLevels(null)]).toEqual([0, 2, 0]);
  });

  it('alert does nothing and prints nothing', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    expect(b.alert('\u001b[2J pwned')).toBeUndefined();
    expect(log).not.toHaveBeenCalled();
    log.mockRestore();
  });
});

describe('time builtins, at Wednesday 2024-06-12 14:30:15 UTC', () => {
  it.each([
    [[14, 'GMT'], true],
    [['14', 'GMT'], true],
    [[13, 'GMT'], false],
    [[14, 15, 'GMT'], true],
    [[13, 14, 'GMT'], true], // Chromium: (h1, h2) runs to h2:59:59
    [[12, 13, 'GMT'], false],
    [[22, 15, 'GMT'], true], // wraps past midnight
    [[15, 13, 'GMT'], false],
    [[14, 30, 14, 30, 'GMT'], true], // (h1, m1, h2, m2) runs to m2:59
    [[14, 31, 15, 0, 'GMT'], false],
    [[14, 30, 15, 14, 30, 15, 'GMT'], true],
    [[14, 30, 16, 14, 31, 0, 'GMT'], false],
    [[24, 'GMT'], false],
    [[14, 60, 15, 0, 'GMT'], false],
    [[14.5, 'GMT'], false],
    [[1, 2, 3, 'GMT'], false],
    [['GMT'], false],
    [[], false],
  ])('timeRange(%j) is %s', (args, expected) => {
    expect(b.timeRange(...args)).toBe(expected);
  });

  it.each([
    [[12, 'GMT'], true],
    [[13, 'GMT'], false],
    [['JUN', 'GMT'], true],
    [['JUL', 'GMT'], false],
    [[2024, 'GMT'], true],
    [[2023, 'GMT'], false],
    [[10, 15, 'GMT'], true],
    [[13, 20, 'GMT'], false],
    [[28, 13, 'GMT'], true], // day ranges wrap
    [['MAY', 'JUL', 'GMT'], true],
    [['NOV', 'JUL', 'GMT'], true], // month ranges wrap
    [['JUL', 'NOV', 'GMT'], false],
    [[2020, 2025, 'GMT'], true],
    [[2025, 2020, 'GMT'], false], // year ranges never wrap
    [[1, 'JUN', 12, 'JUN', 'GMT'], true],
    [[13, 'JUN', 1, 'JUL', 'GMT'], false],
    [[1, 'DEC', 15, 'JUN', 'GMT'], true],
    [['JUN', 2024, 'DEC', 2024, 'GMT'], true],
    [['JUL', 2024, 'DEC', 2024, 'GMT'], false],
    [[12, 'JUN', 2024, 12, 'JUN', 2024, 'GMT'], true],
    [[13, 'JUN', 2024, 31, 'DEC', 2024, 'GMT'], false],
    [[1, 'JUN', 'GMT'], false], // two different kinds are not a range
    [['jun', 'GMT'], false],
    [[0, 'GMT'], false],
    [[], false],
    [[1, 2, 3, 4, 5, 6, 7], false],
  ])('dateRange(%j) is %s', (args, expected) => {
    expect(b.dateRange(...args)).toBe(expected);
  });

  it.each([
    [['WED', 'GMT'], true],
    [['TUE', 'GMT'], false],
    [['MON', 'FRI', 'GMT'], true],
    [['THU', 'SAT', 'GMT'], false],
    [['FRI', 'WED', 'GMT'], true], // wraps over the weekend
    [['THU', 'TUE', 'GMT'], false],
    [['wed', 'GMT'], false],
    [['MON', 'TUE', 'WED', 'GMT'], false],
    [[], false],
  ])('weekdayRange(%j) is %s', (args, expected) => {
    expect(b.weekdayRange(...args)).toBe(expected);
  });

  it('uses local time without "GMT"', () => {
    const weekdays = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
    const months = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
    expect(b.timeRange(NOW.getHours())).toBe(true);
    expect(b.weekdayRange(weekdays[NOW.getDay()])).toBe(true);
    expect(b.dateRange(NOW.getDate(), months[NOW.getMonth()], NOW.getFullYear(), NOW.getDate(), months[NOW.getMonth()], NOW.getFullYear())).toBe(true);
  });

  it('is false when the port’s clock is broken', () => {
    const broken = createPacBuiltins(portWith({ now: () => new Date(Number.NaN) }));
    expect([broken.timeRange(14, 'GMT'), broken.dateRange(2024), broken.weekdayRange('WED')]).toEqual([false, false, false]);
  });
});
