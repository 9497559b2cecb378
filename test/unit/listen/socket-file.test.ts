// bindUnixSocket (ADR 0014): the socket file appears at its path with its final mode, a stale file is
// replaced, and anything else at the path (a live socket, a regular file) is never replaced; nothing of
// the private bind directory is left behind either way. Each refusal carries its kind, by which admin/
// words it for admin.listen, and the probe the caller passes decides what counts as stale.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { SocketFileError, bindUnixSocket, removeSocketFile } from '../../../src/listen/socket-file.js';

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
    await bindUnixSocket(s, file, null, isUnixSocketAlive);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
  });

  it('creates every missing directory of a nested path 0700, whatever the umask (issue 17, item 4)', async () => {
    const file = path.join(dir, 'a', 'b', 'c', 'g.sock');
    // An umask that takes the owner's write bit would leave 0500 directories nobody can bind in.
    const umask = process.umask(0o277);
    try {
      await bindUnixSocket(server(), file, null, isUnixSocketAlive);
    } finally {
      process.umask(umask);
    }
    expect(await isUnixSocketAlive(file)).toBe(true);
    for (const d of ['a', 'a/b', 'a/b/c']) expect(fs.statSync(path.join(dir, d)).mode & 0o777, d).toBe(0o700);
  });

  it('never changes the mode of a directory that exists, its own or a parent', async () => {
    fs.mkdirSync(path.join(dir, 'shared'), { mode: 0o755 });
    fs.chmodSync(path.join(dir, 'shared'), 0o755);
    await bindUnixSocket(server(), path.join(dir, 'shared', 'a.sock'), null, isUnixSocketAlive);
    await bindUnixSocket(server(), path.join(dir, 'shared', 'new', 'b.sock'), null, isUnixSocketAlive);
    expect(fs.statSync(path.join(dir, 'shared')).mode & 0o777).toBe(0o755);
    expect(fs.statSync(path.join(dir, 'shared', 'new')).mode & 0o777).toBe(0o700);
  });

  it('names a directory it cannot create `directory`, with the path and the error code, instead of a bare errno', async () => {
    fs.writeFileSync(path.join(dir, 'plain'), '');
    const file = path.join(dir, 'plain', 'sub', 'a.sock');
    const error = await bindUnixSocket(server(), file, null, isUnixSocketAlive).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SocketFileError);
    expect((error as SocketFileError).refusal).toBe('directory');
    expect((error as Error).message).toBe(`unix:${file}: cannot create its directory ${path.join(dir, 'plain', 'sub')} (ENOTDIR); create it, or choose a path Sluice's user may create`);
  });

  it('replaces a stale socket file that nothing answers on', async () => {
    const file = path.join(dir, 'a.sock');
    // Closing without removeSocketFile leaves the file behind, as a crash would.
    const dead = net.createServer();
    await bindUnixSocket(dead, file, null, isUnixSocketAlive);
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    expect(fs.statSync(file).isSocket()).toBe(true);
    expect(await isUnixSocketAlive(file)).toBe(false);
    const s = server();
    await bindUnixSocket(s, file, null, isUnixSocketAlive);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path where another server answers, and leaves that server alone', async () => {
    const file = path.join(dir, 'a.sock');
    const other = server();
    await new Promise<void>((resolve) => other.listen(file, resolve));
    const s = server();
    await expect(bindUnixSocket(s, file, null, isUnixSocketAlive)).rejects.toThrow(/is in use \(is another sluice running\?\)$/);
    expect(s.listening).toBe(false);
    expect(await isUnixSocketAlive(file)).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path that is a regular file, and leaves the file as it was', async () => {
    const file = path.join(dir, 'a.sock');
    fs.writeFileSync(file, 'keep me');
    await expect(bindUnixSocket(server(), file, null, isUnixSocketAlive)).rejects.toThrow(/not a socket/);
    expect(fs.readFileSync(file, 'utf8')).toBe('keep me');
    expect(leftovers()).toEqual([]);
  });

  it('refuses a path too long to bind privately first, instead of truncating it', async () => {
    const deep = path.join(dir, 'd'.repeat(Math.max(1, 100 - dir.length)));
    fs.mkdirSync(deep);
    const file = path.join(deep, 'a.sock');
    await expect(bindUnixSocket(server(), file, null, isUnixSocketAlive)).rejects.toThrow(/too long/);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('removeSocketFile removes only the file it bound', async () => {
    const file = path.join(dir, 'a.sock');
    const s = server();
    const bound = await bindUnixSocket(s, file, null, isUnixSocketAlive);
    await new Promise<void>((resolve) => s.close(() => resolve()));
    expect(fs.existsSync(file)).toBe(true);
    fs.unlinkSync(file);
    fs.writeFileSync(file, 'someone else');
    await removeSocketFile(bound);
    expect(fs.readFileSync(file, 'utf8')).toBe('someone else');
    fs.unlinkSync(file);
    const again = await bindUnixSocket(server(), file, null, isUnixSocketAlive);
    await removeSocketFile(again);
    expect(fs.existsSync(file)).toBe(false);
  });
});

