// Plans the bubblewrap command line for `sluice run`: which namespaces, which paths the command sees
// and how, what is masked, and the environment. Pure apart from reading the filesystem (lstat,
// realpath); never starts anything. The view is an allow-list: what is not named here is absent.
import fs from 'node:fs';
import path from 'node:path';
import { isWithin, lstatOrNull, realOrSelf } from './paths.js';
import { createMissing, planProtections, type Protection, type Watched } from './caller-tree.js';
import { identityOf, openTree } from './open-tree.js';
import { SCAN_BUDGET_ENTRIES, scanTrees } from './tree-scan.js';

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
  /** `--unprotect`: protected names (caller-tree.ts) the caller lets the command write, with what lies below. */
  readonly unprotect?: readonly string[] | undefined;
  /** Entries the walk of the shown trees may visit (tree-scan.ts); tests lower it. */
  readonly scanBudget?: number | undefined;
}

export interface SandboxPlan {
  /** bwrap's arguments, ending with the init script and the command. Seccomp filter on fd 3; handshake on fd 4. */
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Opened trees the child gets at TREE_FD_BASE, TREE_FD_BASE + 1, … (bound as /proc/self/fd/N). */
  readonly fds: readonly number[];
  /** What the run protects in its writable trees (caller-tree.ts). */
  readonly protections: readonly Protection[];
  /**
   * Protected names missing at a root: what the command leaves there is moved aside after the run,
   * through `via` (the name under its tree's descriptor here), before `fds` are closed.
   */
  readonly watched: readonly Watched[];
}

export type PlanResult = { readonly ok: true; readonly plan: SandboxPlan } | { readonly ok: false; readonly message: string };

/** A mount step; steps apply parents first, so a tmpfs never covers a later bind below it. */
interface MountStep {
  readonly dest: string;
  readonly args: readonly string[];
  /** What the init must find at `dest` once mounted: `=dev:ino` that inode, `!dev:ino` anything else. */
  readonly expect?: string | undefined;
}

export const SECCOMP_FD = 3;
/** The init writes "ready" here once confined; `sluice run` answers "go" once the grant is in place. */
export const HANDSHAKE_FD = 4;
/** The first descriptor number of the opened trees in bwrap (the init closes them all first thing). */
export const TREE_FD_BASE = 5;

/**
 * The plan. Opens the trees it shows (the caller closes `plan.fds`), and creates what git leaves in a
 * git directory where it is missing (caller-tree.ts: createMissing); the caller moves aside what the
 * command leaves at a watched name after the run (quarantine).
 */
export function planSandbox(spec: SandboxSpec): PlanResult {
  const env = sandboxEnv(spec);
  if (!env.ok) return env;
  // Never follow a symlink to a tree (review 2026-12-04 finding 4): one that a sandbox can write can be
  // pointed anywhere, and the checks below would judge the target while the caller named the link. Each
  // path is resolved once; what is opened (and checked again through its descriptor) is the path itself.
  const requested = [...(spec.writable.length > 0 ? spec.writable : [spec.cwd]).map((p) => ['--write', p] as const), ...spec.readable.map((p) => ['--read', p] as const)];
  for (const [flag, p] of requested) {
    const real = realOrSelf(p);
    if (real !== path.resolve(p)) return { ok: false, message: `${flag} ${p}: the path goes through a symlink (it leads to ${real}); pass the real path, so that what is checked is what is mounted` };
  }
  const writable = (spec.writable.length > 0 ? spec.writable : [spec.cwd]).map((p) => path.resolve(p));
  const readable = spec.readable.map((p) => path.resolve(p));
  const home = path.resolve(spec.home);
  for (const dir of writable) {
    if (dir === '/' || isWithin(home, dir)) return { ok: false, message: `refusing to make ${dir} writable: it holds your home directory (and its keys); run from a project directory or pass --write DIR` };
    if (!isDirectory(dir)) return { ok: false, message: `--write ${dir}: not a directory` };
  }
  for (const file of readable) if (!fs.existsSync(file)) return { ok: false, message: `--read ${file}: no such file or directory` };
  const ownSocket = realOrSelf(spec.grantSocket);
  for (const hidden of spec.hidden.map(realOrSelf).filter((h) => h !== ownSocket)) {
    const holder = writable.find((dir) => isWithin(hidden, dir));
    if (holder !== undefined && lstatOrNull(hidden) !== null) {
      return { ok: false, message: `refusing to make ${holder} writable: it holds ${hidden}, which is a running Sluice's (state, config, audit file, secret or sockets) and the command could rewrite or move it; pass --write a directory that does not hold it` };
    }
  }
  const fds: number[] = [];
  const close = (): void => fds.forEach((fd) => fs.closeSync(fd));
  const opened = openTrees([...readable.map((p) => ({ p, flag: '--read', isWritable: false })), ...writable.map((p) => ({ p, flag: '--write', isWritable: true }))], fds);
  if (!opened.ok) {
    close();
    return opened;
  }
  let grant: Opened['grant'] = null;
  if (spec.isGrantDirBound !== true) {
    const socket = openTree(realOrSelf(spec.grantSocket), '--grant-socket');
    if (!socket.ok || socket.tree.isDirectory) {
      if (socket.ok) fds.push(socket.tree.fd);
      close();
      return { ok: false, message: socket.ok ? `--grant-socket ${spec.grantSocket}: not a socket` : socket.message };
    }
    fds.push(socket.tree.fd);
    grant = { source: `/proc/self/fd/${TREE_FD_BASE + fds.length - 1}`, expect: `=${socket.tree.identity}` };
  }
  const rest = planView(spec, env.env, writable, readable, home, { ...opened, grant }, fds);
  if (!rest.ok) close();
  return rest;
}

