// While Sluice drains on SIGTERM (admin.drainTimeoutMs), a load balancer health-checking /readyz must be
// told to stop sending: /readyz answers 503 from the moment the drain starts (docs/admin-api.md), while
// the admin API stays up, live tunnels keep working until they end, and no new connection is accepted.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitFor, withTimeout } from '../support/wait.js';

const TOKEN = 'tok-drain';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };

function readyz(socketPath: string): Promise<{ status: number; body: { status: string; detail: string } }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: '/readyz', method: 'GET', timeout: 3000 }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { status: string; detail: string } }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('drain: /readyz answers 503 while Sluice shuts down', () => {
  let sluice: TestSluice | null = null;
  let echo: EchoServer | null = null;
  let dir = '';

  afterEach(async () => {
    await sluice?.close();
    await echo?.close();
    if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is ready while serving, 503 draining from the start of the drain, while a live tunnel still relays', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-drain-'));
    const adminSocket = path.join(dir, 'admin', 'admin.sock');
    echo = await startTcpEchoServer();
    sluice = await startSluice(
      {
        admin: { listen: `unix:${adminSocket}` },
        grants: [{ id: 'd', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
    expect(await readyz(adminSocket)).toEqual({ status: 200, body: { status: 'ready', detail: 'listening' } });

    const tunnel = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    expect(tunnel.status).toBe(200);
    const closing = sluice.app.close(10_000);

    expect(await readyz(adminSocket)).toEqual({ status: 503, body: { status: 'not_ready', detail: 'draining: shutting down' } });
    // The live tunnel is drained, not cut: it still relays.
    expect(await roundTrip(tunnel.socket, 'still-relaying')).toBe('still-relaying');
    // No new connection is accepted on the proxy listener.
    const refused = net.connect({ port: sluice.port, host: '127.0.0.1' });
    const outcome = await withTimeout(Promise.race([waitFor(refused, 'connect').then(() => 'connected'), waitFor(refused, 'error').then(() => 'refused')]), 3000, 'new connection outcome').catch(() => 'refused');
    refused.destroy();
    expect(outcome).toBe('refused');

    // The drain ends when the last tunnel does.
    tunnel.socket.end();
    await withTimeout(closing, 5000, 'drain completes once the tunnel ends');
  });
});
