// A second `sluice start` on addresses the first one holds (UX review 2026-12-04 finding 12; issue
// 25): it exits 1, naming the key of the address and asking whether another Sluice runs, for every key
// Sluice listens on (listeners[N].listen, TCP and unix:, admin.listen, TCP and unix:, admin.metrics);
// and the first instance keeps serving on each of them. check-config passes the same file: it binds
// nothing, so a port in use is a host condition (exit 1), not a config error (exit 2;
// docs/configuration.md, "Binding"). A port below 1024 without the capability is named the same way.
// Runs the built dist/ as `npx sluice` does.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { adminRequest } from '../support/admin-socket.js';
import { OTHER_UID, canSwitchUid } from '../support/other-uid.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { unusedPort } from '../support/ports.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { BIN, killSluiceProcesses, startSluiceProcess, type SluiceProcess } from '../support/sluice-process.js';
import { tokenHash } from '../support/sluice.js';

const TOKEN = 'tok-second-instance';

function sluice(args: string[], cwd: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: 'utf8', timeout: 15_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let dir: string;
let first: SluiceProcess;
let echo: EchoServer;
let squatter: net.Server;
let ports: { proxy: number; metrics: number; squatted: number };
let files: { admin: string; proxySocket: string };

/** A config for the second instance: its own state, the addresses each case gives. */
function secondConfig(name: string, extra: Record<string, unknown>): string {
  const file = path.join(dir, `${name}.yaml`);
  const state = path.join(dir, `state-${name}`);
  fs.writeFileSync(file, stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state, audit: { file: 'stderr' }, ...extra }));
  return file;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-second-'));
  echo = await startTcpEchoServer();
  squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  ports = { proxy: await unusedPort(), metrics: await unusedPort(), squatted: (squatter.address() as net.AddressInfo).port };
  files = { admin: path.join(dir, 'state', 'admin.sock'), proxySocket: path.join(dir, 'state', 'proxy.sock') };
  first = await startSluiceProcess({
    cwd: dir,
    config: {
      listeners: [
        { name: 'shared', listen: `127.0.0.1:${ports.proxy}`, identify: 'token' },
        { name: 'sock', listen: `unix:${files.proxySocket}`, identify: 'token' },
      ],
      admin: { listen: `unix:${files.admin}`, metrics: `127.0.0.1:${ports.metrics}` },
      state: path.join(dir, 'state'),
      audit: { file: path.join(dir, 'audit.jsonl') },
      grants: [{ id: 'g', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://127.0.0.1:${echo.port}`], allowAddressClasses: ['loopback'] }],
    },
  });
}, 30_000);

afterAll(async () => {
  await killSluiceProcesses();
  await new Promise<void>((resolve) => squatter.close(() => resolve()));
  await echo.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a second sluice start on addresses in use', () => {
  it('the same config: check-config passes, start exits 1 naming listeners[0].listen', () => {
    const same = path.join(dir, 'sluice.yaml');
    expect(sluice(['check-config', same], dir).status).toBe(0);
    const second = sluice(['start', '--config', same], dir);
    expect(second.status).toBe(1);
    expect(second.stderr).toBe(`sluice start: listeners[0].listen: 127.0.0.1:${ports.proxy} is in use (is another sluice running?)\n`);
  });

  it.each([
    ['a TCP listener second in the list', () => ({ listeners: [{ name: 'a', listen: '127.0.0.1:0', identify: 'token' }, { name: 'b', listen: `127.0.0.1:${ports.proxy}`, identify: 'token' }] }), () => `listeners[1].listen: 127.0.0.1:${ports.proxy} is in use (is another sluice running?)`],
    ['a unix: listener', () => ({ listeners: [{ name: 'sock', listen: `unix:${files.proxySocket}`, identify: 'token' }] }), () => `listeners[0].listen: unix:${files.proxySocket} is in use (is another sluice running?)`],
    ['the admin socket', () => ({ admin: { listen: `unix:${files.admin}` } }), () => `admin.listen: admin socket ${files.admin} is in use (is another sluice running?)`],
    ['a TCP admin listener', () => ({ admin: { listen: `127.0.0.1:${ports.squatted}`, tokenSha256: tokenHash('admin') } }), () => `admin.listen: 127.0.0.1:${ports.squatted} is in use (is another sluice running?)`],
    ['the metrics listener', () => ({ admin: { metrics: `127.0.0.1:${ports.metrics}` } }), () => `admin.metrics: 127.0.0.1:${ports.metrics} is in use (is another sluice running?)`],
  ])('%s: exit 1 naming its key', (name, extra, line) => {
    const file = secondConfig(name.replace(/\W+/g, '-'), extra());
    expect(sluice(['check-config', file], dir)).toMatchObject({ status: 0 });
    const second = sluice(['start', '--config', file], dir);
    expect(second.status).toBe(1);
    expect(second.stderr.split('\n').filter((l) => l.startsWith('sluice start: '))).toEqual([`sluice start: ${line()}`]);
  });

  it('leaves the first instance serving on every address it holds', async () => {
    expect(first.alive()).toBe(true);
    const tunnel = await openConnectTunnel(ports.proxy, `127.0.0.1:${echo.port}`, { 'Proxy-Authorization': `Bearer ${TOKEN}` });
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(200);
    const health = await fetch(`http://127.0.0.1:${ports.metrics}/healthz`);
    expect(health.status).toBe(200);
    expect(await adminRequest(files.admin, 'GET', '/healthz')).toMatchObject({ status: 200 });
    const viaSocket = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(files.proxySocket);
      socket.once('error', reject);
      socket.once('data', (chunk: Buffer) => {
        socket.destroy();
        resolve(chunk.toString('latin1').split('\r\n')[0] ?? '');
      });
      socket.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: 127.0.0.1:${echo.port}\r\n\r\n`);
    });
    expect(viaSocket).toBe('HTTP/1.1 407 Proxy Authentication Required');
  });
});

describe('a port below 1024 without the capability', () => {
  // Needs root to drop to another uid (setpriv); the tests run as root, where the port itself is allowed.
  it.runIf(canSwitchUid())('exits 1 naming the key, the port and the fix', () => {
    const open = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-privileged-'));
    try {
      fs.chmodSync(open, 0o777);
      const file = path.join(open, 'sluice.yaml');
      fs.writeFileSync(file, stringify({ listeners: [{ name: 'low', listen: '127.0.0.1:81', identify: 'token' }], state: path.join(open, 'state'), audit: { file: 'stderr' } }));
      const r = spawnSync('setpriv', [`--reuid=${OTHER_UID}`, `--regid=${OTHER_UID}`, '--clear-groups', process.execPath, BIN, 'start', '--config', file], { cwd: open, encoding: 'utf8', timeout: 15_000 });
      expect(r.status).toBe(1);
      expect(r.stderr).toBe('sluice start: listeners[0].listen: 127.0.0.1:81: permission denied: a port below 1024 needs root or CAP_NET_BIND_SERVICE; choose a port from 1024 up\n');
    } finally {
      fs.rmSync(open, { recursive: true, force: true });
    }
  });
});
