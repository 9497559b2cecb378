// Tells, without creating or opening anything, whether Sluice could create or append to a file (the audit
// log) or a directory (state): so `check-config` names what `start` would fail on. Reads the file system only.
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/** Why `target` could not be written as a `kind`, or null. A missing path is fine if its nearest existing parent is a writable directory (Sluice creates the rest). */
export async function unwritableReason(target: string, kind: 'file' | 'directory'): Promise<string | null> {
  const stat = await fs.stat(target).catch((error: NodeJS.ErrnoException) => error);
  if (!(stat instanceof Error)) {
    if (kind === 'directory' && !stat.isDirectory()) return `${target} exists and is not a directory`;
    if (kind === 'file' && stat.isDirectory()) return `${target} is a directory`;
    return (await isWritable(target)) ? null : `${target} is not writable by this user`;
  }
  if (stat.code !== 'ENOENT' && stat.code !== 'ENOTDIR') return `cannot use ${target} (${stat.code ?? stat.message})`;
  let parent = path.dirname(target);
  for (;;) {
    const up = await fs.stat(parent).catch(() => null);
    if (up !== null) {
      if (!up.isDirectory()) return `cannot create ${target}: ${parent} is not a directory`;
      return (await isWritable(parent)) ? null : `cannot create ${target}: ${parent} is not writable by this user`;
    }
    const next = path.dirname(parent);
    if (next === parent) return `cannot create ${target}: no existing parent directory`;
    parent = next;
  }
}

async function isWritable(target: string): Promise<boolean> {
  return fs.access(target, constants.W_OK).then(
    () => true,
    () => false,
  );
}
