// Threat: a CONNECT pipelined behind an absolute-form GET on one client connection. Review 2026-12
// finding 14: `GET …\r\n\r\nCONNECT …\r\n\r\n` in one write got only the CONNECT's 403; the GET had
// reached the origin, but its 200 never reached the client, because node:http hands the socket over at
// the CONNECT head and the CONNECT's answer ended (or, when allowed, took over) the connection while the
// GET's response was still pending. RFC 9112 §9.3.2: a server MUST send the responses to pipelined
// requests in the order the requests were received, and may work on them in parallel only if all are
// safe (CONNECT is not). So the GET's whole response comes first, then the CONNECT's answer; and no
// byte after the CONNECT head is read, parsed or relayed until then (had it been, a tunnel byte could be
// taken for a request, or a response written into a tunnel).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { parseResponseHead, type ParsedHead } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-pipelined';
const AUTH = `Basic ${Buffer.from(`p:${TOKEN}`).toString('base64')}`;
const MIB = 1024 * 1024;

interface Exchange {
  /** Each complete response in the order received (heads with a Content-Length body, or a 200 to CONNECT). */
  readonly responses: { readonly head: ParsedHead; readonly body: Buffer }[];
  /** What followed the last response: tunnel bytes. */
  readonly rest: Buffer;
  readonly closed: boolean;
}

/**
 * Writes `data` in one write, half-closes, and reads until the server closes (bounded). The echo server
 * ends its side once the tunnel passes on the half-close, so an allowed tunnel ends too. Without
 * `halfClose` the client only writes: for exchanges that Sluice itself ends (node:http answers a client's
 * FIN on a connection it still parses by aborting the requests in flight, a behaviour of its own).
 */
