// bindListener binds one `listeners[]` section: TCP at once (reporting the address actually bound), a
// Unix socket through socket-file.ts so that its file never exists with the umask's mode. What another
// local user or process could try: connect to a socket file left group- or world-accessible, take the
// port first so Sluice's clients reach it instead, or name a group that does not exist so the socket
// falls back to some other ownership. Real sockets on loopback and in a temp dir.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ListenerSection } from '../../../src/config/index.js';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { bindListener } from '../../../src/listen/bind-listener.js';
import { waitFor } from '../../support/wait.js';

let dir: string;
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bind-'));
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) if (s.listening) await new Promise<void>((resolve) => s.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function server(): net.Server {
  const s = net.createServer((socket) => socket.on('error', () => undefined).end('sluice'));
  servers.push(s);
  return s;
}

function section(listen: string, socketGroup?: string | number): ListenerSection {
  return socketGroup === undefined ? { name: 'l', listen, protocol: 'http' } : { name: 'l', listen, protocol: 'http', socketGroup };
}

/** Connects and reads the greeting: proves the bound server is the one answering. */
async function greeting(options: net.NetConnectOpts): Promise<string> {
  const socket = net.connect(options);
  sockets.push(socket);
  socket.on('error', () => undefined);
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
  await waitFor(socket, 'end');
  return text;
}

describe('bindListener: TCP', () => {
  it('binds 127.0.0.1 and reports the port actually bound for port 0', async () => {
    const s = server();
    const bound = await bindListener(s, section('127.0.0.1:0'), isUnixSocketAlive);
    const port = (s.address() as net.AddressInfo).port;
    expect(bound).toEqual({ address: `127.0.0.1:${port}`, socketFile: null });
    expect(port).toBeGreaterThan(0);
    expect(await greeting({ host: '127.0.0.1', port })).toBe('sluice');
  });

  it('binds [::1] and reports it in brackets', async () => {
    const s = server();
    const bound = await bindListener(s, section('[::1]:0'), isUnixSocketAlive);
    const port = (s.address() as net.AddressInfo).port;
    expect(bound.address).toBe(`[::1]:${port}`);
    expect(await greeting({ host: '::1', port })).toBe('sluice');
  });

  it('refuses a port another server holds, and leaves that server answering', async () => {
    const holder = net.createServer((socket) => socket.on('error', () => undefined).end('holder'));
    servers.push(holder);
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    const s = server();
    await expect(bindListener(s, section(`127.0.0.1:${port}`), isUnixSocketAlive)).rejects.toMatchObject({ code: 'EADDRINUSE', listen: `127.0.0.1:${port}`, message: `127.0.0.1:${port} is in use (is another sluice running?)` });
    expect(s.listening).toBe(false);
    expect(s.listenerCount('error')).toBe(0);
    expect(await greeting({ host: '127.0.0.1', port })).toBe('holder');
  });
});

describe('bindListener: Unix socket', () => {
  it('binds the socket file owner-only (0600) and reports the file it put in place', async () => {
    const file = path.join(dir, 'proxy.sock');
    const s = server();
    const bound = await bindListener(s, section(`unix:${file}`), isUnixSocketAlive);
    const stat = fs.statSync(file);
    expect(bound).toEqual({ address: `unix:${file}`, socketFile: { path: file, ino: stat.ino } });
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
    expect(await greeting({ path: file })).toBe('sluice');
  });

  it('makes the directory of a socket in a missing directory private (0700)', async () => {
    const file = path.join(dir, 'state', 'proxy.sock');
    await bindListener(server(), section(`unix:${file}`), isUnixSocketAlive);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(await greeting({ path: file })).toBe('sluice');
  });

  it.each([
    ['a numeric gid', (gid: number): number => gid],
    ['a gid written as digits', (gid: number): string => String(gid)],
  ])('gives the socket to socketGroup (%s) with mode 0660', async (_label, group) => {
    const gid = process.getgid?.() ?? 0;
    const file = path.join(dir, 'group.sock');
    await bindListener(server(), section(`unix:${file}`, group(gid)), isUnixSocketAlive);
    const stat = fs.statSync(file);
    expect(stat.mode & 0o777).toBe(0o660);
    expect(stat.gid).toBe(gid);
  });

  it('refuses a socketGroup that names no group, binding nothing rather than falling back to another mode', async () => {
    const file = path.join(dir, 'nogroup.sock');
    const s = server();
    await expect(bindListener(s, section(`unix:${file}`, 'sluice-no-such-group'), isUnixSocketAlive)).rejects.toThrow('listener l: no group named sluice-no-such-group');
    expect(s.listening).toBe(false);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('refuses a path where another server answers, and leaves it answering', async () => {
    const file = path.join(dir, 'taken.sock');
    const holder = net.createServer((socket) => socket.on('error', () => undefined).end('holder'));
    servers.push(holder);
    await new Promise<void>((resolve) => holder.listen(file, resolve));
    const s = server();
    await expect(bindListener(s, section(`unix:${file}`), isUnixSocketAlive)).rejects.toThrow(/is in use \(is another sluice running\?\)$/);
    expect(s.listening).toBe(false);
    expect(await greeting({ path: file })).toBe('holder');
  });
});
