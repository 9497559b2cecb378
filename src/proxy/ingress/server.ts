// The proxy's ingress: one node:http server per configured listener (TCP or Unix socket), each either
// token-identified or bound to one grant. Parses strictly (Node's default strict parser, never the lenient one: request smuggling,
// RFC 9112 §6.3), answers parse errors with 400 and closes only that connection.
import http from 'node:http';
import net from 'node:net';
import type { ListenerSection } from '../../config/index.js';
import { SlotSet, SOCKET_HIGH_WATER_MARK } from '../../core/index.js';
import { Deadlines, isUnixSocketAlive } from '../../egress/index.js';
import { ConnectionContext } from '../hop/connection-context.js';
import { Hop } from '../hop/hop.js';
import { parseConnectHead } from './connect-head.js';
import { connectRequestOf, onConnect, type ConnectRequest } from './on-connect.js';
import { onRequest } from './on-request.js';
import { onSocksConnection } from './socks5.js';
import { writeResponseDenial, writeSocketDenial } from './respond.js';
import { refuseHop, type Answer } from '../hop/run-hop.js';
import type { ProxyRuntime } from '../hop/runtime.js';
import { afterResponse, answerInOrder, noteResponse, pendingResponse } from './answer-in-order.js';
import { acceptTls, bindListener, closeListeners, loadListenerTls, presentedCertificate, proxyProtocolGate, type ProxyProtocolGate, type SocketFile, type TlsHolder } from '../../listen/index.js';
import { carriedOver } from '../../relay/index.js';

const CONTEXT = Symbol('sluice.connection');
/** An accepted socket's index in its listener's SlotSet (a Set would chain its tables: core/slot-set.ts). */
const LISTENER_SLOT = Symbol('sluice.listenerSlot');
type TaggedSocket = net.Socket & { [CONTEXT]?: ConnectionContext };

export interface BoundListener {
  readonly name: string;
  /** `host:port` with the real port, or `unix:/path`. */
  readonly address: string;
  readonly server: net.Server;
  /**
   * The node:http server that parses what the CONNECT fast path hands over, and mediated tunnels (on a
   * SOCKS5 listener only those).
   */
  readonly http: http.Server | null;
  /** Every accepted client socket, including those handed over to CONNECT tunnels, for shutdown. */
  readonly sockets: SlotSet<net.Socket>;
  /** A Unix listener's socket file, removed on stop (null for TCP). */
  readonly socketFile: SocketFile | null;
  /** A TLS listener's context for new handshakes (listeners[].tls); a reload swaps `current`. */
  readonly tls: TlsHolder | null;
}

/** The first byte of a TLS record carrying a handshake (RFC 8446 §5.1, ContentType handshake = 22). */
const TLS_HANDSHAKE_RECORD = 0x16;

/** Closed until the listener's socket file has its final mode: a connection accepted before is dropped. */
interface AcceptGate {
  isOpen: boolean;
}

export interface HttpLimits {
  readonly headersTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxHeaderBytes: number;
}

function contextOf(socket: net.Socket): ConnectionContext | undefined {
  return (socket as TaggedSocket)[CONTEXT];
}

/** node:http parsed a head (or gave up on one) on this connection: its first-request clock stops. */
function headParsed(socket: net.Socket): ConnectionContext | undefined {
  const ctx = contextOf(socket);
  ctx?.firstRequestDone();
  return ctx;
}

/** Admission, the connection context and socket tracking: the same for HTTP and SOCKS5 listeners. */
function acceptConnection(rt: ProxyRuntime, section: ListenerSection, sockets: SlotSet<net.Socket>, socket: TaggedSocket, httpServer: http.Server): ConnectionContext | null {
  const ctx = new ConnectionContext(socket, section.name, { boundGrant: section.grant ?? null });
  ctx.httpServer = httpServer;
  if (!rt.gate.tryAdmit(section.name, section.maxConnections)) {
    refuseHop(rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), 'connections_exhausted', '', (decision) => {
      if (section.protocol === 'socks5') socket.destroy();
      else writeSocketDenial(socket, decision);
    });
    return null;
  }
  socket[CONTEXT] = ctx;
  // Set on every socket at accept, so that all keep one shape.
  noteResponse(socket, null);
  sockets.add(socket);
  rt.metrics.connectionOpened(section.name);
  socket.once('close', () => {
    ctx.firstRequestDone();
    rt.gate.release(section.name);
    sockets.delete(socket);
    rt.metrics.connectionClosed(section.name);
  });
  return ctx;
}

