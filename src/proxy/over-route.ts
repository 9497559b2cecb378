// The one loop over a hop's route alternatives, for tunnels and forwarded requests alike: each
// alternative in the route's order; only a failure the caller says may be retried (a connection-level
// failure before anything was sent) moves on to the next. A 407 or a refusal from a proxy ends the hop.
// DIRECT is tried only when the route lists it.
import { deny, type Verdict } from '../core/index.js';
import type { RouteHop } from '../route/index.js';
import type { Hop } from './hop.js';

export type ProxyHop = RouteHop & { kind: 'proxy' };

export async function overRoute<T>(hop: Hop, attempt: (routeHop: RouteHop) => Promise<Verdict<T>>, mayRetry: (failure: Verdict<T> & { ok: false }) => boolean): Promise<Verdict<T>> {
  let last: Verdict<T> = deny('route_none', 'no route alternative could carry the hop');
  for (const routeHop of hop.routeHops) {
    hop.usedHop = routeHop;
    last = await attempt(routeHop);
    if (last.ok || !mayRetry(last)) break;
  }
  return last;
}

/** The authority sent upstream: the checked IP literal when the pin must survive the hop, else the name. */
export function upstreamAuthority(hop: Hop, routeHop: ProxyHop): string | null {
  const dest = hop.canonical;
  if (dest === null) return null;
  if (!routeHop.proxy.sendResolvedAddress) return dest.key;
  const pinned = hop.pinned[0];
  if (pinned === undefined) return null;
  return pinned.family === 6 ? `[${pinned.address}]:${dest.port}` : `${pinned.address}:${dest.port}`;
}
