// Threat: online guessing of grant tokens and grant ids through Proxy-Authorization (CWE-307 improper
// restriction of excessive authentication attempts; CWE-204 observable response discrepancy; OWASP ASVS
// V2.2.1 anti-automation). A sandbox tries token after token, and compares answers to learn which grant
// ids exist. Sluice counts bad tokens per presented grant id, from any address: after
// `limits.authFailuresPerMinute` of them, presenting that grant id is answered 429 auth_rate_limited
// without checking the token at all (so even the right token is refused for the rest of the minute, and
// more addresses buy no more guesses). A token without a grant id (Bearer) is counted per source address.
// `limits.authFailuresPerMinutePerSource`, much higher, bounds how many grant ids one address can try.
// Other grant ids, other principals' dedicated listeners and already-identified connections carry on
// (issue 13: every token client shares 127.0.0.1, so a per-address key let one guesser lock out all of
// them). A bad token for an existing grant id and for a made-up one get byte-identical answers (RFC 9110
// §11.7.1 challenge, RFC 9209 Proxy-Status), blocked or not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { parseResponseHead } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN_A = 'tok-guess-a-correct';
const TOKEN_B = 'tok-guess-b-correct';
const LIMIT = 5;
// Well above what this suite spends from 127.0.0.1 (three buckets of LIMIT), as it should be in production.
const CEILING = 20;

const basic = (user: string, token: string): string => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

/** True once `buf` holds one complete response with a Content-Length body. */
function complete(buf: Buffer): boolean {
  const head = parseResponseHead(buf);
  return head !== null && buf.length - head.headLength >= Number(head.headers['content-length'] ?? 0);
}

