// Which TCP listen addresses only this host can reach: the rule for token-less (grant-bound) listeners
// (review 2026-12, finding 12). Literal loopback IPs only; a name is never trusted, since a hosts file
// or resolver decides where it points.
import { describe, expect, it } from 'vitest';
import { isLoopbackTcpListen, listenAddressProblem } from '../../../src/config/index.js';

describe('isLoopbackTcpListen', () => {
  it.each([
    ['127.0.0.1:3180', true],
    ['127.0.0.1:0', true],
    ['127.42.7.9:8080', true], // all of 127.0.0.0/8 (RFC 1122 §3.2.1.3)
    ['[::1]:3180', true],
    ['[0:0:0:0:0:0:0:1]:3180', true], // the same address, spelled out (RFC 4291 §2.5.3)
    ['0.0.0.0:3180', false], // every interface
    ['[::]:3180', false],
    ['[::ffff:127.0.0.1]:3180', false], // IPv4-mapped: an IPv6 socket, not a loopback literal
    ['10.0.0.1:3180', false],
    ['192.0.2.7:3180', false],
    ['[fe80::1]:3180', false],
    ['localhost:3180', false],
    ['127.0.0.1.nip.io:3180', false],
    ['127.1:3180', false], // shorthand that inet_aton reads as 127.0.0.1; not a literal Node listens on as such
    ['0x7f.0.0.1:3180', false],
    ['unix:/run/sluice/a.sock', false], // not TCP at all
  ])('%s → %s', (listen, expected) => {
    expect(isLoopbackTcpListen(listen)).toBe(expected);
  });
});

describe('listenAddressProblem: what listen() would refuse, named before start (issue 17, item 3)', () => {
  it.each([
    ['127.0.0.1:99999', /port 99999 is out of range/],
    ['[::1]:65536', /port 65536 is out of range/],
    ['unix:', /needs the socket file path/],
    ['unix:   ', /needs the socket file path/],
    ['unix:/run/sluice/', /names a directory/],
    ['unix:.', /names a directory/],
    ['unix:/run/..', /names a directory/],
    ['[nothex]:80', /expected host:port/],
    ['[1:2:3]:80', /not an IPv6 address/],
    ['127.0.0.1', /expected host:port/],
  ])('refuses %s', (listen, problem) => {
    expect(listenAddressProblem(listen)).toMatch(problem);
  });

  it.each([['127.0.0.1:0'], ['127.0.0.1:65535'], ['[::1]:3180'], ['localhost:3180'], ['unix:./state/a.sock'], ['unix:/run/a.sock']])('accepts %s', (listen) => {
    expect(listenAddressProblem(listen)).toBeNull();
  });
});
