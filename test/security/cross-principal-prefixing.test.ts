// Threat: cross-principal request prefixing through a shared origin connection (review 2026-12-04
// finding 6, docs/reviews/security-2026-12-04.md; issue 24 item 1; the desync class of CWE-444, Kettle
// "HTTP Desync Attacks" 2019, here without any framing ambiguity). An origin may answer a request without
// reading its body (RFC 9112 §9.3 lets it: it then ought to close, but Python's http.server keeps the
// connection open). If Sluice then hands that connection to another principal, the unread body is the
// start of that principal's next request: principal A POSTs the body `GET /A-CHOSEN-PATH HTTP/1.1\r\n
// X-Swallow: `, principal B's GET becomes a header of A's request, the origin serves A's path with B's
// Authorization, and B gets that answer. Sluice keeps connections per principal (relay/principal-pools.ts)
// and never reuses a connection that carried a body (relay/forward.ts, `reset`). The origin here is the
// review's own: a Python BaseHTTPRequestHandler, HTTP/1.1, that never reads a request body and logs the
// path, Authorization and client port of every request it parses. A control proves the origin really
// does take leftover body bytes as a request on a reused connection. The same attack runs through a real
// Squid (Basic auth) as the route's upstream proxy, where Sluice's connections are the ones to Squid.
// Residual risk, outside Sluice: an upstream proxy pools its own connections to the origin for all its
// clients, and Squid (default server_persistent_connections on) hands the origin connection A's POST
// left dirty to B's next request, so the prefixing reappears one hop further. That Squid runs here with
// server_persistent_connections off; what Sluice owns, its connections to Squid, is checked in Squid's log.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopChild } from '../support/child-process.js';
import { parseResponseHead } from '../support/raw-client.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { squidAvailable, startSquid, type Squid } from '../support/squid.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const A_CHOSEN = '/A-CHOSEN-PATH';
const SMUGGLED_BODY = `GET ${A_CHOSEN} HTTP/1.1\r\nX-Swallow: `;
const ROUNDS = 30;
const WAVES = 10;
const REQUEST_TIMEOUT_MS = 5000;

// The review's origin.py: answers every GET and POST at once, never reads a body, keeps the connection.
// One JSON line per parsed request on stdout; it exits when its stdin closes (the test process went away).
const ORIGIN_PY = [
  'import json, sys, threading',
  'from http.server import BaseHTTPRequestHandler, HTTPServer',
  'from socketserver import ThreadingMixIn',
  'lock = threading.Lock()',
  'def emit(obj):',
  '    with lock:',
  "        sys.stdout.write(json.dumps(obj) + '\\n')",
  '        sys.stdout.flush()',
  'class S(ThreadingMixIn, HTTPServer):',
  '    daemon_threads = True',
  'class H(BaseHTTPRequestHandler):',
  "    protocol_version = 'HTTP/1.1'",
  '    disable_nagle_algorithm = True',
  '    def do_GET(self):',
  "        auth = self.headers.get('authorization')",
  "        emit({'method': self.command, 'path': self.path, 'auth': auth, 'port': self.client_address[1]})",
  '        body = f"path={self.path} auth={auth}".encode()',
  '        self.send_response(200)',
  "        self.send_header('Content-Type', 'text/plain')",
  "        self.send_header('Content-Length', str(len(body)))",
  '        self.end_headers()',
  '        self.wfile.write(body)',
  '    do_POST = do_GET',
  '    def log_message(self, *args):',
  '        pass',
  "s = S(('127.0.0.1', 0), H)",
  "emit({'listening': s.server_address[1]})",
  'threading.Thread(target=s.serve_forever, daemon=True).start()',
  'sys.stdin.read()',
].join('\n');

interface OriginHit {
  method: string;
  path: string;
  auth: string | null;
  /** The client port of the connection the request came on. */
  port: number;
}

interface NonReadingOrigin {
  port: number;
  readonly hits: OriginHit[];
  close(): Promise<void>;
}

