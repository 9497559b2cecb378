// Specifies how raw CONNECT authorities and absolute-form targets become the one canonical destination
// policy sees: lowercase, IDNA to punycode, no trailing dot, IP literals normalized, explicit port.
// RFC 9110 §9.3.6 (CONNECT), RFC 9112 §3.2 (request-target forms), RFC 3986 §3.2 (authority), WHATWG URL host parsing.
import { describe, expect, it } from 'vitest';
import { canonicalize, parseAbsoluteTarget, parseConnectTarget, parsePort } from '../../../src/authority/canonical-destination.js';
import { canonicalizeHost } from '../../../src/authority/canonical-host.js';
import { ok } from '../../../src/core/verdict.js';

const refused = (reason: string): unknown => expect.objectContaining({ ok: false, reason });

describe('canonicalize: names', () => {
  it.each([
    ['Example.COM.:443', 'example.com:443'], // case-insensitive (RFC 4343), one root dot dropped
    ['bücher.example:443', 'xn--bcher-kva.example:443'], // IDNA (UTS #46) → punycode (RFC 3492)
    ['ｅｘａｍｐｌｅ.com:443', 'example.com:443'], // full-width letters are mapped by UTS #46
    ['ａ。com:443', 'a.com:443'], // ideographic full stop is a label separator (UTS #46 §4)
    ['a\u00ad.com:443', 'a.com:443'], // soft hyphen is mapped to nothing: policy and dialer both see a.com
    ['faß.de:443', 'xn--fa-hia.de:443'], // nontransitional processing keeps ß (WHATWG)
    ['localhost.:443', 'localhost:443'],
    ['exa_mple.com:443', 'exa_mple.com:443'], // underscore occurs in real names; WHATWG and getaddrinfo agree
    ['a.test:1', 'a.test:1'],
    ['a.test:65535', 'a.test:65535'],
    ['a.test:00443', 'a.test:443'], // RFC 3986 §3.2.3 port = *DIGIT; leading zeros are the same port
  ])('canonicalizes %j to %s', (raw, key) => {
    expect(canonicalize(raw)).toEqual(ok(expect.objectContaining({ key, hostKind: 'name' })));
  });
});

describe('canonicalize: IPv4 in every spelling WHATWG accepts is one dotted quad', () => {
  it.each([
    '127.0.0.1', '0x7f.1', '2130706433', '127.1', '0177.0.0.1', '0x7f000001', '127.0.0.1.', '0x7F.0.0.1', '１２７.０.０.１',
  ])('%j:443 is 127.0.0.1:443', (host) => {
    expect(canonicalize(`${host}:443`)).toEqual(ok({ host: '127.0.0.1', hostKind: 'ipv4', port: 443, key: '127.0.0.1:443' }));
  });

  it.each([
    ['0:443', '0.0.0.0:443'], // a single number is the whole 32-bit address (WHATWG IPv4 parser)
    ['1.2.3:443', '1.2.0.3:443'], // the last part fills the remaining 16 bits
    ['169.254.43518:80', '169.254.169.254:80'], // metadata address spelled with a 16-bit tail
  ])('canonicalizes %j to %s', (raw, key) => {
    expect(canonicalize(raw)).toEqual(ok(expect.objectContaining({ key, hostKind: 'ipv4' })));
  });
});

describe('canonicalize: IPv6 literals (RFC 4291 §2.2, RFC 5952 text form)', () => {
  it.each([
    ['[::ffff:7f00:1]:443', '127.0.0.1:443', 'ipv4'], // IPv4-mapped (RFC 4291 §2.5.5.2) is unwrapped
    ['[::ffff:127.0.0.1]:443', '127.0.0.1:443', 'ipv4'],
    ['[::FFFF:10.0.0.1]:443', '10.0.0.1:443', 'ipv4'],
    ['[64:ff9b::7f00:1]:443', '[64:ff9b::7f00:1]:443', 'ipv6'], // NAT64 stays IPv6; its class is the embedded one
    ['[0:0::1]:443', '[::1]:443', 'ipv6'],
    ['[2001:DB8:0:0:0:0:0:1]:8443', '[2001:db8::1]:8443', 'ipv6'],
    ['[::]:443', '[::]:443', 'ipv6'],
  ])('canonicalizes %j to %s (%s)', (raw, key, hostKind) => {
    expect(canonicalize(raw)).toEqual(ok(expect.objectContaining({ key, hostKind })));
  });
});

