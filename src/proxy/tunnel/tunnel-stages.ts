// The stages of a tunnel hop after its principal and destination are known and authorized (decide-hop.ts),
// for HTTP CONNECT and SOCKS5 alike: dial the route → answer → (SNI check) → relay → close record. A denial is answered
// before any byte goes upstream (docs/scenarios.md scenario 1).
import type net from 'node:net';
import type { RuntimeGrant } from '../../grant/index.js';
import { Tunnel } from '../../relay/index.js';
import type { ConnectionContext } from '../hop/connection-context.js';
import type { Decision } from '../hop/decision.js';
import { dialRoute } from './dial-route.js';
import type { HopRun } from '../hop/run-hop.js';
import { relayLimitsFor, type ProxyRuntime } from '../hop/runtime.js';
import { checkSni } from './sni-guard.js';

/** How a tunnel hop answers its client: HTTP CONNECT (200 / a denial response) or SOCKS5 replies. */
export interface TunnelResponder {
  established(socket: net.Socket): void;
  deny(socket: net.Socket, decision: Decision): void;
}

/** A tunnel's client socket and whether it has been told the tunnel is established. */
export interface TunnelClient {
  readonly socket: net.Socket;
  /** What the client sent after its request head, held until the tunnel relays it. */
  readonly head: Buffer;
  readonly responder: TunnelResponder;
  established: boolean;
}

/** Answers a denied tunnel hop: a denial before the 200, or just the close after it (SNI mismatch). */
export function answerTunnel(client: TunnelClient, decision: Decision): void {
  if (client.established) client.socket.destroy();
  else client.responder.deny(client.socket, decision);
}

export async function tunnelStages(rt: ProxyRuntime, ctx: ConnectionContext, run: HopRun, grant: RuntimeGrant, client: TunnelClient): Promise<void> {
  const { hop } = run;
  const { socket } = client;
  if (socket.destroyed) return void hop.fail('client_gone', 'before the tunnel was dialed');

  const opened = await dialRoute(rt, hop);
  hop.dialUs = hop.elapsedUs();
  if (!opened.ok) return void hop.fail(opened.reason, opened.detail);
  const upstream = opened.value.socket;
  try {
    if (opened.value.head.length > 0) hop.firstByteUs = hop.elapsedUs();
    if (socket.destroyed) {
      upstream.destroy();
      return void hop.fail('client_gone', 'before the tunnel was established');
    }
    let clientHead = client.head;
    if (grant.requireSniMatch && hop.canonical !== null) {
      // The 200 goes first (the client sends its ClientHello only after it); nothing reaches the
      // origin until the server name is checked.
      client.responder.established(socket);
      client.established = true;
      const sni = await checkSni(socket, client.head, hop.canonical, rt.handshakeTimeoutMs);
      if (!sni.ok) {
        upstream.destroy();
        return void hop.fail('sni_mismatch', sni.detail);
      }
      clientHead = sni.head;
      run.decide();
    } else {
      run.decide();
      client.responder.established(socket);
      client.established = true;
    }
    if (opened.value.head.length > 0) socket.write(opened.value.head);
    await relay(rt, ctx, run, grant, socket, upstream, clientHead);
  } catch (error) {
    upstream.destroy();
    throw error;
  }
}

async function relay(rt: ProxyRuntime, ctx: ConnectionContext, run: HopRun, grant: RuntimeGrant, socket: net.Socket, upstream: net.Socket, clientHead: Buffer): Promise<void> {
  const { hop } = run;
  const tunnel = new Tunnel(socket, upstream, relayLimitsFor(rt, grant), clientHead, rt.registry.budgetOf(grant));
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
  run.close({ closedBy: outcome.closedBy, status: 200, bytesUp: outcome.bytesUp, bytesDown: outcome.bytesDown });
}
