// Threat: CR, LF and NUL injection. A sandbox (or an attacker who controls part of a URL or header that a
// sandboxed program sends) puts CR LF in a request-target or field value so that a proxy forwarding it
// writes an extra header or a second request to the origin (CWE-93, CWE-113; HTTP request splitting such
// as CVE-2018-12116 in Node's http client, and CVE-2019-9740/CVE-2019-9947 in Python's urllib). RFC 9112
// §2.2 and RFC 9110 §5.5: a field value never contains CR, LF or NUL, and a recipient MUST reject or
// replace them; RFC 9112 §3: a request-line is `method SP request-target SP HTTP-version`, and an invalid
// one "might be deliberately crafted to bypass security filters" and should be answered 400. Sluice must
// answer 400 and close, and the origin must see nothing but the requests Sluice itself parsed and
// authorized. A raw recorder in front of the origin keeps every byte the origin receives.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { rawRequest } from '../support/raw-client.js';
import { runCurl } from '../support/curl.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-crlf';
const AUTH = `Basic ${Buffer.from(`c:${TOKEN}`).toString('base64')}`;


describe('CR, LF and NUL in request targets and field values', () => {
  let origin: Origin;
  let recorder: Recorder;
  let echo: EchoServer;
  let sluice: TestSluice;
  let P: number;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    recorder = await startRecorder(origin.port);
    echo = await startTcpEchoServer();
    P = recorder.port;
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'c',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`http://web.test:${recorder.port}`, `tcp://web.test:${echo.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await recorder?.close();
    await origin?.close();
    await echo?.close();
  });

  const head = (target: string, extra = ''): string =>
    `GET ${target} HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\n${extra}\r\n`;

  // [name, request]: each is refused by the strict HTTP parser before Sluice sees a request.
  const REFUSED: readonly (readonly [string, () => string])[] = [
    ['CR inside the request-target', () => head(`http://web.test:${P}/a\rInjected: 1`)],
    ['NUL inside the request-target', () => head(`http://web.test:${P}/a\0b`)],
    ['NUL inside the host of the request-target', () => head(`http://web.test\0.evil.test:${P}/`)],
    ['TAB inside the request-target', () => head(`http://web.test:${P}/a\tb`)],
    ['CR inside a field value', () => head(`http://web.test:${P}/`, 'X-A: a\rInjected: 1\r\n')],
    ['a bare LF inside a field value', () => head(`http://web.test:${P}/`, 'X-A: a\nInjected: 1\r\n')],
    ['NUL inside a field value', () => head(`http://web.test:${P}/`, 'X-A: a\0Injected: 1\r\n')],
    ['DEL (a CTL) inside a field value', () => head(`http://web.test:${P}/`, 'X-A: a\x7fb\r\n')],
    ['CR inside a field name', () => head(`http://web.test:${P}/`, 'X\r-A: 1\r\n')],
    ['NUL inside a field name', () => head(`http://web.test:${P}/`, 'X\0A: 1\r\n')],
    ['CR LF inside Proxy-Authorization', () => `GET http://web.test:${P}/ HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: Basic x\rInjected: 1\r\n\r\n`],
    ['UTF-8 that a byte-truncating client turns into CR LF (CVE-2018-12116)', () => head(`http://web.test:${P}/\u010d\u010aInjected:%201`)],
    ['NUL inside a CONNECT target', () => `CONNECT web.test\0.evil.test:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['CR inside a CONNECT target', () => `CONNECT web.test:${echo.port}\rInjected: 1 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
  ];

  it.each(REFUSED)('%s: 400 request_malformed, closed, and the origin sees nothing', async (_name, request) => {
    const received = recorder.received().length;
    const connections = recorder.connections + echo.connections;
    const res = await rawRequest(sluice.port, Buffer.from(request(), 'utf8'), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('Proxy-Status: sluice; error=http_request_error; details="request_malformed"');
    expect(res.closed).toBe(true);
    expect(recorder.received().length).toBe(received);
    expect(recorder.connections + echo.connections).toBe(connections);
  });

  // CR LF ends the request-line early; what follows would be read as header lines (Node's parser takes a
  // line without HTTP-version as HTTP/0.9 and then still reads headers). Sluice must refuse such a request.
  it.each([
    ['CR LF', '\r\n'],
    ['a bare LF', '\n'],
  ])('%s inside an absolute-form target: 400, and no injected header reaches the origin', async (_name, eol) => {
    const requests = origin.requests.length;
    const received = recorder.received().length;
    const res = await rawRequest(sluice.port, `GET http://web.test:${P}/a${eol}Injected: 1 HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`, { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('details="request_malformed"');
    expect(recorder.received().slice(received)).not.toContain('Injected');
    expect(origin.requests.length).toBe(requests);
  });

  it('CR LF inside a CONNECT target: 400, never a tunnel', async () => {
    const connections = echo.connections;
    const res = await rawRequest(sluice.port, `CONNECT web.test:${echo.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\nbytes`, { untilClose: true, timeoutMs: 2000 }).catch((error: Error) => ({ text: error.message, closed: false }));
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.closed).toBe(true);
    expect(echo.connections).toBe(connections);
  });

  it('percent-encoded CR LF in a path is forwarded still encoded: it never becomes a header', async () => {
    const received = recorder.received().length;
    const res = await rawRequest(sluice.port, head(`http://web.test:${P}/a%0d%0aInjected:%201`, 'Connection: close\r\n'), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    const seen = origin.requests.at(-1);
    expect(seen?.url).toBe('/a%0d%0aInjected:%201');
    expect(seen?.headers.injected).toBeUndefined();
    expect(recorder.received().slice(received)).not.toContain('\r\nInjected');
  });

  it.each([
    ['absolute-form', () => head(`http://web.test%0d%0aInjected:1:${P}/`)],
    ['absolute-form NUL', () => head(`http://web.test%00.evil.test:${P}/`)],
    ['CONNECT', () => `CONNECT web.test%0d%0aInjected:1:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['CONNECT NUL', () => `CONNECT web.test%00.evil.test:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
  ])('percent-encoded CR LF or NUL in a host (%s) is 400 destination_malformed, never decoded', async (_name, request) => {
    const connections = recorder.connections + echo.connections;
    const res = await rawRequest(sluice.port, request());
    expect(res.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.text).toContain('details="destination_malformed"');
    expect(recorder.connections + echo.connections).toBe(connections);
  });

  it('obs-text that a byte-truncating client would turn into CR LF reaches the origin as one field, never a line break', async () => {
    // U+010D U+010A as UTF-8 (C4 8D C4 8A): 0D and 0A never appear as bytes on either side.
    const received = recorder.received().length;
    const res = await rawRequest(sluice.port, Buffer.from(head(`http://web.test:${P}/obs`, 'X-A: a\u010d\u010aInjected: 1\r\nConnection: close\r\n'), 'utf8'), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    const seen = origin.requests.at(-1);
    expect(seen?.url).toBe('/obs');
    expect(seen?.headers.injected).toBeUndefined();
    expect(recorder.received().slice(received)).not.toMatch(/\r\nInjected/);
  });

  it('keeps serving other clients after every refusal', async () => {
    const result = await runCurl(['--proxy', `http://c:${TOKEN}@127.0.0.1:${sluice.port}`, `http://web.test:${P}/after`]);
    expect(result.stdout).toBe('origin:GET:/after');
  });
});
