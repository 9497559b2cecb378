// onRequest (src/proxy/ingress/on-request.ts): every absolute-form request on a keep-alive client connection is
// its own hop, identified, canonicalized and authorized again. What a hostile client tries: a second
// request to a host outside its grant on a connection whose first request was allowed; a Host header
// that disagrees with the URI (RFC 9112 §3.2.2), hoping one layer routes by one and another by the other;
// a refused request whose unread body carries a second request (smuggling it past the decision); its own
// Proxy-Authorization forwarded to the origin; another grant's token on a connection already identified
// (authority bleeding between principals, principle A5 in docs/principles.md); and more bytes than its
// grant's budget. A real in-process Sluice (startSluice), raw sockets, a recording origin.
import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyStatus, Reasons } from '../../../../src/core/index.js';
import { denialBody } from '../../../../src/proxy/ingress/respond.js';
import { startHttpOrigin, type Origin } from '../../../support/origins.js';
import { parseResponseHead, rawRequest, type ParsedHead } from '../../../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../../../support/sluice.js';
import { waitFor, waitUntil } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const TOKEN_A = 'token-a-0123456789abcdef';
const TOKEN_B = 'token-b-0123456789abcdef';
const TOKEN_SMALL = 'token-small-0123456789';
const basic = (id: string, token: string): string => `Basic ${Buffer.from(`${id}:${token}`).toString('base64')}`;
const BIG_BODY = 'x'.repeat(4096);

let origin: Origin;
let sluice: TestSluice;
const sockets: net.Socket[] = [];

beforeAll(async () => {
  origin = await startHttpOrigin({
    handler: (req, res) => {
      const body = req.url === '/big' ? BIG_BODY : `origin:${req.method ?? ''}:${req.url ?? ''}`;
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
  });
  const dest = (host: string): string => `http://${host}:${origin.port}`;
  sluice = await startSluice(
    {
      grants: [
        { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [dest('a.test')], allowAddressClasses: ['loopback'] },
        { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [dest('b.test')], allowAddressClasses: ['loopback'] },
        { id: 'small', tokenSha256: tokenHash(TOKEN_SMALL), destinations: [dest('a.test')], allowAddressClasses: ['loopback'], limits: { maxBytes: 1024 } },
      ],
    },
    { lookup: tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] }) },
  );
});

afterAll(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await sluice?.close();
  await origin?.close();
});

beforeEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  sluice.records.length = 0;
  origin.requests.length = 0;
});

interface Response {
  readonly head: ParsedHead;
  readonly body: string;
}

/** One client connection to Sluice that reads its responses in order (Content-Length framed). */
class Session {
  private buffer = Buffer.alloc(0);
  closed = false;
  readonly socket: net.Socket;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    sockets.push(this.socket);
    this.socket.on('error', () => undefined);
    this.socket.on('data', (c: Buffer) => (this.buffer = Buffer.concat([this.buffer, c])));
    this.socket.on('close', () => (this.closed = true));
  }

  send(data: string): this {
    this.socket.write(data);
    return this;
  }

  async next(): Promise<Response> {
    let framed: { head: ParsedHead; end: number } | null = null;
    await waitUntil(() => {
      const head = parseResponseHead(this.buffer);
      if (head === null) return false;
      const end = head.headLength + Number(head.headers['content-length'] ?? 0);
      if (this.buffer.length < end) return false;
      framed = { head, end };
      return true;
    }, { timeoutMs: TIMEOUT_MS, label: 'a whole response' });
    const { head, end } = framed as unknown as { head: ParsedHead; end: number };
    const body = this.buffer.subarray(head.headLength, end).toString('utf8');
    this.buffer = this.buffer.subarray(end);
    return { head, body };
  }

  async untilClosed(): Promise<void> {
    await waitUntil(() => this.closed, { timeoutMs: TIMEOUT_MS, label: 'the connection to close' });
  }

  get unread(): Buffer {
    return this.buffer;
  }
}

function get(host: string, auth: string | null, extra = '', path = '/'): string {
  return `GET http://${host}:${origin.port}${path} HTTP/1.1\r\nHost: ${host}:${origin.port}\r\n${auth === null ? '' : `Proxy-Authorization: ${auth}\r\n`}${extra}\r\n`;
}