/** listeners[].proxyProtocol: the header is read, and the client address it carries kept, before anything else. */
function afterProxyHeader(rt: ProxyRuntime, proxyHeader: ProxyProtocolGate | null, ctx: ConnectionContext, next: () => void): void {
  if (proxyHeader === null) return next();
  proxyHeader.read(ctx.socket, (outcome) => {
    if (!outcome.ok) return refuseHop(rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), 'request_malformed', outcome.reason, () => void ctx.socket.destroy());
    ctx.carrySource(outcome.source);
    next();
    ctx.socket.resume();
  });
}

interface ListenerServers {
  readonly server: net.Server;
  readonly http: http.Server;
}

/**
 * listeners[].tls: the handshake, after any PROXY protocol header and before anything else, within
 * timeouts.headersMs of accept (a client that opens and stalls holds nothing longer than a slow head
 * would). A connection that starts in plain text is answered in plain text (tls_required), so `curl -x
 * http://` to a TLS listener learns why. On an `identify: certificate` listener the verified client
 * certificate decides the principal, once, for the connection's life.
 */
function startTls(rt: ProxyRuntime, section: ListenerSection, ctx: ConnectionContext, holder: TlsHolder, limits: HttpLimits, serve: (secure: net.Socket) => void): void {
  const transport = ctx.socket;
  const refuse = (reason: 'tls_required' | 'tls_handshake_failed' | 'request_timeout', detail: string, answer: Answer): void =>
    refuseHop(rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), reason, detail, answer);
  const deadline = setTimeout(() => {
    transport.removeListener('data', onFirst);
    refuse('tls_handshake_failed', 'no TLS handshake within timeouts.headersMs', () => void transport.destroy());
  }, limits.headersTimeoutMs);
  deadline.unref();
  transport.on('error', destroyOnError);
  transport.once('close', () => clearTimeout(deadline));
  const onFirst = (chunk: Buffer): void => {
    transport.pause();
    if (chunk[0] !== TLS_HANDSHAKE_RECORD) {
      clearTimeout(deadline);
      refuse('tls_required', 'the connection began in plain text', (decision) => writeSocketDenial(transport, decision));
      return;
    }
    transport.unshift(chunk);
    clearTimeout(deadline);
    const left = Math.max(1, limits.headersTimeoutMs - (Date.now() - ctx.acceptedAtMs));
    acceptTls(transport, holder, left, (outcome) => {
      if (!outcome.ok) return refuse('tls_handshake_failed', outcome.reason, () => void transport.destroy());
      const secure = outcome.socket as TaggedSocket;
      carriedOver(secure, transport);
      secure[CONTEXT] = ctx;
      noteResponse(secure, null);
      if (section.identify !== 'certificate') ctx.overTls(secure, ctx.identity);
      else {
        const presented = presentedCertificate(outcome.socket);
        if (presented === null) return refuse('tls_handshake_failed', 'no client certificate', () => void secure.destroy());
        const mapped = rt.registry.grantForCertificate(presented.sha256, presented.uris);
        ctx.overTls(secure, 'grant' in mapped ? { boundGrant: mapped.grant, certificate: 'mapped' } : { boundGrant: null, certificate: mapped.none });
      }
      serve(secure);
    });
  };
  transport.once('data', onFirst);
}

