// Threat: a process that reaches the admin Unix socket (a sandbox not started by `sluice run` that was
// handed the state directory, or a same-uid process) issues itself grants (review 2026-12, findings 2 and
// 12 part 3). Before, the socket's file mode was its only authentication, and admin.tokenSha256 /
// admin.tokenEnv applied to TCP only. Now a configured admin token is required on the Unix socket too;
// without one configured, the Unix socket behaves as before.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { adminTokenSha256, startAdminServer, type AdminServer } from '../../src/admin/index.js';
import { isUnixSocketAlive } from '../../src/egress/index.js';
import { startSluice, type TestSluice } from '../support/sluice.js';
import { FakeControl, call, captureLog } from '../unit/admin/fake-control.js';

const ADMIN_TOKEN = 'admin-token-on-unix-5d1e';
let dir: string;
const servers: AdminServer[] = [];
const apps: TestSluice[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-admin-token-'));
});

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const a of apps.splice(0)) await a.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function startAdmin(socketDir: string, tokenSha256: Buffer | null): Promise<AdminServer> {
  const server = await startAdminServer({ listen: `unix:${path.join(socketDir, 'admin.sock')}`, control: new FakeControl(), adminTokenSha256: tokenSha256, log: captureLog().log, isUnixSocketAlive });
  servers.push(server);
  return server;
}

function makeDir(name: string, mode: number): string {
  const d = path.join(dir, name);
  fs.mkdirSync(d);
  fs.chmodSync(d, mode);
  return d;
}

describe('a configured admin token on the Unix socket', () => {
  it('is required: no token and a wrong token get 401, the right one 200', async () => {
    const server = await startAdmin(makeDir('run', 0o700), adminTokenSha256(ADMIN_TOKEN));
    const socketPath = server.address.slice('unix:'.length);
    expect(await call({ socketPath }, 'GET', '/v1/grants')).toMatchObject({ status: 401, json: { error: 'admin_token_invalid' } });
    expect(await call({ socketPath }, 'GET', '/healthz', { headers: { authorization: 'Bearer wrong' } })).toMatchObject({ status: 401 });
    expect(await call({ socketPath }, 'GET', '/v1/grants', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).toMatchObject({ status: 200 });
  });

  it('is required from admin.tokenEnv when Sluice starts with a unix: admin.listen', async () => {
    const socketPath = path.join(makeDir('run', 0o700), 'admin.sock');
    apps.push(await startSluice({ admin: { listen: `unix:${socketPath}`, tokenEnv: 'SLUICE_TEST_ADMIN_TOKEN' } }, { env: { SLUICE_TEST_ADMIN_TOKEN: ADMIN_TOKEN } }));
    const issue = { body: JSON.stringify({ destinations: ['https://a.test'] }), headers: { 'content-type': 'application/json' } };
    expect(await call({ socketPath }, 'POST', '/v1/grants', issue)).toMatchObject({ status: 401 });
    const authorized = await call({ socketPath }, 'POST', '/v1/grants', { ...issue, headers: { ...issue.headers, authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(authorized.status).toBe(201);
  });

  it('is not asked for when none is configured (unchanged)', async () => {
    const server = await startAdmin(makeDir('run', 0o700), null);
    expect(await call({ socketPath: server.address.slice('unix:'.length) }, 'GET', '/v1/grants')).toMatchObject({ status: 200 });
  });
});
