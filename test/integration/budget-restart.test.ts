// Budgets across restarts on the file store (roadmap #2 closed): a grant that spent its maxConnections
// or maxBytes must not get a fresh budget by a restart of Sluice, graceful or kill -9. What each grant
// used is in state/usage.json (ledger/usage-file.ts), written within a second of a change.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/sluice.js');
const TOKEN = 'tok-budget-restart';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

describe('budgets survive a restart on the file store', () => {
  let echo: EchoServer;
  let dir = '';
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    echo = await startTcpEchoServer();
  });
  afterAll(async () => {
    await echo.close();
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
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
    const file = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(
      file,
      stringify({
        listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
        state: path.join(dir, 'state'),
        audit: { file: path.join(dir, 'audit.log') },
        dns: { hosts: { 'echo.test': ['127.0.0.1'] } },
        grants: grants({ maxBytes: 3000 }),
      }),
    );
    const start = async (): Promise<{ child: ChildProcess; port: number }> => {
      const child = spawn(process.execPath, [BIN, 'start', '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
      children.push(child);
      let stderr = '';
      child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
      await waitUntil(() => /"msg":"listening"/.test(stderr) || child.exitCode !== null, { timeoutMs: 20_000, label: 'sluice listens' });
      const port = Number(/"address":"127\.0\.0\.1:(\d+)"/.exec(stderr)?.[1] ?? 0);
      if (port === 0) throw new Error(`sluice did not start: ${stderr}`);
      return { child, port };
    };
    const first = await start();
    const t = await openConnectTunnel(first.port, `echo.test:${echo.port}`, AUTH);
    expect(t.status).toBe(200);
    expect(await roundTrip(t.socket, 'x'.repeat(1500))).toHaveLength(1500);
    t.socket.destroy();
    const usage = path.join(dir, 'state', 'usage.json');
    await waitUntil(() => fs.existsSync(usage) && (JSON.parse(fs.readFileSync(usage, 'utf8')) as { grants: Record<string, { bytes: number }> }).grants['b']?.bytes === 3000, { timeoutMs: 5000, label: 'usage.json has the bytes' });
    const exited = new Promise<void>((resolve) => first.child.once('exit', () => resolve()));
    first.child.kill('SIGKILL');
    await withTimeout(exited, 5000, 'kill -9');
    const second = await start();
    const refused = await openConnectTunnel(second.port, `echo.test:${echo.port}`, AUTH);
    expect(refused.status).toBe(429);
    expect(refused.head).toContain('details="byte_limit_reached"');
    refused.socket.destroy();
  });
});
