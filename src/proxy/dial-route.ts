// Opens the tunnel for an authorized CONNECT over its route: each alternative in order (the pinned
// addresses for direct; CONNECT through the upstream proxy with the canonical name, or the checked IP
// with sendResolvedAddress). Only a connection-level failure moves on to the next alternative; a 407 or
// a refusal from a proxy ends the hop. DIRECT is tried only when the route lists it.
import type net from 'node:net';
import { deny, ok, type Verdict } from '../core/index.js';
import { connectThroughProxy, dial, isConnectionFailure } from '../egress/index.js';
import type { RouteHop } from '../route/index.js';
import type { Hop } from './hop.js';
import type { ProxyRuntime } from './runtime.js';

export interface OpenedTunnel {
  readonly socket: net.Socket;
  readonly head: Buffer;
}

/** The authority sent upstream: the checked IP literal when the pin must survive the hop, else the name. */
export function upstreamAuthority(hop: Hop, routeHop: RouteHop & { kind: 'proxy' }): string | null {
  const dest = hop.canonical;
  if (dest === null) return null;
  if (!routeHop.proxy.sendResolvedAddress) return dest.key;
  const pinned = hop.pinned[0];
  if (pinned === undefined) return null;
  return pinned.family === 6 ? `[${pinned.address}]:${dest.port}` : `${pinned.address}:${dest.port}`;
}

export async function dialRoute(rt: ProxyRuntime, hop: Hop): Promise<Verdict<OpenedTunnel>> {
  let last: Verdict<OpenedTunnel> = deny('route_none');
  for (const routeHop of hop.routeHops) {
    hop.usedHop = routeHop;
    if (routeHop.kind === 'direct') {
      const dialed = await dial(hop.pinned, rt.dial);
      if (dialed.ok) {
        hop.dialed = dialed.value.pinned;
        return ok({ socket: dialed.value.socket, head: Buffer.alloc(0) });
      }
      last = dialed;
    } else {
      const authority = upstreamAuthority(hop, routeHop);
      if (authority === null) {
        last = deny('dns_no_address', 'sendResolvedAddress needs a locally resolved address');
        continue;
      }
      const tunnel = await connectThroughProxy(routeHop.proxy, authority, rt.upstream);
      if (tunnel.ok) {
        if (routeHop.proxy.sendResolvedAddress) hop.dialed = hop.pinned[0] ?? null;
        return tunnel;
      }
      last = tunnel;
    }
    if (last.ok || !isConnectionFailure(last.reason)) break;
  }
  return last;
}
