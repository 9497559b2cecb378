// What the real-peer fixtures (squid.ts, kdc.ts) share to run a server binary: find it, wait for its
// port, stop it within bounds, and kill it if the test process exits without closing it.
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, rmSync } from 'node:fs';
import net from 'node:net';
import { delimiter, join } from 'node:path';

const STOP_TIMEOUT_MS = 5000;
const KILL_TIMEOUT_MS = 2000;

export function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable among `before`, then `name` in each PATH directory, then `after`. */
export function findExecutable(name: string, before: readonly string[] = [], afterDirs: readonly string[] = []): string | undefined {
  const dirs = (process.env['PATH'] ?? '').split(delimiter).filter((d) => d.length > 0);
  for (const candidate of [...before, ...[...dirs, ...afterDirs].map((d) => join(d, name))]) {
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** Whether 127.0.0.1:`port` accepts a connection within `timeoutMs`. */
export function tryConnect(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, timeoutMs);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

/** SIGTERM, a bounded wait, then SIGKILL; throws if even that does not end it. */
export async function stopChild(child: ChildProcess, name: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, STOP_TIMEOUT_MS)) return;
  child.kill('SIGKILL');
  if (!(await waitForExit(child, KILL_TIMEOUT_MS))) {
    throw new Error(`${name} pid ${String(child.pid)} did not exit after SIGKILL`);
  }
}

// Last-resort cleanup if a test process exits without calling close().
const live = new Map<ChildProcess, string>();
let exitHookInstalled = false;

/** Kills `child` and removes `dir` when the test process exits, unless `forget` ran first. */
export function registerLive(child: ChildProcess, dir: string): void {
  live.set(child, dir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const [proc, path] of live) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      rmSync(path, { recursive: true, force: true });
    }
  });
}

export function forget(child: ChildProcess): void {
  live.delete(child);
}
