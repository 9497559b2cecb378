// The first bytes inside a mediated tunnel (src/proxy/tunnel/tunnel-start.ts). The threat: a principal whose
// grant holds only http://host:port gets its CONNECT accepted and then sends TLS (a ClientHello, to reach
// an https origin it was never granted), the HTTP/2 preface (RFC 9113 §3.4), or raw bytes for some other
// protocol on that port. Each is told apart from an HTTP/1.1 request line (RFC 9112 §3: method is a token,
// RFC 9110 §5.6.2) before node:http or any origin sees a byte; a split preface is waited for, not guessed.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyTunnelStart, readTunnelStart } from '../../../../src/proxy/tunnel/tunnel-start.js';

const TLS_CLIENT_HELLO_START = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]);

describe('classifyTunnelStart', () => {
  it.each([
    ['GET / HTTP/1.1\r\n', 'http'],
    ['POST /x HTTP/1.1\r\n', 'http'],
    ['PUT', 'http'],
    ['PATCH', 'http'],
    ['OPTIONS * HTTP/1.1\r\n', 'http'],
    ['g', 'http'], // a token, lower case: node:http's strict parser decides the rest
    ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'not_http'],
    ['PRI ', 'not_http'],
    ['P', 'incomplete'],
    ['PR', 'incomplete'],
    ['PRI', 'incomplete'],
    ['PRIX', 'http'], // an unknown method is node:http's to refuse, as on any connection
    ['', 'incomplete'],
    ['\x00\x01', 'not_http'],
    [' GET / HTTP/1.1', 'not_http'],
    ['\r\nGET / HTTP/1.1', 'not_http'],
    ['\x80\x2e\x01\x00\x02', 'not_http'], // an SSLv2-style ClientHello
  ])('%j is %s', (text, kind) => {
    expect(classifyTunnelStart(Buffer.from(text, 'latin1')).kind).toBe(kind);
  });

  it('a TLS handshake record is refused from its first byte, with a detail that names TLS and the rule it would need', () => {
    for (let n = 1; n <= TLS_CLIENT_HELLO_START.length; n++) {
      const start = classifyTunnelStart(TLS_CLIENT_HELLO_START.subarray(0, n));
      expect(start).toMatchObject({ kind: 'not_http', detail: expect.stringContaining('TLS') });
      expect(start.kind === 'not_http' && start.detail).toContain('https://');
    }
  });

  it('names the HTTP/2 preface', () => {
    expect(classifyTunnelStart(Buffer.from('PRI * HTTP/2.0\r\n'))).toMatchObject({ kind: 'not_http', detail: expect.stringContaining('HTTP/2') });
  });
});

describe('readTunnelStart', () => {
  const open: net.Socket[] = [];
  let server: net.Server | null = null;
  afterEach(async () => {
    for (const s of open.splice(0)) s.destroy();
    await new Promise<void>((resolve) => (server === null ? resolve() : server.close(() => resolve())));
    server = null;
  });

  /** A connected pair on loopback: [the proxy's side, the client's side]. */
  async function pair(): Promise<[net.Socket, net.Socket]> {
    const accepted = new Promise<net.Socket>((resolve) => {
      server = net.createServer({ allowHalfOpen: true }, resolve);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = net.connect((server!.address() as net.AddressInfo).port, '127.0.0.1');
    const proxySide = await accepted;
    proxySide.pause();
    open.push(client, proxySide);
    return [proxySide, client];
  }

  it('hands on every byte read, unchanged, when they start a request, and leaves the socket paused', async () => {
    const [proxySide, client] = await pair();
    const reading = readTunnelStart(proxySide, Buffer.from('P'), 2000);
    client.write('OST /upload HTTP/1.1\r\n');
    const read = await reading;
    expect(read.ok && read.head.toString()).toMatch(/^POST \/upload/);
    expect(proxySide.isPaused()).toBe(true);
    expect(proxySide.listenerCount('data')).toBe(0);
  });

  it('waits for a split HTTP/2 preface and refuses it', async () => {
    const [proxySide, client] = await pair();
    const reading = readTunnelStart(proxySide, Buffer.alloc(0), 2000);
    client.write('PR');
    client.write('I * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    expect(await reading).toMatchObject({ ok: false, reason: 'tunnel_not_http', detail: expect.stringContaining('HTTP/2') });
  });

  it('a client that closes before sending anything is client_gone', async () => {
    const [proxySide, client] = await pair();
    const reading = readTunnelStart(proxySide, Buffer.alloc(0), 2000);
    client.end();
    expect(await reading).toMatchObject({ ok: false, reason: 'client_gone' });
  });

  it('a client that sends nothing within the timeout is request_timeout', async () => {
    const [proxySide] = await pair();
    expect(await readTunnelStart(proxySide, Buffer.alloc(0), 50)).toMatchObject({ ok: false, reason: 'request_timeout' });
  });

  it('decides from the bytes that came with the CONNECT head alone, without reading', async () => {
    const [proxySide] = await pair();
    expect(await readTunnelStart(proxySide, TLS_CLIENT_HELLO_START, 2000)).toMatchObject({ ok: false, reason: 'tunnel_not_http' });
  });
});
