// Handles one CONNECT: identify → canonicalize → authorize → route → resolve/pin → dial the pin →
// 200 → opaque tunnel. A denial is answered before any byte goes upstream (conformance scenario 1).
import type http from 'node:http';
import type net from 'node:net';
import { parseConnectTarget } from '../authority/index.js';
import { Tunnel, type RelayLimits } from '../relay/index.js';
import type { RuntimeGrant } from '../grant/index.js';
import { recordClose, recordDecision } from './audit-hop.js';
import type { ConnectionContext } from './connection-context.js';
import { decideDestination } from './decide.js';
import { dialRoute } from './dial-route.js';
import { Hop } from './hop.js';
import { identifyPresented } from './identify-hop.js';
import { connectEstablished, writeSocketDenial } from './respond.js';
import { checkSni } from './sni-guard.js';
import type { ProxyRuntime } from './runtime.js';

function deny(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, socket: net.Socket): void {
  recordDecision(rt.audit, ctx, hop, rt.metrics);
  writeSocketDenial(socket, { reason: hop.reason, destination: hop.canonical?.key ?? null, grant: hop.principal?.grantId ?? null });
}

function relayLimits(rt: ProxyRuntime, grant: RuntimeGrant): RelayLimits {
  const idle = grant.limits.idleTimeoutMs;
  return idle === undefined || idle >= rt.relay.idleTimeoutMs ? rt.relay : { idleTimeoutMs: idle };
}

/** What a CONNECT hop needs of its request head, from node:http or from the fast path (connect-head.ts). */
export interface ConnectRequest {
  readonly target: string;
  readonly proxyAuthorization: string | undefined;
  readonly headerCount: number;
}

export function connectRequestOf(req: http.IncomingMessage): ConnectRequest {
  return { target: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'], headerCount: req.rawHeaders.length / 2 };
}

export async function onConnect(rt: ProxyRuntime, ctx: ConnectionContext, req: ConnectRequest, socket: net.Socket, head: Buffer): Promise<void> {
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', req.target);
  const grant = identifyPresented(rt, ctx, hop, req.proxyAuthorization, req.headerCount);
  if (grant === null) return deny(rt, ctx, hop, socket);

  const target = parseConnectTarget(req.target);
  if (!target.ok) {
    hop.fail(target.reason, target.detail);
    return deny(rt, ctx, hop, socket);
  }
  hop.canonical = target.value;
  await runTunnelHop(rt, ctx, hop, grant, socket, head, HTTP_CONNECT);
}

/** How a tunnel hop answers its client: HTTP CONNECT (200 / a denial response) or SOCKS5 replies. */
export interface TunnelResponder {
  established(socket: net.Socket): void;
  deny(socket: net.Socket, hop: Hop): void;
}

const HTTP_CONNECT: TunnelResponder = {
  established: (socket) => void socket.write(connectEstablished()),
  deny: (socket, hop) => writeSocketDenial(socket, { reason: hop.reason, destination: hop.canonical?.key ?? null, grant: hop.principal?.grantId ?? null }),
};

/** Decide → dial the route → answer → (SNI check) → relay → close record. Shared by CONNECT and SOCKS5. */
export async function runTunnelHop(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, grant: RuntimeGrant, socket: net.Socket, head: Buffer, responder: TunnelResponder): Promise<void> {
  const deny = (): void => {
    recordDecision(rt.audit, ctx, hop, rt.metrics);
    responder.deny(socket, hop);
  };
  if (!(await decideDestination(rt, hop, grant))) return deny();
  if (socket.destroyed) {
    hop.fail('client_gone', 'before the tunnel was dialed');
    recordDecision(rt.audit, ctx, hop, rt.metrics);
    return;
  }

  const opened = await dialRoute(rt, hop);
  hop.dialUs = hop.elapsedUs();
  if (!opened.ok) {
    hop.fail(opened.reason, opened.detail);
    return deny();
  }
  const upstream = opened.value.socket;
  if (opened.value.head.length > 0) hop.firstByteUs = hop.elapsedUs();
  if (socket.destroyed) {
    upstream.destroy();
    hop.fail('client_gone', 'before the tunnel was established');
    recordDecision(rt.audit, ctx, hop, rt.metrics);
    return;
  }
  let clientHead = head;
  if (grant.requireSniMatch && hop.canonical !== null) {
    // The 200 goes first (the client sends its ClientHello only after it); nothing reaches the
    // origin until the server name is checked.
    responder.established(socket);
    const sni = await checkSni(socket, head, hop.canonical, rt.handshakeTimeoutMs);
    if (!sni.ok) {
      hop.fail('sni_mismatch', sni.detail);
      recordDecision(rt.audit, ctx, hop, rt.metrics);
      upstream.destroy();
      socket.destroy();
      return;
    }
    clientHead = sni.head;
    recordDecision(rt.audit, ctx, hop, rt.metrics);
  } else {
    recordDecision(rt.audit, ctx, hop, rt.metrics);
    responder.established(socket);
  }
  if (opened.value.head.length > 0) socket.write(opened.value.head);
  const tunnel = new Tunnel(socket, upstream, relayLimits(rt, grant), clientHead, rt.registry.budgetOf(grant));
  ctx.tunnel = tunnel;
  ctx.tunnelHop = hop;
  rt.metrics.tunnelOpened(ctx.listener);
  // Revoked or expired while dialing: the registry could not see this tunnel yet.
  if (ctx.endedBy !== null) tunnel.end(ctx.endedBy);
  const outcome = await tunnel.done;
  if (hop.firstByteUs === null && tunnel.firstDownAt !== null) hop.firstByteUs = Math.round((tunnel.firstDownAt - hop.startedAt) * 1000);
  ctx.tunnel = null;
  ctx.tunnelHop = null;
  rt.metrics.tunnelClosed(ctx.listener);
  if (grant.limits.maxBytes === undefined) rt.registry.addBytes(grant.id, outcome.bytesUp + outcome.bytesDown);
  recordClose(rt.audit, ctx, hop, { closedBy: outcome.closedBy, status: 200, bytesUp: outcome.bytesUp, bytesDown: outcome.bytesDown }, rt.metrics);
}
