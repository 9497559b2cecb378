// Asks (issue 27) as real clients meet them: Python's urllib (an absolute-form http:// request, the
// grant id and token as proxy userinfo) and Node's undici ProxyAgent (a CONNECT, a Bearer token) held on
// an ask. Allowed once: the request completes and reaches the origin. Denied: 403 approval_denied in
// Proxy-Status, nothing reaches the origin. No answer: approval_timeout after timeoutMs, not before.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProxyAgent, request } from 'undici';
import { adminRequest } from '../support/admin-socket.js';
import { cleanupClients, runClient } from '../support/clients.js';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const TOKEN = 'tok-asks-clients-5e1f';
const TIMEOUT_MS = 1500;

// argv: proxy URL (with userinfo), target URL. One JSON line: the status, the Proxy-Status header, the body.
const PYTHON = `
import json, sys, urllib.error, urllib.request
proxy, url = sys.argv[1], sys.argv[2]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': proxy}))
try:
    with opener.open(url, timeout=15) as r:
        print(json.dumps({'status': r.status, 'proxyStatus': r.headers.get('proxy-status'), 'body': r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({'status': e.code, 'proxyStatus': e.headers.get('proxy-status'), 'body': e.read().decode()}))
`;

describe('asks through real clients: Python urllib and undici ProxyAgent', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let dir: string;
  let admin: string;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-asks-clients-'));
    admin = path.join(dir, 'admin.sock');
    sluice = await startSluice(
      {
        admin: { listen: `unix:${admin}` },
        grants: [{ id: 'agent', tokenSha256: tokenHash(TOKEN), destinations: ['https://granted.test:443'], allowAddressClasses: ['loopback'], ask: { timeoutMs: TIMEOUT_MS } }],
      },
      { lookup: tableLookup({ 'py.test': ['127.0.0.1'], 'und.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    cleanupClients();
    await sluice?.close();
    await origin?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const pendingFor = async (destination: string): Promise<string> => {
    let id = '';
    await waitUntil(
      async () => {
        const asks = (await adminRequest(admin, 'GET', '/v1/asks')).body['asks'] as { ask: string; destination: string }[];
        id = asks.find((a) => a.destination === destination)?.ask ?? '';
        return id !== '';
      },
      { timeoutMs: 5000, label: `an ask for ${destination}` },
    );
    return id;
  };
  const answer = (id: string, decision: string) => adminRequest(admin, 'POST', `/v1/asks/${id}`, { decision, scope: 'once' });
  const python = (target: string) =>
    runClient('python3', ['-c', PYTHON, `http://agent:${TOKEN}@127.0.0.1:${sluice.port}`, target], { timeoutMs: 20_000 }).then((r) => {
      if (r.code !== 0) throw new Error(`python3 failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { status: number; proxyStatus: string | null; body: string };
    });
  const undici = async (target: string): Promise<{ status: number; proxyStatus: string | null; body: string }> => {
    const agent = new ProxyAgent({ uri: `http://127.0.0.1:${sluice.port}`, token: `Bearer ${TOKEN}` });
    try {
      const r = await request(target, { dispatcher: agent, headersTimeout: 15_000, bodyTimeout: 15_000 });
      return { status: r.statusCode, proxyStatus: null, body: await r.body.text() };
    } catch (error) {
      // undici surfaces a refused CONNECT as an error naming the proxy's status.
      const message = (error as Error).message;
      const status = Number(/\((\d{3})\)/.exec(message)?.[1] ?? 0);
      return { status, proxyStatus: null, body: message };
    } finally {
      await agent.close();
    }
  };

  it('Python: allowed once, the held request completes; denied, 403 approval_denied; unanswered, approval_timeout after timeoutMs', async () => {
    const dest = `http://py.test:${origin.port}`;
    const allowed = python(`${dest}/allowed`);
    await answer(await pendingFor(dest), 'allow');
    expect(await allowed).toMatchObject({ status: 200 });
    expect(origin.requests.some((r) => r.url === '/allowed')).toBe(true);

    const denied = python(`${dest}/denied`);
    await answer(await pendingFor(dest), 'deny');
    const d = await denied;
    expect(d.status).toBe(403);
    expect(d.proxyStatus).toContain('approval_denied');
    expect(origin.requests.some((r) => r.url === '/denied')).toBe(false);

    const started = Date.now();
    const t = await python(`${dest}/unanswered`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(t.status).toBe(403);
    expect(t.proxyStatus).toContain('approval_timeout');
    expect(origin.requests.some((r) => r.url === '/unanswered')).toBe(false);
  });

  it('undici ProxyAgent (a CONNECT): allowed once, the request completes; denied, refused 403; unanswered, refused after timeoutMs', async () => {
    const dest = `https://und.test:${origin.port}`;
    const allowed = undici(`http://und.test:${origin.port}/u-allowed`);
    await answer(await pendingFor(dest), 'allow');
    expect(await allowed).toMatchObject({ status: 200 });
    expect(origin.requests.some((r) => r.url === '/u-allowed')).toBe(true);

    const from = sluice.decisions().length;
    const denied = undici(`http://und.test:${origin.port}/u-denied`);
    await answer(await pendingFor(dest), 'deny');
    expect((await denied).status).toBe(403);
    expect(origin.requests.some((r) => r.url === '/u-denied')).toBe(false);

    const started = Date.now();
    const t = await undici(`http://und.test:${origin.port}/u-unanswered`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(t.status).toBe(403);
    const reasons = sluice.decisions().slice(from).map((d) => d.reason);
    expect(reasons).toEqual(expect.arrayContaining(['approval_denied', 'approval_timeout']));
  });
});
