// Walks a tree `sluice run` will show, once, for what the plan must cover in it: every Unix socket file
// (whatever /proc/net/unix says: a server in another network namespace, or bound by a relative path,
// is not listed there; review 2026-12-04 finding 3) and every git directory or `.git` file
// (the caller's tools run what those hold; finding 2). Never follows a symbolic link. Bounded: a walk
// that would exceed its budget is an answer too, and the run refuses rather than show what it did not see.
import fs from 'node:fs';
import path from 'node:path';

export interface TreeScan {
  readonly sockets: readonly string[];
  /** Git directories (`.git`, and the per-worktree and submodule directories inside one). */
  readonly gitDirs: readonly string[];
  /** `.git` files (`gitdir: …`: worktrees and submodules). */
  readonly gitFiles: readonly string[];
  /** `.git` entries that are symbolic links (never followed; the plan refuses them). */
  readonly gitLinks: readonly string[];
  /** True when the walk stopped at its budget: the lists are incomplete. */
  readonly isTruncated: boolean;
}

/** Entries a run may walk in all, over every tree (about a second on a warm cache). */
export const SCAN_BUDGET_ENTRIES = 500_000;

/** Walks `roots` (directories), sharing one budget; `skip` are directories not to enter (masked anyway). */
export function scanTrees(roots: readonly string[], budget = SCAN_BUDGET_ENTRIES, skip: readonly string[] = []): TreeScan {
  const sockets: string[] = [];
  const gitDirs: string[] = [];
  const gitFiles: string[] = [];
  const gitLinks: string[] = [];
  let left = budget;
  const seen = new Set<string>();
  const stack = roots.filter((r) => !skip.includes(r)).map((r) => r);
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    if (seen.has(dir)) continue;
    seen.add(dir);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable to the caller: the sandbox (same uid, no capabilities) cannot read it either
    }
    left -= entries.length;
    if (left < 0) return { sockets, gitDirs, gitFiles, gitLinks, isTruncated: true };
    for (const entry of entries) {
      const file = path.join(dir, entry.name);
      if (entry.isSocket()) sockets.push(file);
      else if (entry.name === '.git' && entry.isFile()) gitFiles.push(file);
      else if (entry.name === '.git' && entry.isSymbolicLink()) gitLinks.push(file);
      else if (entry.isDirectory() && !skip.includes(file)) {
        // A git directory is walked too: it is shown read-write, so a socket in it is as reachable.
        if (entry.name === '.git') gitDirs.push(file, ...innerGitDirs(file));
        stack.push(file);
      }
    }
  }
  return { sockets, gitDirs, gitFiles, gitLinks, isTruncated: false };
}

/**
 * The git directories inside one: `worktrees/<name>` (each linked worktree's own) and `modules/…`
 * (submodules, nested as deep as the submodules are). Git reads config, commondir and hooks from each.
 */
function innerGitDirs(gitDir: string, depth = 0): string[] {
  const found: string[] = [];
  if (depth > 8) return found;
  for (const [sub, recurse] of [['worktrees', false], ['modules', true]] as const) {
    let names: fs.Dirent[];
    try {
      names = fs.readdirSync(path.join(gitDir, sub), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of names) {
      if (!entry.isDirectory()) continue;
      const dir = path.join(gitDir, sub, entry.name);
      if (isGitDir(dir)) found.push(dir, ...(recurse ? innerGitDirs(dir, depth + 1) : []));
      else if (recurse) found.push(...nestedModules(dir, depth + 1));
    }
  }
  return found;
}

/** Submodule names may hold slashes: `modules/a/b` is a git directory below a plain one. */
function nestedModules(dir: string, depth: number): string[] {
  if (depth > 8) return [];
  let names: fs.Dirent[];
  try {
    names = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const entry of names) {
    if (!entry.isDirectory()) continue;
    const sub = path.join(dir, entry.name);
    if (isGitDir(sub)) found.push(sub, ...innerGitDirs(sub, depth + 1));
    else found.push(...nestedModules(sub, depth + 1));
  }
  return found;
}

function isGitDir(dir: string): boolean {
  try {
    return fs.lstatSync(path.join(dir, 'HEAD')).isFile();
  } catch {
    return false;
  }
}
