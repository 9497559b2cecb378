// Opens a tunnel through an upstream HTTP or HTTPS proxy: connect to the proxy (TLS verified against the
// system roots plus the enterprise CA), send CONNECT for the target with this proxy's own credentials,
// and read the answer. A 407 is answered only with this proxy's configured authentication; otherwise it
// ends the hop (upstream_auth_required, _failed or _unsupported): Sluice never retries without the proxy
// or goes DIRECT instead (principle A2 in docs/principles.md: silently
// bypassing the proxy is forbidden).
import net from 'node:net';
import tls from 'node:tls';
import { deny, ok, SOCKET_HIGH_WATER_MARK, type ReasonCode, type UpstreamProxy, type Verdict } from '../core/index.js';
import type { SocketBufferOptions } from './dial.js';
import { systemGss } from './negotiate.js';
import { bodyEnd, parseProxyAnswer, type ProxyAnswer } from './proxy-answer.js';
import { LearnedMechanisms, parseChallenges, ProxyAuthDialogue, type ProxyAuthContext } from './proxy-auth.js';

export interface UpstreamOptions {
  readonly timeoutMs: number;
  /**
   * Told of every failed attempt at an upstream proxy (refused, unreachable, timed out, TLS, 407, any
   * other answer), for the operational log: the proxy's label (never its credentials) and the reason.
   */
  readonly onFailure?: ((failure: UpstreamFailure) => void) | undefined;
  /** GSSAPI and what `auto` learned of each proxy (one per instance); absent: the process's own. */
  readonly auth?: ProxyAuthContext;
}

export interface UpstreamFailure {
  /** The proxy's printable label (scheme://host:port, no credentials). */
  readonly upstream: string;
  readonly reason: ReasonCode;
  readonly detail: string;
}

/** Without a listener the attempt's promise is returned as is: no extra step on the hop. */
function reported<T>(proxy: UpstreamProxy, options: UpstreamOptions, attempt: Promise<Verdict<T>>): Promise<Verdict<T>> {
  const onFailure = options.onFailure;
  if (onFailure === undefined) return attempt;
  return attempt.then((verdict) => {
    if (!verdict.ok) onFailure({ upstream: proxy.label, reason: verdict.reason, detail: verdict.detail });
    return verdict;
  });
}

export interface UpstreamTunnel {
  readonly socket: net.Socket;
  /** Bytes the proxy sent after its response head: already tunnel payload. */
  readonly head: Buffer;
}

const TCP_FAILURES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

function plainOptions(proxy: UpstreamProxy): SocketBufferOptions {
  return { host: proxy.host, port: proxy.port, allowHalfOpen: true, noDelay: true, writableHighWaterMark: SOCKET_HIGH_WATER_MARK };
}

function failure(error: unknown, isTls: boolean): ReasonCode {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'ETIMEDOUT') return 'upstream_timeout';
  // Anything but a TCP-level failure on a TLS proxy is the handshake or certificate verification
  // (OpenSSL's codes vary: UNABLE_TO_VERIFY_LEAF_SIGNATURE, ERR_TLS_CERT_ALTNAME_INVALID, ERR_SSL_…).
  if (isTls && !TCP_FAILURES.has(code)) return 'upstream_tls_failed';
  return 'upstream_unreachable';
}