/** Sends `request` on a new connection (to a TCP port or a Unix socket), optionally from `localAddress`. */
function ask(target: { port: number; localAddress?: string } | { path: string }, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = 'path' in target ? net.connect(target.path) : net.connect({ host: '127.0.0.1', port: target.port, ...(target.localAddress === undefined ? {} : { localAddress: target.localAddress }) });
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response; got ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`));
    }, 5000);
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (complete(buf)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(buf.toString('latin1'));
      }
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** One keep-alive connection: send a request, wait for its whole response, send the next. */
class KeepAlive {
  private buf = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  readonly socket: net.Socket;
  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.on('error', () => undefined);
    this.socket.on('data', (chunk: Buffer) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      if (complete(this.buf)) this.waiter?.();
    });
  }
  exchange(request: string): Promise<string> {
    this.buf = Buffer.alloc(0);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`keep-alive: no response; got ${JSON.stringify(this.buf.toString('latin1').slice(0, 300))}`)), 5000);
      this.waiter = () => {
        clearTimeout(timer);
        this.waiter = null;
        resolve(this.buf.toString('latin1'));
      };
      this.socket.write(request);
    });
  }
}

const withoutDate = (response: string): string => response.replace(/^Date: .*\r\n/im, '');

describe('token guessing is throttled per presented grant id, under a per-source ceiling', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let dir: string;
  let socketB: string;
  let dedicatedTcpB: number;
  let identified: KeepAlive;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-guess-'));
    socketB = path.join(dir, 'b.sock');
    sluice = await startSluice(
      {
        limits: { authFailuresPerMinute: LIMIT, authFailuresPerMinutePerSource: CEILING },
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'sandbox-b', listen: `unix:${socketB}`, grant: 'b' },
          { name: 'sandbox-b-tcp', listen: '127.0.0.1:0', grant: 'b' },
        ],
        grants: [
          { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
    const tcpB = sluice.app.listeners.find((l) => l.name === 'sandbox-b-tcp')?.address ?? '';
    dedicatedTcpB = Number(tcpB.slice(tcpB.lastIndexOf(':') + 1));
    // Principal a, identified on a keep-alive connection before anyone starts guessing.
    identified = new KeepAlive(sluice.port);
    expect(await identified.exchange(get('/before', basic('a', TOKEN_A)))).toMatch(/^HTTP\/1\.1 200 /);
  });
  afterAll(async () => {
    identified?.socket.destroy();
    await sluice?.close();
    await origin?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  function get(pathname: string, authorization: string | null): string {
    const auth = authorization === null ? '' : `Proxy-Authorization: ${authorization}\r\n`;
    return `GET http://web.test:${origin.port}${pathname} HTTP/1.1\r\nHost: web.test:${origin.port}\r\n${auth}\r\n`;
  }

  async function guessUntilBlocked(authorization: (i: number) => string, from: { localAddress?: string } = {}): Promise<string> {
    for (let i = 0; i < LIMIT; i += 1) {
      const res = await ask({ port: sluice.port, ...from }, get('/guess', authorization(i)));
      expect(res).toMatch(/^HTTP\/1\.1 407 /);
      expect(res).toContain('details="token_invalid"');
    }
    return ask({ port: sluice.port, ...from }, get('/guess', authorization(LIMIT)));
  }

  it(`answers ${LIMIT} bad tokens for grant id a with 407 token_invalid, then 429 auth_rate_limited`, async () => {
    const blocked = await guessUntilBlocked((i) => basic('a', `guess-${i}`));
    expect(blocked).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
    expect(blocked).toContain('Proxy-Status: sluice; error=http_request_denied; details="auth_rate_limited"');
    expect(blocked).not.toContain('Proxy-Authenticate');
  });

  it('refuses even the right token for grant id a, from any address, without checking it', async () => {
    for (const localAddress of ['127.0.0.1', '127.0.0.2']) {
      const res = await ask({ port: sluice.port, localAddress }, get('/right-token', basic('a', TOKEN_A)));
      expect(res).toMatch(/^HTTP\/1\.1 429 /);
      expect(res).toContain('details="auth_rate_limited"');
      expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'auth_rate_limited', principal: null, canonical: null });
    }
    const connect = await ask({ port: sluice.port }, `CONNECT web.test:${origin.port} HTTP/1.1\r\nHost: web.test\r\nProxy-Authorization: ${basic('a', TOKEN_A)}\r\n\r\n`);
    expect(connect).toMatch(/^HTTP\/1\.1 429 /);
    expect(origin.requests.some((r) => r.url === '/right-token' || r.url === '/guess')).toBe(false);
  });

  it('does not block another grant id presented from the same address (issue 13)', async () => {
    const res = await ask({ port: sluice.port }, get('/other-grant', basic('b', TOKEN_B)));
    expect(res).toMatch(/^HTTP\/1\.1 200 /);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', principal: 'b' });
  });

  it('answers blocked guesses for an existing and an unknown grant id byte for byte alike', async () => {
    await guessUntilBlocked((i) => basic('no-such-grant', `guess-${i}`));
    const existing = await ask({ port: sluice.port }, get('/x', basic('a', 'wrong')));
    const unknown = await ask({ port: sluice.port }, get('/x', basic('no-such-grant', 'wrong')));
    expect(existing).toMatch(/^HTTP\/1\.1 429 /);
    expect(withoutDate(existing)).toBe(withoutDate(unknown));
  });

  it('counts a token without a grant id (Bearer) per source address: blocked there, not for grant ids or other addresses', async () => {
    const blocked = await guessUntilBlocked((i) => `Bearer guess-${i}`);
    expect(blocked).toMatch(/^HTTP\/1\.1 429 /);
    expect(await ask({ port: sluice.port }, get('/bearer-right', `Bearer ${TOKEN_B}`))).toMatch(/^HTTP\/1\.1 429 /);
    expect(await ask({ port: sluice.port }, get('/basic-b', basic('b', TOKEN_B)))).toMatch(/^HTTP\/1\.1 200 /);
    expect(await ask({ port: sluice.port, localAddress: '127.0.0.2' }, get('/bearer-elsewhere', `Bearer ${TOKEN_B}`))).toMatch(/^HTTP\/1\.1 200 /);
  });

  it(`blocks every token from an address after ${CEILING} bad tokens for any grant ids, and only from that address`, async () => {
    const from = { localAddress: '127.0.0.3' };
    for (let i = 0; i < CEILING; i += 1) {
      const res = await ask({ port: sluice.port, ...from }, get('/spray', basic(`sprayed-${i}`, 'guess')));
      expect(res).toContain('details="token_invalid"');
    }
    const res = await ask({ port: sluice.port, ...from }, get('/ceiling', basic('b', TOKEN_B)));
    expect(res).toMatch(/^HTTP\/1\.1 429 /);
    expect(res).toContain('details="auth_rate_limited"');
    expect(await ask({ port: sluice.port }, get('/below-ceiling', basic('b', TOKEN_B)))).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('still answers a request without any token 407 token_missing (nothing was guessed)', async () => {
    const res = await ask({ port: sluice.port }, get('/no-token', null));
    expect(res).toMatch(/^HTTP\/1\.1 407 /);
    expect(res).toContain('details="token_missing"');
  });

  it('keeps serving a connection identified before the block', async () => {
    const res = await identified.exchange(get('/after-block', null));
    expect(res).toMatch(/^HTTP\/1\.1 200 /);
    expect(res).toContain('origin:GET:/after-block');
  });

  it('does not block another principal on its dedicated Unix socket listener', async () => {
    const res = await ask({ path: socketB }, get('/unix-b', null));
    expect(res).toMatch(/^HTTP\/1\.1 200 /);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', principal: 'b', listener: 'sandbox-b', via: 'listener' });
  });

  it('does not block a dedicated TCP listener reached from the blocked address without a token', async () => {
    const res = await ask({ port: dedicatedTcpB, localAddress: '127.0.0.3' }, get('/tcp-b', null));
    expect(res).toMatch(/^HTTP\/1\.1 200 /);
    expect(origin.requests.at(-1)?.url).toBe('/tcp-b');
  });
});