function createListenerServer(rt: ProxyRuntime, section: ListenerSection, limits: HttpLimits, sockets: SlotSet<net.Socket>, gate: AcceptGate, tls: TlsHolder | null): ListenerServers {
  const proxyHeader = section.proxyProtocol === undefined ? null : proxyProtocolGate(section.proxyProtocol.trustedSources, limits.headersTimeoutMs);
  // A SOCKS5 listener's node:http server parses only mediated tunnels (mediated-tunnel.ts).
  const httpServer = createHttpServer(rt, limits);
  // The listener itself is a plain net server. On an HTTP listener each connection's first chunk goes to
  // the CONNECT fast path (connect-head.ts) or, unchanged, to node:http.
  const serve = (ctx: ConnectionContext, socket: net.Socket): void => {
    if (section.protocol !== 'socks5') return awaitFirstChunk(rt, ctx, socket, httpServer, limits);
    onSocksConnection(rt, ctx, socket).catch((error: unknown) => lastResort(rt, socket, error));
  };
  const server = net.createServer({ allowHalfOpen: true, noDelay: true, highWaterMark: SOCKET_HIGH_WATER_MARK }, (socket: TaggedSocket) => {
    if (!gate.isOpen) return void socket.destroy();
    const ctx = acceptConnection(rt, section, sockets, socket, httpServer);
    if (ctx === null) return;
    if (tls === null) afterProxyHeader(rt, proxyHeader, ctx, () => serve(ctx, socket));
    else afterProxyHeader(rt, proxyHeader, ctx, () => startTls(rt, section, ctx, tls, limits, (secure) => serve(ctx, secure)));
  });
  return { server, http: httpServer };
}

function destroyOnError(this: net.Socket): void {
  this.destroy();
}

/**
 * Until its first request head is parsed, a connection is on the clock of timeouts.headersMs from
 * accept (slowloris, RFC 9112 §9.5), whichever parser ends up reading it: the deadline is cleared by the
 * first hop, and answers 408 request_timeout otherwise, as Node's own header timeout does.
 */
function awaitFirstChunk(rt: ProxyRuntime, ctx: ConnectionContext, socket: net.Socket, httpServer: http.Server, limits: HttpLimits): void {
  ctx.startFirstRequestDeadline(Deadlines.for(limits.headersTimeoutMs), () => {
    if (socket.destroyed || socket.writableEnded) return;
    refuseHop(rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), 'request_timeout', 'no request head within timeouts.headersMs', (decision) => writeSocketDenial(socket, decision));
  });
  socket.on('error', destroyOnError);
  const onEnd = (): void => void socket.destroy();
  socket.once('end', onEnd);
  socket.once('data', (chunk: Buffer) => {
    socket.removeListener('end', onEnd);
    const head = parseConnectHead(chunk, limits.maxHeaderBytes);
    if (head === null) {
      // node:http reads the connection from its first byte: the chunk goes back in front of the stream.
      socket.pause();
      socket.unshift(chunk);
      httpServer.emit('connection', socket);
      socket.resume();
      return;
    }
    // Hold what the client sends while the hop is decided and dialed: the tunnel (or the ClientHello
    // check) resumes the socket. node:http does the same for its 'connect' event.
    socket.pause();
    startConnect(rt, ctx, socket, { target: head.target, proxyAuthorization: head.proxyAuthorization, headerCount: head.headerCount }, head.rest);
  });
}

function startConnect(rt: ProxyRuntime, ctx: ConnectionContext, socket: net.Socket, req: ConnectRequest, head: Buffer): void {
  ctx.firstRequestDone();
  onConnect(rt, ctx, req, socket, head).catch((error: unknown) => lastResort(rt, socket, error));
}

