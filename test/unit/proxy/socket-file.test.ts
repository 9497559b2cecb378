// bindUnixSocket (ADR 0014): the socket file appears at its path with its final mode, a stale file is
// replaced, and anything else at the path (a live socket, a regular file) is never replaced; nothing of
// the private bind directory is left behind either way.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { bindUnixSocket, removeSocketFile } from '../../../src/proxy/socket-file.js';

let dir: string;
const servers: net.Server[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sockfile-'));
});

afterEach(async () => {
  for (const s of servers.splice(0)) if (s.listening) await new Promise<void>((resolve) => s.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function server(): net.Server {
  const s = net.createServer((socket) => socket.end());
  servers.push(s);
  return s;
}

const leftovers = (): string[] => fs.readdirSync(dir).filter((name) => name.startsWith('.sluice-'));

describe('bindUnixSocket', () => {
  it('creates a missing directory 0700, as a fresh machine with `unix:./state/a.sock` needs', async () => {
    const file = path.join(dir, 'state', 'a.sock');
    const s = server();
    await bindUnixSocket(s, file, null);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
  });

  it('replaces a stale socket file that nothing answers on', async () => {
    const file = path.join(dir, 'a.sock');
    // Closing without removeSocketFile leaves the file behind, as a crash would.
    const dead = net.createServer();
    await bindUnixSocket(dead, file, null);
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    expect(fs.statSync(file).isSocket()).toBe(true);
    expect(await isUnixSocketAlive(file)).toBe(false);
    const s = server();
    await bindUnixSocket(s, file, null);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path where another server answers, and leaves that server alone', async () => {
    const file = path.join(dir, 'a.sock');
    const other = server();
    await new Promise<void>((resolve) => other.listen(file, resolve));
    const s = server();
    await expect(bindUnixSocket(s, file, null)).rejects.toThrow(/path exists/);
    expect(s.listening).toBe(false);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path that is a regular file, and leaves the file as it was', async () => {
    const file = path.join(dir, 'a.sock');
    fs.writeFileSync(file, 'keep me');
    await expect(bindUnixSocket(server(), file, null)).rejects.toThrow(/not a socket/);
    expect(fs.readFileSync(file, 'utf8')).toBe('keep me');
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path too long to bind privately first, instead of truncating it', async () => {
    const deep = path.join(dir, 'd'.repeat(Math.max(1, 100 - dir.length)));
    fs.mkdirSync(deep);
    const file = path.join(deep, 'a.sock');
    await expect(bindUnixSocket(server(), file, null)).rejects.toThrow(/too long/);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('removeSocketFile removes only the file it bound', async () => {
    const file = path.join(dir, 'a.sock');
    const s = server();
    const bound = await bindUnixSocket(s, file, null);
    await new Promise<void>((resolve) => s.close(() => resolve()));
    expect(fs.existsSync(file)).toBe(true);
    fs.unlinkSync(file);
    fs.writeFileSync(file, 'someone else');
    await removeSocketFile(bound);
    expect(fs.readFileSync(file, 'utf8')).toBe('someone else');
    fs.unlinkSync(file);
    const again = await bindUnixSocket(server(), file, null);
    await removeSocketFile(again);
    expect(fs.existsSync(file)).toBe(false);
  });
});
