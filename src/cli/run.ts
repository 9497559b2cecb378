// `sluice run`: runs a command under bubblewrap so that its only authority is one grant (ADR 0013).
// With --destination the run issues that grant itself and revokes it when the command ends, however it
// ends. Fail closed: when confinement cannot be had, the command never runs and the exit status is 125.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Duplex, Writable } from 'node:stream';
import { quarantine } from './caller-tree.js';
import { closeInheritedDescriptors, stdioRefusal } from './descriptors.js';
import { HANDSHAKE_FD, SECCOMP_FD, TREE_FD_BASE, planSandbox, type SandboxPlan, type SandboxSpec } from './sandbox-plan.js';
import { buildSeccompFilter, isSeccompArchSupported } from './seccomp-filter.js';
import { beginRunGrant, type PendingRunGrant, type RunGrant, type RunGrantRequest, type RunGrantResult } from './run-grant.js';

export const EXIT_CONFINEMENT_FAILED = 125;
/** How long a cancelled start may take to wind down before bubblewrap is killed. */
const CANCEL_GRACE_MS = 5_000;
const SIGNAL_NUMBERS: Readonly<Record<string, number>> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

/** What `sluice run` was asked for; the plan's own fields keep their meaning (sandbox-plan.ts). */
export interface RunOptions extends Pick<SandboxSpec, 'port' | 'command' | 'cwd' | 'home' | 'envFlags' | 'callerEnv' | 'hidden' | 'node' | 'initScript' | 'unprotect'> {
  /** A grant socket the supervisor issued; absent when `grant` asks for a run-owned grant. */
  readonly grantSocket?: string | undefined;
  readonly grant?: RunGrantRequest | undefined;
  readonly write: readonly string[];
  readonly read: readonly string[];
  readonly arch: string;
  readonly bwrap?: string | undefined;
}

export interface RunIo {
  stderr(text: string): void;
  /** Registers the handler for SIGTERM, SIGINT and SIGHUP sent to `sluice run` (main.ts owns process). */
  onSignal(handler: (signal: string) => void): void;
}

