// The PROXY protocol parser (HAProxy's proxy-protocol.txt) from the threats first: a forged or
// malformed header must be refused, never guessed at; an oversized one must be refused without reading
// past the spec's limits (v1 107 bytes, v2 536); a header split across packets is only `incomplete`
// until it is whole; and arbitrary bytes never throw.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_PROXY_HEADER_BYTES, parseProxyHeader, type ProxyHeaderResult } from '../../../src/listen/index.js';

const SIG = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

function v2(verCmd: number, famProto: number, block: Buffer): Buffer {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(block.length);
  return Buffer.concat([SIG, Buffer.from([verCmd, famProto]), len, block]);
}

function tcp4Block(src: number[], dst: number[], sport: number, dport: number, tlvs = Buffer.alloc(0)): Buffer {
  const b = Buffer.alloc(12);
  Buffer.from(src).copy(b, 0);
  Buffer.from(dst).copy(b, 4);
  b.writeUInt16BE(sport, 8);
  b.writeUInt16BE(dport, 10);
  return Buffer.concat([b, tlvs]);
}

function tcp6Block(src: Buffer, dst: Buffer, sport: number, dport: number): Buffer {
  const b = Buffer.alloc(36);
  src.copy(b, 0);
  dst.copy(b, 16);
  b.writeUInt16BE(sport, 32);
  b.writeUInt16BE(dport, 34);
  return b;
}

const parse = (s: string | Buffer): ProxyHeaderResult => parseProxyHeader(typeof s === 'string' ? Buffer.from(s, 'latin1') : s);

function complete(result: ProxyHeaderResult): { source: { address: string; port: number } | null; length: number; version: number } {
  if (result.state !== 'complete') throw new Error(`expected a complete header, got ${JSON.stringify(result)}`);
  return result.header;
}

