// What the caller's own tools execute from a tree `sluice run` makes writable stays read-only inside
// (review 2026-12-04 finding 2: the command wrote core.fsmonitor into .git/config and the
// caller's next `git status` ran it unconfined, in the host's network namespace). The names are the
// union of Anthropic's sandbox-runtime (dangerous files and directories, .git/hooks and .git/config)
// and codex (the git directory of every writable root), plus the editors' and agents' own config.
//
// An existing name is bound read-only onto itself, and every git directory is itself a mount point, so
// it can be neither renamed nor replaced (rename(2) of a mount point is EBUSY; link(2) across one is
// EXDEV). A name missing inside a git directory is created for good the way git itself would leave it
// (empty hooks/ and info/, a commondir saying ".": this directory), then protected like the rest. A
// name missing at a tree's root is not created (an empty .npmrc or .mcp.json would show in `git status`
// and be committed by `git add -A`): it is watched instead, and one the run leaves behind is moved aside
// afterwards, before the caller's tools can take it for theirs (quarantine()).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { lstatOrNull, realOrSelf } from './paths.js';
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
/**
 * What git reads only when present and where an empty stand-in is what git means by absent. A missing
 * config.worktree is read only under extensions.worktreeConfig, which lives in the protected config.
 */
const GIT_DIR_CREATE: Readonly<Record<string, { readonly kind: 'file' | 'dir'; readonly content: string }>> = {
  // git still takes a directory without config for a repository; an empty one means the same.
  config: { kind: 'file', content: '' },
  hooks: { kind: 'dir', content: '' },
  info: { kind: 'dir', content: '' },
  commondir: { kind: 'file', content: '.\n' },
};

export interface Protection {
  readonly path: string;
  /** `readonly`: bound read-only onto itself. `pin`: bound read-write onto itself (a git directory). */
  readonly mode: 'readonly' | 'pin';
  /** Missing at plan time and created by createMissing() with this content (kept after the run). */
  readonly create: null | { readonly kind: 'file' | 'dir'; readonly content: string };
}

/** A watched name, and the path to reach it by: through its tree's descriptor (sandbox-plan.ts). */
export interface Watched {
  readonly path: string;
  readonly via: string;
}

export interface ProtectionPlan {
  readonly protections: readonly Protection[];
  /** Protected names missing at a root: whatever is there after the run is moved aside (quarantine). */
  readonly watched: readonly string[];
}

export type ProtectResult = ({ readonly ok: true } & ProtectionPlan) | { readonly ok: false; readonly message: string };

/**
 * The protections for `roots` (real paths of the writable trees) given what the walk found in them.
 * `unprotect`: absolute paths the caller opted out (`--unprotect`), each with what lies below it.
 * Refuses a protected name that is a symbolic link: binding it would follow the link (and show or pin
 * whatever it names), and leaving it would let the command redirect what the caller's tools read.
 */
export function planProtections(roots: readonly string[], scan: TreeScan, unprotect: readonly string[]): ProtectResult {
  const isOptedOut = (p: string): boolean => unprotect.some((u) => p === u || p.startsWith(`${u}/`));
  const inWritable = (p: string): boolean => roots.some((r) => p === r || p.startsWith(`${r}/`));
  const wanted = new Map<string, { mode: Protection['mode']; create: Protection['create'] | 'watch' }>();
  for (const root of roots) {
    for (const name of [...PROTECTED_ROOT_FILES, ...PROTECTED_ROOT_DIRS, '.git']) wanted.set(path.join(root, name), { mode: 'readonly', create: 'watch' });
  }
  for (const link of scan.gitLinks) wanted.set(link, { mode: 'readonly', create: null });
  const gitDirs = [...scan.gitDirs];
  for (const file of scan.gitFiles) {
    wanted.set(file, { mode: 'readonly', create: null });
    for (const dir of linkedGitDirs(file)) if (inWritable(dir) && !gitDirs.includes(dir)) gitDirs.push(dir);
  }
  for (const dir of gitDirs) {
    wanted.set(dir, { mode: 'pin', create: null });
    for (const name of [...GIT_DIR_FILES, ...GIT_DIR_DIRS]) wanted.set(path.join(dir, name), { mode: 'readonly', create: GIT_DIR_CREATE[name] ?? null });
  }
  const protections: Protection[] = [];
  const watched: string[] = [];
  for (const [file, want] of wanted) {
    if (isOptedOut(file)) continue;
    const stat = lstatOrNull(file);
    if (stat?.isSymbolicLink() === true) {
      return { ok: false, message: `refusing to run: ${file} is a symlink, and the caller's tools would follow it; remove it, or pass --unprotect ${file}` };
    }
    if (stat !== null) protections.push({ path: file, mode: want.mode, create: null });
    else if (want.create === 'watch') watched.push(file);
    else if (want.create !== null) protections.push({ path: file, mode: want.mode, create: want.create });
  }
  return { ok: true, protections, watched };
}

