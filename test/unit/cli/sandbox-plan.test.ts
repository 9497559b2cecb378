// The bubblewrap plan of `sluice run`: the namespaces and the filesystem view are an allow-list, and
// what a hostile command would look for (Sluice's state and sockets, the caller's secrets, /etc/shadow,
// the home directory) is absent (issue 12; review security-2026-12 findings 2-5).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { planSandbox, SANDBOX_NO_PROXY, sandboxEnv, TREE_FD_BASE, type SandboxSpec } from '../../../src/cli/index.js';

let root: string;
let project: string;
let home: string;
const servers: net.Server[] = [];

/** A real listening Unix socket: the plan tells sockets from files by their type. */
function listenUnix(file: string): Promise<void> {
  const server = net.createServer();
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => resolve());
  });
}

beforeAll(async () => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-plan-')));
  project = path.join(root, 'project');
  home = path.join(root, 'home');
  for (const dir of [project, home, path.join(project, 'state'), path.join(project, 'src')]) fs.mkdirSync(dir, { recursive: true });
  for (const file of ['state/ledger.json', 'sluice.yaml', 'src/app.ts']) fs.writeFileSync(path.join(project, file), '');
  for (const file of ['state/admin.sock', 'state/a.sock', 'dev.sock']) await listenUnix(path.join(project, file));
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  fs.rmSync(root, { recursive: true, force: true });
});

function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    grantSocket: path.join(project, 'state/a.sock'),
    port: 3128,
    command: ['sh', '-c', 'true'],
    cwd: project,
    home,
    writable: [],
    readable: [],
    hidden: [],
    liveSockets: [],
    envFlags: [],
    callerEnv: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
    node: process.execPath,
    initScript: path.join(project, 'src/app.ts'),
    ...overrides,
  };
}

/**
 * The plan's arguments, with each /proc/self/fd/N source (a tree or the grant socket, bound from the
 * descriptor the plan opened; its own test is below) shown as the path that descriptor holds. The
 * descriptors are closed at once.
 */
function argsOf(s: SandboxSpec): string[] {
  const planned = planSandbox(s);
  if (!planned.ok) throw new Error(planned.message);
  const held = (arg: string): string => {
    const n = /^\/proc\/self\/fd\/(\d+)$/.exec(arg)?.[1];
    const fd = n === undefined ? undefined : planned.plan.fds[Number(n) - TREE_FD_BASE];
    return fd === undefined ? arg : fs.readlinkSync(`/proc/self/fd/${fd}`);
  };
  const args = planned.plan.args.map(held);
  for (const fd of planned.plan.fds) fs.closeSync(fd);
  return args;
}

/** The `[flag, a, b]` triples of the plan, as "flag a b" strings. */
function mounts(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const flag = args[i] ?? '';
    if (['--bind', '--ro-bind', '--symlink'].includes(flag)) out.push(`${flag} ${args[i + 1]} ${args[i + 2]}`);
    else if (['--tmpfs', '--remount-ro', '--proc', '--dev'].includes(flag)) out.push(`${flag} ${args[i + 1]}`);
  }
  return out;
}

describe('planSandbox: namespaces and privileges', () => {
  it('asks for every namespace, no capabilities, no nested user namespaces, a new session, death with the parent and the seccomp filter', () => {
    const args = argsOf(spec());
    for (const flag of ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net', '--disable-userns', '--die-with-parent', '--new-session']) {
      expect(args).toContain(flag);
    }
    expect(args.join(' ')).toContain('--cap-drop ALL');
    expect(args.join(' ')).toContain('--seccomp 3');
    const dashdash = args.indexOf('--');
    const init = args.slice(dashdash + 1);
    expect(init.slice(0, 5)).toEqual([fs.realpathSync(process.execPath), '/run/sluice/init.mjs', '3128', '/run/sluice/grant.sock', '4']);
    expect(JSON.parse(init[5] ?? '')).toContainEqual([project, expect.stringMatching(/^=\d+:\d+$/)]);
    expect(init.slice(6)).toEqual(['sh', '-c', 'true']);
  });
});