interface TreeRequest {
  readonly p: string;
  readonly flag: string;
  readonly isWritable: boolean;
}

/**
 * Opens each tree once and binds its descriptor. A writable tree inside another is already shown by it
 * and not bound again, but opened all the same: its protected names and what the command leaves at its
 * watched ones are reached through its own descriptor, even if the command moves it and puts a link in
 * its place.
 */
function openTrees(requests: readonly TreeRequest[], fds: number[]): { readonly ok: true; readonly steps: MountStep[]; readonly trees: Map<string, TreeFds> } | { readonly ok: false; readonly message: string } {
  const steps: MountStep[] = [];
  const trees = new Map<string, TreeFds>();
  const writableRoots = requests.filter((r) => r.isWritable).map((r) => r.p);
  for (const { p, flag, isWritable } of requests) {
    const result = openTree(p, flag);
    if (!result.ok) return result;
    fds.push(result.tree.fd);
    trees.set(p, { own: result.tree.fd, child: TREE_FD_BASE + fds.length - 1 });
    if (isWritable && writableRoots.some((root) => root !== p && isWithin(p, root))) continue;
    const source = `/proc/self/fd/${TREE_FD_BASE + fds.length - 1}`;
    steps.push({ dest: p, args: [isWritable ? '--bind' : '--ro-bind', source, p], expect: `=${result.tree.identity}` });
  }
  return { ok: true, steps, trees };
}

/** An opened tree's descriptor here (`own`) and the number bwrap gets it as (`child`). */
interface TreeFds {
  readonly own: number;
  readonly child: number;
}

/** `p` as reached through the descriptor of the deepest opened tree that holds it, here or in bwrap. */
function throughTree(trees: ReadonlyMap<string, TreeFds>, p: string, side: keyof TreeFds): string {
  let best: string | null = null;
  for (const root of trees.keys()) if (isWithin(p, root) && (best === null || root.length > best.length)) best = root;
  const fds = best === null ? undefined : trees.get(best);
  return best === null || fds === undefined ? p : path.join(`/proc/self/fd/${fds[side]}`, path.relative(best, p));
}

interface Opened {
  readonly steps: readonly MountStep[];
  readonly trees: ReadonlyMap<string, TreeFds>;
  /** The grant socket, opened like a tree: another principal's socket swapped in is refused inside. */
  readonly grant: { readonly source: string; readonly expect: string } | null;
}

