// Handles one HTTP CONNECT, from node:http or the fast path (connect-head.ts): identify → canonicalize
// → the tunnel stages (tunnel-stages.ts), run by runHop; or, for a destination only http:// rules grant,
// a mediated tunnel (mediated-tunnel.ts).
import type http from 'node:http';
import type net from 'node:net';
import { parseConnectTarget } from '../../authority/index.js';
import type { ConnectionContext } from '../hop/connection-context.js';
import { decideHop, lookupHop } from '../hop/decide-hop.js';
import { Hop } from '../hop/hop.js';
import { identifyPresented } from '../hop/identify-hop.js';
import { mediateTunnel, mediatingRule } from '../tunnel/mediated-tunnel.js';
import { connectEstablished, writeSocketDenial } from './respond.js';
import { runHop } from '../hop/run-hop.js';
import type { ProxyRuntime } from '../hop/runtime.js';
import { answerTunnel, tunnelStages, type TunnelClient, type TunnelResponder } from '../tunnel/tunnel-stages.js';

/** What a CONNECT hop needs of its request head, from node:http or from the fast path (connect-head.ts). */
export interface ConnectRequest {
  readonly target: string;
  readonly proxyAuthorization: string | undefined;
  readonly headerCount: number;
}

export function connectRequestOf(req: http.IncomingMessage): ConnectRequest {
  return { target: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'], headerCount: req.rawHeaders.length / 2 };
}

const HTTP_CONNECT: TunnelResponder = {
  established: (socket) => void socket.write(connectEstablished()),
  deny: writeSocketDenial,
};

export function onConnect(rt: ProxyRuntime, ctx: ConnectionContext, req: ConnectRequest, socket: net.Socket, head: Buffer): Promise<void> {
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', req.target);
  const client: TunnelClient = { socket, head, responder: HTTP_CONNECT, established: false };
  const lookup = lookupHop(rt, ctx, hop, req.proxyAuthorization, req.target);
  return runHop(rt, ctx, hop, async (run) => {
    let grant = identifyPresented(rt, ctx, hop, req.proxyAuthorization, req.headerCount, lookup.remembered?.principal ?? null);
    if (grant instanceof Promise) grant = await grant;
    if (grant === null) return;
    let mediating: string | null = null;
    let decided = decideHop(rt, hop, grant, lookup, () => {
      const target = parseConnectTarget(req.target);
      if (!target.ok) return hop.fail(target.reason, target.detail);
      hop.canonical = target.value;
      // Only http:// rules grant it: not dialed here, each request inside is its own hop.
      mediating = mediatingRule(ctx, hop, grant);
      return mediating === null;
    });
    if (decided instanceof Promise) decided = await decided;
    if (decided) await tunnelStages(rt, ctx, run, grant, client);
    else if (mediating !== null) await mediateTunnel(rt, ctx, run, mediating, client);
  }, (decision) => answerTunnel(client, decision));
}
