// Mediated tunnels (issue 17, item 1): undici's ProxyAgent and EnvHttpProxyAgent, with default options,
// send an http:// URL through a CONNECT tunnel. A CONNECT (or SOCKS5 CONNECT) whose destination only
// http:// rules grant is accepted, and every HTTP/1.1 request inside is its own hop: authorized by those
// rules, confined to the CONNECT target (Host included, RFC 9112 §3.2.2), forwarded by the absolute-form
// engine, one decision record each. The threat: a principal holding only http://host:port uses the
// accepted tunnel to carry TLS, HTTP/2 or raw bytes past its grant, to reach another host through it,
// or to swap principals inside it. Each must fail, with nothing reaching an origin.
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EnvHttpProxyAgent, fetch as undiciFetch, ProxyAgent, type Dispatcher } from 'undici';
import { cleanupClients, runClient } from '../support/clients.js';
import { runCurl } from '../support/curl.js';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { openConnectTunnel, parseResponseHead } from '../support/raw-client.js';
import type { DecisionRecordV1 } from '../../src/audit/index.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitFor, waitForClose, waitUntil, withTimeout } from '../support/wait.js';

const TOKEN = 'tok-mediated-5c1e';
const OTHER_TOKEN = 'tok-mediated-other-77a0';
const basic = (grant: string, token: string): string => `Basic ${Buffer.from(`${grant}:${token}`).toString('base64')}`;

let pki: TestPki;
let web: Origin;
let secure: Origin;
let sluice: TestSluice;
const dispatchers: Dispatcher[] = [];
const sockets: net.Socket[] = [];

const listenerPort = (name: string): number => Number(sluice.app.listeners.find((l) => l.name === name)?.address.split(':').at(-1));
const proxyUrl = (): string => `http://m:${TOKEN}@127.0.0.1:${sluice.port}`;
const webUrl = (path: string, host = 'web.test'): string => `http://${host}:${web.port}${path}`;

beforeAll(async () => {
  pki = createTestPki(['web.test', 'tls.test']);
  web = await startHttpOrigin();
  secure = await startHttpsOrigin(pki);
  sluice = await startSluice(
    {
      listeners: [
        { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
        { name: 'dedicated', listen: '127.0.0.1:0', grant: 'm' },
        { name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' },
      ],
      grants: [
        {
          id: 'm',
          tokenSha256: tokenHash(TOKEN),
          // web.test: http:// only (mediated); tls.test: https:// (opaque); wide.test: http:// and tcp:// (opaque);
          // private.test: http:// only, but its address is in a class the grant does not allow.
          destinations: [`http://web.test:${web.port}`, `https://tls.test:${secure.port}`, `http://wide.test:${web.port}`, `tcp://wide.test:${web.port}`, `http://private.test:${web.port}`],
          allowAddressClasses: ['loopback'],
        },
        { id: 'other', tokenSha256: tokenHash(OTHER_TOKEN), destinations: [`http://web.test:${web.port}`], allowAddressClasses: ['loopback'] },
      ],
    },
    { lookup: tableLookup({ 'web.test': ['127.0.0.1'], 'tls.test': ['127.0.0.1'], 'wide.test': ['127.0.0.1'], 'deny.test': ['127.0.0.1'], 'private.test': ['10.255.0.1'] }) },
  );
});

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(dispatchers.splice(0).map((d) => d.destroy()));
});

afterAll(async () => {
  cleanupClients();
  await sluice?.close();
  await web?.close();
  await secure?.close();
});

function track<T extends Dispatcher>(dispatcher: T): T {
  dispatchers.push(dispatcher);
  return dispatcher;
}

/** The decision records Sluice wrote since `start` (an index into all its records). */
function decisionRecords(start: number): DecisionRecordV1[] {
  return sluice.records.slice(start).filter((r): r is DecisionRecordV1 => r.kind === 'decision');
}

/** The same, as `method reason` lines. */
function decisionsSince(start: number): string[] {
  return decisionRecords(start).map((d) => `${d.method} ${d.reason}`);
}

/** Opens a tunnel as a client would and keeps its socket for cleanup. */
async function tunnel(target: string, port = sluice.port, headers: Record<string, string> = { 'Proxy-Authorization': basic('m', TOKEN) }): Promise<net.Socket> {
  const t = await openConnectTunnel(port, target, headers);
  sockets.push(t.socket);
  expect(t.status).toBe(200);
  return t.socket;
}

