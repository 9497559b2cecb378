// Owns how the `sluice run` tests start the real CLI: as the runner or as another uid (setpriv), in
// its own process group, with exactly the environment given and a hard timeout that SIGKILLs the group;
// and when they skip (bwrap missing, never under CI). The escape suite's fixtures: sandbox-worst-case.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, killGroup } from './sluice-process.js';

export { BIN, REPO_ROOT } from './sluice-process.js';
/** Outside the container's own users; nothing else runs as this uid. */
export const UNPRIVILEGED_UID = 21001;

function onPath(name: string): string | undefined {
  for (const dir of ['/usr/bin', '/usr/sbin', '/bin', ...(process.env.PATH ?? '').split(path.delimiter)]) {
    const file = path.join(dir, name);
    if (dir !== '' && fs.existsSync(file)) return file;
  }
  return undefined;
}

/**
 * Why these tests cannot run here, or null. Under CI=true there is never a reason: a CI machine without
 * bubblewrap must fail them, not skip them (as the Squid tests do).
 */
export function sandboxSkipReason(): string | null {
  if (process.env.CI === 'true') return null;
  if (onPath('bwrap') === undefined) return 'bwrap is not installed (Debian package bubblewrap)';
  return null;
}

/** Who runs `sluice run`: the test runner itself (uid null), or another uid through setpriv. */
export interface Identity {
  readonly label: string;
  readonly uid: number | null;
}

/** Root and uid 21001 when the runner is root; otherwise only the runner (it cannot switch uid). */
export function identities(): Identity[] {
  const uid = process.getuid?.() ?? -1;
  if (uid !== 0) return [{ label: `the test runner (uid ${uid})`, uid: null }];
  if (onPath('setpriv') === undefined) {
    console.log('sandbox tests: setpriv is missing, so only root runs them');
    return [{ label: 'root', uid: null }];
  }
  return [
    { label: 'root', uid: null },
    { label: `uid ${UNPRIVILEGED_UID}`, uid: UNPRIVILEGED_UID },
  ];
}

/** argv run as `identity`: through `setpriv`, which execs, so the pid is the command's own. */
export function asIdentity(identity: Identity, argv: readonly string[]): [string, string[]] {
  if (identity.uid === null) return [argv[0] ?? '', argv.slice(1)];
  return ['setpriv', [`--reuid=${identity.uid}`, `--regid=${identity.uid}`, '--clear-groups', ...argv]];
}

/** Makes `paths` (recursively) belong to `identity`, so that only the sandbox stands between it and them. */
export function giveTo(identity: Identity, ...paths: string[]): void {
  if (identity.uid === null) return;
  const uid = identity.uid;
  const walk = (p: string): void => {
    fs.lchownSync(p, uid, uid);
    if (fs.lstatSync(p).isDirectory()) for (const entry of fs.readdirSync(p)) walk(path.join(p, entry));
  };
  for (const p of paths) walk(p);
}

// ---------------------------------------------------------------------------------------------------
// Running the real CLI. Every child leads its own process group and is SIGKILLed (group and all) on
// timeout or when the worker exits; bwrap's --die-with-parent takes the sandbox with it.

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

export interface SluiceRun {
  readonly child: ChildProcess;
  readonly result: Promise<RunResult>;
  stdout(): string;
  /** Resolves once stdout contains `text`; rejects if the run ends first or after `timeoutMs`. */
  waitForOutput(text: string, timeoutMs?: number): Promise<void>;
}

const live = new Set<ChildProcess>();

/** Puts a child this file did not start (a victim process) under the same kill-on-exit rule. */
export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
}

/** SIGKILLs every child still running (sluice run, victims). Call it in afterAll. */
export function killAll(): void {
  for (const child of live) killGroup(child);
  live.clear();
}
process.once('exit', killAll);

export interface SluiceRunOptions {
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly identity?: Identity;
  readonly timeoutMs?: number;
}

/** Starts `node bin/sluice.js run ARGS` with exactly `env` (nothing of the runner's environment). */
export function startSluiceRun(args: readonly string[], opts: SluiceRunOptions): SluiceRun {
  const [file, argv] = asIdentity(opts.identity ?? { label: 'runner', uid: null }, [process.execPath, BIN, 'run', ...args]);
  const child = spawn(file, argv, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let stdout = '';
  let stderr = '';
  const waiters = new Set<() => void>();
  child.stdout?.on('data', (c: Buffer) => {
    stdout += c.toString('utf8');
    for (const w of waiters) w();
  });
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const result = new Promise<RunResult>((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      live.delete(child);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      killGroup(child);
      live.delete(child);
      if (timedOut) stderr += `\n[sluice run killed after ${timeoutMs} ms]`;
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
  const waitForOutput = (text: string, ms = 20_000): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!stdout.includes(text)) return;
        done();
        resolve();
      };
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no "${text}" from sluice run within ${ms} ms; stdout: ${stdout} stderr: ${stderr}`));
      }, ms);
      waiters.add(check);
      void result.then((r) => {
        if (stdout.includes(text)) return;
        done();
        reject(new Error(`sluice run ended (code ${r.code}, signal ${r.signal}) before "${text}"; stdout: ${stdout} stderr: ${stderr}`));
      });
      check();
    });
  return { child, result, stdout: () => stdout, waitForOutput };
}

/** The caller's environment: the basics, a HOME, and `extra` (secrets, T_* values). */
export function callerEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', HOME: home, LANG: 'C.UTF-8', TERM: 'dumb', ...extra };
}
