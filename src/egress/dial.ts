// Opens the egress socket for a hop: dials the pinned addresses, in order, and nothing else. It takes
// PinnedAddress values, never a host name, so re-resolution (DNS rebinding) cannot be expressed here.
import net from 'node:net';
import { deny, ok, onReusedRead, reusedReadsOf, ReusedReads, SOCKET_HIGH_WATER_MARK, type PinnedAddress, type ReasonCode, type UpstreamProxy, type Verdict } from '../core/index.js';
import { Deadlines, type Deadline } from './deadlines.js';

/** @types/node leaves it out, but net.Socket passes its options on to stream.Duplex, which takes it. */
export type SocketBufferOptions = net.TcpNetConnectOpts & { readonly writableHighWaterMark: number };

export interface DialOptions {
  readonly timeoutMs: number;
}

export interface DialSuccess {
  readonly socket: net.Socket;
  readonly pinned: PinnedAddress;
  readonly attempts: number;
}

const PENDING = Symbol('sluice.pendingDial');
type DialingSocket = net.Socket & { [PENDING]?: PendingDial | undefined };

function onDialConnect(this: DialingSocket): void {
  this[PENDING]?.settle(null);
}

function onDialError(this: DialingSocket, error: Error): void {
  this[PENDING]?.settle(error);
}

/**
 * One connection attempt in flight: its own deadline (one object, swept with every other dial's) and
 * two shared listener functions that find it on the socket, instead of a closure per listener per dial.
 */
class PendingDial implements Deadline {
  readonly atMs: number;
  sweepSlot = -1;
  private settled = false;

  constructor(
    private readonly socket: DialingSocket,
    private readonly deadlines: Deadlines,
    timeoutMs: number,
    private readonly signal: AbortSignal | undefined,
    private readonly callback: (error: Error | null, socket: net.Socket | null) => void,
  ) {
    this.atMs = Date.now() + timeoutMs;
    socket[PENDING] = this;
    socket.once('error', onDialError);
    socket.once('connect', onDialConnect);
    deadlines.add(this);
    signal?.addEventListener('abort', this, { once: true });
  }

  expire(): void {
    this.settle(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' }));
  }

  /** The abort signal's listener (an EventListener object). */
  handleEvent(): void {
    this.settle(Object.assign(new Error('aborted'), { code: 'ABORT_ERR' }));
  }

  settle(error: Error | null): void {
    if (this.settled) return;
    this.settled = true;
    const socket = this.socket;
    this.deadlines.clear(this);
    this.signal?.removeEventListener('abort', this);
    socket[PENDING] = undefined;
    socket.removeListener('error', onDialError);
    socket.removeListener('connect', onDialConnect);
    if (error === null) return this.callback(null, socket);
    socket.destroy();
    // Never connected, so never read into: its read buffer is free.
    reusedReadsOf(socket)?.release();
    this.callback(error, null);
  }
}

function startDial(target: PinnedAddress, timeoutMs: number, signal: AbortSignal | undefined, allowHalfOpen: boolean, callback: (error: Error | null, socket: net.Socket | null) => void): void {
  // Tunnels are half-closable (allowHalfOpen), so a FIN from the origin does not end the client's direction.
  const options: SocketBufferOptions = { host: target.address, port: target.port, family: target.family, noDelay: true, allowHalfOpen, writableHighWaterMark: SOCKET_HIGH_WATER_MARK };
  if (!allowHalfOpen) return void new PendingDial(net.connect(options), Deadlines.for(timeoutMs), timeoutMs, signal, callback);
  // A tunnel's dialed socket reads into reused buffers (ADR 0022): the relay (relay/tunnel.ts) attaches
  // to them; the forward relay's connections (allowHalfOpen false) keep Node's own reads.
  const reads = new ReusedReads();
  const socket = net.connect({ ...options, onread: { buffer: reads.buffer, callback: onReusedRead as (bytes: number, buffer: Uint8Array) => boolean } });
  reads.bind(socket);
  new PendingDial(socket, Deadlines.for(timeoutMs), timeoutMs, signal, callback);
}

function connectOnce(target: PinnedAddress, timeoutMs: number, signal: AbortSignal | undefined, allowHalfOpen: boolean): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    startDial(target, timeoutMs, signal, allowHalfOpen, (error, socket) => (error === null && socket !== null ? resolve(socket) : reject(error ?? new Error('no socket'))));
  });
}

