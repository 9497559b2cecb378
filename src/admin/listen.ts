// Binds the admin server to a Unix socket (0700 parent, 0600 file, stale file removed) or TCP; never dials out.
// The socket is bound in a private 0700 directory, chmod 0600 there, then hard-linked to its path, so the
// path never shows another mode (ADR 0014; proxy/socket-file.ts does the same, and may not be imported).
import fs from 'node:fs/promises';
import type http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { isUnixListen } from '../config/index.js';

/** Tells whether something answers on a Unix socket path; app.ts passes egress's `isUnixSocketAlive`. */
export type UnixSocketProbe = (file: string) => Promise<boolean>;

export interface BoundAddress {
  /** `unix:/abs/path` or `host:port` with the real port. */
  readonly address: string;
  /** The socket file and its inode: removed on close only while it is still this one. */
  readonly socketFile: { readonly path: string; readonly ino: number } | null;
}

const SOCKET_FILE_MODE = 0o600;
/** sun_path holds 108 bytes with its NUL (unix(7)). */
const MAX_SOCKET_PATH_BYTES = 107;

/**
 * Listens on `listen`. For a Unix socket, `secure` flips to true only once the file is at its path with
 * mode 0600; the server drops any connection accepted before.
 */
export async function bindAdminServer(server: http.Server, listen: string, probe: UnixSocketProbe, secure: { value: boolean }): Promise<BoundAddress> {
  if (isUnixListen(listen)) {
    const file = path.resolve(listen.slice('unix:'.length));
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await removeStaleSocket(file, probe);
    const ino = await bindPrivately(server, file);
    secure.value = true;
    return { address: `unix:${file}`, socketFile: { path: file, ino } };
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

/** Binds in a fresh 0700 directory beside `file`, sets 0600, links the socket to `file`; returns its inode. */
async function bindPrivately(server: http.Server, file: string): Promise<number> {
  const privateDir = await fs.mkdtemp(path.join(path.dirname(file), '.sluice-'));
  const staged = path.join(privateDir, 's');
  try {
    if (Buffer.byteLength(staged) > MAX_SOCKET_PATH_BYTES) throw new Error(`admin socket path ${file} is too long to bind privately first; choose a shorter admin.listen`);
    await listenOn(server, staged);
    await fs.chmod(staged, SOCKET_FILE_MODE);
    // link(), not rename(): a path that appeared since the stale check is refused, never replaced.
    await fs.link(staged, file);
    return (await fs.stat(file)).ino;
  } finally {
    await fs.rm(privateDir, { recursive: true, force: true });
  }
}

/** After close: the socket file goes only if it is still ours. */
export async function removeAdminSocketFile(socketFile: BoundAddress['socketFile']): Promise<void> {
  if (socketFile === null) return;
  const stat = await fs.lstat(socketFile.path).catch(() => null);
  if (stat !== null && stat.isSocket() && stat.ino === socketFile.ino) await fs.unlink(socketFile.path).catch(() => undefined);
}

/** A socket file left by a crash blocks listen(): remove it only when nothing answers on it. */
async function removeStaleSocket(file: string, probe: UnixSocketProbe): Promise<void> {
  const stat = await fs.lstat(file).catch(() => null);
  if (stat === null) return;
  if (!stat.isSocket()) throw new Error(`admin socket path ${file} exists and is not a socket; remove it or choose another admin.listen`);
  if (await probe(file)) throw new Error(`admin socket ${file} is in use: another sluice answers on it`);
  await fs.unlink(file);
}
