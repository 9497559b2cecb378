// How Sluice closes a socket it ends (UX review 2026-12-04 finding 5). Threat: a client whose grant was
// withdrawn keeps reading, for seconds, the bytes Sluice had already relayed into the kernel's send buffer
// before the revocation. A withdrawal resets the socket, so those bytes are dropped; every other end keeps
// the ordinary close, so what was relayed under the grant is delivered. Never a throw, an 'error' or a
// leaked handle, whatever state the socket is in (a Unix socket, already closed, never connected, its FIN
// in flight). passFin, the FIN a tunnel passes on: it never loses a byte or turns into a reset, whatever
// is still queued, and it never takes a TLS socket's close_notify or a half-closed side's answer away.
// Real sockets on 127.0.0.1 and in a temp dir.
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CloseReasons, type CloseReason } from '../../../src/core/index.js';
import { endSocket, passFin, resetSocket, withdrawsAuthority } from '../../../src/relay/index.js';
import { createTestPki } from '../../support/pki.js';
import { readToClose, sawReset } from '../../support/read-to-close.js';
import { waitFor, waitForClose, waitUntil } from '../../support/wait.js';

const MIB = 1024 * 1024;
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * A connected pair: `near` is Sluice's side, `far` the client's, paused before it reads anything. With
 * `allowHalfOpen` both ends are half-closable, as a tunnel's sockets are.
 */
async function pair(address: { port: number; host: string } | { path: string }, allowHalfOpen = false): Promise<{ near: net.Socket; far: net.Socket }> {
  const server = net.createServer({ allowHalfOpen });
  servers.push(server);
  await new Promise<void>((resolve) => ('path' in address ? server.listen(address.path, resolve) : server.listen(0, address.host, resolve)));
  const accepted = waitFor<net.Socket>(server, 'connection');
  const target = 'path' in address ? { path: address.path } : { port: (server.address() as net.AddressInfo).port, host: address.host };
  const far = net.connect({ ...target, allowHalfOpen });
  far.pause();
  // Errors are read where a test looks for them (readToClose); none may crash the worker.
  far.on('error', () => undefined);
  sockets.push(far);
  const [near] = await Promise.all([accepted, waitFor(far, 'connect')]);
  sockets.push(near);
  return { near, far };
}

const tcpPair = (): Promise<{ near: net.Socket; far: net.Socket }> => pair({ port: 0, host: '127.0.0.1' });

async function unixPair(): Promise<{ near: net.Socket; far: net.Socket }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-end-socket-'));
  dirs.push(dir);
  return pair({ path: path.join(dir, 's.sock') });
}

/**
 * Writes to a client that does not read until the kernel holds all it will take (a write is left in
 * Node's buffer) and at least 1 MiB of it; returns what the kernel holds at least.
 */
async function fillKernel(near: net.Socket): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const inKernel = (): number => near.bytesWritten - near.writableLength;
  await waitUntil(
    () => {
      for (let i = 0; i < 64 && near.writableLength === 0; i += 1) near.write(chunk);
      return near.writableLength > 0 && inKernel() >= MIB;
    },
    { timeoutMs: 10_000, label: 'the kernel send buffer full with at least 1 MiB' },
  );
  return inKernel();
}

describe('withdrawsAuthority: which ends reset the client', () => {
  // Every close reason is classified here: a new one must be decided, not default silently.
  const table: Record<CloseReason, boolean> = {
    revoked: true,
    expired: true,
    grant_changed: true,
    byte_limit: true,
    duration_limit: true,
    completed: false,
    client_closed: false,
    origin_closed: false,
    client_reset: false,
    origin_reset: false,
    idle_timeout: false,
    proxy_shutdown: false,
    response_error: false,
    relay_failed: false,
  };

  it('covers every close reason', () => {
    expect(Object.keys(table).sort()).toEqual(Object.keys(CloseReasons).sort());
  });

  it.each(Object.entries(table))('%s resets: %s', (reason, resets) => {
    expect(withdrawsAuthority(reason as CloseReason)).toBe(resets);
  });
});

describe('resetSocket on TCP', () => {
  it('drops what the kernel still held for a client that was not reading: it sees a reset, not the bytes', async () => {
    const { near, far } = await tcpPair();
    const held = await fillKernel(near);
    const read = readToClose(far, 5_000);
    resetSocket(near);
    const r = await read;
    expect(sawReset(r)).toBe(true);
    // What the client still got is what its own receive buffer held, far less than was queued for it.
    expect(r.bytes).toBeLessThan(held / 2);
  });

  it('emits no error on the reset side and closes it', async () => {
    const { near } = await tcpPair();
    const errors: Error[] = [];
    near.on('error', (e) => errors.push(e));
    const closed = waitForClose(near);
    resetSocket(near);
    expect(near.destroyed).toBe(true);
    expect(await closed).toBeNull();
    expect(errors).toEqual([]);
  });

  it('closes without an error or a leaked handle when its FIN is already on its way (libuv refuses SO_LINGER 0 then)', async () => {
    const { near, far } = await tcpPair();
    const read = readToClose(far, 5_000);
    near.write('last words');
    near.end();
    // Two ticks: Node has asked libuv for the shutdown, which has not completed yet.
    await new Promise<void>((resolve) => process.nextTick(() => process.nextTick(resolve)));
    expect(near.writableEnded && !near.writableFinished).toBe(true);
    const closed = waitForClose(near, 5_000);
    resetSocket(near);
    expect(await closed).toBeNull();
    expect((await read).bytes).toBe('last words'.length);
  });

  it('does nothing to a socket already destroyed, and destroys one never connected without an error', async () => {
    const { near } = await tcpPair();
    near.destroy();
    expect(() => resetSocket(near)).not.toThrow();
    const unconnected = new net.Socket();
    const errors: Error[] = [];
    unconnected.on('error', (e) => errors.push(e));
    resetSocket(unconnected);
    expect(unconnected.destroyed).toBe(true);
    await waitFor(unconnected, 'close', 5_000);
    expect(errors).toEqual([]);
  });
});