/** Why confinement is unavailable on this machine, or null. Tests use it to skip outside CI. */
export function confinementUnavailable(bwrap = 'bwrap'): string | null {
  const probe = spawnSync(bwrap, ['--unshare-all', '--unshare-user', '--disable-userns', '--ro-bind', '/', '/', '--', 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error !== undefined) return `cannot run ${bwrap} (install the Debian package bubblewrap): ${probe.error.message}`;
  if (probe.status !== 0) return `bubblewrap cannot create namespaces here (are user namespaces disabled?): ${probe.stderr.trim()}`;
  return null;
}

/** Runs the command confined; resolves with its exit status, or 125 when it could not be confined. */
export async function runConfined(options: RunOptions, io: RunIo): Promise<number> {
  const refuse = (message: string): number => {
    io.stderr(`sluice run: ${message}; refusing to run the command unconfined\n`);
    return EXIT_CONFINEMENT_FAILED;
  };
  if (!isSeccompArchSupported(options.arch)) return refuse(`no seccomp filter for architecture ${options.arch}`);
  // Start from nothing: what the caller's process held is not the command's (review 2026-12-04 finding 1).
  const left = closeInheritedDescriptors();
  if (left.length > 0) return refuse(`cannot close inherited descriptors ${left.join(', ')}`);
  const stdio = stdioRefusal();
  if (stdio !== null) return refuse(stdio);
  const state: SandboxState = { signal: null, cancel: null };
  io.onSignal((signal) => {
    state.signal ??= signal;
    // The sandbox's processes die with bwrap (--die-with-parent makes its init follow it).
    state.cancel?.();
  });
  let grant: RunGrant | null = null;
  let pending: PendingRunGrant | null = null;
  try {
    // A run-owned grant is issued while the sandbox boots; the command waits for it (the handshake).
    pending = options.grant === undefined ? null : beginRunGrant(options.grant);
    const socket = pending?.socket ?? options.grantSocket;
    const issued: Promise<RunGrantResult | null> = pending === null ? Promise.resolve(null) : pending.issued;
    void issued.then((r) => (grant = r?.ok === true ? r.grant : null));
    if (pending === null && (socket === undefined || !fs.statSync(socket, { throwIfNoEntry: false })?.isSocket())) return refuse(`no grant socket at ${socket ?? '(none given)'}`);
    const planned = planSandbox({ ...options, grantSocket: socket ?? '', isGrantDirBound: pending !== null, writable: options.write, readable: options.read, liveSockets: listUnixSockets() });
    if (!planned.ok) {
      await issued;
      return refuse(planned.message);
    }
    let outcome: SandboxOutcome;
    let result: RunGrantResult | null;
    try {
      const sandbox = startSandbox(options.bwrap ?? 'bwrap', planned.plan, buildSeccompFilter(options.arch), state);
      result = await issued;
      if (result?.ok === false) sandbox.cancel();
      else sandbox.go();
      outcome = await sandbox.outcome;
    } finally {
      // The sandbox is gone (its PID namespace with it); through the trees' descriptors, still open.
      const moved = quarantine(planned.plan.watched);
      for (const fd of planned.plan.fds) fs.closeSync(fd);
      if (moved.length > 0) {
        io.stderr(`sluice run: the command created names your own tools would run or obey; moved aside (review them before restoring):\n${moved.map((m) => `  ${m}\n`).join('')}`);
      }
    }
    if (state.signal !== null) return 128 + (SIGNAL_NUMBERS[state.signal] ?? 0);
    if (result?.ok === false) return refuse(result.message);
    if (outcome.error !== null) return refuse(outcome.error);
    if (!outcome.isReady) return refuse('bubblewrap could not set up the sandbox (its message is above; user namespaces may be disabled)');
    return outcome.status;
  } finally {
    const owned = grant as RunGrant | null;
    if (owned !== null) {
      const refused = await owned.refusals();
      if (refused !== null) io.stderr(refused);
      const revoked = await owned.revoke();
      if (revoked !== null) io.stderr(`sluice run: could not revoke the run's grant ${owned.id}: ${revoked}\n`);
    }
    pending?.discard();
  }
}

interface SandboxOutcome {
  readonly isReady: boolean;
  readonly status: number;
  readonly error: string | null;
}

interface SandboxState {
  signal: string | null;
  cancel: (() => void) | null;
}

interface Sandbox {
  /** Lets the command start (the grant is in place). */
  go(): void;
  /**
   * Ends the sandbox: before its command starts, the init reads "stop" (or the handshake's end) and
   * exits, and bwrap with it; after, bwrap is killed and the command dies with it.
   */
  cancel(): void;
  readonly outcome: Promise<SandboxOutcome>;
}

function startSandbox(bwrap: string, plan: SandboxPlan, filter: Buffer, state: SandboxState): Sandbox {
  const stdio: ('inherit' | 'pipe' | number)[] = ['inherit', 'inherit', 'inherit'];
  stdio[SECCOMP_FD] = 'pipe';
  stdio[HANDSHAKE_FD] = 'pipe';
  plan.fds.forEach((fd, i) => (stdio[TREE_FD_BASE + i] = fd));
  const child = spawn(bwrap, plan.args, { stdio, env: plan.env });
  const handshake = child.stdio[HANDSHAKE_FD] as Duplex | null;
  let isReady = false;
  handshake?.once('data', () => (isReady = true));
  handshake?.on('error', () => undefined);
  child.stdio[SECCOMP_FD]?.on('error', () => undefined);
  (child.stdio[SECCOMP_FD] as Writable | null)?.end(filter);
  const outcome = new Promise<SandboxOutcome>((resolve) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      resolve({ isReady: false, status: EXIT_CONFINEMENT_FAILED, error: error.code === 'ENOENT' ? `${bwrap} not found: install bubblewrap (Debian package bubblewrap)` : `cannot start ${bwrap}: ${error.message}` }),
    );
    child.once('close', (code, signal) => resolve({ isReady, status: code ?? 128 + (signal === null ? 0 : (os.constants.signals[signal] ?? 0)), error: null }));
  });
  let hasGone = false;
  let fallback: NodeJS.Timeout | null = null;
  void outcome.then(() => fallback !== null && clearTimeout(fallback));
  const cancel = (): void => {
    if (hasGone || handshake === null || handshake === undefined) {
      child.kill('SIGKILL');
      return;
    }
    // Before the command starts, the init is told to stop and bubblewrap ends with it. A SIGKILL during
    // bwrap's set-up can orphan its inner process before --die-with-parent is armed, holding the
    // caller's stderr; and the init, seeing the handshake vanish, would add a second message to the
    // run's own (UX review 2026-12-04 finding 7). The kill stays as a bounded fallback.
    handshake.end('stop\n');
    fallback ??= setTimeout(() => child.kill('SIGKILL'), CANCEL_GRACE_MS);
  };
  state.cancel = cancel;
  const go = (): void => {
    hasGone = true;
    handshake?.write('go\n');
  };
  return { go, cancel, outcome };
}

/**
 * Paths of the Unix sockets bound in every network namespace a process here lives in (/proc/net/unix
 * lists only its reader's namespace, proc(5)): Sluice's admin socket and every grant's socket among
 * them, which the plan masks wherever the sandbox could see them. A socket bound by a relative path
 * (listed so) cannot be placed from here: the walk of the shown trees finds it (tree-scan.ts).
 */
export function listUnixSockets(proc = '/proc'): string[] {
  const tables = new Map<string, string>([['self', `${proc}/net/unix`]]);
  let pids: string[] = [];
  try {
    pids = fs.readdirSync(proc).filter((name) => /^\d+$/.test(name));
  } catch {
    pids = [];
  }
  for (const pid of pids) {
    try {
      const ns = fs.readlinkSync(`${proc}/${pid}/ns/net`);
      if (!tables.has(ns)) tables.set(ns, `${proc}/${pid}/net/unix`);
    } catch {
      // another user's process, or gone
    }
  }
  const paths = new Set<string>();
  for (const table of tables.values()) for (const file of socketPathsIn(table)) paths.add(file);
  return [...paths];
}

function socketPathsIn(table: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(table, 'utf8');
  } catch {
    return [];
  }
  const paths: string[] = [];
  for (const line of text.split('\n').slice(1)) {
    const file = line.trim().split(/\s+/).slice(7).join(' ');
    if (file.startsWith('/')) paths.push(path.normalize(file));
  }
  return paths;
}
