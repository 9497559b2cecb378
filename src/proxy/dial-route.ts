// Opens the tunnel for an authorized CONNECT over its route (over-route.ts): direct dials the pinned
// addresses; a proxy alternative is asked to CONNECT to the canonical name, or to the checked IP with
// sendResolvedAddress. Only a connection-level failure moves on to the next alternative.
import type net from 'node:net';
import { deny, ok, type Verdict } from '../core/index.js';
import { connectThroughProxy, dial, isConnectionFailure } from '../egress/index.js';
import type { RouteHop } from '../route/index.js';
import type { Hop } from './hop.js';
import { overRoute, upstreamAuthority } from './over-route.js';
import type { ProxyRuntime } from './runtime.js';

export interface OpenedTunnel {
  readonly socket: net.Socket;
  readonly head: Buffer;
}

async function openOne(rt: ProxyRuntime, hop: Hop, routeHop: RouteHop): Promise<Verdict<OpenedTunnel>> {
  if (routeHop.kind === 'direct') {
    const dialed = await dial(hop.pinned, rt.dial);
    if (!dialed.ok) return dialed;
    hop.dialed = dialed.value.pinned;
    return ok({ socket: dialed.value.socket, head: Buffer.alloc(0) });
  }
  const authority = upstreamAuthority(hop, routeHop);
  if (authority === null) return deny('dns_no_address', 'sendResolvedAddress needs a locally resolved address');
  const tunnel = await connectThroughProxy(routeHop.proxy, authority, rt.upstream);
  if (tunnel.ok && routeHop.proxy.sendResolvedAddress) hop.dialed = hop.pinned[0] ?? null;
  return tunnel;
}

export function dialRoute(rt: ProxyRuntime, hop: Hop): Promise<Verdict<OpenedTunnel>> {
  return overRoute(hop, (routeHop) => openOne(rt, hop, routeHop), (failure) => isConnectionFailure(failure.reason));
}
