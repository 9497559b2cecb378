// Threat: the command plants code in its writable tree that the caller's own tools run later, outside
// the sandbox (review 2026-12-04 finding 2, high). `sluice run` binds the working directory
// read-write as a whole, .git included: the review set core.fsmonitor in .git/config, and the
// caller's next `git status` ran it unconfined, in the host network namespace; a planted pre-commit
// hook runs the same way, and so do .envrc (direnv), shell rc files, .npmrc, .vscode tasks and .mcp.json.
// What must hold: at the root of every writable tree and in every git directory in it, a protected
// name that exists stays read-only and unchanged. One missing at a root is not created (a placeholder
// would be committed by `git add -A`): the command may create it during the run, but when `sluice run`
// ends it is moved aside to a sibling `<name>.sluice-quarantine…` (listed on stderr as "from → to"), so
// that the caller's tools never find it at its name. In a git directory, missing hooks/ and info/ are
// created empty, commondir with ".\n" and config empty, for good, and are read-only too; objects, refs and the index stay writable, so
// git commit works inside. A `.git` that is a symlink, at a root or below, is refused. Attempts come
// from python3 inside; the host then compares every protected path and runs git status and git commit
// itself, and a marker that the planted code would write stays absent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { giveTo, identities, killAll, sandboxSkipReason, type Identity, type RunResult } from '../support/sandbox.js';
import { killSluiceProcesses } from '../support/sluice-process.js';
import {
  PY_PRELUDE, attemptLine, checkLine, describeRun, escapeRe, fileState, hostTool, removeScratch, scratchDir, sluiceRun, snapshot, startGrantSluice, verdicts,
  type GrantSluice, type Verdicts,
} from '../support/sandbox-review2.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape-caller-tree: ${skip}`);

const HOST_GIT = ['-c', 'user.name=host', '-c', 'user.email=host@example.test'];
/** Every name protected at a writable root (what the caller's tools run or obey), as src/cli/caller-tree.ts lists them (issue 23). */
const PROTECTED_ROOT_NAMES = [
  '.gitmodules', '.gitconfig', '.envrc', '.bashrc', '.bash_profile', '.bash_login', '.bash_logout', '.profile', '.zshrc', '.zprofile', '.zshenv',
  '.zlogin', '.zlogout', '.npmrc', '.ripgreprc', '.mcp.json', '.vscode', '.idea', '.claude', '.codex', '.cursor', '.git',
];
/** Some protected names exist before the run (with this content); the rest do not. */
const EXISTING: Record<string, string> = {
  '.gitmodules': '# no submodules\n',
  '.bashrc': 'echo bashrc\n',
  '.profile': 'echo profile\n',
  '.zshrc': 'echo zshrc\n',
  '.mcp.json': '{"mcpServers": {}}\n',
};
/** Missing files the command creates inside (the write works there); each is moved aside after the run. */
const CREATED_FILES = ['.envrc', '.bash_profile', '.bash_login', '.zprofile', '.zshenv', '.npmrc'];
/** Missing directories the command creates with one file inside; each is moved aside after the run. */
const CREATED_DIRS = ['.idea', '.claude', '.codex', '.cursor'];
/** Missing names the command leaves alone: nothing at the name, and no quarantine either. */
const UNTOUCHED = PROTECTED_ROOT_NAMES.filter((n) => !(n in EXISTING) && !CREATED_FILES.includes(n) && !CREATED_DIRS.includes(n) && !['.zlogin', '.zlogout', '.vscode', '.git'].includes(n));
/** A decoy the command puts where a predictable quarantine name would go: the move must not replace it. */
const DECOY = '.bash_profile.sluice-quarantine';
/** What is left in each git directory after the run that was not there before (created for good). */
const GIT_DIR_NAMES = ['config', 'config.worktree', 'commondir', 'hooks', 'info'];
const SHA_DOT = createHash('sha256').update('.\n').digest('hex').slice(0, 16);
const SHA_EMPTY = createHash('sha256').update('').digest('hex').slice(0, 16);
const GIT_ADDED: Record<string, string> = { commondir: `file 2 bytes sha256 ${SHA_DOT}`, config: `file 0 bytes sha256 ${SHA_EMPTY}`, hooks: 'dir []', info: 'dir []' };

