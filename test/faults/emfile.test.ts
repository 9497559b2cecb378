// Fault: Sluice runs out of file descriptors (EMFILE; issue #5, item 3). A real `sluice start` child
// whose descriptor limit is lowered to 64 once it listens is filled with tunnels until it cannot accept
// or dial. It must stay up, refuse the hop it cannot dial with a recorded reason (dial_unreachable with
// EMFILE in the audit detail) instead of crashing, give every descriptor back once clients close, and
// answer again. Linux only (prlimit, /proc/<pid>/fd).
//
// Why not `bash -c 'ulimit -n 64; exec node …'`: Node's ESM loader reads the dependency graph (zod's
// locales alone are ~50 files) concurrently and dies with EMFILE before Sluice runs. So the child starts
// under `ulimit -n 128` and `prlimit` lowers it to 64 after it listens (128 stays when prlimit is missing).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, type ConnectTunnel, roundTrip } from '../support/raw-client.js';
import { tokenHash } from '../support/sluice.js';
import { killSluiceProcesses, REPO_ROOT as ROOT, startSluiceProcess, type SluiceProcess } from '../support/sluice-process.js';
import { waitFor, waitUntil } from '../support/wait.js';

const TOKEN = 'tok-emfile';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const START_LIMIT = 128;
const hasPrlimit = spawnSync('prlimit', ['--version'], { encoding: 'utf8' }).status === 0;
const LIMIT = hasPrlimit ? 64 : START_LIMIT;

function fdCount(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * Whether process `pid` holds the server side of the loopback connection whose client end is bound to
 * `clientPort`: its socket inode from /proc/net/tcp among the process's descriptors. Counting
 * descriptors cannot tell this apart from libuv's own EMFILE reserve descriptor closing and reopening.
 */
function holdsConnectionFrom(pid: number, serverPort: number, clientPort: number): boolean {
  const hex = (n: number): string => n.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1]?.endsWith(`:${hex(serverPort)}`) === true && f[2]?.endsWith(`:${hex(clientPort)}`) === true && f[9] !== undefined) inodes.add(f[9]);
  }
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1] !== undefined && inodes.has(m[1])) return true;
    } catch {
      // closed while listing
    }
  }
  return false;
}

type Attempt = { kind: 'ok'; tunnel: ConnectTunnel } | { kind: 'refused'; tunnel: ConnectTunnel } | { kind: 'dropped'; error: string };

async function attempt(port: number, target: string): Promise<Attempt> {
  try {
    const tunnel = await openConnectTunnel(port, target, AUTH, { timeoutMs: 3000 });
    if (tunnel.status === 200) return { kind: 'ok', tunnel };
    tunnel.socket.destroy();
    return { kind: 'refused', tunnel };
  } catch (error) {
    return { kind: 'dropped', error: (error as Error).message };
  }
}

