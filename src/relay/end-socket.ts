// How Sluice closes a socket of a connection it ends, by close reason. When the grant no longer allows
// the connection (revoked, expired, narrowed by a reload or a rotation, past its byte or duration
// budget), the close is an abort (RFC 9293 §3.10.5: a RST; Linux discards the unsent send queue when
// SO_LINGER is 0): bytes relayed into the kernel's send buffer but not yet delivered to the client are
// dropped, not delivered for seconds after the authority ended (UX review 2026-12-04 finding 5); what the
// client's own kernel already received it can still read, then it sees the reset. The client never gets
// a FIN that a stream without its own framing would take for a complete transfer. Every other end
// (completed, a peer's close or reset, idle timeout, shutdown drain) keeps the ordinary close: the grant
// still allowed what was relayed, so it is delivered.
import type net from 'node:net';
import type { CloseReason } from '../core/index.js';

const WITHDRAWN: ReadonlySet<CloseReason> = new Set<CloseReason>(['revoked', 'expired', 'grant_changed', 'byte_limit', 'duration_limit']);

/** Whether `reason` ends a connection because its grant no longer allows it (the socket is reset). */
export function withdrawsAuthority(reason: CloseReason): boolean {
  return WITHDRAWN.has(reason);
}

/** The TCP socket under a TLS socket Sluice accepted (a TLS listener, issue 28): the one a reset goes to. */
const TRANSPORTS = new WeakMap<net.Socket, net.Socket>();

/** Records that `secure` runs over `transport`, so a withdrawn connection resets the TCP socket under it. */
export function carriedOver(secure: net.Socket, transport: net.Socket): void {
  TRANSPORTS.set(secure, transport);
}

/**
 * Resets a TCP socket now. A socket without a TCP handle (a Unix socket, a TLS socket) has no reset:
 * Node throws ERR_INVALID_HANDLE_TYPE before touching it, and it is destroyed instead; its peer can still
 * read what its own receive buffer holds.
 */
export function resetSocket(socket: net.Socket): void {
  if (socket.destroyed) return;
  // A TLS socket has no reset of its own: its TCP socket's is the one that drops what the kernel holds.
  const transport = TRANSPORTS.get(socket);
  if (transport !== undefined && !transport.destroyed) {
    resetSocket(transport);
    socket.destroy();
    return;
  }
  // Not connected (no handle: resetAndDestroy would emit ERR_SOCKET_CLOSED), still connecting, or shutting down.
  if (socket.pending || mayBeShuttingDown(socket)) return void socket.destroy();
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/**
 * A FIN was asked for (end()) and every write is flushed, but 'finish' has not come: libuv's shutdown
 * request may be in flight, and libuv refuses SO_LINGER 0 then (uv_tcp_close_reset: EINVAL), after which
 * Node emits 'error' and never closes the handle (no 'close', a leaked descriptor). Such a socket is
 * destroyed: the kernel still delivers what it holds. Only a socket Sluice had already ended (a FIN passed
 * on, or node:http closing a connection after its last response) is in this state, for the one loop turn
 * the shutdown takes.
 */
function mayBeShuttingDown(socket: net.Socket): boolean {
  return socket.writableEnded && !socket.writableFinished && socket.writableLength === 0;
}

/** Closes a socket of a connection Sluice ends for `reason`: reset when the grant withdrew it, else destroyed. */
export function endSocket(socket: net.Socket, reason: CloseReason): void {
  if (WITHDRAWN.has(reason)) resetSocket(socket);
  else socket.destroy();
}

/**
 * Passes a FIN on to `socket`, one side of a tunnel whose other side sent its own. When `socket` sent its
 * FIN already (all it sent was read) and Node holds none of its writes, the tunnel is over both ways:
 * close(2) alone sends the same FIN after whatever the kernel still holds (RFC 9293 §3.10.4), without the
 * shutdown(2) and the callbacks end() makes first, and that close runs when the next tunnel may be waiting
 * (ADR 0023). A TLS socket ends with its close_notify (RFC 8446 §6.1), and one with queued writes flushes
 * them first: both go through end(), as does a socket that may still send (the half-close).
 */
export function passFin(socket: net.Socket): void {
  if (socket.readableEnded && socket.writableLength === 0 && (socket as { encrypted?: boolean }).encrypted !== true) socket.destroy();
  else socket.end();
}