/** DIR's entries named NAME.sluice-quarantine… (whatever suffix `sluice run` chose). */
function quarantinesOf(dir: string, name: string): string[] {
  return fs.readdirSync(dir).filter((e) => e.startsWith(`${name}.sluice-quarantine`)).map((e) => path.join(dir, e));
}

/** Where `sluice run` says (stderr: "from → to") it moved DIR/NAME: a sibling NAME.sluice-quarantine…. */
function movedTo(r: RunResult, dir: string, name: string): string {
  const from = path.join(dir, name);
  const m = new RegExp(`^\\s*${escapeRe(from)} → (${escapeRe(from)}\\.sluice-quarantine\\S*)$`, 'm').exec(r.stderr);
  if (m?.[1] === undefined) throw new Error(`stderr does not list ${from} as moved aside: ${describeRun(r)}`);
  return m[1];
}


// Inside, from W: what must work first (the commit), then every attempt. argv: MARKER, EXISTING names, CREATED_FILES, CREATED_DIRS.
const SCRIPT = PY_PRELUDE + String.raw`
marker = sys.argv[1]
check('git-commit', lambda: run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '--allow-empty', '-q', '-m', 'x']))
check('write-ordinary', lambda: write('ordinary.txt', 'ok\n', 'w'))
attempt('git-config-fsmonitor', lambda: run(['git', 'config', 'core.fsmonitor', 'echo HOST-CODE-EXEC > %s; false' % marker]))
attempt('git-config-hookspath', lambda: run(['git', 'config', 'core.hooksPath', os.getcwd() + '/myhooks']))
attempt('git-config-append', lambda: write('.git/config', '[core]\n\tfsmonitor = echo > %s\n' % marker))
def replace_config():
    try:
        write('.git/config.new', '[core]\n\tfsmonitor = echo > %s\n' % marker, 'w')
        os.replace('.git/config.new', '.git/config')
        return 'replaced'
    finally:
        if os.path.lexists('.git/config.new'):
            os.unlink('.git/config.new')
attempt('git-config-replace', replace_config)
def hook():
    write('.git/hooks/pre-commit', '#!/bin/sh\necho HOOK > %s\n' % marker, 'w')
    os.chmod('.git/hooks/pre-commit', 0o755)
    return 'planted'
attempt('hook-pre-commit', hook)
attempt('hooks-rm-rf', lambda: run(['rm', '-rf', '.git/hooks']))
attempt('hooks-rename', lambda: os.rename('.git/hooks', '.git/hooks-old') or 'moved')
attempt('info-attributes', lambda: write('.git/info/attributes', '* filter=evil\n', 'w'))
attempt('info-exclude', lambda: write('.git/info/exclude', 'evil\n'))
attempt('commondir-write', lambda: write('.git/commondir', '/tmp/evil\n', 'w'))
attempt('dotgit-rename', lambda: os.rename('.git', '.git-old') or 'moved')
for n in json.loads(sys.argv[2]):
    attempt('write' + n, lambda n=n: write(n))
check('decoy', lambda: write('` + DECOY + String.raw`', 'decoy\n', 'w'))
for n in json.loads(sys.argv[3]):
    check('create' + n, lambda n=n: write(n, 'planted %s\n' % n, 'w'))
for n in json.loads(sys.argv[4]):
    check('create' + n, lambda n=n: run(['sh', '-c', 'mkdir %s && echo planted > %s/tasks.json' % (n, n)]))
check('mkfifo-zlogin', lambda: os.mkfifo('.zlogin') or 'made')
check('symlink-zlogout', lambda: os.symlink('/etc/passwd', '.zlogout') or 'made')
attempt('vscode-settings', lambda: write('.vscode/settings.json', '{"evil": true}\n'))
attempt('vscode-tasks', lambda: run(['sh', '-c', 'mkdir -p .vscode && echo > .vscode/tasks.json']))
attempt('unlink-bashrc', lambda: os.unlink('.bashrc') or 'removed')
attempt('rename-profile', lambda: os.rename('.profile', 'profile-old') or 'moved')
def hardlink(src, name):
    os.link(src, name)
    return write(name, 'through the link\n')
attempt('hardlink-git-config', lambda: hardlink('.git/config', 'x'))
attempt('hardlink-etc-passwd', lambda: hardlink('/etc/passwd', 'y'))
attempt('nested-git-config', lambda: write('sub/repo2/.git/config', '[core]\n\tfsmonitor = echo > %s\n' % marker))
attempt('nested-hook', lambda: write('sub/repo2/.git/hooks/post-checkout', '#!/bin/sh\necho HOOK > %s\n' % marker, 'w'))
attempt('nested-commondir', lambda: write('sub/repo2/.git/commondir', '/tmp/evil\n', 'w'))
attempt('worktree-dotgit-file', lambda: write('wt/.git', 'gitdir: /tmp/evil\n', 'w'))
attempt('worktree-commondir', lambda: write('.git/worktrees/wt/commondir', '/tmp/evil\n', 'w'))
attempt('worktree-hook', lambda: write('.git/worktrees/wt/hooks/pre-commit', '#!/bin/sh\necho HOOK > %s\n' % marker, 'w'))
print('END', flush=True)
`;
const ATTEMPTS = [
  'git-config-fsmonitor', 'git-config-hookspath', 'git-config-append', 'git-config-replace', 'hook-pre-commit', 'hooks-rm-rf', 'hooks-rename',
  'info-attributes', 'info-exclude', 'commondir-write', 'dotgit-rename', ...Object.keys(EXISTING).map((n) => `write${n}`), 'vscode-settings', 'vscode-tasks',
  'unlink-bashrc', 'rename-profile', 'hardlink-git-config', 'hardlink-etc-passwd', 'nested-git-config', 'nested-hook', 'nested-commondir',
  'worktree-dotgit-file', 'worktree-commondir', 'worktree-hook',
];
const CHECKS = ['decoy', ...CREATED_FILES.map((n) => `create${n}`), ...CREATED_DIRS.map((n) => `create${n}`), 'mkfifo-zlogin', 'symlink-zlogout'];

