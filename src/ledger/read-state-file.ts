// Reads a state file (ledger.json, usage.json) only if nobody but Sluice's user could have written it.
// The ledger decides which grants exist and which stay revoked: a sandbox or another user able to
// rewrite it could un-revoke a grant or add an unrestricted one that the next start obeys (issue 23,
// review 2026-12-04 finding 5). Sluice writes these files 0600 itself (store.ts), so any
// other owner, mode or file type means someone else put it there.
import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import { ProxyError } from '../core/index.js';

/**
 * The file's text, or null when there is none. Throws ERR_LEDGER_FILE_UNSAFE, naming the file and the
 * fix, when it is a symbolic link, not a regular file, not owned by `owner`, or open to group or others.
 */
export async function readStateFile(file: string, owner: number): Promise<string | null> {
  let handle: fs.FileHandle;
  try {
    // O_NOFOLLOW: a symlink is refused by the open itself. O_NONBLOCK: a FIFO planted there cannot
    // hang the start. The checks then read the descriptor that is read, never the path again.
    handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw unsafe(file, ['it is a symbolic link'], `replace it with the file itself (owned by uid ${owner}, mode 0600)`);
    throw error;
  }
  try {
    const problem = stateFileProblem(file, await handle.stat(), owner);
    if (problem !== null) throw problem;
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** Why a state file with this stat must not be loaded by a Sluice running as `owner`, or null. */
export function stateFileProblem(file: string, stat: Stats, owner: number): ProxyError | null {
  if (!stat.isFile()) return unsafe(file, ['it is not a regular file'], `replace it with a regular file (owned by uid ${owner}, mode 0600)`);
  const mode = stat.mode & 0o7777;
  const why: string[] = [];
  const fix: string[] = [];
  if (stat.uid !== owner) {
    why.push(`it is owned by uid ${stat.uid}, not by Sluice's uid ${owner}`);
    fix.push(`chown ${owner} ${file}`);
  }
  if ((mode & 0o077) !== 0) {
    why.push(`its mode 0${mode.toString(8)} gives group or others access`);
    fix.push(`chmod 600 ${file}`);
  }
  return why.length === 0 ? null : unsafe(file, why, fix.join(' && '));
}

function unsafe(file: string, why: readonly string[], fix: string): ProxyError {
  return new ProxyError(
    'ERR_LEDGER_FILE_UNSAFE',
    `refusing to load ${file}: ${why.join('; ')}. Sluice writes it itself, mode 0600: another user or a sandbox may have replaced it (to un-revoke a grant, or add one). Check its content, then: ${fix}`,
  );
}
