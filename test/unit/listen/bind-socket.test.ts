// bindSocket and bindTcp: the one way src/ listens (docs/architecture.md, rule 3). TCP binds at once and
// reports the address actually bound, IPv6 in brackets; a held port is refused with no error listener
// left behind; `unix:/path` gets its file through socket-file.ts, with the mode the caller asked for
// (0600, or 0660 and a group), and is reported as given. Works for an http.Server as well as a net.Server
// (the admin and metrics listeners). Real sockets on loopback and in a temp dir.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { bindSocket, bindTcp } from '../../../src/listen/bind-socket.js';
import { ListenError } from '../../../src/listen/listen-error.js';
import { removeSocketFile } from '../../../src/listen/socket-file.js';

let dir: string;
const servers: net.Server[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bindsock-'));
});

afterEach(async () => {
  for (const s of servers.splice(0)) if (s.listening) await new Promise<void>((resolve) => s.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function track<T extends net.Server>(s: T): T {
  servers.push(s);
  return s;
}

const OWNER_ONLY = { gid: null, probe: isUnixSocketAlive } as const;

describe('bindTcp', () => {
  it('reports 127.0.0.1 with the real port for port 0', async () => {
    const s = track(net.createServer());
    const address = await bindTcp(s, '127.0.0.1', 0);
    expect(address).toBe(`127.0.0.1:${(s.address() as net.AddressInfo).port}`);
    expect(s.listenerCount('error')).toBe(0);
  });

  it('reports ::1 in brackets', async () => {
    const s = track(net.createServer());
    expect(await bindTcp(s, '::1', 0)).toBe(`[::1]:${(s.address() as net.AddressInfo).port}`);
  });

  it('rejects a held port with EADDRINUSE, named for the operator, not listening and with no error listener left', async () => {
    const holder = track(net.createServer());
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    const s = track(net.createServer());
    const refused = bindTcp(s, '127.0.0.1', port);
    await expect(refused).rejects.toBeInstanceOf(ListenError);
    await expect(refused).rejects.toMatchObject({ code: 'EADDRINUSE', listen: `127.0.0.1:${port}`, message: `127.0.0.1:${port} is in use (is another sluice running?)` });
    expect(s.listening).toBe(false);
    expect(s.listenerCount('error')).toBe(0);
  });
});

describe('bindSocket', () => {
  it('parses host:port and [v6]:port and binds TCP with no socket file', async () => {
    const v4 = await bindSocket(track(net.createServer()), '127.0.0.1:0', OWNER_ONLY);
    expect(v4.address).toMatch(/^127\.0\.0\.1:[1-9]\d*$/);
    expect(v4.socketFile).toBeNull();
    const v6 = await bindSocket(track(net.createServer()), '[::1]:0', OWNER_ONLY);
    expect(v6.address).toMatch(/^\[::1\]:[1-9]\d*$/);
  });

  it('binds an http.Server to unix:/path 0600 in a 0700 directory it creates, and reports the path as given', async () => {
    const file = path.join(dir, 'run', 'admin.sock');
    const s = track(http.createServer((_req, res) => res.end('ok')));
    const bound = await bindSocket(s, `unix:${file}`, OWNER_ONLY);
    const stat = fs.statSync(file);
    expect(bound).toEqual({ address: `unix:${file}`, socketFile: { path: file, ino: stat.ino } });
    expect(stat.mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(fs.readdirSync(path.dirname(file))).toEqual(['admin.sock']);
    expect(await isUnixSocketAlive(file)).toBe(true);
  });

  // Issue 23, review 2026-12-04 finding 3: a socket bound by a relative path is listed
  // relative in /proc/net/unix, where `sluice run`'s socket mask never sees it.
  it.each(['unix:rel.sock', 'unix:./agents/c.sock'])('refuses %s (relative: a caller that did not resolve it), creating and listening on nothing', async (listen) => {
    const s = track(net.createServer());
    await expect(bindSocket(s, listen, OWNER_ONLY)).rejects.toThrow(`${listen}: a relative socket path reached bindUnixSocket`);
    expect(s.listening).toBe(false);
    expect(fs.existsSync(listen.slice('unix:'.length))).toBe(false);
    expect(fs.existsSync('agents')).toBe(false);
  });

  it('gives the socket 0660 and the group when a gid is passed', async () => {
    const gid = process.getgid?.() ?? 0;
    const file = path.join(dir, 'g.sock');
    await bindSocket(track(net.createServer()), `unix:${file}`, { gid, probe: isUnixSocketAlive });
    expect(fs.statSync(file).mode & 0o777).toBe(0o660);
    expect(fs.statSync(file).gid).toBe(gid);
  });

  it('replaces a stale socket file that nothing answers on, and removes its own file after close', async () => {
    const file = path.join(dir, 'a.sock');
    // Closing without removeSocketFile leaves the file behind, as a crash would.
    const first = track(net.createServer());
    await bindSocket(first, `unix:${file}`, OWNER_ONLY);
    await new Promise<void>((resolve) => first.close(() => resolve()));
    expect(await isUnixSocketAlive(file)).toBe(false);
    const second = track(net.createServer());
    const bound = await bindSocket(second, `unix:${file}`, OWNER_ONLY);
    expect(await isUnixSocketAlive(file)).toBe(true);
    await new Promise<void>((resolve) => second.close(() => resolve()));
    await removeSocketFile(bound.socketFile);
    expect(fs.existsSync(file)).toBe(false);
  });
});
