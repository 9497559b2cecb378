// Threat (review 2026-12-04 finding 2 and 3): a socket file under a tree the sandbox sees is
// another grant's authority (or the admin API) when /proc/net/unix does not list it (bound by a relative
// path, or by a server in another network namespace); a git directory in a writable tree holds what the
// caller's git runs next. The walk must find both, however deep, inside git directories too (they are
// shown read-write), and a hostile tree must not steer it: a symlink is never followed (out of the tree,
// or in a loop; a `.git` symlink is reported in gitLinks, for the plan to refuse), and a tree larger than
// the budget is an answer (isTruncated) on which the caller refuses, never a partial list taken as complete.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { scanTrees } from '../../../src/cli/tree-scan.js';

let base: string;
let root: string;
let outside: string;
const servers: net.Server[] = [];

function listenUnix(file: string): Promise<void> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const server = net.createServer();
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => resolve());
  });
}

/** A directory git would take for a git directory (what the walk looks for: a HEAD file). */
function gitDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'HEAD'), 'ref: refs/heads/main\n');
}

function file(p: string, content = ''): void {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
}

/**
 * Every entry below `dir` (what the budget counts: each directory's entries, the roots not included;
 * git directories are walked too, symlinks are not).
 */
function countEntries(dir: string): number {
  let n = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    n += 1;
    if (entry.isDirectory()) n += countEntries(path.join(dir, entry.name));
  }
  return n;
}

beforeAll(async () => {
  base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-scan-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await listenUnix(path.join(root, 'top.sock'));
  await listenUnix(path.join(root, 'a/b/c/d/e/f/deep.sock'));
  await listenUnix(path.join(root, 'skipped/hidden.sock'));
  await listenUnix(path.join(outside, 'outside.sock'));
  gitDir(path.join(outside, '.git'));
  await listenUnix(path.join(outside, '.git/outside-git.sock'));
  file(path.join(root, 'a/plain.txt'));
  execFileSync('mkfifo', [path.join(root, 'a/fifo')]);
  gitDir(path.join(root, '.git'));
  gitDir(path.join(root, '.git/worktrees/wt1'));
  fs.mkdirSync(path.join(root, '.git/worktrees/not-a-git-dir'), { recursive: true });
  file(path.join(root, '.git/worktrees/a-file'));
  gitDir(path.join(root, '.git/modules/a/b'));
  gitDir(path.join(root, '.git/modules/sub'));
  gitDir(path.join(root, '.git/modules/sub/modules/inner'));
  gitDir(path.join(root, 'nested/repo/.git'));
  file(path.join(root, 'wt/.git'), 'gitdir: ../.git/worktrees/wt1\n');
  // A symlink to a directory holding a socket and a git directory, outside the tree; one loop back up.
  fs.symlinkSync(outside, path.join(root, 'a/link-out'));
  fs.symlinkSync(root, path.join(root, 'a/b/loop'));
  fs.symlinkSync(path.join(outside, 'outside.sock'), path.join(root, 'link.sock'));
  fs.symlinkSync(path.join(outside, '.git'), path.join(root, 'a/.git'));
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  fs.rmSync(base, { recursive: true, force: true });
});