describe.skipIf(skip !== null).each(identities())('sluice run: what the caller’s tools execute stays read-only, as $label', (identity: Identity) => {
  let sluice: GrantSluice;
  let home: string;
  let marker: string;
  let w: string;
  let protectedPaths: string[];
  let gitDirPaths: string[];
  let before: Record<string, string>;
  let gitBefore: Record<string, string>;
  let run: RunResult;
  let v: Verdicts;

  const git = (cwd: string, args: readonly string[], allowFailure = false): { status: number | null; stdout: string; stderr: string } =>
    hostTool(identity, ['git', ...HOST_GIT, ...args], { cwd, home, allowFailure });
  /** A git repository with one commit, owned by `identity`, made on the host as the caller makes it. */
  const makeRepo = (prefix: string): string => {
    const dir = scratchDir(prefix);
    giveTo(identity, dir);
    git(dir, ['init', '-q']);
    git(dir, ['commit', '--allow-empty', '-q', '-m', 'initial']);
    return dir;
  };
  const runIn = (cwd: string, args: readonly string[], timeoutMs = 30_000): Promise<RunResult> =>
    sluiceRun(['--grant-socket', sluice.grantSocket, ...args], { cwd, identity, home, timeoutMs });

  beforeAll(async () => {
    sluice = await startGrantSluice({ configDir: scratchDir('tree-conf'), identity });
    home = scratchDir('tree-home');
    const markerDir = scratchDir('tree-marker');
    giveTo(identity, home, markerDir);
    marker = path.join(markerDir, 'host-code-exec');
    w = makeRepo('tree-w');
    for (const [name, text] of Object.entries(EXISTING)) fs.writeFileSync(path.join(w, name), text);
    fs.mkdirSync(path.join(w, '.vscode'));
    fs.writeFileSync(path.join(w, '.vscode/settings.json'), '{}\n');
    fs.mkdirSync(path.join(w, 'sub/repo2'), { recursive: true });
    giveTo(identity, w);
    git(path.join(w, 'sub/repo2'), ['init', '-q']);
    git(w, ['worktree', 'add', '-q', 'wt']);
    protectedPaths = [
      ...['wt/.git', '.git/hooks/pre-commit', '.git/info/attributes', '.git/info/exclude', 'sub/repo2/.git/hooks/post-checkout'],
      ...Object.keys(EXISTING), '.vscode', 'x', 'y', '.git-old', '.git/hooks-old', 'profile-old', 'myhooks',
    ].map((p) => path.join(w, p));
    gitDirPaths = ['.git', 'sub/repo2/.git', '.git/worktrees/wt'].flatMap((d) => GIT_DIR_NAMES.map((n) => path.join(w, d, n)));
    before = snapshot(protectedPaths);
    gitBefore = snapshot(gitDirPaths);
    run = await runIn(w, ['--', 'python3', '-c', SCRIPT, marker, JSON.stringify(Object.keys(EXISTING)), JSON.stringify(CREATED_FILES), JSON.stringify(CREATED_DIRS)]);
    v = verdicts(run);
  }, 120_000);
  afterAll(async () => {
    killAll();
    await killSluiceProcesses();
    removeScratch();
  });

  it('runs every attempt and returns the command’s status 0', () => {
    expect(v.ended, v.summary).toBe(true);
    expect(run.code, v.summary).toBe(0);
  });

  it('lets the command commit (objects, refs, index writable) and write an ordinary file', () => {
    expect(checkLine(v, 'git-commit')).toBe('CHECK git-commit OK');
    expect(checkLine(v, 'write-ordinary')).toBe('CHECK write-ordinary OK');
    expect(git(w, ['log', '--format=%s']).stdout.split('\n')).toContain('x');
    expect(fs.readFileSync(path.join(w, 'ordinary.txt'), 'utf8')).toBe('ok\n');
  });

  it.each(ATTEMPTS)('blocks %s', (name) => {
    expect(attemptLine(v, name)).toMatch(new RegExp(`^ATTEMPT ${escapeRe(name)} BLOCKED`));
  });

  it.each(CHECKS)('lets the command create %s at a missing protected name during the run (moved aside after)', (name) => {
    expect(checkLine(v, name)).toBe(`CHECK ${name} OK`);
  });

  it('leaves every existing protected path on the host as it was: rc files, .vscode, worktree links, hooks and info content', () => {
    expect(snapshot(protectedPaths)).toEqual(before);
    expect(fs.lstatSync(path.join(w, '.git')).isDirectory()).toBe(true);
    for (const name of [...Object.keys(EXISTING), '.vscode', '.git']) expect(quarantinesOf(w, name), name).toEqual([]);
  });

  it('changes the git directories only by creating what was missing, for good: hooks/ and info/ empty, commondir ".\\n", config empty', () => {
    const expected = Object.fromEntries(Object.entries(gitBefore).map(([p, state]) => [p, state === 'absent' ? (GIT_ADDED[path.basename(p)] ?? 'absent') : state]));
    expect(snapshot(gitDirPaths)).toEqual(expected);
    // At least the main repository’s commondir was missing: the test covers an addition.
    expect(gitBefore[path.join(w, '.git/commondir')]).toBe('absent');
  });

  it('moves aside every name the command created at a missing protected name: nothing at the name, the quarantine holds it, stderr lists it', () => {
    for (const name of CREATED_FILES) {
      expect(fileState(path.join(w, name)), name).toBe('absent');
      const to = movedTo(run, w, name);
      expect(fs.readFileSync(to, 'utf8'), name).toBe(`planted ${name}\n`);
      expect(quarantinesOf(w, name).sort(), name).toEqual((name === '.bash_profile' ? [to, path.join(w, DECOY)] : [to]).sort());
    }
    for (const name of CREATED_DIRS) {
      expect(fileState(path.join(w, name)), name).toBe('absent');
      const to = movedTo(run, w, name);
      expect(fs.readFileSync(path.join(to, 'tasks.json'), 'utf8'), name).toBe('planted\n');
      expect(quarantinesOf(w, name), name).toEqual([to]);
    }
    // The decoy the command put at a predictable quarantine name is not what was moved, nor overwritten.
    expect(fs.readFileSync(path.join(w, DECOY), 'utf8')).toBe('decoy\n');
  });

  it('moves a planted FIFO and symlink aside without opening them (the run ended), and the rest stay absent', () => {
    expect(fileState(path.join(w, '.zlogin'))).toBe('absent');
    expect(fileState(movedTo(run, w, '.zlogin'))).toBe('fifo');
    expect(fileState(path.join(w, '.zlogout'))).toBe('absent');
    expect(fileState(movedTo(run, w, '.zlogout'))).toBe('symlink -> /etc/passwd');
    expect(Object.fromEntries(UNTOUCHED.map((n) => [n, [fileState(path.join(w, n)), ...quarantinesOf(w, n)]]))).toEqual(Object.fromEntries(UNTOUCHED.map((n) => [n, ['absent']])));
  });

  it('shows the caller’s git status none of the planted names at their own path', () => {
    const status = git(w, ['status', '--porcelain', '--untracked-files=all']).stdout.split('\n').map((l) => l.slice(3));
    // The names that existed before (untracked here) are the caller's own; every other protected name is the command's.
    const commandMade = PROTECTED_ROOT_NAMES.filter((n) => !(n in EXISTING) && n !== '.vscode');
    const planted = status.filter((f) => commandMade.some((n) => f === n || f.startsWith(`${n}/`)));
    expect(planted, status.join('\n')).toEqual([]);
  });

  it('blocks code execution outside: the host’s git status and git commit run nothing the command planted', () => {
    for (const dir of [w, path.join(w, 'sub/repo2'), path.join(w, 'wt')]) git(dir, ['status']);
    git(w, ['commit', '--allow-empty', '-q', '-m', 'host']);
    expect(fileState(marker)).toBe('absent');
  });

  it('commits no placeholder: `git add -A && git commit` inside records only what the command wrote', async () => {
    const w5 = makeRepo('tree-add-all');
    fs.writeFileSync(path.join(w5, 'README'), 'readme\n');
    giveTo(identity, w5);
    git(w5, ['add', 'README']);
    git(w5, ['commit', '-q', '-m', 'readme']);
    const script = `${PY_PRELUDE}
check('write-new', lambda: write('new.txt', 'new\\n', 'w'))
check('add-all', lambda: run(['git', 'add', '-A']))
check('commit', lambda: run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-q', '-m', 'inside']))
print('END', flush=True)
`;
    const r = await runIn(w5, ['--', 'python3', '-c', script]);
    const u = verdicts(r);
    expect(r.code, u.summary).toBe(0);
    for (const name of ['write-new', 'add-all', 'commit']) expect(checkLine(u, name)).toBe(`CHECK ${name} OK`);
    expect(git(w5, ['log', '-1', '--format=%s']).stdout.trim()).toBe('inside');
    expect(git(w5, ['show', '--name-only', '--format=', 'HEAD']).stdout.trim().split('\n')).toEqual(['new.txt']);
    const tree = git(w5, ['ls-tree', '-r', '--name-only', 'HEAD']).stdout.trim().split('\n');
    const isProtected = (f: string): boolean => PROTECTED_ROOT_NAMES.some((n) => f === n || f.startsWith(`${n}/`)) || /(^|\/)(commondir|hooks|info)(\/|$)/.test(f);
    expect(tree.filter(isProtected), tree.join('\n')).toEqual([]);
    expect(tree.sort()).toEqual(['README', 'new.txt']);
  }, 60_000);

  it('moves aside a .git the command creates at a root that had none: the caller’s git finds no repository there', async () => {
    const w6 = scratchDir('tree-nogit');
    fs.writeFileSync(path.join(w6, 'file.txt'), 'file\n');
    giveTo(identity, w6);
    const script = `${PY_PRELUDE}
check('git-init', lambda: run(['git', 'init', '-q']))
check('git-config-fsmonitor', lambda: run(['git', 'config', 'core.fsmonitor', 'echo HOST-CODE-EXEC > ${marker}; false']))
check('hook', lambda: write('.git/hooks/pre-commit', '#!/bin/sh\\necho HOOK > ${marker}\\n', 'w'))
print('END', flush=True)
`;
    const r = await runIn(w6, ['--', 'python3', '-c', script]);
    const u = verdicts(r);
    expect(r.code, u.summary).toBe(0);
    for (const name of ['git-init', 'git-config-fsmonitor', 'hook']) expect(checkLine(u, name)).toBe(`CHECK ${name} OK`);
    expect(fileState(path.join(w6, '.git'))).toBe('absent');
    expect(fs.readFileSync(path.join(movedTo(r, w6, '.git'), 'config'), 'utf8')).toContain('fsmonitor');
    const status = git(w6, ['status'], true);
    expect(status.stderr).toMatch(/not a git repository/);
    expect(fileState(marker)).toBe('absent');
  }, 60_000);

  it('lets `--unprotect .envrc` open .envrc, and only .envrc, to the command (never moved aside)', async () => {
    const w2 = makeRepo('tree-unprotect');
    fs.writeFileSync(path.join(w2, '.bashrc'), 'echo bashrc\n');
    giveTo(identity, w2);
    const kept = snapshot(['.bashrc', '.git/config'].map((p) => path.join(w2, p)));
    const script = `${PY_PRELUDE}
check('write-envrc', lambda: write('.envrc', 'unprotected\\n', 'w'))
attempt('write.bashrc', lambda: write('.bashrc'))
check('create.zshenv', lambda: write('.zshenv', 'planted\\n', 'w'))
attempt('git-config-append', lambda: write('.git/config', '[core]\\n\\tfsmonitor = false\\n'))
print('END', flush=True)
`;
    const r = await runIn(w2, ['--unprotect', '.envrc', '--', 'python3', '-c', script]);
    const u = verdicts(r);
    expect(r.code, u.summary).toBe(0);
    expect(checkLine(u, 'write-envrc')).toBe('CHECK write-envrc OK');
    expect(checkLine(u, 'create.zshenv')).toBe('CHECK create.zshenv OK');
    for (const name of ['write.bashrc', 'git-config-append']) expect(attemptLine(u, name)).toMatch(new RegExp(`^ATTEMPT ${escapeRe(name)} BLOCKED`));
    expect(fs.readFileSync(path.join(w2, '.envrc'), 'utf8')).toBe('unprotected\n');
    expect(quarantinesOf(w2, '.envrc')).toEqual([]);
    expect(fileState(path.join(w2, '.zshenv'))).toBe('absent');
    expect(fs.readFileSync(movedTo(r, w2, '.zshenv'), 'utf8')).toBe('planted\n');
    expect(snapshot(['.bashrc', '.git/config'].map((p) => path.join(w2, p)))).toEqual(kept);
  }, 60_000);

  it('refuses, exit 125, a protected name that is a symlink (.envrc -> /etc/passwd); the command never runs', async () => {
    const w3 = makeRepo('tree-symlink');
    fs.symlinkSync('/etc/passwd', path.join(w3, '.envrc'));
    giveTo(identity, w3);
    const ran = path.join(w3, 'ran');
    const r = await runIn(w3, ['--', 'sh', '-c', `echo ran > ${ran}`]);
    expect(r.code, describeRun(r)).toBe(125);
    expect(r.stderr.split('\n').find((l) => l.includes('.envrc') && l.includes('symlink')), describeRun(r)).toBeDefined();
    expect(fileState(ran)).toBe('absent');
    expect(fs.readlinkSync(path.join(w3, '.envrc'))).toBe('/etc/passwd');
  }, 60_000);

  it.each(['.git', 'sub/.git'])('refuses, exit 125, a %s that is a symlink to a git directory elsewhere; the command never runs', async (at) => {
    const elsewhere = makeRepo('tree-gitlink-target');
    const w7 = scratchDir('tree-gitlink');
    fs.mkdirSync(path.join(w7, 'sub'));
    fs.symlinkSync(path.join(elsewhere, '.git'), path.join(w7, at));
    giveTo(identity, w7);
    const kept = snapshot([path.join(elsewhere, '.git/config'), path.join(elsewhere, '.git/hooks')]);
    const ran = path.join(w7, 'ran');
    const r = await runIn(w7, ['--', 'sh', '-c', `echo ran > ${ran}; echo '[core]' >> ${w7}/${at}/config`]);
    expect(r.code, describeRun(r)).toBe(125);
    expect(r.stderr, describeRun(r)).toMatch(/symlink/);
    expect(fileState(ran)).toBe('absent');
    expect(fs.readlinkSync(path.join(w7, at))).toBe(path.join(elsewhere, '.git'));
    expect(snapshot([path.join(elsewhere, '.git/config'), path.join(elsewhere, '.git/hooks')])).toEqual(kept);
  }, 60_000);

  it('moves nothing aside outside the trees when the command swaps a nested writable root for a symlink to another directory', async () => {
    // --write P --write P/sub: P/sub is a root of its own (its missing names watched), inside P, which the
    // command may rename. It puts a symlink to V (the caller's, outside every tree: think $HOME or another
    // repository) at P/sub; the move-aside after the run must not follow it into V.
    const p = scratchDir('tree-nested');
    const victim = scratchDir('tree-victim');
    fs.mkdirSync(path.join(p, 'sub'));
    fs.writeFileSync(path.join(victim, '.bashrc'), 'echo mine\n');
    fs.writeFileSync(path.join(victim, '.npmrc'), 'registry=https://registry.npmjs.org/\n');
    fs.writeFileSync(path.join(victim, '.envrc'), 'use nix\n');
    giveTo(identity, p, victim);
    git(victim, ['init', '-q']);
    const kept = fileState(victim);
    const sub = path.join(p, 'sub');
    const r = await runIn(p, ['--write', p, '--write', sub, '--', 'sh', '-c', `mv ${sub} ${p}/sub2 && ln -s ${victim} ${sub}; ls -la ${p}`]);
    expect(r.timedOut, describeRun(r)).toBe(false);
    expect(fileState(victim), describeRun(r)).toBe(kept);
  }, 60_000);

  it('is not blocked by FIFOs the command plants at unprotected names: this run and the next end within 15 s', async () => {
    const w4 = makeRepo('tree-fifo');
    const plant = 'mkdir -p sub deep/.git && mkfifo plain.fifo sub/.envrc sub/.git deep/.git/config deep/.git/HEAD';
    const first = await runIn(w4, ['--', 'sh', '-c', plant], 15_000);
    expect(first.timedOut, describeRun(first)).toBe(false);
    expect(first.code, describeRun(first)).toBe(0);
    expect(fileState(path.join(w4, 'sub/.git'))).toBe('fifo');
    // The next run from the same tree meets them at start: refusing is fine, hanging is not.
    const next = await runIn(w4, ['--', 'true'], 15_000);
    expect(next.timedOut, describeRun(next)).toBe(false);
    expect([0, 125], describeRun(next)).toContain(next.code);
  }, 60_000);
});