describe('canonicalize: refusals are destination_malformed', () => {
  it.each([
    ['userinfo', 'user@host:443'], // RFC 9110 §4.2.4: userinfo is not part of a proxy target
    ['zone id', '[fe80::1%25eth0]:443'], // RFC 6874 zone IDs name a local interface, not a destination
    ['unbracketed IPv6', '::1:443'], // RFC 3986 §3.2.2: IPv6 literals must be bracketed
    ['unterminated IPv6', '[::1:443'],
    ['junk after IPv6', '[::1]x:443'],
    ['invalid IPv6', '[::g]:443'],
    ['port 0', 'a.test:0'],
    ['port 65536', 'a.test:65536'],
    ['port with letters', 'a.test:443abc'],
    ['negative port', 'a.test:-1'],
    ['signed port', 'a.test:+443'],
    ['empty port', 'a.test:'],
    ['empty host', ':443'],
    ['empty label', 'a..b:443'],
    ['leading dot', '.a.test:443'],
    ['two trailing dots', 'a.test..:443'],
    ['space', 'host name:443'],
    ['CR LF (header injection)', 'ho\r\nst:443'],
    ['tab (URL parser would strip it)', 'ho\tst:443'],
    ['percent-encoding (URL parser would decode it)', 'ho%41st:443'],
    ['NUL', 'ho\u0000st:443'],
    ['backslash', 'a.test\\b:443'],
    ['wildcard', '*.a.test:443'],
    ['leading hyphen', '-a.test:443'],
    ['invalid punycode', 'xn--a:443'],
    ['IPv4 out of range', '256.0.0.1:443'],
    ['IPv4 with five parts', '1.2.3.4.5:443'],
    ['number too big for IPv4', '0x100000000:443'],
    ['invalid octal', '08.0.0.1:443'],
    ['two colons', 'a.test:443:443'],
    ['full-width colon (UTS #46 maps it to a delimiter)', 'a.test\uff1a8080:443'],
    ['full-width at sign', 'a.test\uff20b.test:443'],
    ['full-width solidus', 'a.test\uff0fx:443'],
    ['oversized host', `${'a.'.repeat(600)}test:443`],
  ])('refuses %s: %j', (_what, raw) => {
    expect(canonicalize(raw)).toEqual(refused('destination_malformed'));
  });

  it('requires a port unless the caller supplies a default', () => {
    expect(canonicalize('a.test')).toEqual(refused('destination_malformed'));
    expect(canonicalize('[::1]')).toEqual(refused('destination_malformed'));
    expect(canonicalize('a.test', 443)).toEqual(ok(expect.objectContaining({ key: 'a.test:443' })));
    expect(canonicalize('[::1]', 80)).toEqual(ok(expect.objectContaining({ key: '[::1]:80' })));
  });
});

describe('parsePort', () => {
  it.each([['1', 1], ['80', 80], ['65535', 65535]])('accepts %j', (raw, port) => expect(parsePort(raw)).toEqual(ok(port)));
  it.each(['', '0', '65536', '99999', '123456', '1e3', '0x50', ' 80', '80 ', '８０'])('refuses %j', (raw) => {
    expect(parsePort(raw)).toEqual(refused('destination_malformed'));
  });
});

describe('canonicalizeHost', () => {
  it('names the host kind', () => {
    expect(canonicalizeHost('A.Test')).toEqual(ok({ host: 'a.test', hostKind: 'name' }));
    expect(canonicalizeHost('0x7f.1')).toEqual(ok({ host: '127.0.0.1', hostKind: 'ipv4' }));
    expect(canonicalizeHost('[::1]')).toEqual(ok({ host: '::1', hostKind: 'ipv6' }));
  });

  it.each(['', '::1', '[::1', 'a]', 'a:b'])('refuses %j', (raw) => {
    expect(canonicalizeHost(raw)).toEqual(refused('destination_malformed'));
  });
});

describe('parseAbsoluteTarget (RFC 9112 §3.2.2 absolute-form)', () => {
  it.each([
    ['http://a.test/x?y', 'http', 'a.test:80', '/x?y'],
    ['HTTP://A.TEST:8080', 'http', 'a.test:8080', '/'], // scheme and host are case-insensitive; empty path is "/"
    ['http://a.test?q=1', 'http', 'a.test:80', '/?q=1'],
    ['ws://a.test/socket', 'ws', 'a.test:80', '/socket'],
    ['http://[::1]:8080/', 'http', '[::1]:8080', '/'],
    ['http://0x7f.1/', 'http', '127.0.0.1:80', '/'],
  ])('parses %j', (target, scheme, key, pathAndQuery) => {
    expect(parseAbsoluteTarget(target)).toEqual(ok({ scheme, destination: expect.objectContaining({ key }), pathAndQuery }));
  });

  it.each([
    ['https://a.test/', 'scheme_forbidden'], // https must be tunneled with CONNECT (docs/pipeline.md)
    ['wss://a.test/', 'scheme_forbidden'],
    ['ftp://a/', 'scheme_forbidden'],
    ['http://u:p@a.test/', 'destination_malformed'], // userinfo would be a second, ambiguous identity
    ['http://a.test:80@evil.test/', 'destination_malformed'],
    ['http://a.test\\@evil.test/', 'destination_malformed'], // WHATWG treats \ as / for http
    ['http:///x', 'destination_malformed'],
    ['http://a.test:99999/', 'destination_malformed'],
    ['/relative', 'request_malformed'], // origin-form is not a proxy request
    ['a.test:80', 'request_malformed'],
    ['*', 'request_malformed'],
    ['http://a.test/#fragment', 'request_malformed'], // RFC 9112 §3.2: no fragment in a request-target
  ])('refuses %j with %s', (target, reason) => {
    expect(parseAbsoluteTarget(target)).toEqual(refused(reason));
  });
});