/** Connects to the proxy itself (TCP, then TLS for https:// proxies). The caller owns the socket. */
export function connectToProxy(proxy: UpstreamProxy, options: UpstreamOptions): Promise<Verdict<net.Socket>> {
  return reported(proxy, options, new Promise<Verdict<net.Socket>>((resolve) => {
    let settled = false;
    const socket: net.Socket = proxy.tls
      ? tls.connect({
          host: proxy.host,
          port: proxy.port,
          servername: net.isIP(proxy.host) === 0 ? proxy.host : undefined,
          ca: proxy.ca === null ? undefined : [...tls.rootCertificates, proxy.ca],
          ALPNProtocols: ['http/1.1'],
          allowHalfOpen: true,
        } as tls.ConnectionOptions)
      : net.connect(plainOptions(proxy));
    const timer = setTimeout(() => finish(deny('upstream_timeout', `no connection to ${proxy.label} within ${options.timeoutMs} ms`)), options.timeoutMs);
    function finish(verdict: Verdict<net.Socket>): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.removeListener('error', onError);
      if (!verdict.ok) socket.destroy();
      resolve(verdict);
    }
    function onError(error: Error): void {
      const code = (error as NodeJS.ErrnoException).code ?? error.message;
      finish(deny(failure(error, proxy.tls), `${proxy.label}: ${code}`));
    }
    socket.once('error', onError);
    socket.once(proxy.tls ? 'secureConnect' : 'connect', () => {
      socket.setNoDelay(true);
      finish(ok(socket));
    });
  }));
}

/** One answer to CONNECT: a tunnel, or a refusal whose connection may carry the next authentication leg. */
type Answer =
  | { readonly kind: 'tunnel'; readonly head: Buffer }
  | { readonly kind: 'refused'; readonly status: number; readonly challenges: readonly string[]; readonly reusable: boolean };

/** Reads the answer to one CONNECT; for a refusal, reads its body through when the connection stays open. */
function readAnswer(socket: net.Socket, proxy: UpstreamProxy, timeoutMs: number): Promise<Verdict<Answer>> {
  return new Promise<Verdict<Answer>>((resolve) => {
    let buffer: Buffer = Buffer.alloc(0);
    let answer: ProxyAnswer | null = null;
    const timer = setTimeout(() => done(deny('upstream_timeout', `${proxy.label} did not answer CONNECT within ${timeoutMs} ms`)), timeoutMs);
    function done(verdict: Verdict<Answer>): void {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('error', onError);
      socket.removeListener('end', onEnd);
      socket.pause();
      resolve(verdict);
    }
    function refused(a: ProxyAnswer, reusable: boolean): void {
      done(ok({ kind: 'refused', status: a.status, challenges: a.challenges, reusable }));
    }
    function onData(chunk: Buffer): void {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      if (answer === null) {
        const parsed = parseProxyAnswer(buffer);
        if (parsed === 'incomplete') return;
        if (parsed === 'garbage') return done(deny('upstream_failed', `${proxy.label} answered CONNECT with something that is not HTTP`));
        // Any 2xx to CONNECT opens the tunnel (RFC 9110 §9.3.6).
        if (parsed.status >= 200 && parsed.status < 300) return done(ok({ kind: 'tunnel', head: buffer.subarray(parsed.headLength) }));
        answer = parsed;
        buffer = buffer.subarray(parsed.headLength);
        if (parsed.body === 'close') return refused(parsed, false);
      }
      const end = bodyEnd(buffer, answer.body as number | 'chunked');
      if (end === 'incomplete') return;
      // Bytes past the body before the next request are not HTTP: that connection carries no more legs.
      refused(answer, end !== 'garbage' && end === buffer.length);
    }
    function onError(error: Error): void {
      done(deny(failure(error, proxy.tls), `${proxy.label}: ${(error as NodeJS.ErrnoException).code ?? error.message}`));
    }
    function onEnd(): void {
      if (answer !== null) return refused(answer, false);
      done(deny('upstream_failed', `${proxy.label} closed the connection without answering CONNECT`));
    }
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('end', onEnd);
    socket.resume();
  });
}

/**
 * Sends CONNECT `authority` (canonical host name, or the checked IP literal) through the proxy,
 * authenticating as configured (proxy-auth.ts): a 407 is answered on the same connection while the
 * mechanism's legs last (NTLM's must), on a new one when the proxy closed it and the mechanism allows.
 */