function createHttpServer(rt: ProxyRuntime, limits: HttpLimits): http.Server {
  const server = http.createServer({
    // Explicit, so NODE_OPTIONS=--insecure-http-parser cannot loosen it (ADR 0011; RFC 9112 §6.3).
    insecureHTTPParser: false,
    requireHostHeader: false,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: 0,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxHeaderSize: limits.maxHeaderBytes,
    noDelay: true,
    highWaterMark: SOCKET_HIGH_WATER_MARK,
    // Node checks header and request timeouts on this interval (default 30 s): slowloris needs it short.
    connectionsCheckingInterval: 1_000,
  });
  // No field count in node:http: the identify stage counts every field and refuses above
  // limits.maxHeaderCount (identify-hop.ts), with the same decision on every Node version. Node 20
  // silently drops the fields past maxHeadersCount; Node 24 (24.22.3 measured) refuses the whole head as
  // HPE_HEADER_OVERFLOW, before the request has a method, a target or a principal.
  // What node:http keeps is bounded by maxHeaderSize (limits.maxHeaderBytes): a field is 4 bytes or more.
  server.maxHeadersCount = 0;
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const ctx = headParsed(req.socket);
    if (ctx === undefined) return void res.destroy();
    const pending = pendingResponse(req.socket);
    noteResponse(req.socket, res);
    if (!isHttp11(req)) return refuseVersion(rt, ctx, req, (decision) => writeResponseDenial(res, decision, true));
    if (pending === null) return void onRequest(rt, ctx, req, res).catch((error: unknown) => lastResort(rt, req.socket, error));
    // A pipelined request waits for the responses ahead of it (RFC 9112 §9.3.2): if one of them closed the
    // connection, nothing after it may reach an origin; it is recorded and dropped.
    afterResponse(pending, req.socket, () => {
      onRequest(rt, ctx, req, res).catch((error: unknown) => lastResort(rt, req.socket, error));
    }, () => {
      const hop = new Hop(ctx.nextHop(), 'forward', req.method ?? 'GET', req.url ?? '');
      refuseHop(rt, ctx, hop, 'client_gone', 'the connection closed before the requests pipelined ahead of it were answered', () => res.destroy());
    });
  });
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const ctx = headParsed(socket);
    if (ctx === undefined) return void socket.destroy();
    const pending = pendingResponse(socket);
    if (pending === null) return answerConnect(rt, ctx, req, socket, head);
    answerInOrder(socket, pending, () => {
      if (socket.destroyed) return recordGone(rt, ctx, req);
      answerConnect(rt, ctx, req, socket, head);
    });
  });
  // RFC 9110 §10.1.1: an Expect other than 100-continue is answered 417, by Sluice (with a reason and a
  // record), not by Node's default handler.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const ctx = headParsed(req.socket);
    if (ctx === undefined) return void res.destroy();
    const hop = connectionHop(ctx, 'forward', req);
    refuseHop(rt, ctx, hop, 'expectation_unsupported', '', (decision) => writeResponseDenial(res, decision, true));
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    const ctx = headParsed(socket);
    if (ctx === undefined) return void socket.destroy();
    const pending = pendingResponse(socket);
    if (pending === null) return refuseUpgrade(rt, ctx, req, socket);
    answerInOrder(socket, pending, () => refuseUpgrade(rt, ctx, req, socket));
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: net.Socket) => {
    const ctx = headParsed(socket);
    if (ctx === undefined || error.code === 'ECONNRESET' || error.code === 'EPIPE') return void socket.destroy();
    const pending = pendingResponse(socket);
    // A body that breaks its own framing is refused at once, as before: its request cannot complete.
    if (pending === null || !pending.req.complete) return refuseMalformed(rt, ctx, error, socket);
    // A malformed head after complete requests: stop reading (node:http would feed its failed parser
    // again; nothing after it is a request), and answer once the responses ahead are written, in order
    // (RFC 9112 §9.3.2).
    socket.pause();
    answerInOrder(socket, pending, () => refuseMalformed(rt, ctx, error, socket));
  });
  return server;
}

function answerConnect(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
  if (!isHttp11(req)) return refuseVersion(rt, ctx, req, (decision) => writeSocketDenial(socket, decision));
  // A tunnel inside a mediated tunnel would carry what its http:// rules do not grant: never.
  if (ctx.mediated !== null) return refuseHop(rt, ctx, connectionHop(ctx, 'connect', req), 'tunnel_not_http', 'a CONNECT inside a tunnel granted only by http:// rules', (decision) => writeSocketDenial(socket, decision));
  startConnect(rt, ctx, socket, connectRequestOf(req), head);
}

/**
 * A hop refused before identification: it is attributed to the connection's principal, if an earlier
 * hop named one, and its denial names that grant as before.
 */
function connectionHop(ctx: ConnectionContext, kind: 'connect' | 'forward', req: http.IncomingMessage | null): Hop {
  const hop = new Hop(ctx.nextHop(), kind, req?.method ?? '-', req?.url ?? '');
  hop.principal = ctx.principal;
  return hop;
}