describe('planSandbox: the filesystem view', () => {
  it('binds the working directory writable, the grant socket and init at fixed paths, a private /tmp and an empty home', () => {
    const m = mounts(argsOf(spec()));
    expect(m).toContain(`--bind ${project} ${project}`);
    expect(m).toContain(`--ro-bind ${path.join(project, 'state/a.sock')} /run/sluice/grant.sock`);
    expect(m).toContain('--tmpfs /tmp');
    expect(m).toContain(`--tmpfs ${home}`);
    expect(m).toContain('--proc /proc');
  });

  it('binds a run-owned grant’s directory (the socket may not exist yet) and points the init at the socket inside it', () => {
    const runDir = path.join(root, 'run-dir');
    fs.mkdirSync(runDir, { recursive: true });
    const args = argsOf(spec({ grantSocket: path.join(runDir, 'grant.sock'), isGrantDirBound: true }));
    expect(mounts(args)).toContain(`--ro-bind ${runDir} /run/sluice/grant`);
    expect(mounts(args).join('\n')).not.toContain('/run/sluice/grant.sock');
    expect(args.slice(args.indexOf('--') + 1)).toContain('/run/sluice/grant/grant.sock');
  });

  it('shows /etc only by allow-list: never /etc/shadow, /etc/ssl/private or /etc itself', () => {
    const m = mounts(argsOf(spec()));
    expect(m.filter((x) => /\s\/etc(\/shadow|\/gshadow|\/ssl\/private|\/sudoers)?$/.test(x))).toEqual([]);
    if (fs.existsSync('/etc/passwd')) expect(m).toContain('--ro-bind /etc/passwd /etc/passwd');
  });

  it('applies parents before children, so /tmp’s tmpfs does not cover a writable directory under /tmp', () => {
    const m = mounts(argsOf(spec()));
    const tmp = m.indexOf('--tmpfs /tmp');
    const bind = m.indexOf(`--bind ${project} ${project}`);
    expect(tmp).toBeGreaterThanOrEqual(0);
    expect(bind).toBeGreaterThan(tmp);
  });

  it('covers the directory of every live socket under a visible tree (the state directory: admin socket, ledger, other grants)', () => {
    const m = mounts(argsOf(spec({ liveSockets: [path.join(project, 'state/admin.sock'), path.join(project, 'state/a.sock'), '/var/run/elsewhere.sock'] })));
    const state = path.join(project, 'state');
    expect(m).toContain(`--tmpfs ${state}`);
    expect(m).toContain(`--remount-ro ${state}`);
    expect(m.indexOf(`--tmpfs ${state}`)).toBeGreaterThan(m.indexOf(`--bind ${project} ${project}`));
    expect(m.join('\n')).not.toContain('elsewhere');
  });

  it('masks a live socket that sits directly in a tree the caller named with /dev/null, keeping the rest of the tree', () => {
    const m = mounts(argsOf(spec({ liveSockets: [path.join(project, 'dev.sock')] })));
    expect(m).toContain(`--ro-bind /dev/null ${path.join(project, 'dev.sock')}`);
    expect(m).toContain(`--bind ${project} ${project}`);
  });

  it('covers the nearest existing directory of a socket bound in a staging directory that is gone (bound, then linked into place)', () => {
    const m = mounts(argsOf(spec({ liveSockets: [path.join(project, 'state/.sluice-x1y2/s')] })));
    expect(m).toContain(`--tmpfs ${path.join(project, 'state')}`);
  });

  it('masks the sockets of a tree the caller named when a listed socket there is gone, leaving its files', () => {
    const m = mounts(argsOf(spec({ liveSockets: [path.join(project, '.sluice-gone/s')] })));
    expect(m).toContain(`--ro-bind /dev/null ${path.join(project, 'dev.sock')}`);
    expect(m).toContain(`--bind ${project} ${project}`);
    expect(m.join('\n')).not.toContain(`/dev/null ${path.join(project, 'sluice.yaml')}`);
  });

  it('masks Sluice’s config file and state directory given with --config under a read-only tree', () => {
    const hidden = [path.join(project, 'sluice.yaml'), path.join(project, 'state'), path.join(root, 'not-there')];
    const m = mounts(argsOf(spec({ readable: [project], writable: [path.join(project, 'src')], hidden })));
    expect(m).toContain(`--ro-bind /dev/null ${path.join(project, 'sluice.yaml')}`);
    expect(m).toContain(`--tmpfs ${path.join(project, 'state')}`);
  });

  // review 2026-12-04 finding 5: a mask in a writable tree does not stop the command from
  // renaming the masked path's parent and putting its own file where Sluice will read it next.
  it('refuses a writable tree that holds Sluice’s config, state or audit file, naming it', () => {
    for (const hidden of ['sluice.yaml', 'state', 'state/ledger.json']) {
      const refused = planSandbox(spec({ hidden: [path.join(project, hidden)] }));
      expect(refused.ok, hidden).toBe(false);
      if (!refused.ok) expect(refused.message).toContain(`refusing to make ${project} writable: it holds ${path.join(project, hidden)}`);
    }
  });

  // Finding 4's class: a sandbox that can write a tree's parent points the link anywhere (the caller's
  // HOME, /etc, another run's state) between any check and the mount; so a link is never followed.
  it('refuses a --write or --read path that goes through a symlink, naming where it leads', () => {
    const link = path.join(root, 'link-to-src');
    fs.rmSync(link, { force: true });
    fs.symlinkSync(path.join(project, 'src'), link);
    for (const s of [spec({ writable: [link] }), spec({ readable: [link] }), spec({ readable: [path.join(link, 'app.ts')] })]) {
      const refused = planSandbox(s);
      expect(refused.ok).toBe(false);
      if (!refused.ok) expect(refused.message).toMatch(/goes through a symlink \(it leads to .*\/project\/src/);
    }
  });

  it('binds each tree from the descriptor it opened, whose path is the tree (review 2026-12-04 finding 4)', () => {
    const planned = planSandbox(spec({ readable: [path.join(project, 'src')] }));
    if (!planned.ok) throw new Error(planned.message);
    try {
      const binds = planned.plan.args.flatMap((a, i, all) => (a.startsWith('/proc/self/fd/') ? [[all[i - 1], Number(a.slice('/proc/self/fd/'.length)), all[i + 1] ?? ''] as const] : []));
      expect(binds.map(([flag, , dest]) => `${flag} ${dest}`).sort()).toEqual([`--bind ${project}`, `--ro-bind ${path.join(project, 'src')}`, '--ro-bind /run/sluice/grant.sock'].sort());
      const grant = binds.find(([, , dest]) => dest === '/run/sluice/grant.sock');
      expect(fs.readlinkSync(`/proc/self/fd/${planned.plan.fds[(grant?.[1] ?? 0) - TREE_FD_BASE]}`)).toBe(path.join(project, 'state/a.sock'));
      for (const [, childFd, dest] of binds.filter(([, , d]) => d !== '/run/sluice/grant.sock')) expect(fs.readlinkSync(`/proc/self/fd/${planned.plan.fds[childFd - TREE_FD_BASE]}`)).toBe(dest);
    } finally {
      for (const fd of planned.plan.fds) fs.closeSync(fd);
    }
  });

  it('refuses to show a tree that is, or holds, something that must be hidden', () => {
    const refused = planSandbox(spec({ writable: [path.join(project, 'state')], hidden: [path.join(project, 'state')] }));
    expect(refused.ok).toBe(false);
    const holds = planSandbox(spec({ readable: [path.join(project, 'state/ledger.json')], hidden: [path.join(project, 'state')] }));
    expect(holds.ok).toBe(false);
  });

  it('refuses to make the home directory, one of its parents, or / writable', () => {
    for (const dir of [home, root, '/']) {
      const planned = planSandbox(spec({ writable: [dir] }));
      expect(planned.ok, dir).toBe(false);
      if (!planned.ok) expect(planned.message).toMatch(/home directory/);
    }
  });

  it('refuses a --read path that does not exist and a --write path that is not a directory', () => {
    expect(planSandbox(spec({ readable: [path.join(root, 'missing')] })).ok).toBe(false);
    expect(planSandbox(spec({ writable: [path.join(project, 'sluice.yaml')] })).ok).toBe(false);
  });

  it('with --write, binds only those directories writable and starts there when the working directory is not shown', () => {
    const src = path.join(project, 'src');
    const args = argsOf(spec({ writable: [src] }));
    expect(mounts(args)).toContain(`--bind ${src} ${src}`);
    expect(mounts(args)).not.toContain(`--bind ${project} ${project}`);
    expect(args[args.indexOf('--chdir') + 1]).toBe(src);
  });
});

describe('sandboxEnv: an allow-list, never the caller’s secrets (finding 5)', () => {
  const callerEnv = {
    PATH: '/usr/bin', LANG: 'C.UTF-8', LC_ALL: 'C', TERM: 'xterm', HOME: '/root',
    SLUICE_ADMIN_TOKEN: 'admin-secret', GRANT_B_TOKEN: 'tok-b-secret', AWS_SECRET_ACCESS_KEY: 'xyz', SSH_AUTH_SOCK: '/tmp/ssh.sock',
    HTTPS_PROXY: 'http://corp:3128', FOO: 'foo-value',
  };

  it('keeps the allow-listed variables and drops everything else', () => {
    const env = sandboxEnv({ callerEnv, envFlags: [], home: '/home/u' });
    expect(env.ok && env.env).toEqual({
      PATH: '/usr/bin', LANG: 'C.UTF-8', LC_ALL: 'C', TERM: 'xterm', HOME: '/home/u', TMPDIR: '/tmp',
      NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1',
    });
  });

  // Issue 17 item 8: the sandbox's loopback is its own; nothing else may bypass the bridge, whatever
  // the caller's environment says (a caller's NO_PROXY=* would send every name around the grant).
  it('sets NO_PROXY to the sandbox loopback only, ignoring the caller’s NO_PROXY', () => {
    const env = sandboxEnv({ callerEnv: { ...callerEnv, NO_PROXY: '*', no_proxy: '.corp.example' }, envFlags: [], home: '/h' });
    expect(env.ok && env.env['NO_PROXY']).toBe(SANDBOX_NO_PROXY);
    expect(env.ok && env.env['no_proxy']).toBe(SANDBOX_NO_PROXY);
    expect(SANDBOX_NO_PROXY.split(',')).toEqual(['localhost', '127.0.0.1', '::1']);
  });

  it('passes --env NAME from the caller and sets --env NAME=VALUE', () => {
    const env = sandboxEnv({ callerEnv, envFlags: ['FOO', 'BAR=1', 'MISSING'], home: '/h' });
    expect(env.ok && env.env['FOO']).toBe('foo-value');
    expect(env.ok && env.env['BAR']).toBe('1');
    expect(env.ok && 'MISSING' in env.env).toBe(false);
  });

  it.each(['SLUICE_ADMIN_TOKEN', 'sluice_anything=1', 'HTTPS_PROXY', 'no_proxy=*', 'NO_PROXY', 'NO_PROXY=', '1BAD', 'A-B'])('refuses --env %s', (flag) => {
    expect(sandboxEnv({ callerEnv, envFlags: [flag], home: '/h' }).ok).toBe(false);
  });
});
