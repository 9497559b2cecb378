// Plans the bubblewrap command line for `sluice run`: which namespaces, which paths the command sees
// and how, what is masked, and the environment. Pure apart from reading the filesystem (lstat,
// realpath); never starts anything. The view is an allow-list: what is not named here is absent.
import fs from 'node:fs';
import path from 'node:path';

/** Where the sandbox finds its own parts. Fixed paths, so nothing inside depends on host layout. */
export const SANDBOX_DIR = '/run/sluice';
export const SANDBOX_GRANT_SOCKET = `${SANDBOX_DIR}/grant.sock`;
/** A run-owned grant's directory: bound before Sluice has put the socket in it (start-up overlaps). */
export const SANDBOX_GRANT_DIR = `${SANDBOX_DIR}/grant`;
// `.mjs`: bound alone, outside any package.json, the init script must still load as an ES module.
export const SANDBOX_INIT = `${SANDBOX_DIR}/init.mjs`;
/**
 * NO_PROXY inside: the sandbox's loopback is its own network namespace's (only the bridge and what CMD
 * itself starts listen there), so a client talking to its own local server must not send that through
 * the grant, where `localhost` would mean the host's loopback. Nothing else bypasses the bridge, and a
 * bypass reaches nothing else: the namespace has no route out.
 */
export const SANDBOX_NO_PROXY = 'localhost,127.0.0.1,::1';

/** System trees shown read-only when present; a symlink (merged /usr) is recreated as a symlink. */
const SYSTEM_TREES = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The parts of /etc that programs need to run, resolve users and verify TLS. Not /etc as a whole:
 * a command started by root keeps uid 0 (without capabilities), so it could read root-owned files
 * such as /etc/shadow or /etc/ssl/private by owner permission.
 */
const ETC_FILES = [
  'alternatives', 'bash.bashrc', 'ca-certificates', 'ca-certificates.conf', 'crypto-policies', 'debian_version', 'gai.conf',
  'gitconfig', 'group', 'host.conf', 'hostname', 'hosts', 'inputrc', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'locale.alias',
  'localtime', 'mime.types', 'nsswitch.conf', 'os-release', 'passwd', 'pki/tls/certs', 'profile', 'protocols', 'python3',
  'services', 'ssl/certs', 'ssl/openssl.cnf', 'terminfo', 'timezone', 'wgetrc',
];

/** Variables a command may keep from the caller; everything else (tokens, keys) stays outside. */
const ENV_ALLOWED = ['PATH', 'LANG', 'LANGUAGE', 'TERM', 'COLORTERM', 'TZ', 'USER', 'LOGNAME', 'SHELL', 'NO_COLOR', 'FORCE_COLOR', 'COLUMNS', 'LINES'];

export interface SandboxSpec {
  /** The grant's dedicated Unix socket on the host. */
  readonly grantSocket: string;
  /**
   * Bind the socket's directory instead of the socket (a run-owned grant's private directory): the
   * sandbox can start while the grant is being issued, and the socket appears inside once it exists.
   */
  readonly isGrantDirBound?: boolean;
  readonly port: number;
  readonly command: readonly string[];
  readonly cwd: string;
  /** The caller's HOME: the command gets an empty private directory at this path. */
  readonly home: string;
  /** Writable trees; when empty, the working directory. */
  readonly writable: readonly string[];
  readonly readable: readonly string[];
  /** Paths that must be absent inside (Sluice's state, config, audit file); masked when under a visible tree. */
  readonly hidden: readonly string[];
  /** Paths of live Unix sockets on the host (/proc/net/unix). */
  readonly liveSockets: readonly string[];
  /** `--env NAME` (copied) or `--env NAME=VALUE`. */
  readonly envFlags: readonly string[];
  readonly callerEnv: Readonly<Record<string, string | undefined>>;
  readonly node: string;
  readonly initScript: string;
}

