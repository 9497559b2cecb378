// Per-client-connection state. Fields are all set in the constructor so the shape never changes.
import type http from 'node:http';
import type net from 'node:net';
import type { CanonicalDestination, CloseReason, Principal } from '../../core/index.js';
import type { Deadline, Deadlines } from '../../egress/index.js';
import type { ListenerIdentity } from '../../identity/index.js';
import { endSocket } from '../../relay/index.js';
import type { Hop } from './hop.js';

let nextId = 0;

export class ConnectionContext {
  principal: Principal | null = null;
  /** The Proxy-Authorization value that identified `principal` (compared, never logged). */
  verifiedAuthorization: string | null = null;
  hops = 0;
  /** The live CONNECT tunnel on this connection, so shutdown and revocation can end it with a reason. */
  tunnel: { end(reason: CloseReason): void } | null = null;
  /** The hop the live tunnel carries, so a reload can re-check it against a changed grant. */
  tunnelHop: Hop | null = null;
  /** The grant this connection is attached to (counted against its budgets). */
  grantId: string | null = null;
  /** The grant registry's index of this connection among its grant's live ones (GrantConnection). */
  liveSlot = -1;
  /**
   * The node:http server that parses this connection's requests: its listener's (on a SOCKS5 listener,
   * one kept for mediated tunnels only); null where nothing can parse them, and then no tunnel is mediated.
   */
  httpServer: http.Server | null = null;
  /**
   * Once this connection is a mediated tunnel (mediated-tunnel.ts): the CONNECT or SOCKS5 target that
   * every request on it is confined to. Null otherwise; never cleared.
   */
  mediated: CanonicalDestination | null = null;
  /** Why the connection was ended from outside (revocation, expiry, limits), for its close record. */
  endedBy: CloseReason | null = null;
  private durationTimer: NodeJS.Timeout | null = null;
  private firstRequest: { readonly deadlines: Deadlines; readonly deadline: Deadline } | null = null;
  readonly id: string;
  readonly acceptedAtMs = Date.now();
  private peer: string | null = null;
  /** The client address a PROXY protocol header carried (listeners[].proxyProtocol). */
  private carried: string | null = null;

  constructor(
    /** The client socket: the accepted one, or on a TLS listener the TLS socket over it (overTls). */
    public socket: net.Socket,
    readonly listener: string,
    public identity: ListenerIdentity,
  ) {
    nextId += 1;
    this.id = `c${nextId.toString(36)}`;
  }

  /**
   * The handshake on a TLS listener completed: every later read and write is the TLS socket's, and on an
   * `identify: certificate` listener the certificate decided the principal (issue 28). Called once,
   * before the first request is read.
   */
  overTls(secure: net.Socket, identity: ListenerIdentity): void {
    this.socket = secure;
    this.identity = identity;
  }

  /**
   * The address auth failures are counted against: the carried client address, else the peer (the
   * listener for Unix sockets). Read on first use: it costs a getpeername(2).
   */
  get source(): string {
    this.peer ??= this.carried ?? this.socket.remoteAddress ?? `unix:${this.listener}`;
    return this.peer;
  }

  /** The source as the decision record shows it: null on a Unix socket. */
  get auditSource(): string | null {
    const source = this.source;
    return source.startsWith('unix:') ? null : source;
  }

  /** A PROXY protocol header named the client (null: it named none, the peer is the client). */
  carrySource(address: string | null): void {
    this.carried = address;
    this.peer = null;
  }

  /**
   * Ends the connection now: its tunnel (with the reason in its close record) and the client socket, which
   * is reset when the grant withdrew it (relay/end-socket.ts), so bytes not yet delivered to the client are
   * dropped, not delivered after the revocation.
   */
  end(reason: CloseReason): void {
    this.endedBy ??= reason;
    this.tunnel?.end(reason);
    endSocket(this.socket, reason);
  }

  limitDuration(ms: number): void {
    if (this.durationTimer !== null) return;
    this.durationTimer = setTimeout(() => this.end('duration_limit'), ms);
    this.durationTimer.unref();
    this.socket.once('close', () => {
      if (this.durationTimer !== null) clearTimeout(this.durationTimer);
    });
  }

  /** Starts the clock for the first request head (timeouts.headersMs from accept). */
  startFirstRequestDeadline(deadlines: Deadlines, expire: () => void): void {
    this.firstRequest = { deadlines, deadline: deadlines.start(expire) };
  }

  /** The first request head arrived (or the connection closed): stops that clock. */
  firstRequestDone(): void {
    if (this.firstRequest === null) return;
    this.firstRequest.deadlines.clear(this.firstRequest.deadline);
    this.firstRequest = null;
  }

  get awaitingFirstRequest(): boolean {
    return this.firstRequest !== null;
  }

  nextHop(): number {
    this.hops += 1;
    return this.hops;
  }
}