/** Writes `text` into an open tunnel and reads one response (head and Content-Length body), bounded. */
function exchange(socket: net.Socket, text: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return withTimeout(
    new Promise((resolve, reject) => {
      let buf = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        buf = Buffer.concat([buf, chunk]);
        const head = parseResponseHead(buf);
        if (head === null) return;
        const length = Number(head.headers['content-length'] ?? 0);
        if (buf.length - head.headLength < length) return;
        socket.off('data', onData);
        resolve({ status: head.status, headers: head.headers, body: buf.subarray(head.headLength, head.headLength + length).toString() });
      };
      socket.on('data', onData);
      socket.once('error', reject);
      socket.write(text);
    }),
    5000,
    `response to ${JSON.stringify(text.slice(0, 40))}`,
  );
}

/** Resolves once `socket` is closed by the other side. */
function closed(socket: net.Socket): Promise<void> {
  if (socket.closed) return Promise.resolve();
  socket.resume();
  return waitFor(socket, 'close').then(() => undefined);
}

describe('undici ProxyAgent (default options) fetches http:// through a tunnel the http:// rule grants', () => {
  it('each request inside a tunnel is its own hop, authorized by the http:// rule and recorded', async () => {
    const start = sluice.records.length;
    const agent = track(new ProxyAgent(proxyUrl()));
    const first = await undiciFetch(webUrl('/one'), { dispatcher: agent });
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('origin:GET:/one');
    const second = await undiciFetch(webUrl('/two?q=1'), { dispatcher: agent });
    expect(await second.text()).toBe('origin:GET:/two?q=1');

    const decisions = decisionRecords(start);
    const gets = decisions.filter((d) => d.method === 'GET');
    expect(gets.map((d) => `${d.reason} ${d.rule} ${d.target}`)).toEqual([
      `granted http://web.test:${web.port} http://web.test:${web.port}/one`,
      `granted http://web.test:${web.port} http://web.test:${web.port}/two`,
    ]);
    expect(gets[0]).toMatchObject({ request: 'forward', scheme: 'http', canonical: `web.test:${web.port}`, principal: 'm', via: 'token', pinned: '127.0.0.1', route: 'direct' });
    // Each request rode a CONNECT that was granted by the same http:// rule, on its connection, before it.
    for (const get of gets) {
      const connect = decisions.find((d) => d.method === 'CONNECT' && d.connection === get.connection);
      expect(connect).toMatchObject({ request: 'connect', reason: 'granted', rule: `http://web.test:${web.port}`, canonical: `web.test:${web.port}`, detail: expect.stringContaining('mediated'), pinned: null });
      expect(connect!.hop).toBeLessThan(get.hop);
    }
    // Each forwarded request has its own close record; the origin never saw the token.
    expect(sluice.records.slice(start).filter((r) => r.kind === 'close' && r.request === 'forward').map((r) => r.kind === 'close' && r.closedBy)).toEqual(['completed', 'completed']);
    expect(web.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(web.requests.at(-1)?.headers.host).toBe(`web.test:${web.port}`);
  });

  it('a second request on the same tunnel (keep-alive inside it) is its own hop', async () => {
    const start = sluice.records.length;
    // One connection per origin, so the second request must reuse the tunnel.
    const agent = track(new ProxyAgent({ uri: proxyUrl(), connections: 1 }));
    expect(await (await undiciFetch(webUrl('/a'), { dispatcher: agent })).text()).toBe('origin:GET:/a');
    expect(await (await undiciFetch(webUrl('/b'), { dispatcher: agent })).text()).toBe('origin:GET:/b');
    const decisions = decisionRecords(start);
    expect(decisions.map((d) => `${d.hop} ${d.method} ${d.reason}`)).toEqual(['1 CONNECT granted', '2 GET granted', '3 GET granted']);
    expect(new Set(decisions.map((d) => d.connection)).size).toBe(1);
  });

  it('the CONNECT hop gets its close record when the tunnel ends', async () => {
    const start = sluice.records.length;
    const agent = track(new ProxyAgent(proxyUrl()));
    expect((await undiciFetch(webUrl('/close'), { dispatcher: agent })).status).toBe(200);
    await agent.close();
    await waitUntil(() => sluice.records.slice(start).some((r) => r.kind === 'close' && r.request === 'connect'), { timeoutMs: 5000, label: 'CONNECT close record' });
    const close = sluice.records.slice(start).find((r) => r.kind === 'close' && r.request === 'connect');
    expect(close).toMatchObject({ canonical: `web.test:${web.port}`, status: 200, bytesUp: 0, bytesDown: 0, closedBy: 'client_closed' });
  });

  it('a request inside the tunnel is still checked end to end: an address the grant does not allow gets 403 with Proxy-Status', async () => {
    const start = sluice.records.length;
    const before = web.requests.length;
    const agent = track(new ProxyAgent(proxyUrl()));
    const r = await undiciFetch(`http://private.test:${web.port}/secret`, { dispatcher: agent });
    expect(r.status).toBe(403);
    expect(r.headers.get('proxy-status')).toBe('sluice; error=destination_ip_prohibited; details="address_class_denied"');
    expect(await r.text()).toContain(`sluice: 403 address_class_denied`);
    expect(web.requests.length).toBe(before);
    expect(decisionsSince(start)).toEqual(['CONNECT granted', 'GET address_class_denied']);
  });

  it('a destination no rule grants is refused at the CONNECT, as before', async () => {
    const start = sluice.records.length;
    const agent = track(new ProxyAgent(proxyUrl()));
    await expect(undiciFetch(webUrl('/no', 'deny.test'), { dispatcher: agent })).rejects.toThrow('fetch failed');
    expect(decisionsSince(start)).toEqual(['CONNECT destination_not_granted']);
  });

  it('a grant with a tcp:// rule for the target keeps its opaque tunnel: one CONNECT hop, no request hops', async () => {
    const start = sluice.records.length;
    const agent = track(new ProxyAgent(proxyUrl()));
    expect(await (await undiciFetch(webUrl('/opaque', 'wide.test'), { dispatcher: agent })).text()).toBe('origin:GET:/opaque');
    expect(decisionRecords(start).map((d) => `${d.method} ${d.reason} ${d.rule}`)).toEqual([`CONNECT granted tcp://wide.test:${web.port}`]);
  });

  it('on a listener dedicated to the grant, without credentials', async () => {
    const start = sluice.records.length;
    const agent = track(new ProxyAgent(`http://127.0.0.1:${listenerPort('dedicated')}`));
    expect(await (await undiciFetch(webUrl('/dedicated'), { dispatcher: agent })).text()).toBe('origin:GET:/dedicated');
    expect(decisionRecords(start).map((d) => `${d.method} ${d.reason} ${d.via} ${d.principal}`)).toEqual(['CONNECT granted listener m', 'GET granted listener m']);
  });
});

describe('undici EnvHttpProxyAgent (default options) in a Node 20 child process, configured by HTTP_PROXY / HTTPS_PROXY', () => {
  // The docs/clients.md snippet: Node 20's fetch ignores the proxy variables; the agent reads them.
  const SCRIPT = `
import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';
setGlobalDispatcher(new EnvHttpProxyAgent());
for (const url of process.argv.slice(1)) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(10000) });
    console.log(JSON.stringify({ url, status: r.status, body: await r.text() }));
  } catch (e) {
    console.log(JSON.stringify({ url, error: String(e.cause ?? e) }));
  }
}
`;

  it('http:// is mediated under the http:// rule, https:// is an opaque tunnel under the https:// rule', async () => {
    const start = sluice.records.length;
    const env = { HTTP_PROXY: proxyUrl(), HTTPS_PROXY: proxyUrl(), NODE_EXTRA_CA_CERTS: pki.caFile };
    const r = await runClient(process.execPath, ['--input-type=module', '-e', SCRIPT, webUrl('/env-http'), `https://tls.test:${secure.port}/env-https`], { env });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown)).toEqual([
      { url: webUrl('/env-http'), status: 200, body: 'origin:GET:/env-http' },
      { url: `https://tls.test:${secure.port}/env-https`, status: 200, body: 'origin:GET:/env-https' },
    ]);
    expect(decisionRecords(start).map((d) => `${d.method} ${d.reason} ${d.rule}`)).toEqual([
      `CONNECT granted http://web.test:${web.port}`,
      `GET granted http://web.test:${web.port}`,
      `CONNECT granted https://tls.test:${secure.port}`,
    ]);
  });

  it('the in-process agent, given the proxy by its constructor options, does the same', async () => {
    const start = sluice.records.length;
    const agent = track(new EnvHttpProxyAgent({ httpProxy: proxyUrl(), httpsProxy: proxyUrl() }));
    expect(await (await undiciFetch(webUrl('/env-options'), { dispatcher: agent })).text()).toBe('origin:GET:/env-options');
    expect(decisionsSince(start)).toEqual(['CONNECT granted', 'GET granted']);
  });
});