function exchange(port: number, data: string, { halfClose = true, timeoutMs = 8000 } = {}): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 400))}`));
    }, timeoutMs);
    socket.on('connect', () => (halfClose ? socket.end(data) : socket.write(data)));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => socket.end());
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(split(Buffer.concat(chunks)));
    });
  });
}

function split(buf: Buffer): Exchange {
  const responses: { head: ParsedHead; body: Buffer }[] = [];
  let rest = buf;
  for (;;) {
    const head = parseResponseHead(rest);
    if (head === null) break;
    const length = head.status === 200 && /connection established/i.test(head.head.split('\r\n')[0] ?? '') ? 0 : Number(head.headers['content-length'] ?? 0);
    if (rest.length < head.headLength + length) break;
    responses.push({ head, body: rest.subarray(head.headLength, head.headLength + length) });
    rest = rest.subarray(head.headLength + length);
    if (length === 0 && head.status === 200) break;
  }
  return { responses, rest, closed: true };
}

describe('review 2026-12 finding 14: a CONNECT pipelined after a GET', () => {
  let origin: Origin;
  let echo: EchoServer;
  let sluice: TestSluice;
  let P: number;
  let E: number;

  beforeAll(async () => {
    origin = await startHttpOrigin({
      handler: (req, res) => {
        // Answered late, so the CONNECT behind the GET is parsed while the GET's response is pending.
        const delayMs = req.url === '/slow' ? 200 : 0;
        const body = req.url === '/big' ? Buffer.alloc(MIB, 0x62) : Buffer.from(`origin:${req.method ?? ''}:${req.url ?? ''}`);
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
          res.end(body);
        }, delayMs);
      },
    });
    echo = await startTcpEchoServer();
    P = origin.port;
    E = echo.port;
    sluice = await startSluice(
      {
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`http://web.test:${P}`, `tcp://echo.test:${E}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
    await origin?.close();
  });

  const get = (path: string): string => `GET http://web.test:${P}${path} HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;
  const connect = (target: string): string => `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;

  it('GET + allowed CONNECT in one write: the GET\'s 200 and body first, then 200 to the CONNECT, then the tunnel', async () => {
    const got = await exchange(sluice.port, get('/slow') + connect(`echo.test:${E}`) + 'PING');
    expect(got.responses.map((r) => r.head.status)).toEqual([200, 200]);
    expect(got.responses[0]?.body.toString()).toBe('origin:GET:/slow');
    expect(got.responses[1]?.head.head).toMatch(/^HTTP\/1\.1 200 Connection established/i);
    expect(got.rest.toString()).toBe('PING');
  });

  it('GET + denied CONNECT in one write: the GET\'s 200 and body first, then 403 destination_not_granted', async () => {
    const got = await exchange(sluice.port, get('/slow') + connect(`other.test:${E}`));
    expect(got.responses.map((r) => r.head.status)).toEqual([200, 403]);
    expect(got.responses[0]?.body.toString()).toBe('origin:GET:/slow');
    expect(got.responses[1]?.head.headers['proxy-status']).toContain('details="destination_not_granted"');
    expect(got.rest.length).toBe(0);
  });

  it('two GETs + CONNECT: both responses in order, then the CONNECT\'s answer', async () => {
    const got = await exchange(sluice.port, get('/slow') + get('/second') + connect(`echo.test:${E}`) + 'PONG');
    expect(got.responses.map((r) => r.body.toString())).toEqual(['origin:GET:/slow', 'origin:GET:/second', '']);
    expect(got.rest.toString()).toBe('PONG');
  });

  it('a 1 MiB GET response ahead of the CONNECT is written in full (backpressure still resumes it)', async () => {
    const got = await exchange(sluice.port, get('/big') + connect(`echo.test:${E}`) + 'PING');
    expect(got.responses.map((r) => r.head.status)).toEqual([200, 200]);
    expect(got.responses[0]?.body.length).toBe(MIB);
    expect(got.rest.toString()).toBe('PING');
  });

  it('tunnel bytes that look like a request are never parsed as one: they reach the tunnel, not an origin', async () => {
    const smuggled = `GET http://other.test:${P}/smuggled HTTP/1.1\r\nHost: other.test:${P}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;
    const got = await exchange(sluice.port, get('/slow') + connect(`echo.test:${E}`) + smuggled);
    expect(got.responses.map((r) => r.head.status)).toEqual([200, 200]);
    expect(got.rest.toString()).toBe(smuggled);
    expect(origin.requests.some((r) => r.url === '/smuggled')).toBe(false);
    expect(sluice.decisions().some((r) => r.target.includes('/smuggled'))).toBe(false);
  });

  it('records one decision for each request, numbered in the order they came', async () => {
    const before = sluice.decisions().length;
    await exchange(sluice.port, get('/slow') + connect(`other.test:${E}`));
    const records = sluice.decisions().slice(before).sort((a, b) => a.hop - b.hop);
    expect(records.map((r) => [r.hop, r.request, r.reason])).toEqual([
      [1, 'forward', 'granted'],
      [2, 'connect', 'destination_not_granted'],
    ]);
  });

  it('GET with Connection: close + CONNECT: the GET\'s response, then the connection ends; the CONNECT is neither answered nor dialed', async () => {
    // RFC 9112 §9.6: after a request with close, the server MUST NOT process further requests.
    const before = echo.connections;
    const closing = `GET http://web.test:${P}/slow HTTP/1.1\r\nHost: web.test:${P}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`;
    const got = await exchange(sluice.port, closing + connect(`echo.test:${E}`) + 'PING', { halfClose: false });
    expect(got.responses.map((r) => [r.head.status, r.body.toString()])).toEqual([[200, 'origin:GET:/slow']]);
    expect(got.rest.length).toBe(0);
    expect(echo.connections).toBe(before);
  });

  it('GET + a malformed request: the GET\'s 200 first, then 400 request_malformed', async () => {
    const got = await exchange(sluice.port, `${get('/slow')}GET http://web.test:${P}/x HTTP/1.1\r\nHost : web.test\r\n\r\n`, { halfClose: false });
    expect(got.responses.map((r) => r.head.status)).toEqual([200, 400]);
    expect(got.responses[0]?.body.toString()).toBe('origin:GET:/slow');
    expect(got.responses[1]?.head.headers['proxy-status']).toContain('details="request_malformed"');
  });
});
