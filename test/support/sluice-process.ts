// Owns running the built CLI as a real `sluice start` child: the config written as YAML, the child in
// its own process group, ready once its JSON log on stderr names every listener of the config (and the
// admin API and metrics listener when the config has them), every wait bounded, and a kill of the whole
// group on stop, on cleanup (killSluiceProcesses) and when the worker exits. Needs `npm run build`.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { waitUntil, withTimeout } from './wait.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = path.join(REPO_ROOT, 'bin/sluice.js');

/** Signals the process group `child` leads (detached), or the child itself when it leads none; never throws. */
export function killGroup(child: ChildProcess | null | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child?.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // no such group: not detached, or gone already
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  }
}

/** The JSON lines (pino log, audit records) in `text`; other lines are passed over. */
export function logLines(text: string): Record<string, unknown>[] {
  return text.split('\n').flatMap((line) => {
    try {
      return line.startsWith('{') ? [JSON.parse(line) as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

/** The port of a logged `host:port` address. */
export const portOf = (address: unknown): number => Number(String(address).slice(String(address).lastIndexOf(':') + 1));

export interface SluiceProcessOptions {
  /** A config object (written as YAML to `configFile`) or the path of a YAML file (passed as it is). */
  readonly config: Record<string, unknown> | string;
  /** Where an object config is written; default `<cwd>/sluice.yaml`, or a temporary directory's. */
  readonly configFile?: string;
  readonly cwd?: string;
  /** The child's whole environment; default the runner's. */
  readonly env?: NodeJS.ProcessEnv;
  /** 'pipe' collects stdout (the audit stream when the config has no audit file) for stdout(). */
  readonly stdout?: 'ignore' | 'pipe';
  /** Wraps `node bin/sluice.js start --config FILE` (e.g. in `bash -c 'ulimit …; exec "$0" "$@"'`); it must exec. */
  readonly wrap?: (argv: readonly string[]) => [file: string, args: string[]];
  /** Bound on getting ready, in ms (default 20 s); past it the group is killed and start rejects. */
  readonly timeoutMs?: number;
  /** A label for errors (default `sluice start`). */
  readonly name?: string;
}

export interface SluiceProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The TCP port of the config's first listener. */
  readonly port: number;
  /** Settles with the exit code (null after a signal) once the child has exited. */
  readonly exited: Promise<number | null>;
  /** The logged address of a listener (default the first) or of the metrics listener (`'metrics'` when no listener has that name). */
  address(listener?: string): string;
  /** The TCP port of `address(listener)`. */
  portOf(listener: string): number;
  stderr(): string;
  stdout(): string;
  alive(): boolean;
  /** Signals the process group (default SIGTERM) and resolves with the exit code, bounded (default 10 s). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  /** SIGKILLs the process group and waits, bounded (default 5 s), for the exit. */
  kill9(timeoutMs?: number): Promise<void>;
}

const live = new Set<SluiceProcess>();
const tempDirs = new Set<string>();

/** SIGKILLs every child still running and waits (bounded) for each; call it in afterEach/afterAll. */
export async function killSluiceProcesses(): Promise<void> {
  const all = [...live];
  live.clear();
  await Promise.all(all.map((p) => p.kill9().catch(() => undefined)));
}
process.once('exit', () => {
  for (const p of live) killGroup(p.child);
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

interface Expected {
  readonly listeners: string[];
  readonly admin: boolean;
  readonly metrics: boolean;
}

function expected(config: Record<string, unknown>): Expected {
  const listeners = Array.isArray(config['listeners']) ? (config['listeners'] as { name?: unknown }[]).map((l) => String(l.name)) : [];
  const admin = config['admin'] as { listen?: unknown; metrics?: unknown } | undefined;
  return { listeners, admin: admin?.listen !== undefined, metrics: admin?.metrics !== undefined };
}

/** Starts `node bin/sluice.js start --config …` and resolves once it has logged every listener it was given. */
export async function startSluiceProcess(opts: SluiceProcessOptions): Promise<SluiceProcess> {
  const name = opts.name ?? 'sluice start';
  let file: string;
  let config: Record<string, unknown>;
  if (typeof opts.config === 'string') {
    file = opts.config;
    config = parse(fs.readFileSync(path.resolve(opts.cwd ?? '.', file), 'utf8')) as Record<string, unknown>;
  } else {
    config = opts.config;
    if (opts.configFile !== undefined) file = opts.configFile;
    else if (opts.cwd !== undefined) file = path.join(opts.cwd, 'sluice.yaml');
    else {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-process-'));
      tempDirs.add(dir);
      file = path.join(dir, 'sluice.yaml');
    }
    fs.writeFileSync(file, stringify(config));
  }
  const want = expected(config);
  const argv = [process.execPath, BIN, 'start', '--config', file];
  const [command, args] = opts.wrap?.(argv) ?? [argv[0]!, argv.slice(1)];
  const child = spawn(command, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', opts.stdout ?? 'ignore', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  let done = false;
  const exited = new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null));
    child.once('exit', (code) => resolve(code));
  }).finally(() => (done = true));
  const addresses = new Map<string, string>();
  let metrics: string | undefined;
  let adminUp = false;
  const ready = (): boolean => {
    if (done) throw new Error(`${name} exited before it was ready`);
    for (const l of logLines(stderr)) {
      if (l['msg'] === 'listening' && typeof l['listener'] === 'string') addresses.set(l['listener'], String(l['address']));
      if (l['msg'] === 'admin API listening') adminUp = true;
      if (typeof l['metrics'] === 'string') metrics = l['metrics'];
    }
    const listeners = want.listeners.length === 0 ? addresses.size > 0 : want.listeners.every((n) => addresses.has(n));
    return listeners && (!want.admin || adminUp) && (!want.metrics || metrics !== undefined);
  };
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const address = (listener?: string): string => {
    const key = listener ?? want.listeners[0] ?? [...addresses.keys()][0] ?? '';
    const found = addresses.get(key) ?? (key === 'metrics' ? metrics : undefined);
    if (found === undefined) throw new Error(`${name}: no address logged for ${key}`);
    return found;
  };
  const kill9 = async (ms = 5000): Promise<void> => {
    live.delete(proc);
    killGroup(child);
    await withTimeout(exited, ms, `${name} dies`);
  };
  const proc: SluiceProcess = {
    child,
    pid: child.pid ?? 0,
    get port() {
      return portOf(address());
    },
    exited,
    address,
    portOf: (listener) => portOf(address(listener)),
    stderr: () => stderr,
    stdout: () => stdout,
    alive: () => !done,
    async stop(signal = 'SIGTERM', ms = 10_000) {
      killGroup(child, signal);
      const code = await withTimeout(exited, ms, `${name} exits on ${signal}`);
      live.delete(proc);
      return code;
    },
    kill9,
  };
  live.add(proc);
  try {
    await waitUntil(ready, { timeoutMs, label: `${name}: every listener logged` });
  } catch (error) {
    await kill9().catch(() => undefined);
    throw new Error(`${(error as Error).message}; stderr: ${stderr}`, { cause: error });
  }
  return proc;
}