describe('parseConnectTarget (RFC 9110 §9.3.6 authority-form)', () => {
  it.each([
    ['a.test:443', 'a.test:443'],
    ['[::1]:8443', '[::1]:8443'],
    ['Bücher.Example:443', 'xn--bcher-kva.example:443'],
  ])('accepts %j as %s', (target, key) => {
    expect(parseConnectTarget(target)).toEqual(ok(expect.objectContaining({ key })));
  });

  it.each([
    ['no port', 'a.test'], // CONNECT has no default port
    ['a path', 'a.test:443/path'],
    ['userinfo', 'u@a.test:443'],
    ['a URI', 'https://a.test:443'],
    ['empty', ''],
  ])('refuses %s: %j', (_what, target) => {
    expect(parseConnectTarget(target)).toEqual(refused('destination_malformed'));
  });
});

describe('canonicalizeHost: near misses of the mapped-IPv4 form stay IPv6', () => {
  // Only ::ffff:a.b.c.d as a whole is IPv4-mapped (RFC 4291 §2.5.5.2). Unwrapping the tail or the head of
  // a longer address would hand policy and dialer an IPv4 address the client never named.
  it.each([
    ['[1::ffff:7f00:1]', '1::ffff:7f00:1'], // mutant 225: MAPPED without ^ read this as 127.0.0.1
    ['[::ffff:1:2:3]', '::ffff:1:2:3'], // mutant 226: MAPPED without $ read this as 0.1.0.2
  ])('%j is the IPv6 address %s', (raw, host) => {
    expect(canonicalizeHost(raw)).toEqual(ok({ host, hostKind: 'ipv6' }));
  });
});

describe('canonicalizeHost: length limits on hosts that go through the URL parser', () => {
  // Upper case makes these skip the plain-name fast path, so the NAME expression alone holds the
  // RFC 1035 §2.3.4 limit of 253 characters. Mutant 205 dropped the `$` from its (?=.{1,253}$) lookahead.
  it('accepts a 253-character name', () => {
    const name = `A${'a.'.repeat(124)}test`;
    expect(name.length).toBe(253);
    expect(canonicalizeHost(name)).toEqual(ok({ host: name.toLowerCase(), hostKind: 'name' }));
  });

  it.each([
    ['254 characters', `A${'a.'.repeat(124)}tests`],
    ['265 characters', `A${'a.'.repeat(130)}test`],
  ])('refuses a name of %s', (_what, name) => {
    expect(canonicalizeHost(name)).toEqual(refused('destination_malformed'));
  });

  // Only a numeric IPv4 spelling can be longer than 253 characters and still parse; 1024 characters is
  // the most the URL parser is ever given. Mutants 412 (no bound) and 413 (`>= 1024`).
  const hexZeros = (length: number): string => `0x${'0'.repeat(length - 10)}7f000001`;

  it('reads a 1024-character hex spelling of 127.0.0.1', () => {
    expect(hexZeros(1024)).toHaveLength(1024);
    expect(canonicalizeHost(hexZeros(1024))).toEqual(ok({ host: '127.0.0.1', hostKind: 'ipv4' }));
  });

  it.each([1025, 1110])('refuses a %i-character hex spelling of 127.0.0.1 before parsing it', (length) => {
    expect(canonicalizeHost(hexZeros(length))).toEqual(refused('destination_malformed'));
  });
});

describe('canonicalize: the port of a bracketed IPv6 literal follows a colon', () => {
  // Mutants 97 and 99: the character after `]` was dropped as if it were the colon: [::1]x443 became
  // [::1]:443 and [::1]443 became [::1]:43.
  it.each(['[::1]x443', '[::1]443'])('refuses %j', (raw) => {
    expect(canonicalize(raw)).toEqual(refused('destination_malformed'));
  });
});

describe('parseAbsoluteTarget: the whole target must be the absolute URI', () => {
  // Mutant 129 (ABSOLUTE without ^): an origin-form target with a URI in its query was forwarded to the
  // host in the query string instead of being refused as a non-proxy request (RFC 9112 §3.2.1).
  it.each([
    '/r?u=http://10.0.0.1/x',
    '/r?u=http://a.test/',
    'x http://a.test/',
    ' http://a.test/',
  ])('refuses %j as request_malformed', (target) => {
    expect(parseAbsoluteTarget(target)).toEqual(refused('request_malformed'));
  });
});