function planView(spec: SandboxSpec, env: Record<string, string>, writable: readonly string[], readable: readonly string[], home: string, opened: Opened, fds: readonly number[]): PlanResult {
  const treeSteps = opened.steps;
  const steps: MountStep[] = [];
  const visible: string[] = [];
  for (const tree of SYSTEM_TREES) {
    const stat = lstatOrNull(tree);
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
  steps.push(...treeSteps);
  visible.push(...readable, ...writable);
  const userTrees = [...readable, ...writable].filter(isDirectory);
  const scan = scanTrees(userTrees, spec.scanBudget ?? SCAN_BUDGET_ENTRIES, spec.hidden.map(realOrSelf));
  if (scan.isTruncated) {
    return { ok: false, message: `refusing to run: ${userTrees.join(', ')} hold more entries than sluice run checks for sockets and git directories (${spec.scanBudget ?? SCAN_BUDGET_ENTRIES}); pass a narrower --write or --read` };
  }
  const masks = planMasks(spec, visible, scan.sockets);
  if (!masks.ok) return masks;
  steps.push(...masks.steps);
  const protect = planProtections(writable, scan, (spec.unprotect ?? []).map((p) => path.resolve(spec.cwd, p)));
  if (!protect.ok) return protect;
  const isMasked = (p: string): boolean => masks.steps.some((m) => isWithin(p, m.dest));
  const protections = createMissing(protect.protections.filter((p) => !isMasked(p.path)), (p) => throughTree(opened.trees, p, 'own'));
  for (const p of protections) {
    // Through the opened tree's descriptor: the inode bound is the one identified here (finding 4).
    const identity = identityOf(throughTree(opened.trees, p.path, 'own'));
    const source = throughTree(opened.trees, p.path, 'child');
    if (identity !== null) steps.push({ dest: p.path, args: [p.mode === 'pin' ? '--bind' : '--ro-bind', source, p.path], expect: `=${identity}` });
  }
  // Parents first; at one depth a git directory's pin before what is bound inside it.
  steps.sort((a, b) => depth(a.dest) - depth(b.dest));

  const insideSocket = spec.isGrantDirBound === true ? `${SANDBOX_GRANT_DIR}/${path.basename(spec.grantSocket)}` : SANDBOX_GRANT_SOCKET;
  const grantMount = spec.isGrantDirBound === true || opened.grant === null ? ['--ro-bind', path.dirname(spec.grantSocket), SANDBOX_GRANT_DIR] : ['--ro-bind', opened.grant.source, SANDBOX_GRANT_SOCKET];
  if (spec.isGrantDirBound !== true && opened.grant !== null) steps.push({ dest: SANDBOX_GRANT_SOCKET, args: [], expect: opened.grant.expect });
  const cwd = realOrSelf(spec.cwd);
  const chdir = visible.some((root) => isWithin(cwd, root)) && !masks.steps.some((m) => isWithin(cwd, m.dest)) ? cwd : (writable[0] ?? home);
  const expectations = steps.flatMap((s) => (s.expect === undefined ? [] : [[s.dest, s.expect]]));
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
    '--', node, SANDBOX_INIT, String(spec.port), insideSocket, String(HANDSHAKE_FD), JSON.stringify(expectations), ...spec.command,
  ];
  const watched = protect.watched.filter((p) => !isMasked(p)).map((p) => ({ path: p, via: throughTree(opened.trees, p, 'own') }));
  return { ok: true, plan: { args, env, fds, protections, watched } };
}

type MaskResult = { readonly ok: true; readonly steps: readonly MountStep[] } | { readonly ok: false; readonly message: string };

/**
 * Sluice's own files and every live Unix socket under a visible tree are covered. A socket's whole
 * directory is covered (a state directory holds the admin socket, the ledger and other grants'
 * sockets, and new ones appear there later), unless that directory is itself a tree the caller named.
 * `scanned`: the socket files the walk found in the caller's trees, each covered where it is (a server
 * in another network namespace, or bound by a relative path, is missing from /proc/net/unix).
 */
function planMasks(spec: SandboxSpec, visible: readonly string[], scanned: readonly string[]): MaskResult {
  const masked = new Map<string, MountStep>();
  const devNull = identityOf('/dev/null');
  const mask = (target: string): string | null => {
    const real = realOrSelf(target);
    const stat = lstatOrNull(real);
    if (stat === null) return null;
    const exposed = visible.find((root) => isWithin(root, real));
    if (exposed !== undefined) return `refusing to show ${exposed}: it is or holds ${real}, which the command must not see (Sluice's state, config or sockets)`;
    if (!visible.some((root) => isWithin(real, root))) return null;
    const identity = identityOf(real) ?? '';
    if (stat.isDirectory()) masked.set(real, { dest: real, args: ['--tmpfs', real, '--remount-ro', real], expect: `!${identity}` });
    else masked.set(real, { dest: real, args: ['--ro-bind', '/dev/null', real], expect: devNull === null ? `!${identity}` : `=${devNull}` });
    return null;
  };
  for (const socket of scanned) {
    const refused = mask(socket);
    if (refused !== null) return { ok: false, message: refused };
  }
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
  if (lstatOrNull(at)?.isSocket() === true) return { dir: path.dirname(at) };
  while (at !== '/') {
    at = path.dirname(at);
    if (isDirectory(at)) return { dir: realOrSelf(at) };
  }
  return null;
}

/** The socket files directly in one directory. */
function socketsIn(dir: string): string[] {
  try {
    return fs.readdirSync(dir).map((name) => path.join(dir, name)).filter((file) => lstatOrNull(file)?.isSocket() === true);
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

function depth(p: string): number {
  return p === '/' ? 0 : p.split('/').length - 1;
}

function isDirectory(p: string): boolean {
  return lstatOrNull(p)?.isDirectory() === true;
}