async function startNonReadingOrigin(): Promise<NonReadingOrigin> {
  const child: ChildProcess = spawn('python3', ['-c', ORIGIN_PY], { stdio: ['pipe', 'pipe', 'inherit'] });
  const hits: OriginHit[] = [];
  const lines = readline.createInterface({ input: child.stdout! });
  const listening = new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`origin.py exited (${String(code)}) before listening`)));
    lines.on('line', (line) => {
      const parsed = JSON.parse(line) as OriginHit | { listening: number };
      if ('listening' in parsed) resolve(parsed.listening);
      else hits.push(parsed);
    });
  });
  const close = async (): Promise<void> => {
    lines.close();
    child.stdin?.end();
    await stopChild(child, 'origin.py');
  };
  try {
    const port = await withTimeout(listening, 10_000, 'origin.py listening');
    return { port, hits, close };
  } catch (err) {
    await close();
    throw err;
  }
}

interface Principal {
  readonly id: string;
  readonly token: string;
  /** What the principal sends the origin in Authorization: the credential another must never borrow. */
  readonly secret: string;
}

const A: Principal = { id: 'a', token: 'tok-prefix-a', secret: 'Bearer A-SECRET' };
const B: Principal = { id: 'b', token: 'tok-prefix-b', secret: 'Bearer B-SECRET' };
const C: Principal = { id: 'c', token: 'tok-prefix-c', secret: 'Bearer C-SECRET' };

interface Answer {
  status: number;
  body: string;
}

/** One absolute-form request through Sluice on the principal's keep-alive agent, bounded. */
function viaSluice(proxyPort: number, agent: http.Agent, who: Principal, url: URL, method: 'GET' | 'POST', body?: string): Promise<Answer> {
  const headers: Record<string, string> = {
    host: url.host,
    'proxy-authorization': `Basic ${Buffer.from(`${who.id}:${who.token}`).toString('base64')}`,
    authorization: who.secret,
  };
  if (body !== undefined) {
    headers['content-type'] = 'text/plain';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method, path: url.href, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
  return withTimeout(answer, REQUEST_TIMEOUT_MS, `${who.id} ${method} ${url.pathname}`);
}

/** What the origin answers a request it parsed with this path and Authorization. */
const named = (pathname: string, who: Principal | null): string => `path=${pathname} auth=${who === null ? 'None' : who.secret}`;

/** A sends the smuggling POST, B sends GETs on its own agent: sequentially many rounds, then concurrently. */
async function attack(proxyPort: number, base: string, tag: string): Promise<{ aPaths: string[]; bPaths: string[] }> {
  const agentA = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const agentB = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const aPaths: string[] = [];
  const bPaths: string[] = [];
  const post = async (p: string): Promise<void> => {
    aPaths.push(p);
    const r = await viaSluice(proxyPort, agentA, A, new URL(p, base), 'POST', SMUGGLED_BODY);
    expect(r).toEqual({ status: 200, body: named(p, A) });
  };
  const get = async (p: string): Promise<void> => {
    bPaths.push(p);
    const r = await viaSluice(proxyPort, agentB, B, new URL(p, base), 'GET');
    // B is answered for its own path, with its own credential: never A's path.
    expect(r).toEqual({ status: 200, body: named(p, B) });
  };
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      await post(`/${tag}-a-post-${round}`);
      for (let i = 0; i < 3; i += 1) await get(`/${tag}-b-${round}-${i}`);
    }
    for (let wave = 0; wave < WAVES; wave += 1) {
      const runs: Promise<void>[] = [];
      for (let i = 0; i < 3; i += 1) runs.push(post(`/${tag}-a-wave-${wave}-${i}`));
      for (let i = 0; i < 6; i += 1) runs.push(get(`/${tag}-b-wave-${wave}-${i}`));
      await Promise.all(runs);
    }
  } finally {
    agentA.destroy();
    agentB.destroy();
  }
  return { aPaths, bPaths };
}

/**
 * The absolute-form request targets under `base` in what Sluice sent on one connection to Squid. The
 * recorder between them numbers the connections: a connection's identity, where Squid's log has only the
 * client port, which the kernel can give a later connection once the earlier one is closed
 * (net.ipv4.tcp_tw_reuse on loopback). A's smuggled body holds an origin-form line, never listed.
 */
function targetsSent(text: string, base: string): string[] {
  const targets: string[] = [];
  for (let at = text.indexOf(` ${base}/`); at >= 0; at = text.indexOf(` ${base}/`, at + 1)) {
    const end = text.indexOf(' ', at + 1);
    if (end < 0) break;
    targets.push(text.slice(at + 1 + base.length, end));
  }
  return targets;
}

