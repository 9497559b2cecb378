// Reading the corporate proxy's answer to CONNECT, and where a 407's body ends (RFC 9112 §6.3, §7.1).
// Threat: the upstream proxy (or whatever answers on its port) frames its refusal so that Sluice reads
// part of a body as the next leg's answer (a desync inside the NTLM/Negotiate handshake), waits forever
// for a body it declared but never sends, or buffers without bound. A framing Sluice cannot trust must
// give 'close' (that connection carries no more legs) or 'garbage', and nothing may throw.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyEnd, MAX_HEAD_BYTES, MAX_SKIPPED_BODY_BYTES, parseProxyAnswer, type ProxyAnswer } from '../../../src/egress/proxy-answer.js';

const head = (...lines: string[]): Buffer => Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
const parsed = (buffer: Buffer): ProxyAnswer => {
  const answer = parseProxyAnswer(buffer);
  if (typeof answer === 'string') throw new Error(`expected an answer, got ${answer}`);
  return answer;
};

describe('parseProxyAnswer: status, challenges and framing of a CONNECT answer', () => {
  it('reads the status and the head length; bytes after the head are not part of it', () => {
    const bytes = Buffer.concat([head('HTTP/1.1 200 Connection established'), Buffer.from('\x16\x03\x01')]);
    expect(parsed(bytes)).toEqual({ status: 200, headLength: bytes.length - 3, challenges: [], body: 'close' });
  });

  it('keeps every Proxy-Authenticate field, in order, whatever the field name case', () => {
    const answer = parsed(head('HTTP/1.1 407 Proxy Authentication Required', 'Proxy-Authenticate: Negotiate', 'proxy-authenticate: NTLM',
      'Content-Length: 0', 'PROXY-AUTHENTICATE:   Basic realm="corp, eu"  '));
    expect(answer.status).toBe(407);
    expect(answer.challenges).toEqual(['Negotiate', 'NTLM', 'Basic realm="corp, eu"']);
    expect(answer.body).toBe(0);
  });

  it('accepts a status line without a reason phrase', () => {
    expect(parsed(head('HTTP/1.1 407', 'Content-Length: 3')).body).toBe(3);
  });

  it.each([
    ['Connection: close on HTTP/1.1', ['HTTP/1.1 407 x', 'Content-Length: 5', 'Connection: close']],
    ['a Connection list naming close', ['HTTP/1.1 407 x', 'Content-Length: 5', 'Connection: Keep-Alive, CLOSE']],
    ['HTTP/1.0 without keep-alive', ['HTTP/1.0 407 x', 'Content-Length: 5']],
    ['HTTP/1.1 without any length (body until close, RFC 9112 §6.3 item 8)', ['HTTP/1.1 407 x']],
    ['HTTP/1.0 keep-alive without a length', ['HTTP/1.0 407 x', 'Connection: keep-alive']],
    ['two different Content-Length values (RFC 9112 §6.3 item 5)', ['HTTP/1.1 407 x', 'Content-Length: 5', 'Content-Length: 50']],
    ['a Content-Length list', ['HTTP/1.1 407 x', 'Content-Length: 5, 6']],
    ['a negative Content-Length', ['HTTP/1.1 407 x', 'Content-Length: -1']],
    ['a Content-Length with a sign', ['HTTP/1.1 407 x', 'Content-Length: +5']],
    ['a Content-Length in hex', ['HTTP/1.1 407 x', 'Content-Length: 0x10']],
    ['a Content-Length of 16 digits', ['HTTP/1.1 407 x', 'Content-Length: 1000000000000000']],
    ['Transfer-Encoding whose last coding is not chunked (RFC 9112 §6.3 item 4)', ['HTTP/1.1 407 x', 'Transfer-Encoding: chunked, gzip']],
    ['Transfer-Encoding not chunked beside a Content-Length (RFC 9112 §6.3 item 4)', ['HTTP/1.1 407 x', 'Transfer-Encoding: gzip', 'Content-Length: 5']],
    ['Transfer-Encoding and Content-Length together (smuggling, RFC 9112 §6.3 item 3)', ['HTTP/1.1 407 x', 'Content-Length: 5', 'Transfer-Encoding: chunked']],
    ['Transfer-Encoding on HTTP/1.0 (RFC 9112 §6.1)', ['HTTP/1.0 407 x', 'Connection: keep-alive', 'Transfer-Encoding: chunked']],
  ])('%s: the body runs until close, so the connection carries no next leg', (_name, lines) => {
    expect(parsed(head(...lines)).body).toBe('close');
  });

  it.each([
    ['Content-Length on HTTP/1.1', ['HTTP/1.1 407 x', 'Content-Length: 42'], 42],
    ['the same Content-Length twice', ['HTTP/1.1 407 x', 'Content-Length: 42', 'Content-Length: 42'], 42],
    ['HTTP/1.0 keep-alive with a length', ['HTTP/1.0 407 x', 'Connection: keep-alive', 'Content-Length: 7'], 7],
    ['chunked', ['HTTP/1.1 407 x', 'Transfer-Encoding: chunked'], 'chunked'],
    ['chunked after another coding', ['HTTP/1.1 407 x', 'Transfer-Encoding: gzip, Chunked'], 'chunked'],
  ] as const)('%s: the body is framed (%j)', (_name, lines, body) => {
    expect(parsed(head(...lines)).body).toBe(body);
  });

  it('is incomplete until the empty line, and garbage once the head outgrows MAX_HEAD_BYTES', () => {
    expect(parseProxyAnswer(Buffer.from('HTTP/1.1 407 x\r\nProxy-Authenticate: NTLM\r\n'))).toBe('incomplete');
    expect(parseProxyAnswer(Buffer.from(''))).toBe('incomplete');
    const endless = Buffer.from(`HTTP/1.1 407 x\r\nX-Pad: ${'a'.repeat(MAX_HEAD_BYTES)}`);
    expect(parseProxyAnswer(endless)).toBe('garbage');
    const long = head('HTTP/1.1 407 x', `X-Pad: ${'a'.repeat(MAX_HEAD_BYTES)}`);
    expect(parseProxyAnswer(long)).toBe('garbage');
  });

  it.each([
    ['a header line without a colon', head('HTTP/1.1 407 x', 'Proxy-Authenticate NTLM')],
    ['a header line starting with a colon', head('HTTP/1.1 407 x', ': NTLM')],
    ['an SSH banner', head('SSH-2.0-OpenSSH_9.6')],
    ['HTTP/2 preface', head('PRI * HTTP/2.0')],
    ['HTTP/1.2', head('HTTP/1.2 200 OK')],
    ['a two-digit status', head('HTTP/1.1 20 OK')],
    ['a status glued to its reason', head('HTTP/1.1 200OK')],
    ['a TLS alert (a TLS proxy spoken to in clear)', Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46, 0x0d, 0x0a, 0x0d, 0x0a])],
  ])('%s is garbage', (_name, bytes) => {
    expect(parseProxyAnswer(bytes)).toBe('garbage');
  });

  it('never throws and never reads past the head, whatever the bytes (fast-check)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.boolean(), (bytes, withEnd) => {
        const buffer = withEnd ? Buffer.concat([Buffer.from('HTTP/1.1 407 x\r\n'), Buffer.from(bytes), Buffer.from('\r\n\r\n')]) : Buffer.from(bytes);
        const answer = parseProxyAnswer(buffer);
        if (typeof answer === 'string') return ['incomplete', 'garbage'].includes(answer);
        return answer.headLength <= buffer.length && answer.status >= 100 && answer.status <= 999
          && (answer.body === 'close' || answer.body === 'chunked' || (Number.isSafeInteger(answer.body) && answer.body >= 0));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('bodyEnd: where a 407 body ends, so the next leg starts at a message boundary', () => {
  it('a Content-Length body: incomplete until every byte is there, then exactly its length', () => {
    expect(bodyEnd(Buffer.from('abcd'), 5)).toBe('incomplete');
    expect(bodyEnd(Buffer.from('abcde'), 5)).toBe(5);
    // Bytes beyond it are not the body's (the caller decides what they mean).
    expect(bodyEnd(Buffer.from('abcdeHTTP/1.1'), 5)).toBe(5);
    expect(bodyEnd(Buffer.alloc(0), 0)).toBe(0);
  });

  it('a declared length beyond MAX_SKIPPED_BODY_BYTES is garbage at once, not a wait for gigabytes', () => {
    expect(bodyEnd(Buffer.alloc(0), MAX_SKIPPED_BODY_BYTES + 1)).toBe('garbage');
    expect(bodyEnd(Buffer.alloc(0), 999_999_999_999_999)).toBe('garbage');
    expect(bodyEnd(Buffer.alloc(MAX_SKIPPED_BODY_BYTES), MAX_SKIPPED_BODY_BYTES)).toBe(MAX_SKIPPED_BODY_BYTES);
  });

  it.each([
    ['one chunk', '5\r\nhello\r\n0\r\n\r\n'],
    ['two chunks, upper- and lower-case hex', 'A\r\n0123456789\r\nb\r\nabcdefghijk\r\n0\r\n\r\n'],
    ['chunk extensions (RFC 9112 §7.1.1)', '5;name=value;q="x"\r\nhello\r\n0;last\r\n\r\n'],
    ['whitespace before an extension', '5 ;x=y\r\nhello\r\n0\r\n\r\n'],
    ['trailer fields (RFC 9112 §7.1.2)', '5\r\nhello\r\n0\r\nX-Trailer: a\r\nX-Other: b\r\n\r\n'],
    ['only the last chunk', '0\r\n\r\n'],
    ['leading zeros', '0005\r\nhello\r\n000\r\n\r\n'],
  ])('chunked, %s: ends exactly after the last chunk and its trailers', (_name, body) => {
    const data = Buffer.from(body, 'latin1');
    expect(bodyEnd(data, 'chunked')).toBe(data.length);
    // What follows the body (the next answer) is not counted.
    expect(bodyEnd(Buffer.concat([data, Buffer.from('HTTP/1.1 200 OK\r\n\r\n')]), 'chunked')).toBe(data.length);
    // Any proper prefix is incomplete, never a premature end.
    for (let i = 0; i < data.length; i++) expect(bodyEnd(data.subarray(0, i), 'chunked'), `prefix ${i}`).toBe('incomplete');
  });

  it.each([
    ['a size that is not hex', 'zz\r\nhello\r\n0\r\n\r\n'],
    ['a negative size', '-5\r\nhello\r\n0\r\n\r\n'],
    ['a size with a 0x prefix', '0x5\r\nhello\r\n0\r\n\r\n'],
    ['leading whitespace', ' 5\r\nhello\r\n0\r\n\r\n'],
    ['an empty size line', '\r\nhello\r\n0\r\n\r\n'],
    ['more than 8 hex digits (an overflow attempt)', '100000000000000005\r\nhello\r\n0\r\n\r\n'],
    ['chunk data longer than its size', '3\r\nhello\r\n0\r\n\r\n'],
    ['a huge declared chunk', 'FFFFFFFF\r\nhello\r\n'],
    ['chunks adding up past MAX_SKIPPED_BODY_BYTES', `${'8000\r\n'}${'a'.repeat(0x8000)}\r\n8000\r\n${'a'.repeat(0x8000)}\r\n0\r\n\r\n`],
    ['a size line that never ends', 'a'.repeat(2000)],
  ])('chunked, %s: garbage', (_name, body) => {
    expect(bodyEnd(Buffer.from(body, 'latin1'), 'chunked')).toBe('garbage');
  });

  it('trailers that never end are garbage once past MAX_SKIPPED_BODY_BYTES, not buffered forever', () => {
    const trailers = `0\r\n${'X-T: y\r\n'.repeat(MAX_SKIPPED_BODY_BYTES / 8 + 1)}`;
    expect(bodyEnd(Buffer.from(trailers), 'chunked')).toBe('garbage');
  });

  it('never throws; an end it gives lies inside the data (fast-check)', () => {
    const chunkish = fc.array(fc.oneof(fc.constantFrom('0', '5', 'a', 'F', ';x=1', ' ', '\r\n', '\r', '\n', 'hello', ':'), fc.string({ maxLength: 4 })), { maxLength: 40 });
    fc.assert(
      fc.property(fc.oneof(chunkish.map((parts) => Buffer.from(parts.join(''), 'latin1')), fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b))), (data) => {
        const end = bodyEnd(data, 'chunked');
        return end === 'incomplete' || end === 'garbage' || (Number.isInteger(end) && end > 0 && end <= data.length);
      }),
      { numRuns: 3000 },
    );
  });
});
