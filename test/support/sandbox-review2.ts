// Owns what the escape tests of the second review (review 2026-12-04 findings 1-5) share: scratch
// directories that the identity under test owns, a plain Sluice with one grant socket (its config,
// state and admin socket outside every tree the command sees, unless a test puts them inside on
// purpose), host-side commands run as that identity (git, the descriptor wrapper), the admin API over
// its Unix socket, a snapshot of files to prove the host saw no change, and the verdict lines that
// the Python attempts inside print (ATTEMPT name BLOCKED|ESCAPED …, CHECK name OK|FAIL …, END).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { asIdentity, callerEnv, startSluiceRun, track, type Identity, type RunResult } from './sandbox.js';
import { reportLines } from './sandbox-worst-case.js';
import { startSluiceProcess, type SluiceProcess } from './sluice-process.js';

export { BIN } from './sandbox.js';
/** The host's PATH; inside, /usr is the host's own read-only, so `python3` and `git` are the same binaries. */
export const HOST_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin';

const scratch = new Set<string>();

/** A fresh directory under the system temp dir, 0755 so another uid can reach what a test gives it. */
export function scratchDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sluice-r2-${prefix}-`));
  fs.chmodSync(dir, 0o755);
  scratch.add(dir);
  return dir;
}

/** Removes every scratch directory (afterAll). */
export function removeScratch(): void {
  for (const dir of scratch) fs.rmSync(dir, { recursive: true, force: true });
  scratch.clear();
}

export function describeRun(run: RunResult): string {
  return `sluice run exited ${run.code ?? run.signal}${run.timedOut ? ' (killed: timed out)' : ''}; stdout: ${run.stdout.slice(0, 3000) || '(empty)'}; stderr: ${run.stderr.slice(0, 2000) || '(empty)'}`;
}

export interface RunOpts {
  readonly cwd: string;
  readonly identity: Identity;
  readonly home: string;
  readonly timeoutMs?: number;
}

/** `node bin/sluice.js run ARGS` as `identity`, with the caller's basic environment and HOME. */
export function sluiceRun(args: readonly string[], opts: RunOpts): Promise<RunResult> {
  return startSluiceRun(args, { cwd: opts.cwd, env: callerEnv(opts.home), identity: opts.identity, timeoutMs: opts.timeoutMs ?? 30_000 }).result;
}

/**
 * Any argv as `identity`, in its own process group, killed by killAll() (sandbox.ts) and after
 * `timeoutMs`. For a host wrapper that execs `sluice run` (descriptors), or a host server.
 */
export function startCommand(argv: readonly string[], opts: { cwd: string; env: Record<string, string>; identity: Identity; timeoutMs: number }): {
  readonly pid: number;
  readonly result: Promise<RunResult>;
  stdout(): string;
  stderr(): string;
} {
  const [file, args] = asIdentity(opts.identity, argv);
  const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const result = new Promise<RunResult>((resolve, reject) => {
    let timedOut = false;
    const kill = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      kill();
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
  return { pid: child.pid ?? 0, result, stdout: () => stdout, stderr: () => stderr };
}

/** A host tool (git, mkfifo) as `identity`, synchronously, bounded to 20 s; throws unless it exits 0. */
export function hostTool(identity: Identity, argv: readonly string[], opts: { cwd: string; home: string; allowFailure?: boolean }): { status: number | null; stdout: string; stderr: string } {
  const [file, args] = asIdentity(identity, argv);
  const r = spawnSync(file, args, { cwd: opts.cwd, env: { ...callerEnv(opts.home), GIT_CONFIG_NOSYSTEM: '1' }, encoding: 'utf8', timeout: 20_000 });
  const out = { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  if (opts.allowFailure !== true && r.status !== 0) throw new Error(`${argv.join(' ')} in ${opts.cwd} exited ${r.status}: ${out.stderr}${r.error?.message ?? ''}`);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// A plain Sluice: one grant socket (grant a, which the command barely needs: the attacks here are on
// the filesystem), admin on a Unix socket; every path absolute under CONFIG_DIR unless a test says.

export interface GrantSluice {
  readonly configDir: string;
  readonly grantSocket: string;
  readonly adminSocket: string;
  readonly proc: SluiceProcess;
  admin(method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: unknown }>;
}

/** The default config for CONFIG_DIR (run/a.sock, adm/admin.sock, state/); `extra` replaces top-level keys. */
export function grantConfig(configDir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listeners: [{ name: 'a-sock', listen: `unix:${path.join(configDir, 'run/a.sock')}`, grant: 'a' }],
    admin: { listen: `unix:${path.join(configDir, 'adm/admin.sock')}` },
    state: path.join(configDir, 'state'),
    grants: [{ id: 'a', destinations: ['http://allowed.test:1'] }],
    ...extra,
  };
}

/**
 * `node bin/sluice.js start --config CONFIG_FILE` from `cwd` (default CONFIG_DIR), as root (Sluice's
 * user here). The grant socket is given to `identity` so that it alone can be connected to by it.
 */
export async function startGrantSluice(opts: { configDir: string; cwd?: string; config?: Record<string, unknown>; configFile?: string; identity: Identity }): Promise<GrantSluice> {
  const { configDir } = opts;
  fs.mkdirSync(path.join(configDir, 'run'), { recursive: true, mode: 0o755 });
  fs.mkdirSync(path.join(configDir, 'adm'), { recursive: true, mode: 0o700 });
  const config = opts.config ?? grantConfig(configDir);
  const proc = await startSluiceProcess({
    config,
    configFile: opts.configFile ?? path.join(configDir, 'sluice.yaml'),
    cwd: opts.cwd ?? configDir,
    env: { PATH: HOST_PATH, LANG: 'C.UTF-8' },
  });
  const listen = String((config['admin'] as { listen: string }).listen).slice('unix:'.length);
  const adminSocket = path.resolve(opts.cwd ?? configDir, listen);
  const grantListen = String((config['listeners'] as { listen: string }[])[0]?.listen).slice('unix:'.length);
  const grantSocket = path.resolve(opts.cwd ?? configDir, grantListen);
  if (opts.identity.uid !== null) fs.lchownSync(grantSocket, opts.identity.uid, opts.identity.uid);
  return { configDir, grantSocket, adminSocket, proc, admin: (m, p, b) => adminRequest(adminSocket, m, p, b) };
}

/** One request over an admin Unix socket: status and parsed JSON body. */
export function adminRequest(socketPath: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) };
    const req = http.request({ socketPath, method, path: urlPath, timeout: 5000, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) });
        } catch {
          resolve({ status: res.statusCode ?? 0, body: text });
        }
      });
    });
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error(`admin ${method} ${urlPath}: no answer within 5000 ms`)));
    req.end(data);
  });
}

// ---------------------------------------------------------------------------------------------------
// What a path is on the host, without ever opening a FIFO or following a symlink: a snapshot to
// compare before and after a run.

export function fileState(p: string): string {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return 'absent';
  }
  if (st.isSymbolicLink()) return `symlink -> ${fs.readlinkSync(p)}`;
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isDirectory()) return `dir [${fs.readdirSync(p).sort().map((e) => `${e}=${fileState(path.join(p, e))}`).join(', ')}]`;
  if (st.isFile()) return `file ${st.size} bytes sha256 ${createHash('sha256').update(fs.readFileSync(p)).digest('hex').slice(0, 16)}`;
  return 'other';
}

export function snapshot(paths: readonly string[]): Record<string, string> {
  return Object.fromEntries(paths.map((p) => [p, fileState(p)]));
}

// ---------------------------------------------------------------------------------------------------
// Attempts made inside with python3: each prints one verdict line. An attempt function returns
// (any value: it worked, so ESCAPED with that value) or raises (BLOCKED with the error). `run(argv)`
// raises unless the program exits 0. `check` is the same for what must work (OK or FAIL).

export const PY_PRELUDE = String.raw`
import errno, json, os, socket, subprocess, sys
def _why(e):
    if isinstance(e, OSError) and e.errno is not None:
        return errno.errorcode.get(e.errno, str(e.errno)) + ' ' + str(e.filename or '')
    return type(e).__name__ + ': ' + str(e)[:200]
