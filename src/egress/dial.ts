// Opens the egress socket for a hop: dials the pinned addresses, in order, and nothing else. It takes
// PinnedAddress values, never a host name, so re-resolution (DNS rebinding) cannot be expressed here.
import net from 'node:net';
import { deny, ok, SOCKET_HIGH_WATER_MARK, type PinnedAddress, type ReasonCode, type UpstreamProxy, type Verdict } from '../core/index.js';
import { Deadlines } from './deadlines.js';

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

function connectOnce(target: PinnedAddress, timeoutMs: number, signal: AbortSignal | undefined, allowHalfOpen: boolean): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    // Tunnels are half-closable (allowHalfOpen), so a FIN from the origin does not end the client's direction.
    const options: SocketBufferOptions = { host: target.address, port: target.port, family: target.family, noDelay: true, allowHalfOpen, writableHighWaterMark: SOCKET_HIGH_WATER_MARK };
    const socket = net.connect(options);
    const deadlines = Deadlines.for(timeoutMs);
    const deadline = deadlines.start(() => fail(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })));
    const onAbort = (): void => fail(Object.assign(new Error('aborted'), { code: 'ABORT_ERR' }));
    signal?.addEventListener('abort', onAbort, { once: true });
    function cleanup(): void {
      deadlines.clear(deadline);
      signal?.removeEventListener('abort', onAbort);
      socket.removeListener('error', fail);
      socket.removeListener('connect', done);
    }
    function fail(error: Error): void {
      cleanup();
      socket.destroy();
      reject(error);
    }
    function done(): void {
      cleanup();
      resolve(socket);
    }
    socket.once('error', fail);
    socket.once('connect', done);
  });
}

export function dialFailureReason(error: unknown): ReasonCode {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'dial_timeout';
  if (code === 'ECONNREFUSED') return 'dial_refused';
  return 'dial_unreachable';
}

/** Dials each pinned address in turn until one connects; the caller owns the returned socket. */
export async function dial(targets: readonly PinnedAddress[], options: DialOptions, signal?: AbortSignal): Promise<Verdict<DialSuccess>> {
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
  const code = (lastError as NodeJS.ErrnoException | undefined)?.code ?? 'unknown';
  return deny(dialFailureReason(lastError), `${attempts} address(es) tried, last error ${code}`);
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