/** A denial's status, Proxy-Status and body are read from the hop's decision record. */
function expectFromDecision(response: Response, index: number, reason: string): void {
  const decision = sluice.decisions()[index];
  expect(decision?.reason).toBe(reason);
  if (decision === undefined) return;
  expect(response.head.status).toBe(Reasons[decision.reason].status);
  expect(response.head.headers['proxy-status']).toBe(proxyStatus(decision.reason));
  expect(response.body).toBe(denialBody(decision));
}

describe('onRequest: every request on a keep-alive connection is its own hop', () => {
  it('refuses a second request to an ungranted host on a connection whose first was allowed, and keeps serving the granted one', async () => {
    const s = new Session(sluice.port);
    s.send(get('a.test', basic('a', TOKEN_A)));
    const first = await s.next();
    expect(first.head.status).toBe(200);
    expect(first.body).toBe('origin:GET:/');
    expect(first.head.headers['proxy-status']).toBeUndefined();
    s.send(get('b.test', null));
    const second = await s.next();
    expectFromDecision(second, 1, 'destination_not_granted');
    expect(second.body).toContain(`destination b.test:${origin.port}, grant a`);
    // A denial without a body keeps the connection: a third, granted request is served on it.
    s.send(get('a.test', null, '', '/third'));
    expect((await s.next()).body).toBe('origin:GET:/third');
    expect(s.closed).toBe(false);
    expect(sluice.decisions().map((d) => [d.hop, d.reason, d.principal])).toEqual([[1, 'granted', 'a'], [2, 'destination_not_granted', 'a'], [3, 'granted', 'a']]);
    expect(origin.requests.map((r) => r.url)).toEqual(['/', '/third']);
  });

  it('never forwards the client’s Proxy-Authorization to the origin, and sets Host to the canonical destination', async () => {
    const s = new Session(sluice.port);
    s.send(get('A.TEST', basic('a', TOKEN_A)));
    expect((await s.next()).head.status).toBe(200);
    const seen = origin.requests[0];
    expect(seen?.headers['proxy-authorization']).toBeUndefined();
    expect(seen?.rawHeaders.join('\n')).not.toContain(TOKEN_A);
    expect(seen?.rawHeaders.join('\n')).not.toContain(Buffer.from(`a:${TOKEN_A}`).toString('base64'));
    expect(seen?.headers.host).toBe(`a.test:${origin.port}`);
    expect(JSON.stringify(sluice.records)).not.toContain(TOKEN_A);
  });
});

describe('onRequest: the target and the Host header', () => {
  it.each([
    ['another host', (port: number) => `b.test:${port}`],
    ['the same host on another port', (port: number) => `a.test:${port + 1}`],
    ['a second Host line', (port: number) => `a.test:${port}\r\nHost: a.test:${port}`],
  ])('refuses a Host naming %s with host_mismatch; the origin sees nothing', async (_label, host) => {
    const data = `GET http://a.test:${origin.port}/ HTTP/1.1\r\nHost: ${host(origin.port)}\r\nProxy-Authorization: ${basic('a', TOKEN_A)}\r\n\r\n`;
    const s = new Session(sluice.port).send(data);
    expectFromDecision(await s.next(), 0, 'host_mismatch');
    expect(sluice.decisions()).toHaveLength(1);
    expect(origin.requests).toHaveLength(0);
  });

  it.each([
    ['https://', 'https://a.test/', 'scheme_forbidden'],
    ['an origin-form target', '/', 'request_malformed'],
    ['userinfo', 'http://u:p@a.test/', 'destination_malformed'],
  ])('refuses %s in the request target', async (_label, target, reason) => {
    const s = new Session(sluice.port).send(`GET ${target} HTTP/1.1\r\nProxy-Authorization: ${basic('a', TOKEN_A)}\r\n\r\n`);
    expectFromDecision(await s.next(), 0, reason);
    expect(origin.requests).toHaveLength(0);
  });
});

