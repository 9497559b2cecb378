// The CONNECT fast path accepts only a strict subset of RFC 9112 and hands everything else to node:http
// (null). Each refusal below is an input where a second parser could disagree with llhttp.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConnectHead } from '../../../src/proxy/connect-head.js';

const MAX = 16 * 1024;
const head = (text: string): Buffer => Buffer.from(text, 'latin1');

describe('parseConnectHead: the subset it takes', () => {
  it('parses target, version, Proxy-Authorization, header count and the bytes after the head', () => {
    const parsed = parseConnectHead(head('CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\nProxy-Authorization: Basic YTpi\r\nUser-Agent: curl/8\r\n\r\n\x16\x03\x01'), MAX);
    expect(parsed).toMatchObject({ target: 'api.example:443', versionMinor: 1, proxyAuthorization: 'Basic YTpi', headerCount: 3 });
    expect([...(parsed?.rest ?? [])]).toEqual([0x16, 0x03, 0x01]);
  });

  it('trims only spaces and tabs around a value, like Node', () => {
    expect(parseConnectHead(head('CONNECT a:1 HTTP/1.1\r\nproxy-authorization: \t Bearer x \t\r\n\r\n'), MAX)?.proxyAuthorization).toBe('Bearer x');
    expect(parseConnectHead(head('CONNECT a:1 HTTP/1.1\r\nProxy-Authorization:\r\n\r\n'), MAX)?.proxyAuthorization).toBe('');
  });

  it('takes HTTP/1.0 and a head with no fields', () => {
    expect(parseConnectHead(head('CONNECT a.example:443 HTTP/1.0\r\n\r\n'), MAX)).toMatchObject({ versionMinor: 0, headerCount: 0, proxyAuthorization: undefined });
  });
});

describe('parseConnectHead: everything else goes to node:http', () => {
  const refused: [string, string][] = [
    ['another method', 'GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n'],
    ['a lowercase method', 'connect a:1 HTTP/1.1\r\n\r\n'],
    ['a method that ends in CONNECT (llhttp answers 400)', 'CCONNECT a:1 HTTP/1.1\r\n\r\n'], // mutant 700: REQUEST_LINE without ^
    ['two spaces in the request line', 'CONNECT  a:1 HTTP/1.1\r\n\r\n'],
    ['no version (HTTP/0.9 style)', 'CONNECT a:1\r\nX: y\r\n\r\n'],
    ['HTTP/2.0', 'CONNECT a:1 HTTP/2.0\r\n\r\n'],
    ['an incomplete head', 'CONNECT a:1 HTTP/1.1\r\nHost: a'],
    ['obs-fold', 'CONNECT a:1 HTTP/1.1\r\nX: a\r\n b\r\n\r\n'],
    ['a bare LF inside a value', 'CONNECT a:1 HTTP/1.1\r\nX: a\nProxy-Authorization: Bearer t\r\n\r\n'],
    ['a bare CR inside a value', 'CONNECT a:1 HTTP/1.1\r\nX: a\rb\r\n\r\n'],
    ['a bare LF ending the request line', 'CONNECT a:1 HTTP/1.1\nX: y\r\n\r\n'],
    ['NUL in a value', 'CONNECT a:1 HTTP/1.1\r\nX: a\u0000b\r\n\r\n'],
    ['obs-text in a value', 'CONNECT a:1 HTTP/1.1\r\nX: caf\u00e9\r\n\r\n'],
    ['a vertical tab at the end of a value', 'CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Bearer t\u000b\r\n\r\n'],
    ['space before the colon', 'CONNECT a:1 HTTP/1.1\r\nX : y\r\n\r\n'],
    ['an empty field name', 'CONNECT a:1 HTTP/1.1\r\n: y\r\n\r\n'],
    ['a field line without a colon', 'CONNECT a:1 HTTP/1.1\r\nJunk\r\n\r\n'],
    ['two Proxy-Authorization fields', 'CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Bearer a\r\nproxy-authorization: Bearer b\r\n\r\n'],
    ['Content-Length', 'CONNECT a:1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello'],
    ['Transfer-Encoding', 'CONNECT a:1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ['Expect', 'CONNECT a:1 HTTP/1.1\r\nExpect: 100-continue\r\n\r\n'],
    ['Upgrade', 'CONNECT a:1 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n'],
    ['a control character in the target', 'CONNECT a\u0001:1 HTTP/1.1\r\n\r\n'],
    ['a backslash in the target', 'CONNECT a.test\\:443 HTTP/1.1\r\n\r\n'],
    ['a fragment in the target', 'CONNECT a.test#frag:443 HTTP/1.1\r\n\r\n'],
    ['a path in the target', 'CONNECT a.test:443/x HTTP/1.1\r\n\r\n'],
  ];
  it.each(refused)('%s', (_label, text) => {
    expect(parseConnectHead(head(text), MAX)).toBeNull();
  });

  it('a head longer than maxHeaderBytes', () => {
    const text = `CONNECT a:1 HTTP/1.1\r\nX: ${'y'.repeat(200)}\r\n\r\n`;
    expect(parseConnectHead(head(text), 100)).toBeNull();
    expect(parseConnectHead(head(text), 1000)).not.toBeNull();
  });

  it('never throws, and whatever it takes has a target of authority characters and a head ending in CR LF CR LF', () => {
    const bytes = fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.concat([Buffer.from('CONNECT '), Buffer.from(a)]));
    const texty = fc.string({ unit: fc.constantFrom('a', ':', ' ', '\r', '\n', '\t', '\u0000', 'X', '1', 'H', 'T', 'P', '/', '.', 'é'), maxLength: 120 }).map((t) => head(`CONNECT a:1 HTTP/1.1\r\n${t}\r\n\r\n`));
    fc.assert(
      fc.property(fc.oneof(bytes, texty), (buf) => {
        const parsed = parseConnectHead(buf, MAX);
        if (parsed === null) return true;
        const end = buf.indexOf('\r\n\r\n');
        return /^[A-Za-z0-9._~!$&'()*+,;=:@%[\]-]+$/.test(parsed.target) && end > 0 && parsed.rest.length === buf.length - end - 4 && !buf.subarray(0, end).includes(0);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('parseConnectHead: maxHeaderBytes bounds the whole head, CR LF CR LF included', () => {
  // Mutants 741 (`end + 4 >= maxHeaderBytes`) and 743 (`end - 4 > maxHeaderBytes`): node:http answers 431
  // to a head one byte over its limit, so the fast path must not take it either.
  const text = 'CONNECT a.test:443 HTTP/1.1\r\nProxy-Authorization: Bearer t\r\n\r\n';
  const length = Buffer.byteLength(text, 'latin1');

  it('takes a head exactly maxHeaderBytes long', () => {
    expect(parseConnectHead(head(text), length)).not.toBeNull();
  });

  it.each([
    ['one byte', 1],
    ['the final CR LF CR LF', 4],
  ])('refuses a head %s over maxHeaderBytes', (_what, over) => {
    expect(parseConnectHead(head(text), length - over)).toBeNull();
  });
});
