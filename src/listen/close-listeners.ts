// Closes listeners the way a drain needs: stop accepting at once, close what is idle, let live
// connections finish for up to `drainMs`, then end the rest, and remove each Unix socket file that is
// still the listener's. What counts as idle and how a live connection ends are the caller's (proxy/).
import type http from 'node:http';
import type net from 'node:net';
import { removeSocketFile, type SocketFile } from './socket-file.js';

export interface ClosableListener {
  readonly server: net.Server;
  /** A node:http server fed sockets by `server` (it never listened itself), or null. */
  readonly http: http.Server | null;
  /** Every accepted socket not yet closed. */
  readonly sockets: { readonly size: number } & Iterable<net.Socket>;
  readonly socketFile: SocketFile | null;
}

export interface CloseHooks {
  /** A connection with nothing in flight (no request head yet): closed at once. */
  isIdle(socket: net.Socket): boolean;
  /** Ends a live connection once the drain is over (its tunnel records why). */
  endLive(socket: net.Socket): void;
}

const DRAIN_CHECK_MS = 25;

export async function closeListeners(listeners: readonly ClosableListener[], drainMs: number, hooks: CloseHooks): Promise<void> {
  const closed = listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve())));
  for (const l of listeners) {
    // Stops node:http's timeout interval; it never listened, so its close() reports that, harmlessly.
    l.http?.close(() => undefined);
    l.http?.closeIdleConnections();
    for (const socket of l.sockets) if (hooks.isIdle(socket)) socket.destroy();
  }
  if (drainMs > 0) await drained(listeners, drainMs);
  for (const l of listeners) {
    l.http?.closeAllConnections();
    for (const socket of l.sockets) {
      hooks.endLive(socket);
      socket.destroy();
    }
  }
  await Promise.all(closed);
  for (const l of listeners) if (l.socketFile !== null) await removeSocketFile(l.socketFile);
}

function drained(listeners: readonly ClosableListener[], drainMs: number): Promise<void> {
  return new Promise((resolve) => {
    const deadline = setTimeout(finish, drainMs);
    const check = (): void => {
      if (listeners.every((l) => l.sockets.size === 0)) finish();
    };
    const poll = setInterval(check, DRAIN_CHECK_MS);
    function finish(): void {
      clearTimeout(deadline);
      clearInterval(poll);
      resolve();
    }
    check();
  });
}
