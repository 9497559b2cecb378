// The answers Sluice writes itself (src/proxy/ingress/respond.ts). A hostile client reads them for what they
// leak and how they frame: an audit-only code (token_grant_mismatch) would tell it that a guessed token is
// live for some other grant (review 2026-12 finding 13); a Content-Length that counts characters instead
// of bytes (the message has a ’) would leave bytes that the client, or a proxy in front, parses as the
// next response (RFC 9112 §6.3); a denial written after a relayed response head has started would be
// spliced into that response; a write to a socket that is already gone must not throw. Real loopback
// sockets and a real node:http server; the bytes on the wire are what is checked.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ADDRESS_CLASSES, proxyStatus, Reasons, Remedies, type ReasonCode } from '../../../../src/core/index.js';
import { denialBody, writeResponseDenial, writeSocketDenial, type DenialContext } from '../../../../src/proxy/ingress/respond.js';
import { AUTH_THROTTLE_WINDOW_SECONDS } from '../../../../src/grant/index.js';
import { parseResponseHead, rawRequest } from '../../../support/raw-client.js';
import { waitFor, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) {
    (s as http.Server).closeAllConnections?.();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

async function listen(server: net.Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

function track(socket: net.Socket): net.Socket {
  sockets.push(socket);
  socket.on('error', () => undefined);
  return socket;
}

/** A loopback TCP pair: `accepted` is the proxy's side of a client connection. */
async function pair(): Promise<{ accepted: net.Socket; client: net.Socket }> {
  const server = net.createServer();
  const port = await listen(server);
  const accepted = waitFor<net.Socket>(server, 'connection');
  const client = track(net.connect(port, '127.0.0.1'));
  return { accepted: track(await accepted), client };
}

/** Everything the client receives until the connection closes. */
function readUntilClose(client: net.Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  return withTimeout(waitFor(client, 'close', TIMEOUT_MS).then(() => Buffer.concat(chunks)), TIMEOUT_MS, 'the connection to close');
}

const ctx = (reason: ReasonCode, canonical: string | null = 'a.test:443', principal: string | null = 'g', more: Partial<DenialContext> = {}): DenialContext => ({
  reason,
  canonical,
  principal,
  request: 'connect',
  scheme: null,
  addresses: [],
  ...more,
});

async function socketDenial(context: DenialContext): Promise<{ raw: Buffer; head: NonNullable<ReturnType<typeof parseResponseHead>>; body: Buffer }> {
  const { accepted, client } = await pair();
  const received = readUntilClose(client);
  writeSocketDenial(accepted, context);
  const raw = await received;
  const head = parseResponseHead(raw);
  if (head === null) throw new Error(`no response head in ${JSON.stringify(raw.toString('latin1'))}`);
  return { raw, head, body: raw.subarray(head.headLength) };
}

describe('denialBody: one line naming the code, its message, the destination, the grant and the fix', () => {
  it('names the canonical destination and grant, and says so when neither is known yet', () => {
    expect(denialBody(ctx('destination_not_granted'))).toBe(
      `sluice: 403 destination_not_granted: ${Reasons.destination_not_granted.message} (destination a.test:443, grant g); fix: add a destination rule for https://a.test:443 to the grant (sluice run --destination https://a.test:443)\n`,
    );
    expect(denialBody(ctx('token_missing', null, null))).toBe(`sluice: 407 token_missing: ${Reasons.token_missing.message} (destination unknown, grant none); fix: ${Remedies.token_missing}\n`);
  });

  it('names the rule an absolute-form request would need with its own scheme', () => {
    expect(denialBody(ctx('destination_not_granted', 'deny.test:8080', 'g', { request: 'forward', scheme: 'http' }))).toMatch(/; fix: add a destination rule for http:\/\/deny\.test:8080 to the grant \(sluice run --destination http:\/\/deny\.test:8080\)\n$/);
    expect(denialBody(ctx('destination_not_granted', '[2001:db8::1]:443'))).toContain('rule for https://[2001:db8::1]:443 ');
  });

  it('UX review 2026-12-04 finding 3: an address class denial names the refused classes and the fix, never an address', () => {
    const addresses = [
      { address: '127.0.0.1', class: 'loopback', allowed: false },
      { address: '93.184.215.14', class: 'public', allowed: true },
      { address: '10.9.8.7', class: 'private', allowed: false },
      { address: '127.0.0.2', class: 'loopback', allowed: false },
    ] as const;
    const body = denialBody(ctx('address_class_denied', 'example.test:22443', 'g-1', { addresses }));
    expect(body).toBe(
      `sluice: 403 address_class_denied: ${Reasons.address_class_denied.message} (destination example.test:22443, grant g-1, denied classes loopback, private); ` +
        'fix: allow it with allowAddressClasses: [loopback, private] on the grant (sluice run --allow-class loopback --allow-class private), or only its addresses with allowAddresses (--allow-address; sluice explain lists them)\n',
    );
    for (const a of addresses) expect(body).not.toContain(a.address);
    const one = denialBody(ctx('address_class_denied', 'example.test:22443', 'g-1', { addresses: [addresses[0]] }));
    expect(one).toContain('(destination example.test:22443, grant g-1, denied class loopback); fix: allow it with allowAddressClasses: [loopback] on the grant (sluice run --allow-class loopback)');
  });

  it('a name that resolves only to classes no grant can allow gets no fix that check-config would refuse', () => {
    const body = denialBody(ctx('address_class_denied', 'sink.test:443', 'g', { addresses: [{ address: '0.0.0.0', class: 'unspecified', allowed: false }] }));
    expect(body).toContain('denied class unspecified); fix: nothing the grant can change');
    expect(body).not.toContain('allowAddressClasses');
    expect(body).not.toContain('0.0.0.0');
  });

  it('names classes only for address_class_denied: another code with answers says nothing of them', () => {
    const addresses = [{ address: '10.0.0.1', class: 'private', allowed: false }] as const;
    expect(denialBody(ctx('dial_refused', 'a.test:443', 'g', { addresses }))).not.toContain('private');
  });

  it('answers the audit-only token_grant_mismatch exactly as token_invalid, fix included', () => {
    const mismatch = denialBody(ctx('token_grant_mismatch', null, null));
    expect(mismatch).toBe(denialBody(ctx('token_invalid', null, null)));
    expect(mismatch).toContain(`; fix: ${Remedies.token_invalid}\n`);
    expect(mismatch).not.toContain('mismatch');
    expect(mismatch).not.toContain(Remedies.token_grant_mismatch);
  });

  it('stays one bounded line for every code, even for the longest destination and grant id', () => {
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}:65535`;
    const addresses = ADDRESS_CLASSES.map((c, i) => ({ address: `10.0.0.${i}`, class: c, allowed: false }));
    for (const reason of Object.keys(Reasons) as ReasonCode[]) {
      const body = denialBody(ctx(reason, longest, 'g'.repeat(128), { addresses }));
      expect(body.slice(0, -1), reason).not.toMatch(/[\r\n]/);
      expect(Buffer.byteLength(body), reason).toBeLessThan(1536);
    }
  });
});

describe('writeSocketDenial: a complete response on a raw socket, then the close', () => {
  it.each([
    ['request_malformed', 'HTTP/1.1 400 Bad Request'],
    ['destination_not_granted', 'HTTP/1.1 403 Forbidden'],
    ['token_invalid', 'HTTP/1.1 407 Proxy Authentication Required'],
    ['request_timeout', 'HTTP/1.1 408 Request Timeout'],
    ['expectation_unsupported', 'HTTP/1.1 417 Expectation Failed'],
    ['connections_exhausted', 'HTTP/1.1 429 Too Many Requests'],
    ['internal_error', 'HTTP/1.1 500 Internal Server Error'],
    ['dial_refused', 'HTTP/1.1 502 Bad Gateway'],
    ['dns_timeout', 'HTTP/1.1 504 Gateway Timeout'],
  ] as const)('%s is answered "%s" with Proxy-Status, an exact Content-Length and Connection: close', async (reason, statusLine) => {
    const { head, body } = await socketDenial(ctx(reason));
    expect(head.head.split('\r\n')[0]).toBe(statusLine);
    expect(head.headers['proxy-status']).toBe(proxyStatus(reason));
    expect(head.headers['proxy-status']).toContain(`details="${reason}"`);
    expect(head.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(head.headers['cache-control']).toBe('no-store');
    expect(head.headers['connection']).toBe('close');
    // Bytes, not characters: the messages carry a ’ (3 bytes in UTF-8); nothing follows the body.
    expect(Number(head.headers['content-length'])).toBe(body.length);
    expect(body.toString('utf8')).toBe(denialBody(ctx(reason)));
    expect('proxy-authenticate' in head.headers).toBe(Reasons[reason].status === 407);
  });

  it('counts the body in bytes: a message with a multi-byte character is not cut short or overrun', async () => {
    const { head, body } = await socketDenial(ctx('destination_not_granted'));
    expect(Buffer.byteLength(body.toString('utf8'))).toBeGreaterThan(body.toString('utf8').length);
    expect(Number(head.headers['content-length'])).toBe(body.length);
  });

  it('puts Proxy-Authenticate on a 407 only', async () => {
    const challenged = await socketDenial(ctx('token_missing', null, null));
    expect(challenged.head.headers['proxy-authenticate']).toBe('Basic realm="sluice"');
    const refused = await socketDenial(ctx('grant_expired'));
    expect(refused.head.head.toLowerCase()).not.toContain('proxy-authenticate');
  });

  it('answers token_grant_mismatch byte for byte like token_invalid: nothing tells the token is live elsewhere', async () => {
    const mismatch = await socketDenial(ctx('token_grant_mismatch', 'a.test:443', null));
    const invalid = await socketDenial(ctx('token_invalid', 'a.test:443', null));
    expect(mismatch.raw.equals(invalid.raw)).toBe(true);
    expect(mismatch.raw.toString('latin1')).not.toContain('mismatch');
    expect(mismatch.head.headers['proxy-status']).toContain('details="token_invalid"');
  });

  it('writes nothing to a socket that is already destroyed, and does not throw', async () => {
    const { accepted, client } = await pair();
    const received = readUntilClose(client);
    accepted.destroy();
    expect(() => writeSocketDenial(accepted, ctx('destination_not_granted'))).not.toThrow();
    expect((await received).length).toBe(0);
  });

  it('destroys a socket whose writable side has ended instead of writing after the end', async () => {
    const { accepted, client } = await pair();
    const received = readUntilClose(client);
    accepted.end();
    writeSocketDenial(accepted, ctx('destination_not_granted'));
    expect(accepted.destroyed).toBe(true);
    expect((await received).length).toBe(0);
  });
});

describe('writeResponseDenial: a denial of an absolute-form request through node:http', () => {
  /** A node:http server whose every request is answered by `handle`. */
  async function serve(handle: (res: http.ServerResponse) => void): Promise<number> {
    return listen(http.createServer((req, res) => {
      req.resume();
      handle(res);
    }));
  }

  it('keeps the connection open when not asked to close: a second request on it is answered too', async () => {
    const port = await serve((res) => writeResponseDenial(res, ctx('destination_not_granted', 'b.test:80'), false));
    const request = 'GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n';
    const client = track(net.connect(port, '127.0.0.1'));
    let data = Buffer.alloc(0);
    let closed = false;
    client.on('data', (c: Buffer) => (data = Buffer.concat([data, c])));
    client.on('close', () => (closed = true));
    client.write(request + request);
    await waitUntil(() => data.toString('latin1').split('HTTP/1.1 403 ').length === 3 && data.toString('utf8').endsWith(denialBody(ctx('destination_not_granted', 'b.test:80'))), { timeoutMs: TIMEOUT_MS, label: 'two denials' });
    expect(closed).toBe(false);
    const first = parseResponseHead(data);
    expect(first?.headers['connection']).not.toBe('close');
    expect(first?.headers['proxy-status']).toBe(proxyStatus('destination_not_granted'));
    const bodyEnd = (first?.headLength ?? 0) + Number(first?.headers['content-length']);
    expect(data.subarray(first?.headLength ?? 0, bodyEnd).toString('utf8')).toBe(denialBody(ctx('destination_not_granted', 'b.test:80')));
    // The second response starts exactly where the first body ends: the length framed it.
    expect(data.subarray(bodyEnd).toString('latin1').startsWith('HTTP/1.1 403 Forbidden\r\n')).toBe(true);
  });

  it('with close, says Connection: close and closes after the exact body', async () => {
    const port = await serve((res) => writeResponseDenial(res, ctx('principal_changed'), true));
    const request = 'GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n';
    const answer = await rawRequest(port, request + request, { untilClose: true });
    expect(answer.closed).toBe(true);
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(403);
    expect(head?.headers['connection']).toBe('close');
    // Exactly one response: the pipelined second request was never answered on a closing connection.
    expect(answer.data.length).toBe((head?.headLength ?? 0) + Number(head?.headers['content-length']));
  });

  it('answers token_grant_mismatch as token_invalid with its 407 challenge', async () => {
    const port = await serve((res) => writeResponseDenial(res, ctx('token_grant_mismatch', 'b.test:80', null), false));
    const answer = await rawRequest(port, 'GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n');
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(407);
    expect(head?.headers['proxy-authenticate']).toBe('Basic realm="sluice"');
    expect(head?.headers['proxy-status']).toBe(proxyStatus('token_invalid'));
    expect(answer.text).not.toContain('mismatch');
  });

  it('destroys the response when its head was already sent: no denial is spliced into a relayed response', async () => {
    const port = await serve((res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial', () => writeResponseDenial(res, ctx('origin_failed'), false));
    });
    const answer = await rawRequest(port, 'GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n', { untilClose: true });
    expect(answer.closed).toBe(true);
    expect(parseResponseHead(answer.data)?.status).toBe(200);
    expect(answer.text).not.toContain('sluice:');
    expect(answer.text).not.toContain('Proxy-Status');
    expect(answer.text.endsWith('partial')).toBe(true);
  });
});

describe('Retry-After on a throttled authentication (RFC 6585 §4, RFC 9110 §10.2.3)', () => {
  it('auth_rate_limited is answered 429 with Retry-After: the throttle window in seconds; no other 429 says when to retry', async () => {
    const throttled = await socketDenial(ctx('auth_rate_limited'));
    expect(throttled.head.head.split('\r\n')[0]).toBe('HTTP/1.1 429 Too Many Requests');
    expect(throttled.head.headers['retry-after']).toBe(String(AUTH_THROTTLE_WINDOW_SECONDS));
    expect(AUTH_THROTTLE_WINDOW_SECONDS).toBe(60);
    for (const reason of ['connections_exhausted', 'connection_limit_reached', 'byte_limit_reached'] as const) {
      expect('retry-after' in (await socketDenial(ctx(reason))).head.headers).toBe(false);
    }
  });

  it('a forwarded request refused auth_rate_limited carries Retry-After too', async () => {
    const server = http.createServer((_req, res) => writeResponseDenial(res, ctx('auth_rate_limited'), false));
    const port = await listen(server);
    const answer = await rawRequest(port, 'GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n');
    const head = parseResponseHead(answer.data);
    expect(head?.head.split('\r\n')[0]).toBe('HTTP/1.1 429 Too Many Requests');
    expect(head?.headers['retry-after']).toBe('60');
  });
});
