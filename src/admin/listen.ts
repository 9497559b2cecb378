// Binds the admin server to a Unix socket (0700 parent, 0600 file, stale file removed) or TCP; never dials out.
import fs from 'node:fs/promises';
import type http from 'node:http';
import type net from 'node:net';
import path from 'node:path';

/** Tells whether something answers on a Unix socket path; app.ts passes egress's `isUnixSocketAlive`. */
export type UnixSocketProbe = (file: string) => Promise<boolean>;

export interface BoundAddress {
  /** `unix:/abs/path` or `host:port` with the real port. */
  readonly address: string;
  readonly socketFile: string | null;
}

export function isUnixListen(listen: string): boolean {
  return listen.startsWith('unix:');
}

/**
 * Listens on `listen`. For a Unix socket, connections that arrive before the file is chmod 0600 are
 * dropped: `secure` flips to true only after the mode is set.
 */
export async function bindAdminServer(server: http.Server, listen: string, probe: UnixSocketProbe, secure: { value: boolean }): Promise<BoundAddress> {
  if (isUnixListen(listen)) {
    const file = path.resolve(listen.slice('unix:'.length));
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await removeStaleSocket(file, probe);
    await listenOn(server, file);
    await fs.chmod(file, 0o600);
    secure.value = true;
    return { address: `unix:${file}`, socketFile: file };
  }
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(listen.slice(colon + 1));
  await listenOn(server, { host, port, exclusive: true });
  secure.value = true;
  const bound = server.address() as net.AddressInfo;
  return { address: bound.family === 'IPv6' ? `[${bound.address}]:${bound.port}` : `${bound.address}:${bound.port}`, socketFile: null };
}

function listenOn(server: http.Server, target: string | net.ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const done = (): void => {
      server.removeListener('error', reject);
      resolve();
    };
    if (typeof target === 'string') server.listen(target, done);
    else server.listen(target, done);
  });
}

/** A socket file left by a crash blocks listen(): remove it only when nothing answers on it. */
async function removeStaleSocket(file: string, probe: UnixSocketProbe): Promise<void> {
  const stat = await fs.lstat(file).catch(() => null);
  if (stat === null) return;
  if (!stat.isSocket()) throw new Error(`admin socket path ${file} exists and is not a socket; remove it or choose another admin.listen`);
  if (await probe(file)) throw new Error(`admin socket ${file} is in use: another sluice answers on it`);
  await fs.unlink(file);
}
