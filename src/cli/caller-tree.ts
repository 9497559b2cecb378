// What the caller's own tools execute from a tree `sluice run` makes writable stays read-only inside
// (review security-2026-12-04, finding 2: the command wrote core.fsmonitor into .git/config and the
// caller's next `git status` ran it unconfined, in the host's network namespace). The names are the
// union of Anthropic's sandbox-runtime (dangerous files and directories, .git/hooks and .git/config)
// and codex (the git directory of every writable root), plus the editors' and agents' own config.
// Each is a read-only self-bind; one missing is created empty first (so the command cannot create it)
// and removed after the run if it is still the empty placeholder. Every git directory is itself a
// mount point, so it can be neither renamed nor replaced (rename(2) of a mount point is EBUSY).
import fs from 'node:fs';
import path from 'node:path';
import type { TreeScan } from './tree-scan.js';

/** Files at the root of a writable tree that shells, direnv, git, npm, editors or agents run or obey. */
export const PROTECTED_ROOT_FILES = [
  '.gitmodules', '.gitconfig', '.envrc', '.bashrc', '.bash_profile', '.bash_login', '.bash_logout', '.profile',
  '.zshrc', '.zprofile', '.zshenv', '.zlogin', '.zlogout', '.npmrc', '.ripgreprc', '.mcp.json',
];
/** Directories at the root of a writable tree: editor tasks and agent hooks run from them. */
export const PROTECTED_ROOT_DIRS = ['.vscode', '.idea', '.claude', '.codex', '.cursor'];
/**
 * In every git directory: config (core.fsmonitor, core.hooksPath, aliases, filters), config.worktree,
 * commondir (which git directory's config and hooks apply), hooks and info. Objects, refs, the index
 * and HEAD stay writable, so the command can still commit.
 */
const GIT_DIR_FILES = ['config', 'config.worktree', 'commondir'];
const GIT_DIR_DIRS = ['hooks', 'info'];

export interface Protection {
  readonly path: string;
  /** `readonly`: bound read-only onto itself. `pin`: bound read-write onto itself (a git directory). */
  readonly mode: 'readonly' | 'pin';
  /**
   * Created by this run as an empty placeholder (content below): removed after the run if unchanged.
   * `identity` (dev:ino) is set once created: removal touches that inode only, wherever the path leads by then.
   */
  readonly placeholder: null | { readonly kind: 'file' | 'dir'; readonly content: string; readonly identity?: string };
}

export type ProtectResult = { readonly ok: true; readonly protections: readonly Protection[] } | { readonly ok: false; readonly message: string };

/**
 * The protections for `roots` (real paths of the writable trees) given what the walk found in them.
 * `unprotect`: absolute paths the caller opted out (`--unprotect`), each with what lies below it.
 * Refuses a protected name that is a symbolic link: binding it would follow the link (and show or pin
 * whatever it names), and leaving it would let the command redirect what the caller's tools read.
 */
