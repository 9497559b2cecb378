// MD4 against RFC 1320 appendix A.5's test suite, plus inputs that cross the padding and block edges.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { md4 } from '../../../src/egress/md4.js';

describe('md4 (RFC 1320)', () => {
  // RFC 1320 appendix A.5, "Test suite".
  it.each([
    ['', '31d6cfe0d16ae931b73c59d7e0c089c0'],
    ['a', 'bde52cb31de33e46245e05fbdbd6fb24'],
    ['abc', 'a448017aaf21d8525fc10ae87aa6729d'],
    ['message digest', 'd9130a8164549fe818874806e1c7014b'],
    ['abcdefghijklmnopqrstuvwxyz', 'd79e1c308aa5bbcdeea8ed63df412da9'],
    ['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', '043f8582f241db351ce627e153e7f0e4'],
    ['12345678901234567890123456789012345678901234567890123456789012345678901234567890', 'e33b4ddc9c38f2199c3e7b164fcc0536'],
  ])('MD4("%s") = %s', (input, hex) => {
    expect(md4(Buffer.from(input, 'latin1')).toString('hex')).toBe(hex);
  });

  it('gives the NT hash of "Password" that MS-NLMP 4.2.2.1.2 lists (MD4 of the UTF-16LE password)', () => {
    expect(md4(Buffer.from('Password', 'utf16le')).toString('hex')).toBe('a4f49c406510bdcab6824ee7c30fd852');
  });

  // An independent reference: the openssl CLI with its legacy provider (the library inside Node refuses md4).
  const openssl = spawnSync('openssl', ['dgst', '-md4', '-provider', 'legacy', '-provider', 'default', '-r'], { input: 'abc' });
  const hasOpensslMd4 = openssl.status === 0 && openssl.stdout.toString().startsWith('a448017aaf21d8525fc10ae87aa6729d');

  it.skipIf(!hasOpensslMd4)('hashes every length across the 55/56/64-byte padding edges and multi-block inputs like openssl', () => {
    for (const length of [55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4099]) {
      const input = Buffer.from(Array.from({ length }, (_, i) => (i * 31 + 7) & 0xff));
      const ref = spawnSync('openssl', ['dgst', '-md4', '-provider', 'legacy', '-provider', 'default', '-r'], { input });
      expect(md4(input).toString('hex'), `length ${length}`).toBe(ref.stdout.toString().slice(0, 32));
    }
  });

  it('hashes a well-known two-block sentence and a one-mebibyte input without keeping state between calls', () => {
    const fox = Buffer.from('The quick brown fox jumps over the lazy dog, the quick brown fox jumps over the lazy cog');
    expect(fox.length).toBeGreaterThan(64);
    const first = md4(fox).toString('hex');
    expect(md4(Buffer.from(fox)).toString('hex')).toBe(first);
    expect(md4(Buffer.from('The quick brown fox jumps over the lazy dog')).toString('hex')).toBe('1bee69a46ba811185c194762abaeae90');
  });

  it('hashes one mebibyte of "a" identically twice, and a short input afterwards as before', () => {
    const big = Buffer.alloc(1 << 20, 0x61);
    expect(md4(big).equals(md4(Buffer.from(big)))).toBe(true);
    expect(md4(Buffer.from('a')).toString('hex')).toBe('bde52cb31de33e46245e05fbdbd6fb24');
  });
});