describe('a hostile principal inside an http-only tunnel', () => {
  it('a TLS ClientHello ends the tunnel with tunnel_not_http before any byte reaches the origin', async () => {
    const start = sluice.records.length;
    const connections = web.connections;
    const socket = await tunnel(`web.test:${web.port}`);
    const client = tls.connect({ socket, servername: 'web.test', ca: pki.caPem });
    client.on('error', () => undefined);
    await closed(socket);
    expect(web.connections).toBe(connections);
    const [connect] = decisionRecords(start);
    expect(connect).toMatchObject({ method: 'CONNECT', reason: 'tunnel_not_http', decision: 'deny', rule: `http://web.test:${web.port}` });
    expect(connect?.detail).toContain('TLS');
    // Denied: no close record for it (others' tunnels may close meanwhile).
    expect(sluice.records.slice(start).filter((r) => r.kind === 'close' && r.connection === connect?.connection)).toEqual([]);
  });

  it('curl https:// through the http-only tunnel fails, and the record says why', async () => {
    const start = sluice.records.length;
    const r = await runCurl(['--proxy', proxyUrl(), '--cacert', pki.caFile, `https://web.test:${web.port}/tls`]);
    expect(r.code).not.toBe(0);
    expect(decisionsSince(start)).toEqual(['CONNECT tunnel_not_http']);
  });

  it.each([
    ['the HTTP/2 connection preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'HTTP/2'],
    ['the preface split after its first byte', 'P', 'HTTP/2'],
    ['binary garbage', '\x00\x01\x02\x03', 'request line'],
  ])('%s ends it with tunnel_not_http', async (_name, bytes, detail) => {
    const start = sluice.records.length;
    const socket = await tunnel(`web.test:${web.port}`);
    socket.write(Buffer.from(bytes, 'latin1'));
    if (bytes === 'P') socket.write('RI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    await closed(socket);
    const [connect] = decisionRecords(start);
    expect(connect).toMatchObject({ method: 'CONNECT', reason: 'tunnel_not_http' });
    expect(connect?.detail).toContain(detail);
  });

  it('a Host that is not the CONNECT target is refused host_mismatch with Proxy-Status, and so is another absolute-form host', async () => {
    const start = sluice.records.length;
    const before = web.requests.length;
    const socket = await tunnel(`web.test:${web.port}`);
    const other = await exchange(socket, `GET /x HTTP/1.1\r\nHost: tls.test:${secure.port}\r\n\r\n`);
    expect(other.status).toBe(400);
    expect(other.headers['proxy-status']).toBe('sluice; error=http_request_error; details="host_mismatch"');
    const absolute = await exchange(socket, `GET http://wide.test:${web.port}/x HTTP/1.1\r\nHost: wide.test:${web.port}\r\n\r\n`);
    expect(absolute.status).toBe(400);
    const noHost = await exchange(socket, 'GET /x HTTP/1.1\r\n\r\n');
    expect(noHost.status).toBe(400);
    // The same tunnel still carries a request to its own destination (the refusals closed nothing).
    const ok = await exchange(socket, `GET /fine HTTP/1.1\r\nHost: web.test:${web.port}\r\n\r\n`);
    expect(ok).toMatchObject({ status: 200, body: 'origin:GET:/fine' });
    expect(web.requests.length).toBe(before + 1);
    expect(decisionsSince(start)).toEqual(['CONNECT granted', 'GET host_mismatch', 'GET host_mismatch', 'GET host_mismatch', 'GET granted']);
  });

  it('another principal’s token inside the tunnel is refused principal_changed and the tunnel closed', async () => {
    const start = sluice.records.length;
    const before = web.requests.length;
    const socket = await tunnel(`web.test:${web.port}`);
    const r = await exchange(socket, `GET /swap HTTP/1.1\r\nHost: web.test:${web.port}\r\nProxy-Authorization: ${basic('other', OTHER_TOKEN)}\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(r.headers['proxy-status']).toContain('details="principal_changed"');
    await closed(socket);
    expect(web.requests.length).toBe(before);
    expect(decisionRecords(start).map((d) => `${d.method} ${d.reason} ${d.principal}`)).toEqual(['CONNECT granted m', 'GET principal_changed m']);
  });

  it('a CONNECT inside the tunnel is refused tunnel_not_http (no tunnel inside a tunnel)', async () => {
    const start = sluice.records.length;
    const socket = await tunnel(`web.test:${web.port}`);
    const r = await exchange(socket, `CONNECT wide.test:${web.port} HTTP/1.1\r\nHost: wide.test:${web.port}\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(r.headers['proxy-status']).toContain('details="tunnel_not_http"');
    await closed(socket);
    expect(decisionsSince(start)).toEqual(['CONNECT granted', 'CONNECT tunnel_not_http']);
  });

  it('revoking the grant ends a live mediated tunnel; its CONNECT hop closes revoked and the other grant is untouched', async () => {
    const issued = await sluice.app.control.issueGrant({ destinations: [`http://web.test:${web.port}`], allowAddressClasses: ['loopback'] });
    if (!issued.ok) throw new Error('issue');
    const start = sluice.records.length;
    const socket = await tunnel(`web.test:${web.port}`, sluice.port, { 'Proxy-Authorization': `Bearer ${issued.value.token}` });
    const bystander = await tunnel(`web.test:${web.port}`);
    expect((await exchange(socket, `GET /before HTTP/1.1\r\nHost: web.test:${web.port}\r\n\r\n`)).body).toBe('origin:GET:/before');
    const ended = waitForClose(socket);
    socket.resume();
    await sluice.app.control.revokeGrant(issued.value.id);
    // Reset, not closed: the grant no longer allows the tunnel (relay/end-socket.ts).
    expect(await ended).toBe('ECONNRESET');
    await waitUntil(() => sluice.records.slice(start).some((r) => r.kind === 'close' && r.request === 'connect' && r.principal === issued.value.id), { timeoutMs: 5000, label: 'close record' });
    expect(sluice.records.slice(start).find((r) => r.kind === 'close' && r.request === 'connect' && r.principal === issued.value.id)).toMatchObject({ closedBy: 'revoked' });
    expect((await exchange(bystander, `GET /still HTTP/1.1\r\nHost: web.test:${web.port}\r\n\r\n`)).body).toBe('origin:GET:/still');
  });

  it('works when node:http, not the fast path, parsed the CONNECT (after a keep-alive request, head split)', async () => {
    const start = sluice.records.length;
    const socket = net.connect(sluice.port, '127.0.0.1');
    sockets.push(socket);
    await waitFor(socket, 'connect');
    const auth = basic('m', TOKEN);
    const first = await exchange(socket, `GET ${webUrl('/abs')} HTTP/1.1\r\nHost: web.test:${web.port}\r\nProxy-Authorization: ${auth}\r\n\r\n`);
    expect(first.body).toBe('origin:GET:/abs');
    const established = await exchange(socket, `CONNECT web.test:${web.port} HTTP/1.1\r\nHost: web.test:${web.port}\r\n\r\n`);
    expect(established.status).toBe(200);
    const inside = await exchange(socket, `GET /inside HTTP/1.1\r\nHost: web.test:${web.port}\r\n\r\n`);
    expect(inside.body).toBe('origin:GET:/inside');
    expect(decisionsSince(start)).toEqual(['GET granted', 'CONNECT granted', 'GET granted']);
  });
});

describe('plain HTTP over SOCKS5 to a destination only http:// rules grant', () => {
  it('curl socks5h://grant:token@ fetches http://, each request its own hop', async () => {
    const start = sluice.records.length;
    const r = await runCurl(['--proxy', `socks5h://m:${TOKEN}@127.0.0.1:${listenerPort('socks')}`, webUrl('/socks')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/socks');
    expect(decisionRecords(start).map((d) => `${d.method} ${d.reason} ${d.rule} ${d.listener}`)).toEqual([
      `SOCKS5 granted http://web.test:${web.port} socks`,
      `GET granted http://web.test:${web.port} socks`,
    ]);
  });

  it('TLS over that SOCKS5 tunnel ends it with tunnel_not_http; the origin sees nothing', async () => {
    const start = sluice.records.length;
    const connections = web.connections;
    const r = await runCurl(['--proxy', `socks5h://m:${TOKEN}@127.0.0.1:${listenerPort('socks')}`, '--cacert', pki.caFile, `https://web.test:${web.port}/socks-tls`]);
    expect(r.code).not.toBe(0);
    expect(web.connections).toBe(connections);
    expect(decisionsSince(start)).toEqual(['SOCKS5 tunnel_not_http']);
  });
});
