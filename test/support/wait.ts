// Owns bounded waiting primitives: wait for an event, poll a condition, or cap any promise with a timeout.
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';

/** Resolves with the first argument of the next `event`; rejects on timeout or on an 'error' event. */
export function waitFor<T = unknown>(emitter: EventEmitter, event: string, timeoutMs = 5000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cleanup = (): void => {
      clearTimeout(timer);
      emitter.off(event, onEvent);
      if (event !== 'error') emitter.off('error', onError);
    };
    const onEvent = (value: T): void => {
      cleanup();
      resolve(value);
    };
    const onError = (err: unknown): void => {
      cleanup();
      reject(err instanceof Error ? err : new Error(String(err)));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`waitFor: timed out after ${timeoutMs} ms waiting for '${event}' event`));
    }, timeoutMs);
    emitter.on(event, onEvent);
    if (event !== 'error') emitter.on('error', onError);
  });
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const tick = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `predicate` (a few setImmediate turns, then every 10 ms) until true; rejects after `timeoutMs`. */
export async function waitUntil(
  predicate: () => boolean | Promise<boolean>,
  opts: { timeoutMs: number; label: string },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  for (let attempt = 0; ; attempt += 1) {
    if (await predicate()) return;
    if (Date.now() >= deadline) {
      throw new Error(`waitUntil: '${opts.label}' not satisfied within ${opts.timeoutMs} ms`);
    }
    await (attempt < 5 ? immediate() : tick(10));
  }
}

/** Settles like `promise`, or rejects with a labelled error after `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, label: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`withTimeout: '${label}' did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Resolves once `socket` has closed, with the code of the error it ended with ('ECONNRESET' when the peer
 * reset it) or null when it closed without one; rejects after `timeoutMs`. Unlike waitFor(socket,
 * 'close'), an error before the close is the answer, not a failure. Call it before the close can come.
 */
export function waitForClose(socket: Socket, timeoutMs = 5000): Promise<string | null> {
  let error: string | null = null;
  const onError = (err: NodeJS.ErrnoException): void => void (error ??= err.code ?? err.message);
  socket.on('error', onError);
  if (socket.closed) return Promise.resolve(error);
  return withTimeout(
    new Promise<string | null>((resolve) => socket.once('close', () => resolve(error))),
    timeoutMs,
    'socket closed',
  ).finally(() => socket.off('error', onError));
}
