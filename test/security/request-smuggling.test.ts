// Threat: HTTP request smuggling (CWE-444; Linhart et al. 2005, Kettle "HTTP Desync Attacks" 2019). The
// sandbox frames a message so that Sluice and the origin disagree where it ends, and the leftover bytes
// become a second request the origin runs but Sluice never authorized. RFC 9112 §6.1: a server may refuse
// a request with both Transfer-Encoding and Content-Length and MUST close the connection after answering
// it; §6.3: such a message "ought to be handled as an error", a request whose final transfer coding is
// not chunked MUST get 400, and an invalid Content-Length (differing duplicates included) is an
// unrecoverable framing error; §5.1: no whitespace before the colon (400); §5.2: obs-fold is refused or
// replaced; §7.1: chunk sizes are hex and every chunk ends with CRLF. Node's llhttp parser enforces all of this only while
// `insecureHTTPParser` is off (CVE-2022-32213/32214/32215, CVE-2023-30589, CVE-2024-27982), so Sluice must
// never turn it on. Every case must be answered 400 and closed, or normalized so that each request the
// origin receives is one Sluice parsed and authorized as its own hop. A raw recorder in front of the
// origin keeps every byte the origin receives.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { rawRequest } from '../support/raw-client.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-smuggle';
const AUTH = `Basic ${Buffer.from(`s:${TOKEN}`).toString('base64')}`;