/** What the origin saw: B's credential only on B's own requests, and A's chosen path never with it. */
function expectNoPrefixing(hits: readonly OriginHit[], aPaths: readonly string[], bPaths: readonly string[]): void {
  const bOwn = new Set(bPaths);
  const withB = hits.filter((h) => h.auth === B.secret);
  expect(withB.filter((h) => !bOwn.has(h.path))).toEqual([]);
  expect(hits.filter((h) => h.path === A_CHOSEN && h.auth !== A.secret)).toEqual([]);
  // Each of B's requests reached the origin as itself, once.
  expect(withB.map((h) => h.path).sort()).toEqual([...bPaths].sort());
  // Each of A's POSTs reached it as itself, with A's credential.
  for (const p of aPaths) expect(hits.filter((h) => h.path === p)).toMatchObject([{ method: 'POST', auth: A.secret }]);
}

/** Two requests on one raw connection to `port`: each written after the previous answer, bounded. */
async function sequentialOnOneSocket(port: number, requests: readonly string[]): Promise<string[]> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  let buf = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => void (buf = Buffer.concat([buf, c])));
  try {
    await withTimeout(new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject)), REQUEST_TIMEOUT_MS, 'connect');
    const bodies: string[] = [];
    for (const request of requests) {
      socket.write(request);
      let length = -1;
      await waitUntil(
        () => {
          const head = parseResponseHead(buf);
          if (head === null) return false;
          length = head.headLength + Number(head.headers['content-length'] ?? 0);
          return buf.length >= length;
        },
        { timeoutMs: REQUEST_TIMEOUT_MS, label: 'response on the raw connection' },
      );
      const head = parseResponseHead(buf)!;
      bodies.push(buf.subarray(head.headLength, length).toString());
      buf = buf.subarray(length);
    }
    return bodies;
  } finally {
    socket.destroy();
  }
}

const grantsFor = (originPort: number): Record<string, unknown>[] =>
  [A, B, C].map((p) => ({ id: p.id, tokenSha256: tokenHash(p.token), destinations: [`http://origin.test:${originPort}`], allowAddressClasses: ['loopback'] }));

