// Threat: the command plants code in its writable tree that the caller's own tools run later, outside
// the sandbox (review 2026-12-04, finding 2, high). `sluice run` binds the working directory
// read-write as a whole, .git included: the review set core.fsmonitor in .git/config, and the
// caller's next `git status` ran it unconfined, in the host network namespace; a planted pre-commit
// hook runs the same way, and so do .envrc (direnv), shell rc files, .vscode tasks and .mcp.json.
// What must hold: at the root of every writable tree and of every git directory in it, the names
// below stay read-only, whether they existed before the run or not (and a missing one is not left
// behind as an empty placeholder); objects, refs and the index stay writable, so git commit works
// inside. Attempts come from python3 inside; the host then compares every protected path and runs
// git status and git commit itself, and a marker that the planted code would write stays absent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
/** Half of the protected names exist before the run (with this content), half do not. */
const EXISTING: Record<string, string> = {
  '.gitmodules': '# no submodules\n',
  '.bashrc': 'echo bashrc\n',
  '.profile': 'echo profile\n',
  '.zshrc': 'echo zshrc\n',
  '.mcp.json': '{"mcpServers": {}}\n',
};
const MISSING_FILES = ['.envrc', '.bash_profile', '.bash_login', '.zprofile', '.zshenv'];
const ROOT_FILES = [...Object.keys(EXISTING), ...MISSING_FILES];
const MISSING = [...MISSING_FILES, '.idea'];

// Inside, from W: what must work first (the commit), then every attempt. argv: MARKER.
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
attempt('dotgit-rename', lambda: os.rename('.git', '.git-old') or 'moved')
for n in json.loads(sys.argv[2]):
    attempt('write' + n, lambda n=n: write(n))
attempt('vscode-settings', lambda: write('.vscode/settings.json', '{"evil": true}\n'))
attempt('vscode-tasks', lambda: run(['sh', '-c', 'mkdir -p .vscode && echo > .vscode/tasks.json']))
attempt('idea-workspace', lambda: run(['sh', '-c', 'mkdir -p .idea && echo > .idea/workspace.xml']))
attempt('mkfifo-envrc', lambda: os.mkfifo('.envrc') or 'made')
attempt('symlink-zshenv', lambda: os.symlink('/etc/passwd', '.zshenv') or 'made')
attempt('unlink-bashrc', lambda: os.unlink('.bashrc') or 'removed')
attempt('rename-profile', lambda: os.rename('.profile', 'profile-old') or 'moved')
def hardlink(src, name):
    os.link(src, name)
    return write(name, 'through the link\n')
attempt('hardlink-git-config', lambda: hardlink('.git/config', 'x'))
attempt('hardlink-etc-passwd', lambda: hardlink('/etc/passwd', 'y'))
attempt('nested-git-config', lambda: write('sub/repo2/.git/config', '[core]\n\tfsmonitor = echo > %s\n' % marker))
attempt('nested-hook', lambda: write('sub/repo2/.git/hooks/post-checkout', '#!/bin/sh\necho HOOK > %s\n' % marker, 'w'))
attempt('worktree-dotgit-file', lambda: write('wt/.git', 'gitdir: /tmp/evil\n', 'w'))
attempt('worktree-commondir', lambda: write('.git/worktrees/wt/commondir', '/tmp/evil\n', 'w'))
print('END', flush=True)
`;
const ATTEMPTS = [
  'git-config-fsmonitor', 'git-config-hookspath', 'git-config-append', 'git-config-replace', 'hook-pre-commit', 'hooks-rm-rf', 'hooks-rename',
  'info-attributes', 'info-exclude', 'dotgit-rename', ...ROOT_FILES.map((n) => `write${n}`), 'vscode-settings', 'vscode-tasks', 'idea-workspace',
  'mkfifo-envrc', 'symlink-zshenv', 'unlink-bashrc', 'rename-profile', 'hardlink-git-config', 'hardlink-etc-passwd', 'nested-git-config',
  'nested-hook', 'worktree-dotgit-file', 'worktree-commondir',
];

describe.skipIf(skip !== null).each(identities())('sluice run: what the caller’s tools execute stays read-only, as $label', (identity: Identity) => {
  let sluice: GrantSluice;
  let home: string;
  let marker: string;
  let w: string;
  let protectedPaths: string[];
  let before: Record<string, string>;
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
      ...['.git/config', '.git/hooks', '.git/info', '.git/worktrees/wt/commondir', 'wt/.git', 'sub/repo2/.git/config', 'sub/repo2/.git/hooks'],
      ...ROOT_FILES, '.vscode', '.idea', 'x', 'y', '.git-old', 'profile-old',
    ].map((p) => path.join(w, p));
    before = snapshot(protectedPaths);
    run = await runIn(w, ['--', 'python3', '-c', SCRIPT, marker, JSON.stringify(ROOT_FILES)]);
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

  it('leaves every protected path on the host as it was: .git/config, hooks, info, rc files, worktree links', () => {
    expect(snapshot(protectedPaths)).toEqual(before);
    expect(fs.lstatSync(path.join(w, '.git')).isDirectory()).toBe(true);
  });

  it('leaves no placeholder behind for a protected name that did not exist', () => {
    expect(Object.fromEntries(MISSING.map((n) => [n, fileState(path.join(w, n))]))).toEqual(Object.fromEntries(MISSING.map((n) => [n, 'absent'])));
    expect(fileState(path.join(w, '.git/info/attributes'))).toBe('absent');
    expect(fileState(path.join(w, '.git/hooks/pre-commit'))).toBe('absent');
  });

  it('blocks code execution outside: the host’s git status and git commit run nothing the command planted', () => {
    for (const dir of [w, path.join(w, 'sub/repo2'), path.join(w, 'wt')]) git(dir, ['status']);
    git(w, ['commit', '--allow-empty', '-q', '-m', 'host']);
    expect(fileState(marker)).toBe('absent');
  });

  it('lets `--unprotect .envrc` open .envrc, and only .envrc, to the command', async () => {
    const w2 = makeRepo('tree-unprotect');
    fs.writeFileSync(path.join(w2, '.bashrc'), 'echo bashrc\n');
    giveTo(identity, w2);
    const kept = snapshot(['.bashrc', '.git/config', '.zshenv'].map((p) => path.join(w2, p)));
    const script = `${PY_PRELUDE}
check('write-envrc', lambda: write('.envrc', 'unprotected\\n', 'w'))
attempt('write.bashrc', lambda: write('.bashrc'))
attempt('write.zshenv', lambda: write('.zshenv'))
attempt('git-config-append', lambda: write('.git/config', '[core]\\n\\tfsmonitor = false\\n'))
print('END', flush=True)
`;
    const r = await runIn(w2, ['--unprotect', '.envrc', '--', 'python3', '-c', script]);
    const u = verdicts(r);
    expect(r.code, u.summary).toBe(0);
    expect(checkLine(u, 'write-envrc')).toBe('CHECK write-envrc OK');
    for (const name of ['write.bashrc', 'write.zshenv', 'git-config-append']) expect(attemptLine(u, name)).toMatch(new RegExp(`^ATTEMPT ${escapeRe(name)} BLOCKED`));
    expect(fs.readFileSync(path.join(w2, '.envrc'), 'utf8')).toBe('unprotected\n');
    expect(snapshot(['.bashrc', '.git/config', '.zshenv'].map((p) => path.join(w2, p)))).toEqual(kept);
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