def attempt(name, fn):
    try:
        r = fn()
    except BaseException as e:
        print('ATTEMPT %s BLOCKED %s' % (name, _why(e)), flush=True)
        return
    print('ATTEMPT %s ESCAPED %s' % (name, repr(r)[:300]), flush=True)
def check(name, fn):
    try:
        r = fn()
    except BaseException as e:
        print('CHECK %s FAIL %s' % (name, _why(e)), flush=True)
        return
    print('CHECK %s OK' % name, flush=True)
def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20, **kw)
    if p.returncode != 0:
        raise RuntimeError('exit %d: %s' % (p.returncode, (p.stderr or p.stdout).strip()[:200]))
    return p.stdout.strip()[:200] or 'exit 0'
def write(p, text='x\n', mode='a'):
    with open(p, mode) as f:
        f.write(text)
    return 'wrote ' + p
def read(p):
    with open(p, 'rb') as f:
        data = f.read()
    if data == b'':
        raise RuntimeError('empty')
    return data[:120]
def connect(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(p)
        s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        return 'connected to ' + p
    finally:
        s.close()
`;

export interface Verdicts {
  /** name → "BLOCKED …" | "ESCAPED …" */
  readonly attempts: ReadonlyMap<string, string>;
  /** name → "OK" | "FAIL …" */
  readonly checks: ReadonlyMap<string, string>;
  readonly ended: boolean;
  readonly summary: string;
}

export function verdicts(run: RunResult): Verdicts {
  const { verdicts: attempts, checks } = reportLines(run.stdout, 'ATTEMPT');
  return { attempts, checks, ended: /^END$/m.test(run.stdout), summary: describeRun(run) };
}

/**
 * A writable tree holding a running Sluice's files is refused before the command runs: exit 125, the
 * tree and whichever of its Sluice files was found first named, and `marker` (the command's) absent.
 */
export function expectWritableRefused(r: RunResult, dir: string, marker: string): void {
  expect(r.code, describeRun(r)).toBe(125);
  expect(r.stderr, describeRun(r)).toMatch(new RegExp(`refusing to make ${escapeRe(dir)} writable: it holds ${escapeRe(dir)}/\\S+, which is a running Sluice's`));
  expect(fileState(marker)).toBe('absent');
}

/** The whole line, so that a failing expectation prints what happened (and the run's stderr if absent). */
export function attemptLine(v: Verdicts, name: string): string {
  return `ATTEMPT ${name} ${v.attempts.get(name) ?? `(no line: ${v.summary})`}`;
}

export function checkLine(v: Verdicts, name: string): string {
  return `CHECK ${name} ${v.checks.get(name) ?? `(no line: ${v.summary})`}`;
}

/** For a regular expression built from a host path. */
export function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