function refuseUpgrade(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage, socket: net.Socket): void {
  refuseHop(rt, ctx, connectionHop(ctx, 'forward', req), 'upgrade_unsupported', '', (decision) => writeSocketDenial(socket, decision));
}

function refuseMalformed(rt: ProxyRuntime, ctx: ConnectionContext, error: NodeJS.ErrnoException, socket: net.Socket): void {
  const hop = connectionHop(ctx, 'forward', null);
  refuseHop(rt, ctx, hop, clientErrorReason(error.code), error.code ?? 'parse error', (decision) => writeSocketDenial(socket, decision));
}

/** A pipelined CONNECT whose connection ended before the responses ahead of it were written: recorded, nobody to answer. */
function recordGone(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage): void {
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', req.url ?? '');
  refuseHop(rt, ctx, hop, 'client_gone', 'the connection ended before the requests pipelined ahead of the CONNECT were answered', () => undefined);
}

/**
 * Only HTTP/1.0 and 1.1 request lines. Node's parser takes a line without a version as HTTP/0.9 yet
 * still reads header lines after it, so a CR LF inside a target would end the line early and smuggle
 * the rest in as a header (RFC 9112 §3: HTTP-version is required).
 */
function isHttp11(req: http.IncomingMessage): boolean {
  return req.httpVersionMajor === 1 && (req.httpVersionMinor === 0 || req.httpVersionMinor === 1);
}

function refuseVersion(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage, answer: Answer): void {
  const hop = new Hop(ctx.nextHop(), req.method === 'CONNECT' ? 'connect' : 'forward', req.method ?? '-', req.url ?? '');
  // Inside a mediated tunnel only HTTP/1.x passes; the principal is the tunnel's.
  if (ctx.mediated !== null) hop.principal = ctx.principal;
  refuseHop(rt, ctx, hop, ctx.mediated === null ? 'request_malformed' : 'tunnel_not_http', `HTTP/${req.httpVersion} request line`, answer);
}

function clientErrorReason(code: string | undefined): 'request_timeout' | 'headers_too_large' | 'request_malformed' {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  if (code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  return 'request_malformed';
}

/** runHop answers every fault of a hop; this only catches one of runHop itself, and closes the connection. */
function lastResort(rt: ProxyRuntime, socket: net.Socket, error: unknown): void {
  rt.log.error({ err: error }, 'hop handling failed outside the hop');
  socket.destroy();
}

export async function startListeners(rt: ProxyRuntime, sections: readonly ListenerSection[], limits: HttpLimits): Promise<BoundListener[]> {
  const bound: BoundListener[] = [];
  try {
    for (const section of sections) {
      const sockets = new SlotSet<net.Socket>(LISTENER_SLOT);
      const acceptGate: AcceptGate = { isOpen: false };
      // A file set that does not load fails the start (or the reload) naming the key: never a listener
      // that accepts and then fails every handshake.
      const tls = section.tls === undefined ? null : { current: loadListenerTls(section.tls) };
      const { server, http: httpServer } = createListenerServer(rt, section, limits, sockets, acceptGate, tls);
      const { address, socketFile } = await bindListener(server, section, isUnixSocketAlive);
      // Nothing is served before the socket file has its final mode, as on the admin socket.
      acceptGate.isOpen = true;
      // node:http sets up its connection tracking (header timeouts, closeIdleConnections) on
      // 'listening'; it is fed sockets by the listener instead of listening itself.
      httpServer.emit('listening');
      bound.push({ name: section.name, address, server, http: httpServer, sockets, socketFile, tls });
    }
  } catch (error) {
    await stopListeners(bound);
    throw error;
  }
  return bound;
}

/**
 * Stops accepting at once, lets live connections finish for up to `drainMs`, then ends the rest
 * (tunnels record proxy_shutdown), and removes each Unix socket file that is still this listener's.
 */
export function stopListeners(listeners: readonly BoundListener[], drainMs = 0): Promise<void> {
  return closeListeners(listeners, drainMs, {
    // Connections that have not sent a request head yet are idle too.
    isIdle: (socket) => contextOf(socket)?.awaitingFirstRequest === true,
    endLive: (socket) => contextOf(socket)?.tunnel?.end('proxy_shutdown'),
  });
}