describe('cross-principal request prefixing (review 2026-12-04 finding 6)', () => {
  let origin: NonReadingOrigin;
  let sluice: TestSluice;
  let base: string;

  beforeAll(async () => {
    origin = await startNonReadingOrigin();
    base = `http://origin.test:${origin.port}`;
    sluice = await startSluice({ dns: { hosts: { 'origin.test': ['127.0.0.1'] } }, grants: grantsFor(origin.port) });
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
  });

  it('control: the origin takes an unread body as the start of the next request on the same connection', async () => {
    const host = `127.0.0.1:${origin.port}`;
    const post = `POST /control-a HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${A.secret}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(SMUGGLED_BODY)}\r\n\r\n${SMUGGLED_BODY}`;
    const get = `GET /control-b HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${B.secret}\r\n\r\n`;
    const answers = await sequentialOnOneSocket(origin.port, [post, get]);
    // The attack is real: B's GET is answered with A's path and B's credential.
    expect(answers).toEqual([named('/control-a', A), named(A_CHOSEN, B)]);
    await waitUntil(() => origin.hits.some((h) => h.path === A_CHOSEN && h.auth === B.secret), { timeoutMs: 5000, label: 'control hit logged' });
    expect(origin.hits.some((h) => h.path === '/control-b')).toBe(false);
  });

  it("A's unread POST body never becomes the start of B's request, sequentially or concurrently", async () => {
    const before = origin.hits.length;
    const { aPaths, bPaths } = await attack(sluice.port, base, 'direct');
    await waitUntil(() => origin.hits.length - before >= aPaths.length + bPaths.length, { timeoutMs: 5000, label: 'origin logged every request' });
    const hits = origin.hits.slice(before);
    expectNoPrefixing(hits, aPaths, bPaths);
    // A's and B's requests never shared a connection to the origin.
    const portsOf = (who: Principal): Set<number> => new Set(hits.filter((h) => h.auth === who.secret).map((h) => h.port));
    const aPorts = portsOf(A);
    expect([...portsOf(B)].filter((p) => aPorts.has(p))).toEqual([]);
    // Every POST of A came on a connection of its own: none carried a second request.
    expect(aPorts.size).toBe(aPaths.length);
  });

  it("a connection that carried a POST body is not reused, even by the same principal; a GET's is", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const port = (p: string): number | undefined => origin.hits.find((h) => h.path === p)?.port;
    const go = async (p: string, method: 'GET' | 'POST'): Promise<void> => {
      const r = await viaSluice(sluice.port, agent, C, new URL(p, base), method, method === 'POST' ? SMUGGLED_BODY : undefined);
      expect(r).toEqual({ status: 200, body: named(p, C) });
      await waitUntil(() => port(p) !== undefined, { timeoutMs: 5000, label: `origin logged ${p}` });
    };
    try {
      await go('/c-get-1', 'GET');
      await go('/c-get-2', 'GET');
      await go('/c-post', 'POST');
      await go('/c-get-3', 'GET');
      await go('/c-get-4', 'GET');
    } finally {
      agent.destroy();
    }
    expect(port('/c-get-2')).toBe(port('/c-get-1'));
    expect(port('/c-get-3')).not.toBe(port('/c-post'));
    expect(port('/c-get-4')).toBe(port('/c-get-3'));
    // The smuggled request on C's POST connection was never parsed: the connection closed after the answer.
    expect(origin.hits.filter((h) => h.auth === C.secret).map((h) => h.path)).toEqual(['/c-get-1', '/c-get-2', '/c-post', '/c-get-3', '/c-get-4']);
  });
});

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('cross-principal request prefixing through a Basic upstream proxy (real Squid)', () => {
  let origin: NonReadingOrigin;
  let squid: Squid;
  let spy: Recorder;
  let spyUrl: string;
  let sluice: TestSluice;
  let dir: string;
  let base: string;

  beforeAll(async () => {
    origin = await startNonReadingOrigin();
    base = `http://origin.test:${origin.port}`;
    // Squid's own origin pool would carry A's unread body to B's request (see the header): off here.
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, users: { alice: 's3cret' }, serverPersistentConnections: false });
    spy = await startRecorder(Number(new URL(squid.url).port));
    spyUrl = `http://127.0.0.1:${spy.port}`;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-prefixing-'));
    const credentialsFile = path.join(dir, 'squid-creds.txt');
    fs.writeFileSync(credentialsFile, 'alice:s3cret\n', { mode: 0o600 });
    sluice = await startSluice({
      dns: { hosts: { 'origin.test': ['127.0.0.1'] } },
      route: { mode: 'proxy', proxy: { url: spyUrl, credentialsFile } },
      grants: grantsFor(origin.port),
    });
  });
  afterAll(async () => {
    await sluice?.close();
    await spy?.close();
    await squid?.close();
    await origin?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("Sluice never hands A's connection to Squid to B, and the origin never serves A's path with B's credential", async () => {
    const before = origin.hits.length;
    const { aPaths, bPaths } = await attack(sluice.port, base, 'squid');
    await waitUntil(() => origin.hits.length - before >= aPaths.length + bPaths.length, { timeoutMs: 5000, label: 'origin logged every request' });
    expectNoPrefixing(origin.hits.slice(before), aPaths, bPaths);
    expect(sluice.decisions().filter((d) => d.principal === 'a' || d.principal === 'b').every((d) => d.route === `proxy ${spyUrl}`)).toBe(true);

    // Sluice's connections to Squid, as the recorder saw them: each POST of A came on a connection of its
    // own, which carried nothing else, and B's requests never rode one of A's.
    const entries = await squid.waitForLog((e) => e.filter((x) => x.url.includes('/squid-')).length >= aPaths.length + bPaths.length, 10_000);
    const aOwn = new Set(aPaths);
    const sentOn = spy.receivedPerConnection().map((text) => targetsSent(text, base));
    const carryingA = sentOn.filter((targets) => targets.some((t) => aOwn.has(t)));
    expect(carryingA.flat().sort()).toEqual([...aPaths].sort());
    expect(carryingA.filter((targets) => targets.length !== 1)).toEqual([]);
    expect(sentOn.flat().filter((t) => t.includes('-b-')).sort()).toEqual([...bPaths].sort());
    expect(entries.filter((e) => e.url.includes('/squid-')).every((e) => e.user === 'alice' && e.status === 200)).toBe(true);
  }, 40_000);
});
