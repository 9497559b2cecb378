// listeners[].proxyProtocol in a running Sluice, from the threats first. A client that reaches the
// listener directly must not forge its source with a header of its own (trustedSources); a missing,
// malformed, oversized or slow header is refused with a decision record and a close that answers
// nothing; a header split across packets is read whole; the carried client address is the one audited
// (`source`) and the one the auth throttle counts; a header on a listener without proxyProtocol is
// just a malformed request, as before. The process keeps serving throughout.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-proxy-protocol';
const HEADERS_MS = 400;
const SIG = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

let origin: Origin;
let sluice: TestSluice;
const ports: Record<string, number> = {};

function v2Tcp4(src: [number, number, number, number], sport: number): Buffer {
  const block = Buffer.alloc(12);
  Buffer.from(src).copy(block, 0);
  Buffer.from([127, 0, 0, 1]).copy(block, 4);
  block.writeUInt16BE(sport, 8);
  block.writeUInt16BE(3128, 10);
  return Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0x00, 0x0c]), block]);
}

const v1 = (source: string): string => `PROXY TCP4 ${source} 127.0.0.1 40000 3128\r\n`;

function get(token = TOKEN): string {
  return `GET http://origin.test:${origin.port}/x HTTP/1.1\r\nHost: origin.test:${origin.port}\r\nProxy-Authorization: Bearer ${token}\r\nConnection: close\r\n\r\n`;
}

/** The decision records written since `from`. */
function since(from: number): ReturnType<TestSluice['decisions']> {
  return sluice.decisions().slice(from);
}