describe('resetSocket on a Unix socket (no reset exists there)', () => {
  it('destroys it instead of throwing: the client sees it close', async () => {
    const { near, far } = await unixPair();
    near.write('before');
    const read = readToClose(far, 5_000);
    expect(() => resetSocket(near)).not.toThrow();
    expect(near.destroyed).toBe(true);
    const r = await read;
    expect(r).toEqual({ bytes: 'before'.length, error: null, ended: true });
  });
});

describe('endSocket: the ordinary close for every other end', () => {
  it('completed: a client that was not reading still gets every byte queued for it, then a FIN', async () => {
    const { near, far } = await tcpPair();
    const held = await fillKernel(near);
    const read = readToClose(far, 10_000);
    endSocket(near, 'completed');
    const r = await read;
    expect(r.error).toBeNull();
    expect(r.ended).toBe(true);
    expect(r.bytes).toBeGreaterThanOrEqual(held);
  });

  it('revoked: the client sees a reset and not what was queued', async () => {
    const { near, far } = await tcpPair();
    const held = await fillKernel(near);
    const read = readToClose(far, 5_000);
    endSocket(near, 'revoked');
    const r = await read;
    expect(sawReset(r)).toBe(true);
    expect(r.bytes).toBeLessThan(held / 2);
  });
});

/** A tunnel side as Sluice's are and its peer, both half-closable, the peer paused; `near` has read the peer's FIN when `farEnded`. */
async function halfOpenPair(farEnded: boolean): Promise<{ near: net.Socket; far: net.Socket }> {
  const { near, far } = await pair({ port: 0, host: '127.0.0.1' }, true);
  if (farEnded) {
    const sawFin = waitFor(near, 'end');
    near.resume();
    far.end();
    await sawFin;
  }
  return { near, far };
}

describe('passFin: the FIN a tunnel passes on', () => {
  it('after the peer’s own FIN, with nothing queued: closes at once, and the peer gets every byte, then a FIN', async () => {
    const { near, far } = await halfOpenPair(true);
    const read = readToClose(far, 5_000);
    near.write('the last answer');
    expect(near.writableLength).toBe(0);
    passFin(near);
    // No shutdown(2) first: the descriptor is closed now, which sends the FIN after what the kernel holds.
    expect(near.destroyed).toBe(true);
    expect(await read).toEqual({ bytes: 'the last answer'.length, error: null, ended: true });
  });

  it('after the peer’s own FIN, with writes still queued in Node: flushes every one of them, then the FIN', async () => {
    const { near, far } = await halfOpenPair(true);
    await fillKernel(near);
    expect(near.writableLength).toBeGreaterThan(0);
    // Sent to the kernel and still queued in Node: all of it must arrive.
    const written = near.bytesWritten;
    const read = readToClose(far, 10_000);
    passFin(near);
    expect(near.destroyed).toBe(false);
    const r = await read;
    expect(r.error).toBeNull();
    expect(r.ended).toBe(true);
    expect(r.bytes).toBe(written);
  });

  it('before the peer’s FIN: only half-closes, so the peer’s answer after it still arrives', async () => {
    const { near, far } = await halfOpenPair(false);
    const farSawFin = waitFor(far, 'end');
    far.resume();
    passFin(near);
    await farSawFin;
    expect(near.destroyed).toBe(false);
    const answer = waitFor<Buffer>(near, 'data');
    far.end('answer after the FIN');
    expect(String(await answer)).toBe('answer after the FIN');
  });

  it('a TLS socket ends through end() (its close_notify), even after the peer’s FIN with nothing queued', async () => {
    const pki = createTestPki(['localhost']);
    const server = tls.createServer({ key: pki.keyPem, cert: pki.certPem, allowHalfOpen: true });
    const accepted = waitFor<tls.TLSSocket>(server, 'secureConnection');
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const far = tls.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1', servername: 'localhost', ca: pki.caPem });
    far.on('error', () => undefined);
    sockets.push(far);
    try {
      const [near] = await Promise.all([accepted, waitFor(far, 'secureConnect')]);
      sockets.push(near);
      const sawFin = waitFor(near, 'end');
      near.resume();
      far.end();
      await sawFin;
      expect(near.writableLength).toBe(0);
      const read = readToClose(far, 5_000);
      passFin(near);
      expect(near.destroyed).toBe(false);
      expect(await read).toEqual({ bytes: 0, error: null, ended: true });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
