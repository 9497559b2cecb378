// Mount what was checked (review 2026-12-04 finding 4): a running sandbox swapped a directory
// for a symlink between the plan's realpath and bubblewrap's mount, and a later run mounted a host
// directory of the attacker's choice read-write. So each tree is opened once (O_PATH|O_NOFOLLOW), the
// descriptor's own path is what the plan checks, and bubblewrap binds /proc/self/fd/N: the inode that
// was checked, whatever the path names by then. The identity (device, inode) goes to the init, which
// refuses to run the command when what it finds at the path inside is not that inode.
import fs from 'node:fs';

/** O_PATH (asm-generic/fcntl.h; the same on x86_64 and aarch64): a handle, no read, never blocks on a FIFO. */
const O_PATH = 0o10000000;

export interface OpenedTree {
  /** Where the descriptor's inode lives, read back from the descriptor (what the plan checks). */
  readonly real: string;
  readonly fd: number;
  readonly isDirectory: boolean;
  /** `dev:ino` of the inode, compared inside the sandbox. */
  readonly identity: string;
}

export type OpenTreeResult = { readonly ok: true; readonly tree: OpenedTree } | { readonly ok: false; readonly message: string };

/** Opens `expected` (a real path, symlinks already resolved) without following a symlink at its end. */
export function openTree(expected: string, flag: string): OpenTreeResult {
  let fd: number;
  try {
    fd = fs.openSync(expected, O_PATH | fs.constants.O_NOFOLLOW); // libuv adds O_CLOEXEC
  } catch (error) {
    return { ok: false, message: `${flag} ${expected}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` };
  }
  const refuse = (message: string): OpenTreeResult => {
    fs.closeSync(fd);
    return { ok: false, message };
  };
  let real: string;
  try {
    real = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return refuse(`${flag} ${expected}: cannot read back the opened tree's path (is /proc mounted?)`);
  }
  // A component was swapped for a symlink between resolving the path and opening it.
  if (real !== expected) return refuse(`${flag} ${expected} moved while it was being opened (it is now ${real}); refusing to mount what was not checked`);
  const stat = fs.fstatSync(fd, { bigint: true });
  if (stat.isSymbolicLink()) return refuse(`${flag} ${expected} became a symlink while it was being opened; refusing to mount what was not checked`);
  return { ok: true, tree: { real, fd, isDirectory: stat.isDirectory(), identity: `${stat.dev}:${stat.ino}` } };
}

/** `dev:ino` of a path without following a symlink at its end, or null. */
export function identityOf(p: string): string | null {
  try {
    const stat = fs.lstatSync(p, { bigint: true });
    return `${stat.dev}:${stat.ino}`;
  } catch {
    return null;
  }
}