describe.skipIf(process.platform !== 'linux')('EMFILE: out of file descriptors', () => {
  let dir: string;
  let echo: EchoServer;
  let sluice: SluiceProcess;
  let port = 0;
  const auditFile = (): string => path.join(dir, 'audit.log');

  beforeAll(async () => {
    // Like the other process tests, this runs the built CLI (`npm test` builds first); build only if missing.
    if (!fs.existsSync(path.join(ROOT, 'dist/main.js'))) {
      const built = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
      if (built.status !== 0) throw new Error(`build failed: ${built.stdout}${built.stderr}`);
    }
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-emfile-'));
    echo = await startTcpEchoServer();
    sluice = await startSluiceProcess({
      config: {
        listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
        state: path.join(dir, 'state'),
        audit: { file: auditFile() },
        log: { level: 'info' },
        dns: { hosts: { 'echo.test': ['127.0.0.1'] } },
        grants: [{ id: 'e', tokenSha256: tokenHash(TOKEN), destinations: [`https://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
      },
      cwd: dir,
      wrap: (argv) => ['bash', ['-c', `ulimit -n ${START_LIMIT} && exec "$0" "$@"`, ...argv]],
    });
    port = sluice.port;
    if (hasPrlimit) {
      const lowered = spawnSync('prlimit', ['--pid', String(sluice.pid), `--nofile=${LIMIT}:${LIMIT}`], { encoding: 'utf8' });
      if (lowered.status !== 0) throw new Error(`prlimit failed: ${lowered.stderr}`);
    }
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop('SIGTERM', 5000).catch(() => killSluiceProcesses());
    await echo?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it(`survives exhausting ${LIMIT} descriptors, records the failed dial, gives every descriptor back and answers again`, async () => {
    const pid = sluice.pid;
    const target = `echo.test:${echo.port}`;
    const warm = await attempt(port, target);
    expect(warm.kind).toBe('ok');
    if (warm.kind === 'ok') warm.tunnel.socket.destroy();
    await new Promise((r) => setTimeout(r, 200));
    const baselineFds = fdCount(pid);

    // Fill the table with tunnels (two descriptors each in Sluice) until one cannot be opened.
    const tunnels: net.Socket[] = [];
    const idle: net.Socket[] = [];
    const outcomes: string[] = [];
    let refusedHead = '';
    try {
      for (let i = 0; i < LIMIT && refusedHead === ''; i += 1) {
        const a = await attempt(port, target);
        outcomes.push(a.kind);
        if (a.kind === 'ok') {
          tunnels.push(a.tunnel.socket);
          continue;
        }
        if (a.kind === 'refused') {
          refusedHead = a.tunnel.head;
          break;
        }
        // Accept itself failed (libuv accepts and closes when out of descriptors): free one tunnel's two
        // descriptors, take one with an idle connection, so the next CONNECT is accepted but cannot dial.
        // Each wait observes the very connection, not descriptor counts (libuv's reserve descriptor moves).
        const freed = tunnels.pop();
        if (freed === undefined) break;
        const freedPort = freed.localPort ?? 0;
        freed.destroy();
        await waitUntil(() => !holdsConnectionFrom(pid, port, freedPort), { timeoutMs: 2000, label: 'Sluice closes the freed tunnel' });
        const held = net.connect({ port, host: '127.0.0.1' });
        held.on('error', () => undefined);
        idle.push(held);
        let heldClosed = false;
        held.once('close', () => (heldClosed = true));
        await waitFor(held, 'connect', 2000);
        const heldPort = held.localPort ?? 0;
        // Accepted, or accepted and closed at once by libuv when still out of descriptors: the loop goes on either way.
        await waitUntil(() => heldClosed || holdsConnectionFrom(pid, port, heldPort), { timeoutMs: 2000, label: 'Sluice accepts the idle connection' });
      }
      expect(sluice.child.exitCode, sluice.stderr()).toBeNull();
      console.log(`[faults/emfile] limit ${LIMIT}, baseline ${baselineFds} fds, ${tunnels.length} tunnels open, attempts: ${outcomes.join(',')}`);
      expect(outcomes, 'descriptors ran out').toContain('refused');
      expect(refusedHead).toMatch(/^HTTP\/1\.1 502 /);
      expect(refusedHead).toContain('details="dial_unreachable"');
      // Live tunnels were not disturbed by the exhaustion.
      const sample = tunnels.at(0);
      if (sample !== undefined) expect(await roundTrip(sample, 'still-here')).toBe('still-here');
    } finally {
      for (const s of [...tunnels, ...idle]) s.destroy();
    }

    await waitUntil(() => fdCount(pid) <= baselineFds, { timeoutMs: 5000, label: `descriptors back to ${baselineFds}` }).catch(() => {
      throw new Error(`descriptors leaked: ${fdCount(pid)} open, baseline ${baselineFds}`);
    });
    const after = await attempt(port, target);
    expect(after.kind).toBe('ok');
    if (after.kind === 'ok') {
      expect(await roundTrip(after.tunnel.socket, 'answering-again')).toBe('answering-again');
      after.tunnel.socket.destroy();
    }
    expect(sluice.child.exitCode, sluice.stderr()).toBeNull();

    // The failed dial is in the audit stream with its cause; nothing reached the last-resort handlers.
    await waitUntil(() => fs.existsSync(auditFile()) && fs.readFileSync(auditFile(), 'utf8').includes('EMFILE'), { timeoutMs: 3000, label: 'EMFILE in the audit log' });
    const records = fs.readFileSync(auditFile(), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { reason?: string; detail?: string | null });
    expect(records.some((r) => r.reason === 'dial_unreachable' && /EMFILE/.test(r.detail ?? ''))).toBe(true);
    expect(sluice.stderr()).not.toMatch(/uncaught exception|unhandled rejection/);
  }, 60_000);
});
