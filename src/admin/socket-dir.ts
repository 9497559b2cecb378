// Judges the directory an admin Unix socket lives in; reads its mode, never changes it (it may be shared).
// The socket's own 0600 mode keeps others from connecting, but a directory others may write lets them
// replace the socket with their own, and one that every sandbox binds (such as /tmp) shows it to all of
// them (review 2026-12, finding 2; issue 12 part 3).
import fs from 'node:fs/promises';
import path from 'node:path';
import { isUnixListen } from '../config/index.js';

export interface SocketDirVerdict {
  /** Why Sluice must not put its admin socket there; null when it may. */
  readonly refusal: string | null;
  /** Said in the operational log, and the socket is made anyway. */
  readonly warning: string | null;
  readonly directory: string | null;
}

const FINE: SocketDirVerdict = { refusal: null, warning: null, directory: null };

/** A missing directory is fine: Sluice creates it 0700. */
export async function inspectAdminSocketDir(listen: string): Promise<SocketDirVerdict> {
  if (!isUnixListen(listen)) return FINE;
  const directory = path.dirname(path.resolve(listen.slice('unix:'.length)));
  const stat = await fs.stat(directory).catch(() => null);
  if (stat === null) return FINE;
  const mode = stat.mode & 0o7777;
  const octal = `0${mode.toString(8)}`;
  if ((mode & 0o002) !== 0) {
    const sticky = (mode & 0o1000) !== 0 ? ' and sticky, like /tmp' : '';
    return {
      refusal: `${directory} is world-writable${sticky} (mode ${octal}): every local user, and every sandbox that binds it, sees the admin socket there and may replace it; use a directory of Sluice's own, such as ./state`,
      warning: null,
      directory,
    };
  }
  if ((mode & 0o077) !== 0) {
    return { refusal: null, warning: `admin socket directory ${directory} is open to group or others (mode ${octal}); only the socket's own 0600 mode protects it, so prefer a 0700 directory`, directory };
  }
  return FINE;
}
