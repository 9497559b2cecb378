// Puts a Unix socket file at its path with a mode Sluice chose (0600, or 0660 for one group), never the
// umask's (review 2026-12, finding 9; ADR 0014). Never removes or replaces a path something still answers
// on, or that is not a socket. Every Unix socket Sluice listens on goes through here: the proxy's
// listeners and the admin socket.
//
// The socket is bound inside a fresh 0700 directory beside its path, given its mode (and group) there,
// then hard-linked into place. So the path never exists with any other mode: chmod after listen() would
// leave a window in which another uid could connect() and queue a connection that is accepted later.
// link() also refuses to replace a path that appeared meanwhile, where rename() would clobber it.
import fs from 'node:fs/promises';
import type net from 'node:net';
import path from 'node:path';
import { inUseMessage, ListenError } from './listen-error.js';

/** Owner only; with a socket group, owner and group. Applied before the path exists. */
export const SOCKET_FILE_MODE = 0o600;
export const GROUP_SOCKET_FILE_MODE = 0o660;

/** sun_path holds 108 bytes with its NUL (unix(7)); a longer path must not be truncated silently. */
const MAX_SOCKET_PATH_BYTES = 107;
const PRIVATE_DIR_PREFIX = '.sluice-';

/** Tells whether something answers on a Unix socket path; app.ts and proxy/ pass egress's `isUnixSocketAlive`. */
export type UnixSocketProbe = (file: string) => Promise<boolean>;

/** The file this listener put in place: removed on close only if it is still that file (same inode). */
export interface SocketFile {
  readonly path: string;
  readonly ino: number;
}

/**
 * Why a socket file could not be put in place: `not-a-socket` and `in-use` (something is at the path
 * already), `too-long` (no room for the private directory in sun_path), `group` (chown refused), `link`
 * (linking into place failed; `cause` is the error of link()), `directory` (its directory could not be
 * created, or is not writable; `cause` is the error of mkdir() or mkdtemp()). The message is worded for a listener,
 * `unix:<path>: …` (`unix:<path> is in use …`, as a TCP port in use); a caller with its own key to name
 * (admin.listen) rewords it by `refusal`.
 */
export class SocketFileError extends ListenError {
  constructor(
    readonly file: string,
    readonly refusal: 'not-a-socket' | 'in-use' | 'too-long' | 'group' | 'link' | 'directory',
    message: string,
    options?: { readonly cause?: NodeJS.ErrnoException },
  ) {
    super(`unix:${file}`, options?.cause?.code, message, options);
  }
}

/** `unix:<file>: <why>`, the wording of every refusal but `in-use`. */
const at = (file: string, why: string): string => `unix:${file}: ${why}`;

const PATH_TAKEN = 'the path exists and something answers on it, or it is not a socket';

/**
 * Binds `server` to the Unix socket `file` (an absolute path), mode 0600 (or 0660 and group `gid`), and returns the file. A
 * socket file there that `probe` finds dead (left by a crash) is removed first; anything else at the path
 * is refused, and nothing is listening when this rejects.
 */
export async function bindUnixSocket(server: net.Server, file: string, gid: number | null, probe: UnixSocketProbe): Promise<SocketFile> {
  // Every caller resolves its path where it accepts it (config, admin API, ledger). A relative one bound
  // here would be listed relative in /proc/net/unix, where `sluice run` never masks it (issue 23,
  // review 2026-12-04 finding 3): a bug in the caller, never bound.
  if (!path.isAbsolute(file)) throw new Error(`unix:${file}: a relative socket path reached bindUnixSocket; resolve it against the working directory where it is accepted`);
  await ensureSocketDir(file);
  await removeStaleSocket(file, probe);
  const privateDir = await fs.mkdtemp(path.join(path.dirname(file), PRIVATE_DIR_PREFIX)).catch((error: NodeJS.ErrnoException) => {
    throw new SocketFileError(file, 'directory', at(file, `cannot create a private directory in ${path.dirname(file)} (${error.code ?? error.message}); Sluice's user must be able to write there`), { cause: error });
  });
  const staged = path.join(privateDir, 's');
  try {
    const bytes = Buffer.byteLength(staged);
    if (bytes > MAX_SOCKET_PATH_BYTES) {
      throw new SocketFileError(file, 'too-long', at(file, `the path is too long to bind privately first (${bytes} of ${MAX_SOCKET_PATH_BYTES} bytes); choose a shorter one`));
    }
    await listenOnPath(server, staged);
    await fs.chmod(staged, gid === null ? SOCKET_FILE_MODE : GROUP_SOCKET_FILE_MODE);
    if (gid !== null) {
      await fs.chown(staged, -1, gid).catch((error: NodeJS.ErrnoException) => {
        throw new SocketFileError(file, 'group', at(file, `cannot give the socket to group ${gid} (${error.code}); Sluice's user must be root or a member of that group`), { cause: error });
      });
    }
    await fs.link(staged, file).catch((error: NodeJS.ErrnoException) => {
      throw new SocketFileError(file, 'link', at(file, error.code === 'EEXIST' ? PATH_TAKEN : error.message), { cause: error });
    });
    return { path: file, ino: (await fs.stat(file)).ino };
  } catch (error) {
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    throw error;
  } finally {
    await fs.rm(privateDir, { recursive: true, force: true });
  }
}

/**
 * A missing directory (and its missing parents) is created 0700, as the admin socket's is: on a fresh
 * machine `unix:./state/a.sock` must not fail with a bare EACCES or ENOENT (issue 17, item 4). The mode
 * is set explicitly, since mkdir's is masked by the umask; a directory that exists is never changed (it
 * may be shared, and its owner chose its mode).
 */
async function ensureSocketDir(file: string): Promise<void> {
  const dir = path.dirname(file);
  const first = await fs.mkdir(dir, { recursive: true, mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
    throw new SocketFileError(file, 'directory', at(file, `cannot create its directory ${dir} (${error.code ?? error.message}); create it, or choose a path Sluice's user may create`), { cause: error });
  });
  if (first === undefined) return;
  // Only the directories mkdir just made: from the deepest up to the first one it created.
  for (let created = dir; ; created = path.dirname(created)) {
    await fs.chmod(created, 0o700);
    if (created === first || path.dirname(created) === created) break;
  }
}

/** After close: the file goes only if it is still ours (a later Sluice may have taken the path). */
export async function removeSocketFile(socketFile: SocketFile | null): Promise<void> {
  if (socketFile === null) return;
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

/** A socket file left by a crashed run blocks the path: removed only when nothing answers on it. */
async function removeStaleSocket(file: string, probe: UnixSocketProbe): Promise<void> {
  const stat = await fs.lstat(file).catch(() => null);
  if (stat === null) return;
  if (!stat.isSocket()) throw new SocketFileError(file, 'not-a-socket', at(file, PATH_TAKEN));
  if (await probe(file)) throw new SocketFileError(file, 'in-use', inUseMessage(`unix:${file}`));
  await fs.unlink(file);
}