describe('answers do not reveal whether a grant id exists', () => {
  let sluice: TestSluice;
  let origin: Origin;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    sluice = await startSluice(
      { grants: [{ id: 'real-grant', tokenSha256: tokenHash(TOKEN_A), destinations: [`http://web.test:${origin.port}`], allowAddressClasses: ['loopback'] }] },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
  });

  it('absolute-form: a bad token for an existing and for an unknown grant id get identical 407s (apart from Date)', async () => {
    const req = (authorization: string): string =>
      `GET http://web.test:${origin.port}/ HTTP/1.1\r\nHost: web.test:${origin.port}\r\nProxy-Authorization: ${authorization}\r\n\r\n`;
    const existing = await ask({ port: sluice.port }, req(basic('real-grant', 'wrong-token')));
    const unknown = await ask({ port: sluice.port }, req(basic('made-up-grant', 'wrong-token')));
    expect(existing).toMatch(/^HTTP\/1\.1 407 /);
    expect(existing).toContain('Proxy-Authenticate: Basic realm="sluice"');
    expect(withoutDate(existing)).toBe(withoutDate(unknown));
    expect(existing).not.toContain('real-grant');
  });

  it('CONNECT: the same two guesses get byte-identical 407s', async () => {
    const req = (authorization: string): string => `CONNECT web.test:${origin.port} HTTP/1.1\r\nHost: web.test\r\nProxy-Authorization: ${authorization}\r\n\r\n`;
    const existing = await ask({ port: sluice.port }, req(basic('real-grant', 'wrong-token')));
    const unknown = await ask({ port: sluice.port }, req(basic('made-up-grant', 'wrong-token')));
    expect(existing).toMatch(/^HTTP\/1\.1 407 /);
    expect(existing).toBe(unknown);
  });

  it('records both as token_invalid with no principal', () => {
    const last = sluice.decisions().slice(-4);
    expect(last.map((d) => [d.reason, d.principal])).toEqual([
      ['token_invalid', null],
      ['token_invalid', null],
      ['token_invalid', null],
      ['token_invalid', null],
    ]);
  });
});