describe('onRequest: a denial of a request with a body', () => {
  it('closes the connection, so the unread body is never parsed as a next request', async () => {
    const smuggled = get('a.test', basic('a', TOKEN_A), '', '/smuggled');
    const data = `POST http://b.test:${origin.port}/ HTTP/1.1\r\nHost: b.test:${origin.port}\r\nProxy-Authorization: ${basic('a', TOKEN_A)}\r\nContent-Length: ${Buffer.byteLength(smuggled)}\r\n\r\n${smuggled}`;
    const s = new Session(sluice.port).send(data);
    const denied = await s.next();
    expectFromDecision(denied, 0, 'destination_not_granted');
    expect(denied.head.headers['connection']).toBe('close');
    await s.untilClosed();
    expect(s.unread.length).toBe(0);
    expect(sluice.decisions()).toHaveLength(1);
    expect(origin.requests).toHaveLength(0);
  });
});

describe('onRequest: the principal is fixed for the connection', () => {
  it('refuses another grant’s token on the same connection with principal_changed and closes it', async () => {
    const s = new Session(sluice.port);
    s.send(get('a.test', basic('a', TOKEN_A)));
    expect((await s.next()).head.status).toBe(200);
    // Grant b's token is valid, and b.test is in grant b: still refused on a's connection.
    s.send(get('b.test', basic('b', TOKEN_B)));
    const changed = await s.next();
    expectFromDecision(changed, 1, 'principal_changed');
    // Attributed to the connection's principal, not to nobody: the record and the body name grant a.
    expect(sluice.decisions()[1]?.principal).toBe('a');
    expect(changed.body).toContain('grant a)');
    expect(changed.head.headers['connection']).toBe('close');
    await s.untilClosed();
    expect(origin.requests.map((r) => r.url)).toEqual(['/']);
    expect(sluice.decisions()).toHaveLength(2);
  });
});

describe('onRequest: the grant’s byte budget', () => {
  it('cuts a response at the budget (close record byte_limit), then refuses the grant’s next requests with byte_limit_reached', async () => {
    const s = new Session(sluice.port);
    s.send(get('a.test', basic('small', TOKEN_SMALL), '', '/big'));
    await s.untilClosed();
    const head = parseResponseHead(s.unread);
    expect(head?.status).toBe(200);
    // Cut short: fewer body bytes than the origin's Content-Length.
    expect(s.unread.length - (head?.headLength ?? 0)).toBeLessThan(BIG_BODY.length);
    await waitUntil(() => sluice.closes().length === 1, { timeoutMs: TIMEOUT_MS, label: 'the close record' });
    expect(sluice.closes()[0]).toMatchObject({ principal: 'small', closedBy: 'byte_limit' });

    const again = await rawRequest(sluice.port, get('a.test', basic('small', TOKEN_SMALL)));
    const refused = parseResponseHead(again.data);
    expect(refused?.status).toBe(429);
    expect(refused?.headers['proxy-status']).toBe(proxyStatus('byte_limit_reached'));
    expect(sluice.decisions().at(-1)).toMatchObject({ principal: 'small', reason: 'byte_limit_reached' });
    expect(origin.requests.map((r) => r.url)).toEqual(['/big']);
  });
});

describe('onRequest: one decision per hop', () => {
  it('pipelined requests each get exactly one decision record, and their answers come in request order', async () => {
    const s = new Session(sluice.port);
    const closed = waitFor(s.socket, 'close', TIMEOUT_MS * 2).catch(() => undefined);
    s.send(get('a.test', basic('a', TOKEN_A), '', '/1') + get('b.test', null, '', '/2') + get('a.test', null, '', '/3'));
    const answers = [await s.next(), await s.next(), await s.next()];
    expect(answers.map((a) => a.head.status)).toEqual([200, 403, 200]);
    // node:http reads the pipelined heads at once: records may be written out of order, never twice.
    expect(sluice.decisions().map((d) => d.hop).sort()).toEqual([1, 2, 3]);
    expect(sluice.decisions().find((d) => d.hop === 2)?.reason).toBe('destination_not_granted');
    await waitUntil(() => sluice.closes().length === 2, { timeoutMs: TIMEOUT_MS, label: 'two close records' });
    expect(sluice.closes().map((c) => c.hop).sort()).toEqual([1, 3]);
    s.socket.destroy();
    await closed;
  });
});