export interface SandboxPlan {
  /** bwrap's arguments, ending with the init script and the command. Seccomp filter on fd 3; handshake on fd 4. */
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

export type PlanResult = { readonly ok: true; readonly plan: SandboxPlan } | { readonly ok: false; readonly message: string };

/** A mount step; steps apply parents first, so a tmpfs never covers a later bind below it. */
interface MountStep {
  readonly dest: string;
  readonly args: readonly string[];
}

export const SECCOMP_FD = 3;
/** The init writes "ready" here once confined; `sluice run` answers "go" once the grant is in place. */
export const HANDSHAKE_FD = 4;

export function planSandbox(spec: SandboxSpec): PlanResult {
  const env = sandboxEnv(spec);
  if (!env.ok) return env;
  const writable = (spec.writable.length > 0 ? spec.writable : [spec.cwd]).map(realOrSelf);
  const readable = spec.readable.map(realOrSelf);
  const home = path.resolve(spec.home);
  for (const dir of writable) {
    if (dir === '/' || isWithin(home, dir)) return { ok: false, message: `refusing to make ${dir} writable: it holds your home directory (and its keys); run from a project directory or pass --write DIR` };
    if (!isDirectory(dir)) return { ok: false, message: `--write ${dir}: not a directory` };
  }
  for (const file of readable) if (!fs.existsSync(file)) return { ok: false, message: `--read ${file}: no such file or directory` };

  const steps: MountStep[] = [];
  const visible: string[] = [];
  for (const tree of SYSTEM_TREES) {
    const stat = lstat(tree);
    if (stat?.isSymbolicLink() === true) steps.push({ dest: tree, args: ['--symlink', fs.readlinkSync(tree), tree] });
    else if (stat?.isDirectory() === true) {
      steps.push({ dest: tree, args: ['--ro-bind', tree, tree] });
      visible.push(tree);
    }
  }
  for (const name of ETC_FILES) {
    const file = `/etc/${name}`;
    if (!fs.existsSync(file)) continue;
    steps.push({ dest: file, args: ['--ro-bind', file, file] });
    visible.push(file);
  }
  const node = realOrSelf(spec.node);
  if (!visible.some((root) => isWithin(node, root))) {
    steps.push({ dest: node, args: ['--ro-bind', node, node] });
    visible.push(node);
  }
  steps.push({ dest: '/tmp', args: ['--tmpfs', '/tmp'] });
  if (home !== '/' && !writable.some((dir) => isWithin(home, dir))) steps.push({ dest: home, args: ['--tmpfs', home] });
  for (const file of readable) {
    steps.push({ dest: file, args: ['--ro-bind', file, file] });
    visible.push(file);
  }
  for (const dir of writable) {
    steps.push({ dest: dir, args: ['--bind', dir, dir] });
    visible.push(dir);
  }
  const masks = planMasks(spec, visible);
  if (!masks.ok) return masks;
  steps.push(...masks.steps);
  steps.sort((a, b) => depth(a.dest) - depth(b.dest));

  const insideSocket = spec.isGrantDirBound === true ? `${SANDBOX_GRANT_DIR}/${path.basename(spec.grantSocket)}` : SANDBOX_GRANT_SOCKET;
  const grantMount = spec.isGrantDirBound === true ? ['--ro-bind', path.dirname(spec.grantSocket), SANDBOX_GRANT_DIR] : ['--ro-bind', spec.grantSocket, SANDBOX_GRANT_SOCKET];
  const cwd = realOrSelf(spec.cwd);
  const chdir = visible.some((root) => isWithin(cwd, root)) && !masks.steps.some((m) => isWithin(cwd, m.dest)) ? cwd : (writable[0] ?? home);
  const args = [
    '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net', '--unshare-cgroup-try',
    // No user namespaces inside (no nested ones to escalate in); no capabilities even in our own namespace.
    '--disable-userns', '--cap-drop', 'ALL',
    '--die-with-parent', '--new-session', '--hostname', 'sluice-sandbox',
    '--proc', '/proc', '--dev', '/dev',
    ...steps.flatMap((s) => s.args),
    ...grantMount,
    '--ro-bind', spec.initScript, SANDBOX_INIT,
    '--chdir', chdir,
    '--seccomp', String(SECCOMP_FD),
    '--', node, SANDBOX_INIT, String(spec.port), insideSocket, String(HANDSHAKE_FD), ...spec.command,
  ];
  return { ok: true, plan: { args, env: env.env } };
}

type MaskResult = { readonly ok: true; readonly steps: readonly MountStep[] } | { readonly ok: false; readonly message: string };

/**
 * Sluice's own files and every live Unix socket under a visible tree are covered. A socket's whole
 * directory is covered (a state directory holds the admin socket, the ledger and other grants'
 * sockets, and new ones appear there later), unless that directory is itself a tree the caller named.
 */
function planMasks(spec: SandboxSpec, visible: readonly string[]): MaskResult {
  const masked = new Map<string, MountStep>();
  const mask = (target: string): string | null => {
    const real = realOrSelf(target);
    const stat = lstat(real);
    if (stat === null) return null;
    const exposed = visible.find((root) => isWithin(root, real));
    if (exposed !== undefined) return `refusing to show ${exposed}: it is or holds ${real}, which the command must not see (Sluice's state, config or sockets)`;
    if (!visible.some((root) => isWithin(real, root))) return null;
    if (stat.isDirectory()) masked.set(real, { dest: real, args: ['--tmpfs', real, '--remount-ro', real] });
    else masked.set(real, { dest: real, args: ['--ro-bind', '/dev/null', real] });
    return null;
  };
  for (const target of spec.hidden) {
    const refused = mask(target);
    if (refused !== null) return { ok: false, message: refused };
  }
  for (const listed of spec.liveSockets) {
    const found = locateSocket(listed);
    if (found === null || !visible.some((root) => isWithin(found.dir, root))) continue;
    // A directory that is, or holds, a tree the caller named cannot be covered: cover its sockets.
    const holdsRoot = visible.some((root) => isWithin(root, found.dir));
    const targets = holdsRoot ? socketsIn(found.dir) : [found.dir];
    for (const target of targets) {
      const refused = mask(target);
      if (refused !== null) return { ok: false, message: refused };
    }
  }
  // A covered directory makes masks below it redundant (and bwrap could not create their mount points).
  const steps = [...masked.values()].filter((s) => ![...masked.keys()].some((other) => other !== s.dest && isWithin(s.dest, other)));
  return { ok: true, steps };
}

/**
 * Where a socket listed in /proc/net/unix lives now. The listed path is the one it was bound at; a
 * socket bound in a staging directory and linked into place (Sluice does this to set its mode first,
 * ADR 0014) lists a path that is gone, so the nearest directory that still exists stands for it.
 */
function locateSocket(listed: string): { readonly dir: string } | null {
  let at = realOrSelf(listed);
  if (lstat(at)?.isSocket() === true) return { dir: path.dirname(at) };
  while (at !== '/') {
    at = path.dirname(at);
    if (isDirectory(at)) return { dir: realOrSelf(at) };
  }
  return null;
}

/** The socket files directly in one directory. */
function socketsIn(dir: string): string[] {
  try {
    return fs.readdirSync(dir).map((name) => path.join(dir, name)).filter((file) => lstat(file)?.isSocket() === true);
  } catch {
    return [];
  }
}

type EnvResult = { readonly ok: true; readonly env: Record<string, string> } | { readonly ok: false; readonly message: string };

/** The allow-listed environment and NO_PROXY; the init script adds the proxy variables once its port is open. */
export function sandboxEnv(spec: Pick<SandboxSpec, 'callerEnv' | 'envFlags' | 'home'>): EnvResult {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.callerEnv)) {
    if (value === undefined) continue;
    if (ENV_ALLOWED.includes(name) || name.startsWith('LC_')) env[name] = value;
  }
  for (const flag of spec.envFlags) {
    const eq = flag.indexOf('=');
    const name = eq === -1 ? flag : flag.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return { ok: false, message: `--env ${flag}: not a variable name` };
    if (/^SLUICE_/i.test(name)) return { ok: false, message: `--env ${name}: SLUICE_* variables hold Sluice's own secrets and never enter a sandbox` };
    if (/_proxy$/i.test(name)) return { ok: false, message: `--env ${name}: the proxy variables are set by sluice run` };
    const value = eq === -1 ? spec.callerEnv[name] : flag.slice(eq + 1);
    if (value !== undefined) env[name] = value;
  }
  env['HOME'] = path.resolve(spec.home);
  env['TMPDIR'] = '/tmp';
  // Both spellings (curl and Python read no_proxy first, Go and undici either); --env cannot set them.
  env['NO_PROXY'] = env['no_proxy'] = SANDBOX_NO_PROXY;
  return { ok: true, env };
}

function isWithin(child: string, parent: string): boolean {
  if (parent === '/') return true;
  return child === parent || child.startsWith(`${parent}/`);
}

function depth(p: string): number {
  return p === '/' ? 0 : p.split('/').length - 1;
}

function lstat(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

function isDirectory(p: string): boolean {
  return lstat(p)?.isDirectory() === true;
}

function realOrSelf(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