export function dialFailureReason(error: unknown): ReasonCode {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'dial_timeout';
  if (code === 'ECONNREFUSED') return 'dial_refused';
  return 'dial_unreachable';
}

function failedDial(error: unknown, attempts: number): Verdict<DialSuccess> {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? 'unknown';
  return deny(dialFailureReason(error), `${attempts} address(es) tried, last error ${code}`);
}

/** Dials each pinned address in turn until one connects; the caller owns the returned socket. */
export function dial(targets: readonly PinnedAddress[], options: DialOptions, signal?: AbortSignal): Promise<Verdict<DialSuccess>> {
  const only = targets.length === 1 && signal === undefined ? targets[0] : undefined;
  if (only === undefined) return dialEach(targets, options, signal);
  // One address (an IP literal, most names): one attempt, settled by its callback, no async frame.
  return new Promise((resolve) => {
    try {
      startDial(only, options.timeoutMs, undefined, true, (error, socket) => resolve(socket !== null ? ok({ socket, pinned: only, attempts: 1 }) : failedDial(error, 1)));
    } catch (error) {
      resolve(failedDial(error, 1));
    }
  });
}

async function dialEach(targets: readonly PinnedAddress[], options: DialOptions, signal?: AbortSignal): Promise<Verdict<DialSuccess>> {
  let lastError: unknown;
  let attempts = 0;
  for (const target of targets) {
    if (signal?.aborted) break;
    attempts += 1;
    try {
      const socket = await connectOnce(target, options.timeoutMs, signal, true);
      return ok({ socket, pinned: target, attempts });
    } catch (error) {
      lastError = error;
    }
  }
  return failedDial(lastError, attempts);
}

export interface ConnectorOptions {
  readonly hostname: string;
  /** undici passes '' for the scheme's default port. */
  readonly port: string | number;
  readonly protocol?: string;
}

function portOf(opts: ConnectorOptions): number {
  return Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
}

type ConnectorCallback = (error: Error | null, socket: net.Socket | null) => void;

/**
 * A connector for the forward relay's HTTP client: it only ever dials an IP literal (the pinned address
 * the relay put in the origin), so the client library cannot resolve a name behind policy's back.
 */
export function createPinnedConnector(options: DialOptions): (opts: ConnectorOptions, callback: ConnectorCallback) => void {
  return function connectPinned(opts, callback) {
    const host = opts.hostname.replace(/^\[|\]$/g, '');
    const family = net.isIP(host);
    if (family === 0) {
      callback(Object.assign(new Error('refusing to dial a host name; only pinned addresses are dialed'), { code: 'ERR_NOT_PINNED' }), null);
      return;
    }
    const target = { address: host, family, port: portOf(opts), class: 'public' } as unknown as PinnedAddress;
    connectOnce(target, options.timeoutMs, undefined, false).then(
      (socket) => callback(null, socket),
      (error: Error) => callback(error, null),
    );
  };
}

/**
 * A connector for forwarding through upstream proxies: it dials only proxies from Sluice's own route
 * config (looked up by host and port), over TLS for https:// proxies, and refuses anything else.
 */
export function createUpstreamConnector(
  find: (host: string, port: number) => UpstreamProxy | undefined,
  connect: (proxy: UpstreamProxy) => Promise<Verdict<net.Socket>>,
): (opts: ConnectorOptions, callback: ConnectorCallback) => void {
  return function connectUpstream(opts, callback) {
    const proxy = find(opts.hostname.replace(/^\[|\]$/g, ''), portOf(opts));
    if (proxy === undefined) {
      callback(Object.assign(new Error('not a configured upstream proxy'), { code: 'ERR_NOT_UPSTREAM' }), null);
      return;
    }
    connect(proxy).then(
      (verdict) =>
        verdict.ok
          ? callback(null, verdict.value)
          : callback(Object.assign(new Error(verdict.detail), { code: verdict.reason === 'upstream_tls_failed' ? 'ERR_TLS_UPSTREAM' : verdict.reason === 'upstream_timeout' ? 'ETIMEDOUT' : 'ECONNREFUSED' }), null),
      (error: Error) => callback(error, null),
    );
  };
}
