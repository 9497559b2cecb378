// The control plane end to end with real processes: `sluice start` with an admin socket, grants
// issued and revoked with `sluice grant` and with curl over the admin socket, then `kill -9` and a
// restart: a revoked token stays refused and a live grant still works (docs/decisions/0008-ledger-persistence.md:
// a restart neither loses nor resurrects a grant). No token appears in any log line or state file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { runCurl } from '../support/curl.js';
import { BIN, killSluiceProcesses, startSluiceProcess } from '../support/sluice-process.js';

function grantCli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, 'grant', ...args], { encoding: 'utf8', timeout: 15_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('control plane across kill -9', () => {
  let dir: string;
  let echo: EchoServer;
  let config: string;
  let adminSock: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-restart-'));
    echo = await startTcpEchoServer();
    adminSock = path.join(dir, 'state', 'admin.sock');
    config = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(
      config,
      stringify({
        listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
        admin: { listen: `unix:${adminSock}` },
        state: path.join(dir, 'state'),
        audit: { file: path.join(dir, 'audit.log') },
        dns: { hosts: { 'echo.test': ['127.0.0.1'] } },
      }),
    );
  });
  afterAll(async () => {
    await killSluiceProcesses();
    await echo?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const tunnelStatus = async (port: number, token: string): Promise<string> => {
    const t = await openConnectTunnel(port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${token}` });
    t.socket.destroy();
    return t.head.split('\r\n').find((l) => l.startsWith('Proxy-Status')) ?? t.head.split('\r\n')[0] ?? '';
  };

  it('keeps revocations and live grants through kill -9, and never writes a token anywhere', async () => {
    const first = await startSluiceProcess({ config, stdout: 'pipe', timeoutMs: 15_000 });
    const admin = `unix:${adminSock}`;
    expect(fs.statSync(adminSock).mode & 0o777).toBe(0o600);
    const health = await runCurl(['--unix-socket', adminSock, 'http://sluice/healthz']);
    expect(JSON.parse(health.stdout)).toEqual({ status: 'ok' });

    const issued = grantCli(['issue', '--admin', admin, '--json', '--destination', `tcp://echo.test:${echo.port}`, '--allow-class', 'loopback', '--generation', 'run-1']);
    expect(issued.status).toBe(0);
    const a = JSON.parse(issued.stdout) as { id: string; token: string };
    const viaCurl = await runCurl(['--unix-socket', adminSock, '-X', 'POST', '-H', 'content-type: application/json', '--data', JSON.stringify({ destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }), 'http://sluice/v1/grants']);
    const b = JSON.parse(viaCurl.stdout) as { id: string; token: string };
    expect(await tunnelStatus(first.port, a.token)).toContain('granted');
    expect(await tunnelStatus(first.port, b.token)).toContain('granted');

    expect(grantCli(['revoke', a.id, '--admin', admin]).status).toBe(0);
    expect(await tunnelStatus(first.port, a.token)).toContain('grant_revoked');
    const listed = grantCli(['list', '--admin', admin, '--json']);
    expect(listed.stdout).toContain(b.id);
    expect(listed.stdout).not.toContain(b.token);

    await first.kill9();

    const second = await startSluiceProcess({ config, stdout: 'pipe', timeoutMs: 15_000 });
    expect(await tunnelStatus(second.port, a.token)).toContain('grant_revoked');
    expect(await tunnelStatus(second.port, b.token)).toContain('granted');

    expect(await second.stop('SIGTERM', 15_000)).toBe(0);

    const everything = [first.stdout(), first.stderr(), second.stdout(), second.stderr(), fs.readFileSync(path.join(dir, 'audit.log'), 'utf8')];
    for (const file of fs.readdirSync(path.join(dir, 'state'))) {
      const full = path.join(dir, 'state', file);
      if (fs.statSync(full).isFile()) everything.push(fs.readFileSync(full, 'utf8'));
    }
    for (const text of everything) {
      expect(text).not.toContain(a.token);
      expect(text).not.toContain(b.token);
    }
  });
});