describe('parseProxyHeader: v1 text', () => {
  it('reads TCP4 and TCP6 lines, and says how many bytes the header took', () => {
    expect(complete(parse('PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n'))).toEqual({
      version: 1,
      source: { address: '192.168.0.1', port: 56324 },
      length: 47,
    });
    expect(complete(parse('PROXY TCP6 2001:DB8:0:0:0:0:0:1 ::1 1 65535\r\n')).source).toEqual({ address: '2001:db8::1', port: 1 });
  });

  it('takes UNKNOWN (with or without the rest of the line) as "use the peer"', () => {
    expect(complete(parse('PROXY UNKNOWN\r\n'))).toEqual({ version: 1, source: null, length: 15 });
    expect(complete(parse('PROXY UNKNOWN ffff:f:ffff:ffff:ffff:ffff:ffff:ffff ::1 65535 65535\r\n')).source).toBeNull();
  });

  it.each([
    ['a lone LF', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n'],
    ['a CR without LF', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX'],
    ['two spaces', 'PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n'],
    ['a leading zero in an address (octal confusion)', 'PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n'],
    ['a leading zero in a port', 'PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n'],
    ['a port past 65535', 'PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n'],
    ['an octet past 255', 'PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n'],
    ['an IPv6 address under TCP4', 'PROXY TCP4 ::1 ::1 1 2\r\n'],
    ['an IPv4 address under TCP6', 'PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n'],
    ['an IPv4-in-IPv6 dotted form under TCP6', 'PROXY TCP6 ::ffff:1.2.3.4 ::1 1 2\r\n'],
    ['a zone id', 'PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n'],
    ['an unknown protocol', 'PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n'],
    ['lower case', 'proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n'],
    ['a missing field', 'PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n'],
    ['an extra field', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n'],
    ['a host name', 'PROXY TCP4 localhost 5.6.7.8 1 2\r\n'],
    ['a NUL byte', 'PROXY TCP4 1.2.3.4\0 5.6.7.8 1 2\r\n'],
    ['a plain HTTP request (no header at all)', 'CONNECT example.org:443 HTTP/1.1\r\n\r\n'],
    ['a TLS ClientHello', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03'],
  ])('refuses %s', (_name, text) => {
    expect(parse(text).state).toBe('invalid');
  });

  it('refuses a line without CRLF in the first 107 bytes, and never waits for more', () => {
    const long = `PROXY UNKNOWN ${'f'.repeat(200)}\r\n`;
    expect(parse(long)).toEqual({ state: 'invalid', reason: 'v1 line longer than 107 bytes' });
    expect(parse(long.slice(0, 107)).state).toBe('invalid');
    expect(parse(long.slice(0, 106)).state).toBe('incomplete');
    // The longest line the spec allows (107 bytes with its CRLF) is accepted.
    const longest = `PROXY UNKNOWN ${'ffff:'.repeat(7)}ffff ${'ffff:'.repeat(7)}ffff 65535 65535\r\n`;
    expect(longest.length).toBe(107);
    expect(complete(parse(longest)).length).toBe(107);
  });
});

describe('parseProxyHeader: v2 binary', () => {
  it('reads TCP over IPv4 and IPv6 (PROXY command), skipping TLVs', () => {
    const tlv = Buffer.from([0x04, 0x00, 0x03, 0x61, 0x62, 0x63]);
    const h = v2(0x21, 0x11, tcp4Block([203, 0, 113, 7], [10, 0, 0, 1], 40000, 3128, tlv));
    expect(complete(parse(Buffer.concat([h, Buffer.from('GET')])))).toEqual({ version: 2, source: { address: '203.0.113.7', port: 40000 }, length: 34 });
    const src = Buffer.alloc(16);
    src.writeUInt16BE(0x2001, 0);
    src.writeUInt16BE(0x0db8, 2);
    src.writeUInt16BE(1, 14);
    expect(complete(parse(v2(0x21, 0x21, tcp6Block(src, Buffer.alloc(16), 5, 6)))).source).toEqual({ address: '2001:db8::1', port: 5 });
  });

  it('takes LOCAL (a balancer health check), an unspecified family and AF_UNIX as "use the peer", skipping the block', () => {
    expect(complete(parse(v2(0x20, 0x00, Buffer.alloc(0))))).toEqual({ version: 2, source: null, length: 16 });
    expect(complete(parse(v2(0x20, 0x11, Buffer.alloc(7))))).toEqual({ version: 2, source: null, length: 23 });
    expect(complete(parse(v2(0x21, 0x00, Buffer.alloc(0)))).source).toBeNull();
    expect(complete(parse(v2(0x21, 0x31, Buffer.alloc(216)))).source).toBeNull();
  });

  it.each([
    ['version 1 in the binary form', v2(0x11, 0x11, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['an unassigned command', v2(0x22, 0x11, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['an unassigned family', v2(0x21, 0x41, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['an unassigned protocol', v2(0x21, 0x13, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['UDP (this is a TCP listener)', v2(0x21, 0x12, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['an IPv4 block too short for its family', v2(0x21, 0x11, Buffer.alloc(11))],
    ['an IPv6 block too short for its family', v2(0x21, 0x21, Buffer.alloc(35))],
    ['a signature one byte off', Buffer.concat([Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0b]), Buffer.alloc(16)])],
  ])('refuses %s', (_name, bytes) => {
    expect(parse(bytes).state).toBe('invalid');
  });

  it('refuses a declared length past 536 bytes at once, before any of it arrives', () => {
    const header = Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0xff, 0xff])]);
    expect(parse(header)).toEqual({ state: 'invalid', reason: 'v2 header longer than 536 bytes' });
    expect(complete(parse(v2(0x21, 0x11, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, Buffer.alloc(536 - 16 - 12))))).length).toBe(536);
    expect(parse(v2(0x21, 0x11, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, Buffer.alloc(536 - 16 - 12 + 1)))).state).toBe('invalid');
  });
});

describe('parseProxyHeader: split across packets', () => {
  const headers = [
    Buffer.from('PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n'),
    Buffer.from('PROXY TCP6 ::1 ::2 1 2\r\n'),
    Buffer.from('PROXY UNKNOWN\r\n'),
    v2(0x21, 0x11, tcp4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)),
    v2(0x20, 0x00, Buffer.alloc(0)),
    v2(0x21, 0x21, tcp6Block(Buffer.alloc(16, 0xab), Buffer.alloc(16), 9, 9)),
  ];

  it.each(headers.map((h) => [h.length, h] as const))('every proper prefix of a %i-byte header is incomplete, the whole is complete', (_n, header) => {
    for (let k = 1; k < header.length; k++) expect(parse(header.subarray(0, k)).state).toBe('incomplete');
    expect(complete(parse(header)).length).toBe(header.length);
  });
});

describe('parseProxyHeader: arbitrary bytes (fast-check)', () => {
  // The spec's IPv6 form is hex groups only (no dotted IPv4 tail).
  const hexIpV6 = fc.ipV6().filter((a) => !a.includes('.'));
  const valid = fc.oneof(
    fc.tuple(fc.ipV4(), fc.ipV4(), fc.nat(65535), fc.nat(65535)).map(([a, b, p, q]) => Buffer.from(`PROXY TCP4 ${a} ${b} ${p} ${q}\r\n`)),
    fc.tuple(hexIpV6, hexIpV6, fc.nat(65535), fc.nat(65535)).map(([a, b, p, q]) => Buffer.from(`PROXY TCP6 ${a} ${b} ${p} ${q}\r\n`)),
    fc
      .tuple(fc.array(fc.nat(255), { minLength: 4, maxLength: 4 }), fc.nat(65535), fc.uint8Array({ maxLength: 508 }))
      .map(([src, port, tlvs]) => v2(0x21, 0x11, tcp4Block(src, [127, 0, 0, 1], port, 80, Buffer.from(tlvs)))),
    fc.uint8Array({ maxLength: 520 }).map((block) => v2(0x20, 0x00, Buffer.from(block))),
  );
  // Bytes that start like a header (so the parser goes deep) or not at all.
  const hostile = fc.oneof(
    fc.uint8Array({ maxLength: 1200 }).map((b) => Buffer.from(b)),
    fc.uint8Array({ maxLength: 700 }).map((b) => Buffer.concat([SIG, Buffer.from(b)])),
    fc.string({ unit: 'binary-ascii', maxLength: 300 }).map((s) => Buffer.from(`PROXY ${s}`, 'latin1')),
    fc.tuple(valid, fc.nat(80)).map(([h, n]) => {
      const b = Buffer.from(h);
      if (b.length > 0) b[n % b.length] = (b[n % b.length]! + 1) & 0xff; // one byte changed
      return b;
    }),
  );

  it('never throws, never claims more bytes than it was given or than the limit, and decides within the limit', () => {
    fc.assert(
      fc.property(hostile, (bytes) => {
        const result = parseProxyHeader(bytes);
        if (result.state === 'complete') {
          expect(result.header.length).toBeLessThanOrEqual(Math.min(bytes.length, MAX_PROXY_HEADER_BYTES));
        }
        // Past the limit a reader must never be told to wait for more.
        if (bytes.length >= MAX_PROXY_HEADER_BYTES) expect(result.state).not.toBe('incomplete');
        // The verdict depends on the first MAX_PROXY_HEADER_BYTES bytes only: nothing past them is read.
        expect(parseProxyHeader(bytes.subarray(0, MAX_PROXY_HEADER_BYTES))).toEqual(result);
      }),
      { numRuns: 3000 },
    );
  });

  it('reads every valid header whole, whatever follows it, and waits on each of its prefixes', () => {
    fc.assert(
      fc.property(valid, fc.uint8Array({ maxLength: 64 }), (header, after) => {
        const result = complete(parseProxyHeader(Buffer.concat([header, Buffer.from(after)])));
        expect(result.length).toBe(header.length);
        for (let k = 0; k < header.length; k += 7) expect(parseProxyHeader(header.subarray(0, k)).state).toBe('incomplete');
      }),
      { numRuns: 500 },
    );
  });
});
