// The CONNECT fast path accepts only a strict subset of RFC 9112 and hands everything else to node:http
// (null). Each refusal below is an input where a second parser could disagree with llhttp.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConnectHead } from '../../../../src/proxy/ingress/connect-head.js';

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

// The line-by-line regex parser the byte scanner replaced (issue 16), kept as the oracle: the scanner
// must take exactly what it took, and give the same fields. A disagreement is a smuggling surface.
const REQUEST_LINE = /^CONNECT ([A-Za-z0-9._~!$&'()*+,;=:@%[\]-]+) HTTP\/1\.([01])$/;
const FIELD_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[\t ]*([\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?[\t ]*$/;
const ORACLE_NOT_FAST = new Set(['content-length', 'transfer-encoding', 'expect', 'upgrade']);

function oracle(chunk: Buffer, maxHeaderBytes: number): { target: string; versionMinor: number; proxyAuthorization: string | undefined; headerCount: number; rest: number[] } | null {
  if (chunk.length < 16 || chunk[0] !== 0x43) return null;
  const end = chunk.indexOf('\r\n\r\n');
  if (end < 0 || end + 4 > maxHeaderBytes) return null;
  const lines = chunk.toString('latin1', 0, end).split('\r\n');
  const request = REQUEST_LINE.exec(lines[0] ?? '');
  if (request === null) return null;
  let proxyAuthorization: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const field = FIELD_LINE.exec(lines[i] ?? '');
    if (field === null) return null;
    const name = (field[1] ?? '').toLowerCase();
    if (name === 'proxy-authorization') {
      if (proxyAuthorization !== undefined) return null;
      proxyAuthorization = field[2] ?? '';
    } else if (ORACLE_NOT_FAST.has(name)) return null;
  }
  return { target: request[1] ?? '', versionMinor: request[2] === '0' ? 0 : 1, proxyAuthorization, headerCount: lines.length - 1, rest: [...chunk.subarray(end + 4)] };
}

describe('parseConnectHead: the byte scanner takes exactly what the regex parser took', () => {
  const plain = (p: ReturnType<typeof parseConnectHead>) => (p === null ? null : { ...p, rest: [...p.rest] });
  const piece = fc.constantFrom('CONNECT ', 'a', 'Z', '9', ':', '443', ' ', '\t', '\r', '\n', '\r\n', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', '@', '[', ']', '%', '/', '\\', '#', '\u0000', '\u000b', '\u007f', 'é', '\u00ff',
    'Proxy-Authorization', 'PROXY-AUTHORIZATION', 'proxy-authorizatioN', 'Content-Length', 'transfer-encoding', 'EXPECT', 'Upgrade', 'Host', ': ', 'Basic YTpi', 'Bearer t', '^', '_', '`', '|', '~', '!');
  const lines = fc.array(fc.array(piece, { maxLength: 8 }).map((p) => p.join('')), { maxLength: 6 });
  const heads = fc.tuple(fc.constantFrom('CONNECT a.test:443 HTTP/1.1', 'CONNECT [::1]:8080 HTTP/1.0', 'CONNECT  a:1 HTTP/1.1', 'CONNECT a:1 HTTP/1.1 ', 'CONNECTa:1 HTTP/1.1'), lines, fc.constantFrom('', 'rest', '\r\n\r\n'))
    .map(([line, fields, rest]) => head(`${line}${fields.map((f) => `\r\n${f}`).join('')}\r\n\r\n${rest}`));
  const raw = fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.concat([Buffer.from('CONNECT a:1 HTTP/1.1\r\n'), Buffer.from(a), Buffer.from('\r\n\r\n')]));

  it('on heads built from the pieces a smuggler would use, and on random bytes after a valid request line', () => {
    let taken = 0;
    fc.assert(
      fc.property(fc.oneof(heads, raw), fc.constantFrom(MAX, 40, 64), (buf, max) => {
        const parsed = plain(parseConnectHead(buf, max));
        expect(parsed).toEqual(oracle(buf, max));
        if (parsed !== null) taken += 1;
      }),
      { numRuns: 5000, seed: 20261216 },
    );
    // Both answers are exercised, not only refusals.
    expect(taken).toBeGreaterThan(250);
  });
});