export async function connectThroughProxy(proxy: UpstreamProxy, authority: string, options: UpstreamOptions): Promise<Verdict<UpstreamTunnel>> {
  // A failed connect is reported by connectToProxy itself.
  const dialogue = new ProxyAuthDialogue(proxy, options.auth ?? defaultAuthContext());
  // The first leg's token (a GSSAPI call on the thread pool for Negotiate) is made while the TCP and TLS
  // handshakes run, not after them.
  const [first, connected] = await Promise.all([dialogue.first(), connectToProxy(proxy, options)]);
  if (!connected.ok) return connected;
  let socket = connected.value;
  if (!first.ok) {
    socket.destroy();
    return reported(proxy, options, Promise.resolve(first));
  }
  let leg = first;
  return reported(proxy, options, (async (): Promise<Verdict<UpstreamTunnel>> => {
    for (;;) {
      const auth = leg.value.authorization === null ? '' : `Proxy-Authorization: ${leg.value.authorization}\r\n`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
      const answer = await readAnswer(socket, proxy, options.timeoutMs);
      if (!answer.ok) return fail(answer);
      if (answer.value.kind === 'tunnel') return ok({ socket, head: answer.value.head });
      const { status, challenges, reusable } = answer.value;
      if (status !== 407) return fail(deny('upstream_refused', `${proxy.label} answered ${status}`));
      const next = await dialogue.answer(parseChallenges(challenges));
      if (!next.ok) return fail(next);
      leg = next;
      if (reusable) continue;
      if (next.value.sameConnection) return fail(deny('upstream_auth_failed', `${dialogue.chosen ?? 'auth'}: ${proxy.label} closed the connection in the middle of the handshake (407)`));
      socket.destroy();
      const again = await connectToProxy(proxy, { ...options, onFailure: undefined });
      if (!again.ok) return again;
      socket = again.value;
    }
  })());
  function fail(verdict: Verdict<never>): Verdict<never> {
    socket.destroy();
    return verdict;
  }
}

let fallbackAuth: ProxyAuthContext | null = null;

/** The process's GSSAPI and a learned-offer table, for callers that pass no auth context of their own. */
export function defaultAuthContext(): ProxyAuthContext {
  fallbackAuth ??= { gss: systemGss(), learned: new LearnedMechanisms() };
  return fallbackAuth;
}

/** Whether a failed upstream attempt may fall over to the next route entry (connection-level only). */
export function isConnectionFailure(reason: ReasonCode): boolean {
  return reason === 'upstream_unreachable' || reason === 'upstream_timeout' || reason === 'upstream_tls_failed' || reason === 'dial_refused' || reason === 'dial_unreachable' || reason === 'dial_timeout';
}

/** How often one upstream's same failure is logged again while it keeps failing (the rest are counted). */
export const UPSTREAM_FAILURE_LOG_INTERVAL_MS = 10_000;
const MAX_LOGGED_UPSTREAMS = 1000;

/**
 * An `onFailure` that warns in the operational log: at most once per upstream and reason every
 * UPSTREAM_FAILURE_LOG_INTERVAL_MS, with how many failures were not logged meanwhile, so a dead
 * corporate proxy under load is one line every ten seconds, not one per hop. PAC answers can name any
 * proxy, so the table is bounded too.
 */
export function upstreamFailureLogger(log: { warn(obj: object, msg: string): void }, now: () => number = () => performance.now()): (failure: UpstreamFailure) => void {
  const last = new Map<string, { atMs: number; suppressed: number }>();
  return (failure) => {
    const key = `${failure.upstream} ${failure.reason}`;
    const seen = last.get(key);
    const t = now();
    if (seen !== undefined && t - seen.atMs < UPSTREAM_FAILURE_LOG_INTERVAL_MS) {
      seen.suppressed += 1;
      return;
    }
    if (seen === undefined && last.size >= MAX_LOGGED_UPSTREAMS) last.clear();
    last.set(key, { atMs: t, suppressed: 0 });
    log.warn({ upstream: failure.upstream, reason: failure.reason, detail: failure.detail, suppressed: seen?.suppressed ?? 0 }, `upstream proxy ${failure.upstream} failed: ${failure.reason}`);
  };
}
