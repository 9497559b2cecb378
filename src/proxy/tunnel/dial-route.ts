// Opens the tunnel for an authorized CONNECT over its route (over-route.ts): direct dials the pinned
// addresses; a proxy alternative is asked to CONNECT to the canonical name, or to the checked IP with
// sendResolvedAddress. Only a connection-level failure moves on to the next alternative.
import type net from 'node:net';
import { deny, ok, type Verdict } from '../../core/index.js';
import { connectThroughProxy, dial, isConnectionFailure } from '../../egress/index.js';
import type { RouteHop } from '../../route/index.js';
import type { Hop } from '../hop/hop.js';
import { overRoute, upstreamAuthority } from './over-route.js';
import type { ProxyRuntime } from '../hop/runtime.js';

export interface OpenedTunnel {
  readonly socket: net.Socket;
  readonly head: Buffer;
}

/** A direct tunnel has no bytes of its own before the relay starts; never written to. */
const NO_HEAD = Buffer.alloc(0);

async function openOne(rt: ProxyRuntime, hop: Hop, routeHop: RouteHop): Promise<Verdict<OpenedTunnel>> {
  if (routeHop.kind === 'direct') {
    const dialed = await dial(hop.pinned, rt.dial);
    if (!dialed.ok) return dialed;
    hop.dialed = dialed.value.pinned;
    return ok({ socket: dialed.value.socket, head: NO_HEAD });
  }
  const authority = upstreamAuthority(hop, routeHop);
  if (authority === null) return deny('dns_no_address', 'sendResolvedAddress needs a locally resolved address');
  const tunnel = await connectThroughProxy(routeHop.proxy, authority, rt.upstream);
  if (tunnel.ok && routeHop.proxy.sendResolvedAddress) hop.dialed = hop.pinned[0] ?? null;
  return tunnel;
}

export function dialRoute(rt: ProxyRuntime, hop: Hop): Promise<Verdict<OpenedTunnel>> {
  const only = hop.routeHops.length === 1 ? hop.routeHops[0] : undefined;
  // A route of one direct alternative (the default route): dialed without the loop's frames; the same
  // outcome as overRoute, which would try that one alternative and stop.
  if (only?.kind === 'direct') {
    hop.usedHop = only;
    return dial(hop.pinned, rt.dial).then((dialed) => {
      if (!dialed.ok) return dialed;
      hop.dialed = dialed.value.pinned;
      return ok({ socket: dialed.value.socket, head: NO_HEAD });
    });
  }
  return overRoute(hop, (routeHop) => openOne(rt, hop, routeHop), (failure) => isConnectionFailure(failure.reason));
}
