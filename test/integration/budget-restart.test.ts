// Budgets across restarts on the file store (roadmap #2 closed): a grant that spent its maxConnections
// or maxBytes must not get a fresh budget by a restart of Sluice, graceful or kill -9. What each grant
// used is in state/usage.json (ledger/usage-file.ts), written within a second of a change.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash } from '../support/sluice.js';
import { killSluiceProcesses, startSluiceProcess } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';

const TOKEN = 'tok-budget-restart';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

describe('budgets survive a restart on the file store', () => {
  let echo: EchoServer;
  let dir = '';

  beforeAll(async () => {
    echo = await startTcpEchoServer();
  });
  afterAll(async () => {
    await echo.close();
  });
  afterEach(async () => {
    await killSluiceProcesses();
    if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
  });

  const grants = (limits: Record<string, number>): Record<string, unknown>[] => [
    { id: 'b', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'], limits },
  ];

  it('maxConnections spent before a graceful restart stays spent after it', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-budget-'));
    const config = { state: path.join(dir, 'state'), grants: grants({ maxConnections: 2 }) };
    const lookup = tableLookup({ 'echo.test': ['127.0.0.1'] });
    const first = await startSluice(config, { lookup });
    for (let i = 0; i < 2; i += 1) {
      const t = await openConnectTunnel(first.port, `echo.test:${echo.port}`, AUTH);
      expect(t.status).toBe(200);
      t.socket.destroy();
    }
    await first.close();
    const second = await startSluice(config, { lookup });
    try {
      const refused = await openConnectTunnel(second.port, `echo.test:${echo.port}`, AUTH);
      expect(refused.status).toBe(429);
      expect(refused.head).toContain('details="connection_quota_exhausted"');
      refused.socket.destroy();
    } finally {
      await second.close();
    }
  });

  it('maxBytes spent before a kill -9 stays spent after the restart', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-budget-'));
    const config = {
      listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
      state: path.join(dir, 'state'),
      audit: { file: path.join(dir, 'audit.log') },
      dns: { hosts: { 'echo.test': ['127.0.0.1'] } },
      grants: grants({ maxBytes: 3000 }),
    };
    const first = await startSluiceProcess({ config, cwd: dir });
    const t = await openConnectTunnel(first.port, `echo.test:${echo.port}`, AUTH);
    expect(t.status).toBe(200);
    expect(await roundTrip(t.socket, 'x'.repeat(1500))).toHaveLength(1500);
    t.socket.destroy();
    const usage = path.join(dir, 'state', 'usage.json');
    await waitUntil(() => fs.existsSync(usage) && (JSON.parse(fs.readFileSync(usage, 'utf8')) as { grants: Record<string, { bytes: number }> }).grants['b']?.bytes === 3000, { timeoutMs: 5000, label: 'usage.json has the bytes' });
    await first.kill9();
    const second = await startSluiceProcess({ config, cwd: dir });
    const refused = await openConnectTunnel(second.port, `echo.test:${echo.port}`, AUTH);
    expect(refused.status).toBe(429);
    expect(refused.head).toContain('details="byte_limit_reached"');
    refused.socket.destroy();
  });
});
