// Puts a listener's Unix socket file at its path with a mode Sluice chose (0600, or 0660 for one group),
// never the umask's (review 2026-12, finding 9). Never removes a path something still answers on.
//
// The socket is bound inside a fresh 0700 directory beside its path, given its mode (and group) there,
// then hard-linked into place. So the path never exists with any other mode: chmod after listen() would
// leave a window in which another uid could connect() and queue a connection that is accepted later.
// link() also refuses to replace a path that appeared meanwhile, where rename() would clobber it.
// admin/listen.ts does the same for the admin socket; the two cannot share code (ADR 0014).
import fs from 'node:fs/promises';
import type net from 'node:net';
import path from 'node:path';
import { isUnixSocketAlive } from '../egress/index.js';

/** Owner only; with a socket group, owner and group. Applied before the path exists. */
export const SOCKET_FILE_MODE = 0o600;
export const GROUP_SOCKET_FILE_MODE = 0o660;

/** sun_path holds 108 bytes with its NUL (unix(7)); a longer path must not be truncated silently. */
const MAX_SOCKET_PATH_BYTES = 107;
const PRIVATE_DIR_PREFIX = '.sluice-';

/** The file this listener put in place: removed on close only if it is still that file (same inode). */
export interface SocketFile {
  readonly path: string;
  readonly ino: number;
}

/** Binds `server` to the Unix socket `file`, mode 0600 (or 0660 and group `gid`), and returns the file. */
export async function bindUnixSocket(server: net.Server, file: string, gid: number | null): Promise<SocketFile> {
  // A missing directory is created private (`unix:./state/a.sock` on a fresh machine; docs/configuration.md).
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await removeStaleSocket(file);
  const privateDir = await fs.mkdtemp(path.join(path.dirname(file), PRIVATE_DIR_PREFIX));
  const staged = path.join(privateDir, 's');
  try {
    if (Buffer.byteLength(staged) > MAX_SOCKET_PATH_BYTES) {
      fail(file, `the path is too long to bind privately first (${Buffer.byteLength(staged)} of ${MAX_SOCKET_PATH_BYTES} bytes); choose a shorter one`);
    }
    await listenOnPath(server, staged);
    await fs.chmod(staged, gid === null ? SOCKET_FILE_MODE : GROUP_SOCKET_FILE_MODE);
    if (gid !== null) await fs.chown(staged, -1, gid).catch((error: NodeJS.ErrnoException) => fail(file, `cannot give the socket to group ${gid} (${error.code}); Sluice's user must be root or a member of that group`));
    await fs.link(staged, file).catch((error: NodeJS.ErrnoException) => fail(file, error.code === 'EEXIST' ? 'the path exists and something answers on it, or it is not a socket' : error.message));
    return { path: file, ino: (await fs.stat(file)).ino };
  } catch (error) {
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    throw error;
  } finally {
    await fs.rm(privateDir, { recursive: true, force: true });
  }
}

function fail(file: string, why: string): never {
  throw new Error(`unix:${file}: ${why}`);
}

/** After close: the file goes only if it is still ours (a later Sluice may have taken the path). */
export async function removeSocketFile(socketFile: SocketFile): Promise<void> {
  const stat = await fs.lstat(socketFile.path).catch(() => null);
  if (stat !== null && stat.isSocket() && stat.ino === socketFile.ino) await fs.unlink(socketFile.path).catch(() => undefined);
}

function listenOnPath(server: net.Server, file: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
}

/** A socket file left by a crashed run blocks the path; remove it only if nothing answers on it. */
async function removeStaleSocket(file: string): Promise<void> {
  const stat = await fs.lstat(file).catch(() => null);
  if (stat === null || !stat.isSocket()) return;
  if (!(await isUnixSocketAlive(file))) await fs.unlink(file);
}