describe('scanTrees', () => {
  it('finds every socket file, however deep, and only sockets', () => {
    const scan = scanTrees([root], 10_000, [path.join(root, 'skipped')]);
    expect(scan.isTruncated).toBe(false);
    expect([...scan.sockets].sort()).toEqual([path.join(root, 'a/b/c/d/e/f/deep.sock'), path.join(root, 'top.sock')]);
  });

  it('finds .git directories and files, the worktrees/<x> and modules/<a>/<b> git directories inside, and nothing that lacks HEAD', () => {
    const scan = scanTrees([root]);
    expect([...scan.gitDirs].sort()).toEqual(
      ['.git', '.git/modules/a/b', '.git/modules/sub', '.git/modules/sub/modules/inner', '.git/worktrees/wt1', 'nested/repo/.git'].map((p) => path.join(root, p)).sort(),
    );
    expect(scan.gitFiles).toEqual([path.join(root, 'wt/.git')]);
    // The walk enters the git directories as well: each is still recorded once.
    expect(new Set(scan.gitDirs).size).toBe(scan.gitDirs.length);
  });

  it('never follows a symlink: a link to a directory outside (socket, .git), a loop, a link to a socket', () => {
    const scan = scanTrees([root]);
    const all = [...scan.sockets, ...scan.gitDirs, ...scan.gitFiles, ...scan.gitLinks];
    expect(all.filter((p) => p.startsWith(outside) || p.includes('link') || p.includes('loop'))).toEqual([]);
    expect([...scan.sockets, ...scan.gitDirs, ...scan.gitFiles]).not.toContain(path.join(root, 'a/.git'));
    expect(scan.isTruncated).toBe(false);
  });

  it('reports a .git symlink in gitLinks (for the plan to refuse) without entering it: the socket in the git directory it names is not found', () => {
    const scan = scanTrees([root]);
    expect(scan.gitLinks).toEqual([path.join(root, 'a/.git')]);
    expect(scan.sockets.filter((s) => s.endsWith('outside-git.sock'))).toEqual([]);
    // A symlink named otherwise is no git link, even to a git directory.
    expect(scan.gitLinks).not.toContain(path.join(root, 'a/link-out'));
  });

  it('does not enter a skipped directory, nor walk a skipped root', () => {
    const skipped = path.join(root, 'skipped');
    expect(scanTrees([root]).sockets).toContain(path.join(skipped, 'hidden.sock'));
    expect(scanTrees([root], 10_000, [skipped]).sockets).not.toContain(path.join(skipped, 'hidden.sock'));
    expect(scanTrees([skipped], 10_000, [skipped]).sockets).toEqual([]);
  });

  it('reports a tree larger than its budget as truncated (one budget shared by every root), and one that fits as complete', () => {
    const entries = countEntries(root);
    expect(scanTrees([root], entries).isTruncated).toBe(false);
    expect(scanTrees([root], entries - 1).isTruncated).toBe(true);
    expect(scanTrees([root], 0).isTruncated).toBe(true);
    // Two roots that each fit alone do not fit together.
    const half = countEntries(path.join(root, 'a'));
    const b = path.join(root, 'a');
    const c = path.join(root, 'nested');
    expect(scanTrees([b], half).isTruncated).toBe(false);
    expect(scanTrees([b, c], half).isTruncated).toBe(true);
  });

  it('walks a root once even when it is named twice or lies inside another root', () => {
    const scan = scanTrees([root, root, path.join(root, 'a')]);
    expect(scan.sockets.filter((s) => s.endsWith('deep.sock'))).toHaveLength(1);
  });

  it('does not throw on a missing root or one that is a file', () => {
    expect(scanTrees([path.join(base, 'missing'), path.join(root, 'a/plain.txt')])).toEqual({ sockets: [], gitDirs: [], gitFiles: [], gitLinks: [], isTruncated: false });
  });

  it.skipIf(process.getuid?.() === 0)('does not throw on a directory it cannot read (the sandbox, same uid, cannot read it either)', () => {
    const locked = path.join(base, 'locked');
    fs.mkdirSync(path.join(locked, 'inner'), { recursive: true });
    fs.chmodSync(locked, 0o000);
    try {
      expect(scanTrees([base]).isTruncated).toBe(false);
    } finally {
      fs.chmodSync(locked, 0o755);
    }
  });

  // A socket inside a git directory (a server whose state lies in .git, a socket the command bound there
  // for a later sandbox of the same tree) is as reachable as any other: .git is pinned read-write.
  it('finds a socket inside a .git directory, however deep (the git directory is shown read-write)', async () => {
    const inGit = ['.git/in-git.sock', '.git/worktrees/wt1/wt.sock', '.git/modules/sub/modules/inner/objects/inner.sock', 'nested/repo/.git/hooks/nested.sock'].map((p) => path.join(root, p));
    const before = servers.length;
    for (const sock of inGit) await listenUnix(sock);
    try {
      const scan = scanTrees([root]);
      for (const sock of inGit) expect(scan.sockets).toContain(sock);
      expect(scan.isTruncated).toBe(false);
      // Still within budget accounting: the entries inside git directories count.
      expect(scanTrees([root], countEntries(root)).isTruncated).toBe(false);
      expect(scanTrees([root], countEntries(root) - 1).isTruncated).toBe(true);
    } finally {
      const started = servers.splice(before);
      await Promise.all(started.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });

  it('counts the entries of a git directory against the budget (a large .git is a truncated walk, not a skipped one)', () => {
    const big = path.join(base, 'big');
    gitDir(path.join(big, '.git'));
    for (let i = 0; i < 50; i++) file(path.join(big, '.git/objects/aa', `obj${i}`));
    expect(scanTrees([big], 30).isTruncated).toBe(true);
    expect(scanTrees([big], countEntries(big)).isTruncated).toBe(false);
  });
});