describe('request smuggling', () => {
  let origin: Origin;
  let recorder: Recorder;
  let sluice: TestSluice;
  let P: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    recorder = await startRecorder(origin.port);
    P = recorder.port;
    sluice = await startSluice(
      {
        // other.test resolves too, but the grant does not name it: a request for it must never arrive.
        grants: [{ id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${recorder.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await recorder?.close();
    await origin?.close();
  });

  /** The request the attacker hopes the origin runs: to a path nobody authorized, on a host outside the grant. */
  const smuggled = (): string => `GET http://other.test:${P}/smuggled HTTP/1.1\r\nHost: other.test:${P}\r\n\r\n`;
  const post = (fields: string, body: string): string =>
    `POST http://web.test:${P}/upload HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\n${fields}\r\n${body}`;

  it('listens with the strict HTTP parser: no listener opts into insecureHTTPParser, nor does this process', () => {
    expect(sluice.app.listeners.length).toBeGreaterThan(0);
    for (const listener of sluice.app.listeners) {
      expect((listener.server as unknown as { insecureHTTPParser?: boolean }).insecureHTTPParser, listener.name).not.toBe(true);
    }
    // Without an explicit option Node falls back to the process-wide flag; the cases below need it off.
    expect([...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' ')).not.toContain('--insecure-http-parser');
  });

  // [name, request]: refused with 400 request_malformed and the connection closed.
  const REFUSED: readonly (readonly [string, () => string])[] = [
    ['CL.TE: Content-Length then Transfer-Encoding (RFC 9112 §6.1)', () => post('Content-Length: 6\r\nTransfer-Encoding: chunked\r\n', `0\r\n\r\n${smuggled()}`)],
    ['TE.CL: Transfer-Encoding then Content-Length', () => post('Transfer-Encoding: chunked\r\nContent-Length: 3\r\n', `0\r\n\r\n${smuggled()}`)],
    ['two differing Content-Length fields (RFC 9112 §6.3)', () => post('Content-Length: 0\r\nContent-Length: 70\r\n', smuggled())],
    ['two equal Content-Length fields', () => post('Content-Length: 0\r\nContent-Length: 0\r\n', smuggled())],
    ['a Content-Length list', () => post('Content-Length: 0, 70\r\n', smuggled())],
    ['a signed Content-Length', () => post('Content-Length: +0\r\n', smuggled())],
    ['a hex Content-Length', () => post('Content-Length: 0x0\r\n', smuggled())],
    ['obs-fold continuing a field (RFC 9112 §5.2)', () => post('X-A: a\r\n Content-Length: 0\r\nContent-Length: 70\r\n', smuggled())],
    ['obs-fold continuing Transfer-Encoding', () => post('Transfer-Encoding: identity\r\n chunked\r\n', `0\r\n\r\n${smuggled()}`)],
    ['Transfer-Encoding: chunked, identity (chunked not final, RFC 9112 §6.3)', () => post('Transfer-Encoding: chunked, identity\r\n', `0\r\n\r\n${smuggled()}`)],
    ['Transfer-Encoding: identity', () => post('Transfer-Encoding: identity\r\n', smuggled())],
    ['Transfer-Encoding: xchunked', () => post('Transfer-Encoding: xchunked\r\n', `0\r\n\r\n${smuggled()}`)],
    ['Transfer-Encoding: chunked-false', () => post('Transfer-Encoding: chunked-false\r\n', `0\r\n\r\n${smuggled()}`)],
    ['two Transfer-Encoding fields, chunked then identity', () => post('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n', `0\r\n\r\n${smuggled()}`)],
    ['whitespace before the colon: "Transfer-Encoding :" (RFC 9112 §5.1)', () => post('Transfer-Encoding : chunked\r\nContent-Length: 0\r\n', `0\r\n\r\n${smuggled()}`)],
    ['a vertical tab before chunked', () => post('Transfer-Encoding: \x0bchunked\r\n', `0\r\n\r\n${smuggled()}`)],
    ['a form feed before chunked', () => post('Transfer-Encoding: \x0cchunked\r\n', `0\r\n\r\n${smuggled()}`)],
    ['a field line starting with whitespace before the first field', () => `POST http://web.test:${P}/upload HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 0\r\n\r\n0\r\n\r\n${smuggled()}`],
    ['a chunk size that is not hex (RFC 9112 §7.1)', () => post('Transfer-Encoding: chunked\r\n', `zz\r\nabc\r\n0\r\n\r\n${smuggled()}`)],
    ['a chunk size that overflows 64 bits', () => post('Transfer-Encoding: chunked\r\n', `10000000000000003\r\nabc\r\n0\r\n\r\n${smuggled()}`)],
    ['a negative chunk size', () => post('Transfer-Encoding: chunked\r\n', `-3\r\nabc\r\n0\r\n\r\n${smuggled()}`)],
    ['chunk data without its CRLF', () => post('Transfer-Encoding: chunked\r\n', `3\r\nabcXX0\r\n\r\n${smuggled()}`)],
    ['chunk lines ended by bare LF', () => post('Transfer-Encoding: chunked\r\n', `3\nabc\n0\n\n${smuggled()}`)],
    ['a chunk extension ended by bare LF', () => post('Transfer-Encoding: chunked\r\n', `3;x\nabc\r\n0\r\n\r\n${smuggled()}`)],
    ['a request line ended by bare LF', () => `POST http://web.test:${P}/upload HTTP/1.1\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 0\r\n\r\n${smuggled()}`],
  ];

  it.each(REFUSED)('%s: 400 request_malformed, closed, nothing smuggled', async (_name, request) => {
    const received = recorder.received().length;
    const requests = origin.requests.length;
    const res = await rawRequest(sluice.port, request(), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('Proxy-Status: sluice; error=http_request_error; details="request_malformed"');
    // Exactly one response: nothing after the refusal was parsed as a request.
    expect(res.text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
    expect(res.closed).toBe(true);
    expect(recorder.received().slice(received)).not.toContain('smuggled');
    expect(origin.requests.length).toBe(requests);
    expect(sluice.decisions().some((d) => d.target.includes('smuggled'))).toBe(false);
  });

  async function forwardOnce(request: string): Promise<{ text: string; raw: string; requests: Origin['requests'] }> {
    const received = recorder.received().length;
    const requests = origin.requests.length;
    const res = await rawRequest(sluice.port, request, { untilClose: true });
    return { text: res.text, raw: recorder.received().slice(received), requests: origin.requests.slice(requests) };
  }

  it('a request hidden in a Content-Length body stays body: the origin gets one request, framed by Sluice', async () => {
    const body = smuggled();
    const { text, raw, requests } = await forwardOnce(post(`Content-Length: ${body.length}\r\nConnection: close\r\n`, body));
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ method: 'POST', url: '/upload', body });
    expect(raw.match(/^(GET|POST) \//gm)).toHaveLength(1);
  });

  it.each([
    ['chunked', 'Transfer-Encoding: chunked\r\n'],
    ['CHUNKED (codings are case-insensitive, RFC 9112 §7)', 'Transfer-Encoding: CHUNKED\r\n'],
    ['chunked after a TAB (OWS, RFC 9110 §5.6.3)', 'Transfer-Encoding:\tchunked\r\n'],
  ])('a request hidden in a %s body stays body: Sluice re-frames it and the origin gets one request', async (_name, field) => {
    const inner = smuggled();
    const chunked = `${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
    const { text, raw, requests } = await forwardOnce(post(`${field}Connection: close\r\n`, chunked));
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ method: 'POST', url: '/upload', body: inner });
    expect(raw.match(/^(GET|POST) \//gm)).toHaveLength(1);
    // Transfer-Encoding is hop-by-hop (RFC 9110 §7.6.1): the client's field never crosses Sluice.
    expect(raw).not.toMatch(/CHUNKED|:\tchunked/);
  });

  it('a pipelined second request is a hop of its own: authorized again and refused when outside the grant', async () => {
    const first = post('Content-Length: 3\r\n', 'abc');
    const second = `GET http://other.test:${P}/smuggled HTTP/1.1\r\nHost: other.test:${P}\r\nConnection: close\r\n\r\n`;
    const { text, raw, requests } = await forwardOnce(first + second);
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toContain('details="destination_not_granted"');
    expect(requests.map((r) => r.url)).toEqual(['/upload']);
    expect(raw).not.toContain('smuggled');
    // Node hands pipelined requests over as they are parsed, so the refusal may be recorded first.
    const recent = sluice.decisions().slice(-2);
    const upload = recent.find((d) => d.reason === 'granted');
    const refused = recent.find((d) => d.reason === 'destination_not_granted');
    expect(upload).toMatchObject({ canonical: `web.test:${P}`, target: `http://web.test:${P}/upload` });
    expect(refused).toMatchObject({ canonical: `other.test:${P}`, principal: 's', connection: upload?.connection });
  });

  it('keeps serving on a new connection after every refusal', async () => {
    const { text, requests } = await forwardOnce(`GET http://web.test:${P}/after HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(requests.map((r) => r.url)).toEqual(['/after']);
  });
});