beforeAll(async () => {
  origin = await startHttpOrigin();
  sluice = await startSluice(
    {
      listeners: [
        { name: 'lb', listen: '127.0.0.1:0', identify: 'token', proxyProtocol: { trustedSources: ['127.0.0.1/32'] } },
        { name: 'lb-socks', listen: '127.0.0.1:0', protocol: 'socks5', proxyProtocol: { trustedSources: ['127.0.0.1/32'] } },
        // All test traffic is loopback: this listener trusts only a range it never comes from.
        { name: 'remote-lb', listen: '127.0.0.1:0', identify: 'token', proxyProtocol: { trustedSources: ['10.0.0.0/8'] } },
        { name: 'plain', listen: '127.0.0.1:0', identify: 'token' },
      ],
      timeouts: { headersMs: HEADERS_MS },
      limits: { authFailuresPerMinutePerSource: 2, authFailuresPerMinute: 100 },
      dns: { hosts: { 'origin.test': ['127.0.0.1'] } },
      grants: [{ id: 'g', tokenSha256: tokenHash(TOKEN), destinations: [`http://origin.test:${origin.port}`, `tcp://origin.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
    },
    { lookup: tableLookup({}) },
  );
  for (const l of sluice.app.listeners) ports[l.name] = Number(l.address.slice(l.address.lastIndexOf(':') + 1));
});

afterAll(async () => {
  await sluice?.close();
  await origin?.close();
});

describe('a listener with proxyProtocol', () => {
  it('serves a request behind a v1 header and audits the carried client address as source', async () => {
    const from = sluice.decisions().length;
    const res = await rawRequest(ports['lb']!, v1('203.0.113.9') + get());
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(res.text).toContain('origin:GET:');
    expect(since(from)).toMatchObject([{ listener: 'lb', decision: 'allow', reason: 'granted', source: '203.0.113.9' }]);
  });

  it('reads a v2 header split across packets, with the request in the same packet as its tail', async () => {
    const from = sluice.decisions().length;
    const header = v2Tcp4([198, 51, 100, 4], 5555);
    const socket = net.connect(ports['lb']!, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const reply = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (c: Buffer) => (text += c.toString()));
      socket.on('close', () => resolve(text));
    });
    socket.write(header.subarray(0, 5));
    await new Promise((resolve) => setTimeout(resolve, 20)); // a separate packet (not an observable event)
    socket.write(header.subarray(5, 14));
    await new Promise((resolve) => setTimeout(resolve, 20));
    socket.write(Buffer.concat([header.subarray(14), Buffer.from(get())]));
    expect(await reply).toMatch(/^HTTP\/1\.1 200 /);
    expect(since(from)).toMatchObject([{ decision: 'allow', source: '198.51.100.4' }]);
  });

  it('takes a LOCAL (v2) or UNKNOWN (v1) header as the peer being the client', async () => {
    const from = sluice.decisions().length;
    const local = Buffer.concat([SIG, Buffer.from([0x20, 0x00, 0x00, 0x00])]);
    expect((await rawRequest(ports['lb']!, Buffer.concat([local, Buffer.from(get())]))).text).toMatch(/^HTTP\/1\.1 200 /);
    expect((await rawRequest(ports['lb']!, `PROXY UNKNOWN\r\n${get()}`)).text).toMatch(/^HTTP\/1\.1 200 /);
    expect(since(from).map((d) => d.source)).toEqual(['127.0.0.1', '127.0.0.1']);
  });

  it('refuses a spoofed header from a peer outside trustedSources: closed, nothing answered, one record', async () => {
    const from = sluice.decisions().length;
    const res = await rawRequest(ports['remote-lb']!, v1('10.9.9.9') + get(), { untilClose: true });
    expect(res.data.length).toBe(0);
    expect(since(from)).toMatchObject([
      {
        listener: 'remote-lb',
        decision: 'deny',
        reason: 'request_malformed',
        detail: 'untrusted source 127.0.0.1: not in proxyProtocol.trustedSources',
        source: '127.0.0.1',
        principal: null,
      },
    ]);
  });

  it.each([
    ['no header at all (a direct client)', () => get()],
    ['a malformed v1 line', () => `PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n${get()}`],
    ['an oversized v1 line', () => `PROXY UNKNOWN ${'f'.repeat(600)}\r\n${get()}`],
    ['an oversized v2 header', () => Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0x10, 0x00]), Buffer.alloc(4096)])],
    ['a v2 LOCAL header with an unassigned command', () => Buffer.concat([SIG, Buffer.from([0x2f, 0x00, 0x00, 0x00]), Buffer.from(get())])],
  ])('refuses %s: closed, nothing answered, a request_malformed record', async (_name, data) => {
    const from = sluice.decisions().length;
    const res = await rawRequest(ports['lb']!, data(), { untilClose: true });
    expect(res.data.length).toBe(0);
    const records = since(from);
    expect(records).toMatchObject([{ listener: 'lb', decision: 'deny', reason: 'request_malformed', source: '127.0.0.1' }]);
    expect(records[0]?.detail).toMatch(/^no valid PROXY header: /);
  });

  it('cuts off a slowloris header after timeouts.headersMs', async () => {
    const from = sluice.decisions().length;
    const started = Date.now();
    const res = await rawRequest(ports['lb']!, 'PROXY TCP4 1.2.3.4 ', { untilClose: true, timeoutMs: HEADERS_MS * 10 });
    expect(res.data.length).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expect(since(from)).toMatchObject([{ reason: 'request_malformed', detail: `no valid PROXY header: none complete within ${HEADERS_MS} ms` }]);
  });

  it('throttles auth failures by the carried client, not by the balancer every client shares', async () => {
    const from = sluice.decisions().length;
    for (let i = 0; i < 2; i++) expect((await rawRequest(ports['lb']!, v1('192.0.2.66') + get('wrong'))).text).toMatch(/^HTTP\/1\.1 407 /);
    // The guesser is blocked, even with a valid token now...
    expect((await rawRequest(ports['lb']!, v1('192.0.2.66') + get())).text).toMatch(/^HTTP\/1\.1 429 /);
    // ...while another client behind the same balancer is not.
    expect((await rawRequest(ports['lb']!, v1('192.0.2.77') + get())).text).toMatch(/^HTTP\/1\.1 200 /);
    expect(since(from).map((d) => [d.source, d.reason])).toEqual([
      ['192.0.2.66', 'token_invalid'],
      ['192.0.2.66', 'token_invalid'],
      ['192.0.2.66', 'auth_rate_limited'],
      ['192.0.2.77', 'granted'],
    ]);
  });

  it('reads the header on a SOCKS5 listener too', async () => {
    const from = sluice.decisions().length;
    const user = Buffer.from('g');
    const pass = Buffer.from(TOKEN);
    const greeting = Buffer.from([5, 1, 2]);
    const auth = Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]);
    const host = Buffer.from('origin.test');
    const connect = Buffer.concat([Buffer.from([5, 1, 0, 3, host.length]), host, Buffer.from([origin.port >> 8, origin.port & 0xff])]);
    const socket = net.connect(ports['lb-socks']!, '127.0.0.1');
    const replies: Buffer[] = [];
    const got = (n: number): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => void (Buffer.concat(replies).length >= n && resolve());
        socket.on('data', (c: Buffer) => (replies.push(c), check()));
        check();
      });
    socket.write(Buffer.concat([Buffer.from(v1('203.0.113.50')), greeting, auth, connect]));
    await got(2 + 2 + 10);
    socket.destroy();
    expect(since(from)).toMatchObject([{ listener: 'lb-socks', method: 'SOCKS5', decision: 'allow', source: '203.0.113.50' }]);
    expect(Buffer.concat(replies).subarray(4, 6)).toEqual(Buffer.from([5, 0]));
  });
});

describe('a listener without proxyProtocol', () => {
  it('answers a PROXY header as the malformed request it is (400), and records the peer as source', async () => {
    const from = sluice.decisions().length;
    const res = await rawRequest(ports['plain']!, v1('203.0.113.9') + get(), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(since(from)).toMatchObject([{ listener: 'plain', reason: 'request_malformed', source: '127.0.0.1' }]);
  });

  it('still serves (the process kept serving through every refusal above)', async () => {
    expect((await rawRequest(ports['plain']!, get())).text).toMatch(/^HTTP\/1\.1 200 /);
    expect(sluice.decisions().at(-1)).toMatchObject({ decision: 'allow', source: '127.0.0.1' });
  });
});