export function planProtections(roots: readonly string[], scan: TreeScan, unprotect: readonly string[]): ProtectResult {
  const wanted = new Map<string, { mode: Protection['mode']; kind: 'file' | 'dir'; content: string }>();
  const isOptedOut = (p: string): boolean => unprotect.some((u) => p === u || p.startsWith(`${u}/`));
  const inWritable = (p: string): boolean => roots.some((r) => p === r || p.startsWith(`${r}/`));
  for (const root of roots) {
    for (const name of PROTECTED_ROOT_FILES) wanted.set(path.join(root, name), { mode: 'readonly', kind: 'file', content: '' });
    for (const name of PROTECTED_ROOT_DIRS) wanted.set(path.join(root, name), { mode: 'readonly', kind: 'dir', content: '' });
    // A root without a git directory gets an empty one: git skips it (not a repository) and looks above,
    // and the command cannot make one whose config the caller's next git in this directory would run.
    if (lstat(path.join(root, '.git')) === null) wanted.set(path.join(root, '.git'), { mode: 'readonly', kind: 'dir', content: '' });
  }
  const gitDirs = [...scan.gitDirs];
  for (const file of scan.gitFiles) {
    wanted.set(file, { mode: 'readonly', kind: 'file', content: '' });
    for (const dir of linkedGitDirs(file)) if (inWritable(dir) && !gitDirs.includes(dir)) gitDirs.push(dir);
  }
  for (const dir of gitDirs) {
    wanted.set(dir, { mode: 'pin', kind: 'dir', content: '' });
    // A missing commondir means "this directory": a placeholder must say so ("."), or git dies reading it.
    for (const name of GIT_DIR_FILES) wanted.set(path.join(dir, name), { mode: 'readonly', kind: 'file', content: name === 'commondir' ? '.\n' : '' });
    for (const name of GIT_DIR_DIRS) wanted.set(path.join(dir, name), { mode: 'readonly', kind: 'dir', content: '' });
  }
  const protections: Protection[] = [];
  for (const [file, want] of wanted) {
    if (isOptedOut(file)) continue;
    const stat = lstat(file);
    if (stat?.isSymbolicLink() === true) {
      return { ok: false, message: `refusing to run: ${file} is a symlink, and the caller's tools would follow it; remove it, or pass --unprotect ${file}` };
    }
    protections.push({ path: file, mode: want.mode, placeholder: stat === null ? { kind: want.kind, content: want.content } : null });
  }
  return { ok: true, protections };
}

/**
 * Creates the placeholders of `protections` (exclusively: one that appeared meanwhile is protected as
 * it is). Returns the protections with placeholder set only for what this call created. `via` maps a
 * path to the one to create it through: /proc/self/fd/N/… of the opened tree that holds it, so a tree
 * swapped for a symlink since it was opened does not get placeholders somewhere else (finding 4).
 */
export function createPlaceholders(protections: readonly Protection[], via: (p: string) => string = (p) => p): Protection[] {
  const sorted = [...protections].sort((a, b) => a.path.length - b.path.length);
  return sorted.flatMap((p): Protection[] => {
    if (p.placeholder === null) return [p];
    const at = via(p.path);
    try {
      if (p.placeholder.kind === 'dir') fs.mkdirSync(at, { mode: 0o755 });
      else fs.writeFileSync(at, p.placeholder.content, { flag: 'wx', mode: 0o644 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && lstat(at)?.isSymbolicLink() === false) return [{ ...p, placeholder: null }];
      // The parent is gone or unwritable: the command cannot create the name there either.
      return [];
    }
    const stat = fs.lstatSync(at, { bigint: true });
    return [{ ...p, placeholder: { ...p.placeholder, identity: `${stat.dev}:${stat.ino}` } }];
  });
}

/** Removes the placeholders this run created, where they are still that empty file or directory. */
export function removePlaceholders(protections: readonly Protection[]): void {
  for (const p of [...protections].reverse()) {
    if (p.placeholder?.identity === undefined) continue;
    let stat: fs.BigIntStats;
    try {
      stat = fs.lstatSync(p.path, { bigint: true });
    } catch {
      continue;
    }
    if (`${stat.dev}:${stat.ino}` !== p.placeholder.identity) continue;
    try {
      if (p.placeholder.kind === 'dir' && stat.isDirectory()) fs.rmdirSync(p.path);
      else if (p.placeholder.kind === 'file' && stat.isFile() && stat.size === BigInt(Buffer.byteLength(p.placeholder.content))) fs.unlinkSync(p.path);
    } catch {
      // not empty, or gone: leave it
    }
  }
}

/** The git directories a `.git` file leads to: its `gitdir:` and that directory's commondir. */
function linkedGitDirs(file: string): string[] {
  const found: string[] = [];
  try {
    const line = /^gitdir:\s*(.+?)\s*$/m.exec(fs.readFileSync(file, 'utf8').slice(0, 4096))?.[1];
    if (line === undefined) return found;
    const gitDir = realOrSelf(path.resolve(path.dirname(file), line));
    found.push(gitDir);
    const common = fs.readFileSync(path.join(gitDir, 'commondir'), 'utf8').trim();
    if (common !== '') found.push(realOrSelf(path.resolve(gitDir, common)));
  } catch {
    // no commondir, or unreadable: what was found stands
  }
  return found;
}

function lstat(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

function realOrSelf(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
