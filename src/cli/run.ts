// `sluice run`: starts a command in a new network namespace that has only loopback, with `sluice bridge`
// inside relaying 127.0.0.1:<port> to a grant's Unix socket, and the proxy variables pointing there.
// Fail closed: when a namespace cannot be made, or it is not loopback-only, the command never runs.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

export const EXIT_CONFINEMENT_FAILED = 125;

export interface RunOptions {
  readonly grantSocket: string;
  readonly port: number;
  readonly command: readonly string[];
  /** The node binary and the sluice entry script, to start the inner half inside the namespace. */
  readonly node: string;
  readonly bin: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly isRoot: boolean;
}

/** unshare arguments for a network namespace: as root, or as a user with a user namespace. */
function unshareArgs(isRoot: boolean): string[] {
  return isRoot ? ['--net', '--'] : ['--user', '--map-root-user', '--net', '--'];
}

export function canCreateNamespace(isRoot: boolean): string | null {
  const probe = spawnSync('unshare', [...unshareArgs(isRoot), 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error !== undefined) return `cannot run unshare: ${probe.error.message}`;
  if (probe.status !== 0) return `cannot create a network namespace: ${(probe.stderr || `unshare exited ${probe.status ?? 'on a signal'}`).trim()}`;
  return null;
}

/** The outer half: checks, then re-executes `sluice __sandbox-init` inside a fresh namespace. */
export function runInNamespace(options: RunOptions, stderr: (s: string) => void): Promise<number> {
  if (!fs.existsSync(options.grantSocket)) {
    stderr(`sluice run: no grant socket at ${options.grantSocket}\n`);
    return Promise.resolve(EXIT_CONFINEMENT_FAILED);
  }
  const refused = canCreateNamespace(options.isRoot);
  if (refused !== null) {
    stderr(`sluice run: ${refused}; refusing to run the command unconfined\n`);
    return Promise.resolve(EXIT_CONFINEMENT_FAILED);
  }
  const inner = [options.bin, '__sandbox-init', '--grant-socket', options.grantSocket, '--port', String(options.port), '--', ...options.command];
  const child = spawn('unshare', [...unshareArgs(options.isRoot), options.node, ...inner], { stdio: 'inherit', env: { ...options.env } });
  return new Promise((resolve) => {
    child.once('error', (error) => {
      stderr(`sluice run: ${error.message}\n`);
      resolve(EXIT_CONFINEMENT_FAILED);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128 + 9)));
  });
}

/** Inside the namespace: loopback up, nothing else there, or the command does not run. */
export function prepareNamespace(): string | null {
  const up = spawnSync('ip', ['link', 'set', 'lo', 'up'], { encoding: 'utf8', timeout: 10_000 });
  if (up.status !== 0) return `cannot bring loopback up in the namespace: ${(up.stderr ?? '').trim() || (up.error?.message ?? 'ip failed')}`;
  // /sys/class/net shows the host's sysfs unless remounted; ask the namespace itself.
  const links = spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8', timeout: 10_000 });
  if (links.status !== 0) return 'cannot list the namespace interfaces';
  const interfaces = links.stdout
    .split('\n')
    .map((line) => /^\d+:\s*([^:@\s]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && name !== 'lo');
  if (interfaces.length > 0) return `the namespace has interfaces other than loopback (${interfaces.join(', ')})`;
  return null;
}

/** The environment the command gets: every proxy variable names the bridge, and nothing bypasses it. */
export function sandboxEnv(env: Readonly<Record<string, string | undefined>>, port: number): Record<string, string> {
  const proxy = `http://127.0.0.1:${port}`;
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && !/_proxy$/i.test(key)) out[key] = value;
  for (const name of ['http_proxy', 'https_proxy', 'all_proxy']) {
    out[name] = proxy;
    out[name.toUpperCase()] = proxy;
  }
  out['no_proxy'] = '';
  out['NO_PROXY'] = '';
  return out;
}

export function runCommand(command: readonly string[], env: Record<string, string>): Promise<number> {
  const [file, ...args] = command;
  if (file === undefined) return Promise.resolve(EXIT_CONFINEMENT_FAILED);
  const child = spawn(file, args, { stdio: 'inherit', env });
  return new Promise((resolve) => {
    child.once('error', () => resolve(127));
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}