describe('bindUnixSocket: what it refuses, and why', () => {
  async function refusal(promise: Promise<unknown>): Promise<SocketFileError> {
    const error: unknown = await promise.then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(SocketFileError);
    return error as SocketFileError;
  }

  it('names a live socket `in-use`, before binding anything', async () => {
    const file = path.join(dir, 'a.sock');
    const other = server();
    await new Promise<void>((resolve) => other.listen(file, resolve));
    const s = server();
    const error = await refusal(bindUnixSocket(s, file, null, isUnixSocketAlive));
    expect(error.refusal).toBe('in-use');
    expect(error.file).toBe(file);
    expect(error.message).toBe(`unix:${file} is in use (is another sluice running?)`);
    expect(error.listen).toBe(`unix:${file}`);
    expect(s.listening).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('names anything else at the path `not-a-socket`, and never asks the probe about it', async () => {
    const file = path.join(dir, 'a.sock');
    fs.mkdirSync(file);
    const asked: string[] = [];
    const error = await refusal(
      bindUnixSocket(server(), file, null, (f) => {
        asked.push(f);
        return Promise.resolve(false);
      }),
    );
    expect(error.refusal).toBe('not-a-socket');
    expect(asked).toEqual([]);
    expect(fs.statSync(file).isDirectory()).toBe(true);
  });

  it('trusts the probe: a socket file it calls alive is kept, one it calls dead is replaced', async () => {
    const file = path.join(dir, 'a.sock');
    const dead = net.createServer();
    await bindUnixSocket(dead, file, null, isUnixSocketAlive);
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    const ino = fs.statSync(file).ino;
    const asked: string[] = [];
    const alive = (f: string): Promise<boolean> => {
      asked.push(f);
      return Promise.resolve(true);
    };
    expect((await refusal(bindUnixSocket(server(), file, null, alive))).refusal).toBe('in-use');
    expect(asked).toEqual([file]);
    expect(fs.statSync(file).ino).toBe(ino);
    await bindUnixSocket(server(), file, null, () => Promise.resolve(false));
    expect(await isUnixSocketAlive(file)).toBe(true);
  });

  it('names a path with no room for the private directory `too-long`, with the byte count', async () => {
    const deep = path.join(dir, 'd'.repeat(Math.max(1, 100 - dir.length)));
    fs.mkdirSync(deep);
    const file = path.join(deep, 'a.sock');
    const error = await refusal(bindUnixSocket(server(), file, null, isUnixSocketAlive));
    expect(error.refusal).toBe('too-long');
    expect(error.message).toMatch(new RegExp(`^unix:${file}: the path is too long to bind privately first \\(\\d+ of 107 bytes\\); choose a shorter one$`));
  });

  it('gives the socket to a group with mode 0660 before its path exists', async () => {
    const gid = process.getgid?.() ?? 0;
    const file = path.join(dir, 'g.sock');
    await bindUnixSocket(server(), file, gid, isUnixSocketAlive);
    const stat = fs.statSync(file);
    expect(stat.mode & 0o777).toBe(0o660);
    expect(stat.gid).toBe(gid);
    expect(leftovers()).toEqual([]);
  });

  it('removeSocketFile(null) is a no-op (a TCP listener has no file)', async () => {
    await expect(removeSocketFile(null)).resolves.toBeUndefined();
  });
});
