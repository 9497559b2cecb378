// Owns reading what a client can still get from a connection after the other side ended it: resumes a
// paused socket, counts every byte until it closes, and says how it ended (a reset, or a FIN).
import type net from 'node:net';
import { withTimeout } from './wait.js';

export interface ReadToClose {
  /** Every byte the socket delivered, including what it had buffered while paused. */
  readonly bytes: number;
  /** The code of the error it ended with ('ECONNRESET' for a reset), or null. */
  readonly error: string | null;
  /** It saw 'end' (a FIN, or see RESET_AFTER_DATA_IS_ERROR). */
  readonly ended: boolean;
}

function libuvAtLeast(major: number, minor: number, patch: number): boolean {
  const [a = 0, b = 0, c = 0] = process.versions.uv.split('.').map(Number);
  return a !== major ? a > major : b !== minor ? b > minor : c >= patch;
}

/**
 * Whether this Node reports a reset that arrives behind unread data as ECONNRESET. libuv before 1.52.1
 * (Node 20) took POLLHUP after a short read for EOF (libuv/libuv#4997), so a paused socket that is reset
 * while data waits in its receive buffer reads that data and then sees 'end', not an error; the kernel
 * answered ECONNRESET all the same. A reset with nothing left to read is ECONNRESET everywhere.
 */
export const RESET_AFTER_DATA_IS_ERROR = libuvAtLeast(1, 52, 1);

/** Whether `r` is how a reset shows to this Node's client (see RESET_AFTER_DATA_IS_ERROR). */
export function sawReset(r: ReadToClose): boolean {
  if (r.error === 'ECONNRESET') return true;
  return !RESET_AFTER_DATA_IS_ERROR && r.error === null && r.ended && r.bytes > 0;
}

/**
 * Watches a paused `socket` from now on (attaching no listener resumes it); `read` resumes it and
 * resolves once it has closed, with everything it delivered, or rejects after `timeoutMs`. Watch before
 * the other side can end it: an end seen while paused is still counted.
 */
export function watchToClose(socket: net.Socket): { read(timeoutMs: number): Promise<ReadToClose> } {
  let bytes = 0;
  let error: string | null = null;
  let ended = false;
  socket.on('data', (chunk: Buffer) => void (bytes += chunk.length));
  socket.on('error', (err: NodeJS.ErrnoException) => void (error ??= err.code ?? err.message));
  socket.once('end', () => void (ended = true));
  const closed = new Promise<ReadToClose>((resolve) => socket.once('close', () => resolve({ bytes, error, ended })));
  return {
    read: (timeoutMs) => {
      socket.resume();
      return withTimeout(closed, timeoutMs, 'the socket closed');
    },
  };
}

/** Resumes `socket` and resolves once it has closed, with what it delivered; rejects after `timeoutMs`. */
export function readToClose(socket: net.Socket, timeoutMs: number): Promise<ReadToClose> {
  return watchToClose(socket).read(timeoutMs);
}
