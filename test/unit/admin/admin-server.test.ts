// Specifies the admin API over a real Unix socket and a real loopback TCP listener, with an in-memory
// ProxyControl: routes and statuses, key-path validation errors, the token shown exactly once and never
// logged, bearer authentication on TCP, the 64 KiB body cap, and that a failing handler never stops the server.
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminTokenSha256, startAdminServer, type AdminServer } from '../../../src/admin/index.js';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { runCurl } from '../../support/curl.js';
import { FakeControl, call, captureLog, type Target } from './fake-control.js';

const ADMIN_TOKEN = 'admin-secret-3f9a1c';
let dir: string;
let socketPath: string;
let unix: Target;
let server: AdminServer;
const control = new FakeControl();
const capture = captureLog();

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-admin-'));
  socketPath = path.join(dir, 'run', 'admin.sock');
  server = await startAdminServer({ listen: `unix:${socketPath}`, control, adminTokenSha256: null, log: capture.log, isUnixSocketAlive });
  unix = { socketPath };
});

afterAll(async () => {
  await server.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const post = (p: string, body: unknown): ReturnType<typeof call> => call(unix, 'POST', p, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('admin server on a Unix socket', () => {
  it('creates the parent directory 0700 and the socket file 0600, and reports unix:<path>', async () => {
    expect(server.address).toBe(`unix:${socketPath}`);
    expect((await fs.stat(socketPath)).mode & 0o777).toBe(0o600);
    expect((await fs.stat(path.dirname(socketPath))).mode & 0o777).toBe(0o700);
  });

  it('answers real curl --unix-socket on /healthz', async () => {
    const result = await runCurl(['--unix-socket', socketPath, '-i', 'http://admin/healthz']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(result.stdout).toMatch(/content-type: application\/json/i);
    expect(result.stdout.trim().endsWith('{"status":"ok"}')).toBe(true);
  });

  it('answers /readyz from control.readiness(): 200, then 503', async () => {
    expect(await call(unix, 'GET', '/readyz')).toMatchObject({ status: 200, json: { status: 'ready', detail: 'listening' } });
    control.ready = false;
    expect(await call(unix, 'GET', '/readyz')).toMatchObject({ status: 503, json: { status: 'not_ready', detail: 'draining' } });
    control.ready = true;
  });

  it('issues a grant: 201, no-store, the token shown once; list and show never carry it', async () => {
    const issued = await post('/v1/grants', { destinations: ['https://api.github.com'], generation: 'run-7', limits: { maxConcurrent: 8 } });
    expect(issued.status).toBe(201);
    expect(issued.headers['cache-control']).toBe('no-store');
    const body = issued.json as { id: string; token: string; grant: { id: string; destinations: string[] } };
    expect(body.token).toBe(control.issuedTokens.at(-1));
    expect(body.grant).toMatchObject({ id: body.id, destinations: ['https://api.github.com'], generation: 'run-7' });
    expect(control.specs.at(-1)).toMatchObject({ unrestricted: false, allowAddressClasses: [], limits: { maxConcurrent: 8 } });

    const list = await call(unix, 'GET', '/v1/grants');
    expect(list.status).toBe(200);
    expect((list.json as { grants: { id: string }[] }).grants.map((g) => g.id)).toContain(body.id);
    const show = await call(unix, 'GET', `/v1/grants/${body.id}`);
    expect(show).toMatchObject({ status: 200, json: { id: body.id, revokedAt: null } });
    for (const answer of [list, show]) expect(answer.text).not.toContain(body.token);
    for (const line of capture.lines) expect(JSON.stringify(line)).not.toContain(body.token);
  });

  it('revokes one grant (DELETE) and a generation (POST …/revoke)', async () => {
    const a = (await post('/v1/grants', { destinations: ['https://a.example'], generation: 'gen-x' })).json as { id: string };
    const b = (await post('/v1/grants', { destinations: ['https://b.example'], generation: 'gen-x' })).json as { id: string };
    const one = await call(unix, 'DELETE', `/v1/grants/${encodeURIComponent(a.id)}`);
    expect(one).toMatchObject({ status: 200, json: { revoked: { id: a.id }, endedConnections: 2 } });
    expect((one.json as { revoked: { revokedAt: string | null } }).revoked.revokedAt).not.toBeNull();
    expect(await call(unix, 'POST', '/v1/generations/gen-x/revoke')).toMatchObject({ status: 200, json: { revoked: [b.id], endedConnections: 1 } });
  });

  it.each([
    ['GET', '/v1/grants/no-such-grant', 404, 'grant_not_found'],
    ['DELETE', '/v1/grants/no-such-grant', 404, 'grant_not_found'],
    ['GET', '/v1/grants/bad%20id', 400, 'grant_id_invalid'],
    ['DELETE', '/v1/grants/%E0%A4%A', 400, 'grant_id_invalid'],
    ['GET', `/v1/grants/${'x'.repeat(129)}`, 400, 'grant_id_invalid'],
    ['POST', '/v1/generations/a%2Fb/revoke', 400, 'generation_invalid'],
    ['GET', '/nope', 404, 'not_found'],
    ['GET', '/v1/grants/', 404, 'not_found'],
  ])('%s %s → %i %s', async (method, p, status, error) => {
    expect(await call(unix, method, p)).toMatchObject({ status, json: { error } });
  });

  it.each([
    ['PUT', '/v1/grants', 'POST, GET'],
    ['POST', '/healthz', 'GET'],
    ['PATCH', '/v1/grants/g-1', 'GET, DELETE'],
    ['GET', '/v1/reload', 'POST'],
  ])('%s %s → 405 with Allow: %s', async (method, p, allow) => {
    const answer = await call(unix, method, p);
    expect(answer).toMatchObject({ status: 405, json: { error: 'method_not_allowed' } });
    expect(answer.headers['allow']).toBe(allow);
  });

  it('reload: 200 {reloaded:true}, or the control failure with its issues', async () => {
    expect(await call(unix, 'POST', '/v1/reload')).toMatchObject({ status: 200, json: { reloaded: true, endedConnections: 0 } });
    control.reloadResult = { ok: false, status: 400, reason: 'config_invalid', issues: [{ path: 'grants[0].destinations[0]', message: 'bad' }] };
    expect(await call(unix, 'POST', '/v1/reload')).toMatchObject({ status: 400, json: { error: 'config_invalid', issues: [{ path: 'grants[0].destinations[0]' }] } });
    control.reloadResult = { ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } };
  });
});

describe('POST /v1/grants validation', () => {
  it('reports each problem with its config-style key path', async () => {
    const answer = await post('/v1/grants', { destinations: ['https://ok.example', 5], limits: { maxBytes: -1 }, allowAddressClasses: ['self'] });
    expect(answer.status).toBe(400);
    const body = answer.json as { error: string; issues: { path: string; message: string }[] };
    expect(body.error).toBe('grant_invalid');
    expect(body.issues.map((i) => i.path).sort()).toEqual(['allowAddressClasses[0]', 'destinations[1]', 'limits.maxBytes']);
  });

  it.each([
    [{ id: 'mine', destinations: [] }, 'id', /assigned by sluice/],
    [{ token: 'chosen', destinations: [] }, 'token', /generated by sluice/],
    [{ tokenSha256: 'ab'.repeat(32) }, 'tokenSha256', /cannot bring its own token hash/],
  ])('refuses a body that brings its own %o', async (body, field, message) => {
    const answer = await post('/v1/grants', body);
    expect(answer).toMatchObject({ status: 400, json: { error: 'grant_invalid', issues: [{ path: field, message: expect.stringMatching(message) }] } });
    expect(answer.text).not.toContain('chosen');
  });

  // UX review 2026-12-04 finding 10 (issue 25): a grant that would be expired when issued is refused, as a config grant is.
  it.each([
    ['long past', '2020-01-01T00:00:00Z'],
    ['a second ago, with an offset', new Date(Math.floor(Date.now() / 1000) * 1000 - 1000).toISOString().replace('Z', '+00:00')],
  ])('refuses a limits.expiresAt %s at limits.expiresAt, and issues nothing', async (_when, expiresAt) => {
    const before = control.specs.length;
    const answer = await post('/v1/grants', { destinations: ['https://ok.example'], limits: { maxConcurrent: 2, expiresAt } });
    expect(answer).toMatchObject({ status: 400, json: { error: 'grant_invalid', issues: [{ path: 'limits.expiresAt', message: `${expiresAt} has passed: the grant would be expired when issued; set a later expiresAt` }] } });
    expect((answer.json as { issues: unknown[] }).issues).toHaveLength(1);
    expect(control.specs.length).toBe(before);
  });

  it('issues a grant whose expiresAt is still ahead', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    expect(await post('/v1/grants', { destinations: ['https://ok.example'], limits: { expiresAt } })).toMatchObject({ status: 201, json: { grant: { expiresAt } } });
  });

  it('names unknown keys, and passes a ProxyControl failure through with its status', async () => {
    expect(await post('/v1/grants', { destinatons: [] })).toMatchObject({ status: 400, json: { issues: [{ path: '(root)', message: expect.stringContaining('destinatons') }] } });
    expect(await post('/v1/grants', { listen: 'unix:/taken.sock' })).toMatchObject({ status: 409, json: { error: 'listen_in_use', issues: [{ path: 'listen' }] } });
  });

  it('answers 400 to malformed or empty JSON without echoing it', async () => {
    const answer = await call(unix, 'POST', '/v1/grants', { body: '{"destinations": [secret-xyz' });
    expect(answer).toMatchObject({ status: 400, json: { error: 'body_invalid_json' } });
    expect(answer.text).not.toContain('secret-xyz');
    expect(await call(unix, 'POST', '/v1/grants', { body: '' })).toMatchObject({ status: 400, json: { error: 'body_invalid_json' } });
  });

  it.each([false, true])('answers 413 to a body over 64 KiB (chunked: %s) and keeps serving', async (chunked) => {
    const big = JSON.stringify({ destinations: Array.from({ length: 5000 }, (_, i) => `https://h${i}.example`) });
    expect(big.length).toBeGreaterThan(64 * 1024);
    expect(await call(unix, 'POST', '/v1/grants', { body: big, chunked })).toMatchObject({ status: 413, json: { error: 'body_too_large' } });
    expect((await call(unix, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('faults and logging', () => {
  it('answers 500 when a handler throws, then keeps serving', async () => {
    control.failNextList = true;
    expect(await call(unix, 'GET', '/v1/grants')).toMatchObject({ status: 500, json: { error: 'internal_error' } });
    expect((await call(unix, 'GET', '/v1/grants')).status).toBe(200);
    expect(capture.lines.some((l) => l.level === 'error' && l.msg === 'admin handler failed')).toBe(true);
  });

  it('logs one line per request with method, route template and status, never a token or a body', async () => {
    const before = capture.lines.length;
    await call(unix, 'GET', '/v1/grants/g-1');
    const added = capture.lines.slice(before);
    expect(added).toEqual([{ level: 'info', msg: 'admin request', obj: { method: 'GET', route: '/v1/grants/{id}', status: 200 } }]);
    const everything = JSON.stringify(capture.lines);
    for (const token of control.issuedTokens) expect(everything).not.toContain(token);
    expect(everything).not.toMatch(/secret-xyz|chosen|authorization/i);
  });
});

describe('Unix socket start-up', () => {
  it('replaces a stale socket file, refuses a live one, and refuses a non-socket file', async () => {
    const stale = path.join(dir, 'stale.sock');
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(path.join(dir, 'holder.sock'), resolve));
    await fs.rename(path.join(dir, 'holder.sock'), stale);
    await new Promise<void>((resolve) => holder.close(() => resolve()));
    const replaced = await startAdminServer({ listen: `unix:${stale}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive });
    expect((await call({ socketPath: stale }, 'GET', '/healthz')).status).toBe(200);
    await expect(startAdminServer({ listen: `unix:${stale}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive })).rejects.toThrow(/in use/);
    await replaced.close();
    await expect(fs.stat(stale)).rejects.toThrow(/ENOENT/);
    const plain = path.join(dir, 'plain.txt');
    await fs.writeFile(plain, 'x');
    await expect(startAdminServer({ listen: `unix:${plain}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive })).rejects.toThrow(/not a socket/);
  });
});

describe('admin server on TCP', () => {
  it('refuses to start without an admin token', async () => {
    await expect(startAdminServer({ listen: '127.0.0.1:0', control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive })).rejects.toThrow(/requires a bearer token/);
  });

  it('answers 401 with WWW-Authenticate to a missing or wrong bearer token, 200 to the right one', async () => {
    const tcpLog = captureLog();
    const tcp = await startAdminServer({ listen: '127.0.0.1:0', control, adminTokenSha256: adminTokenSha256(ADMIN_TOKEN), log: tcpLog.log, isUnixSocketAlive });
    try {
      expect(tcp.address).toMatch(/^127\.0\.0\.1:\d+$/);
      const target = { host: '127.0.0.1', port: Number(tcp.address.split(':')[1]) };
      for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: `Basic ${ADMIN_TOKEN}` }, { authorization: `Bearer ${ADMIN_TOKEN}x` }]) {
        const answer = await call(target, 'GET', '/v1/grants', { headers });
        expect(answer).toMatchObject({ status: 401, json: { error: 'admin_token_invalid' } });
        expect(answer.headers['www-authenticate']).toBe('Bearer realm="sluice-admin"');
      }
      expect((await call(target, 'GET', '/v1/grants', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(200);
      const big = 'x'.repeat(200 * 1024);
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      expect(await call(target, 'POST', '/v1/grants', { body: big, headers: auth })).toMatchObject({ status: 413, json: { error: 'body_too_large' } });
      expect(await call(target, 'POST', '/v1/grants', { body: big, headers: auth, chunked: true })).toMatchObject({ status: 413 });
      expect(await call(target, 'POST', '/v1/grants', { body: big })).toMatchObject({ status: 401 });
      const curl = await runCurl(['-H', `Authorization: Bearer ${ADMIN_TOKEN}`, `http://${tcp.address}/healthz`]);
      expect(curl.stdout.trim()).toBe('{"status":"ok"}');
      expect(JSON.stringify(tcpLog.lines)).not.toContain(ADMIN_TOKEN);
    } finally {
      await tcp.close();
    }
  });
});
