// A mediated tunnel: a CONNECT (or SOCKS5 CONNECT) whose destination only http:// rules of the grant
// allow is accepted, and the HTTP/1.1 inside is parsed by the listener's node:http server and forwarded
// request by request, each its own hop authorized by those rules (issue 17: undici's proxy agents send
// http:// URLs through CONNECT). It never becomes an opaque tunnel: nothing but HTTP/1.1 requests to the
// CONNECT target passes, so no rule is widened, and a grant with an https/wss/tcp rule for the target
// keeps its opaque tunnel.
import { authorize, parseAbsoluteTarget } from '../../authority/index.js';
import type { CanonicalDestination, CloseReason } from '../../core/index.js';
import type { RuntimeGrant } from '../../grant/index.js';
import { endSocket } from '../../relay/index.js';
import type { ConnectionContext } from '../hop/connection-context.js';
import type { Hop } from '../hop/hop.js';
import type { HopRun } from '../hop/run-hop.js';
import type { ProxyRuntime } from '../hop/runtime.js';
import { readTunnelStart } from './tunnel-start.js';
import type { TunnelClient } from './tunnel-stages.js';

const MEDIATED_DETAIL = 'mediated: each HTTP/1.1 request inside is its own hop';

/**
 * The http:// rule that lets this CONNECT hop (destination canonicalized) be mediated, or null: when a
 * CONNECT rule (https, wss, tcp) or `unrestricted` grants it, it is an opaque tunnel as ever, and
 * when no http:// rule grants it, it is refused as ever. Mediation needs a parser on the connection.
 */
export function mediatingRule(ctx: ConnectionContext, hop: Hop, grant: RuntimeGrant): string | null {
  const dest = hop.canonical;
  if (ctx.httpServer === null || dest === null || authorize(grant.authority, 'connect', dest).ok) return null;
  const rule = authorize(grant.authority, 'forward', dest);
  // Forward rules are http:// and ws://; only an http:// rule says plain HTTP requests may go there.
  if (!rule.ok || !rule.value.text.startsWith('http://')) return null;
  hop.authorizeUs = hop.elapsedUs();
  return rule.value.text;
}

/**
 * The absolute-form target a request inside a tunnel to `dest` stands for: origin-form `/path` becomes
 * `http://<dest><path>`; an absolute-form `http://` URI is kept if it names `dest` itself. Null for any
 * other target (another host or port, another scheme, asterisk- or authority-form): it is refused.
 */
export function targetInTunnel(dest: CanonicalDestination, raw: string): string | null {
  if (raw.startsWith('/')) return `http://${dest.key}${raw}`;
  const absolute = parseAbsoluteTarget(raw);
  return absolute.ok && absolute.value.scheme === 'http' && absolute.value.destination.key === dest.key ? raw : null;
}

/** How a mediated tunnel is ended from outside (revocation, expiry, shutdown): the reason is kept for its close record. */
class MediatedTunnel {
  endedBy: CloseReason | null = null;
  timedOut = false;
  sawEnd = false;

  constructor(private readonly client: TunnelClient) {}

  end(reason: CloseReason): void {
    this.endedBy ??= reason;
    endSocket(this.client.socket, reason);
  }

  /** Resolves with how the tunnel ended once the client socket has closed. */
  closed(ctx: ConnectionContext): Promise<CloseReason> {
    const { socket } = this.client;
    const reasonOf = (hadError: boolean): CloseReason =>
      this.endedBy ?? ctx.endedBy ?? (this.timedOut ? 'idle_timeout' : hadError ? 'client_reset' : this.sawEnd ? 'client_closed' : 'completed');
    if (socket.closed) return Promise.resolve(reasonOf(false));
    // node:http destroys a keep-alive connection on its socket timeout (keepAliveTimeout): idle.
    socket.once('timeout', () => void (this.timedOut = true));
    socket.once('end', () => void (this.sawEnd = true));
    return new Promise((resolve) => socket.once('close', (hadError: boolean) => resolve(reasonOf(hadError))));
  }
}

/**
 * After the CONNECT hop is authorized by `rule`: answers 200 (or the SOCKS5 success reply), reads the
 * first bytes, and decides the hop: allowed when they start an HTTP/1.1 request, else denied
 * (tunnel_not_http, request_timeout, client_gone) and the tunnel closed before any byte went anywhere.
 * Then the connection is node:http's, confined to the target (ConnectionContext.mediated; on-request.ts),
 * and the CONNECT hop's close record is written when it closes; its requests' bytes are in their own.
 */
export async function mediateTunnel(rt: ProxyRuntime, ctx: ConnectionContext, run: HopRun, rule: string, client: TunnelClient): Promise<void> {
  const { hop } = run;
  const { socket } = client;
  const server = ctx.httpServer;
  const dest = hop.canonical;
  if (server === null || dest === null) return void hop.fail('internal_error', 'a mediated tunnel without a parser or a destination');
  hop.rule = rule;
  if (socket.destroyed) return void hop.fail('client_gone', 'before the tunnel was established');
  // The 200 goes first (the client sends its request only after it); nothing is dialed before a request.
  client.responder.established(socket);
  client.established = true;
  const start = await readTunnelStart(socket, client.head, rt.handshakeTimeoutMs);
  if (!start.ok) return void hop.fail(start.reason, start.detail);
  hop.detail = MEDIATED_DETAIL;
  run.decide();
  ctx.mediated = dest;
  const tunnel = new MediatedTunnel(client);
  ctx.tunnel = tunnel;
  const closed = tunnel.closed(ctx);
  if (ctx.endedBy !== null) {
    // Revoked or expired while the first bytes were read: the registry could not see this tunnel yet.
    tunnel.end(ctx.endedBy);
  } else if (!socket.destroyed) {
    // node:http reads the connection from the first request byte, as the CONNECT fast path hands it over.
    if (start.head.length > 0) socket.unshift(start.head);
    server.emit('connection', socket);
    socket.resume();
  }
  const closedBy = await closed;
  if (ctx.tunnel === tunnel) ctx.tunnel = null;
  run.close({ closedBy, status: 200, bytesUp: 0, bytesDown: 0 });
}