/**
 * Creates the missing names of `protections` (exclusively: one that appeared meanwhile is protected as
 * it is) and returns those that exist now. `via` maps a path to the one to create it through:
 * /proc/self/fd/N/… of the opened tree that holds it, so a tree swapped for a symlink since it was
 * opened does not get them somewhere else (finding 4).
 */
export function createMissing(protections: readonly Protection[], via: (p: string) => string = (p) => p): Protection[] {
  const sorted = [...protections].sort((a, b) => a.path.length - b.path.length);
  return sorted.flatMap((p): Protection[] => {
    if (p.create === null) return [p];
    const at = via(p.path);
    try {
      if (p.create.kind === 'dir') fs.mkdirSync(at, { mode: 0o755 });
      else fs.writeFileSync(at, p.create.content, { flag: 'wx', mode: 0o644 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && lstatOrNull(at)?.isSymbolicLink() === false) return [{ ...p, create: null }];
      // The parent is gone or unwritable: the command cannot create the name there either.
      return [];
    }
    return [p];
  });
}

/**
 * Moves aside whatever now stands at a watched name (the command made it: it was missing when the run
 * began) to `<name>.sluice-quarantine-<random>`, never opening it (a FIFO would block), through the
 * tree's descriptor (the command may have moved the tree and left a link to elsewhere). The suffix is
 * unguessable, so the command cannot have planted the target (rename(2) would replace it). Returns
 * "from → to" lines for the caller's message; one that cannot be moved is reported, not skipped.
 */
export function quarantine(watched: readonly Watched[]): string[] {
  const moved: string[] = [];
  for (const { path: file, via } of watched) {
    if (lstatOrNull(via) === null) continue;
    const suffix = `.sluice-quarantine-${randomBytes(6).toString('hex')}`;
    try {
      fs.renameSync(via, `${via}${suffix}`);
      moved.push(`${file} → ${file}${suffix}`);
    } catch (error) {
      moved.push(`${file} (could not be moved: ${(error as NodeJS.ErrnoException).code ?? 'error'}; remove it before your tools read it)`);
    }
  }
  return moved;
}

/** The git directories a `.git` file leads to: its `gitdir:` and that directory's commondir. */
function linkedGitDirs(file: string): string[] {
  const found: string[] = [];
  const line = /^gitdir:\s*(.+?)\s*$/m.exec(readSmallFile(file) ?? '')?.[1];
  if (line === undefined) return found;
  const gitDir = realOrSelf(path.resolve(path.dirname(file), line));
  found.push(gitDir);
  const common = readSmallFile(path.join(gitDir, 'commondir'))?.trim();
  if (common !== undefined && common !== '') found.push(realOrSelf(path.resolve(gitDir, common)));
  return found;
}

/**
 * The first 4 KiB of a regular file, or null. Non-blocking and without following a symlink: a FIFO or
 * a link the command planted where git keeps a pointer must not hang or redirect `sluice run`.
 */
function readSmallFile(file: string): string | null {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return null;
    const buffer = Buffer.alloc(4096);
    return buffer.subarray(0, fs.readSync(fd, buffer, 0, buffer.length, 0)).toString('utf8');
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}
