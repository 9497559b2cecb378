// The one loop over a hop's route alternatives, for tunnels and forwarded requests alike: each
// alternative in the route's order; only a failure the caller says may be retried (a connection-level
// failure before anything was sent) moves on to the next. A 407 or a refusal from a proxy ends the hop.
// DIRECT is tried only when the route lists it. Failover back-off (route/upstream-health.ts): a proxy
// that failed at the connection level is skipped while it backs off, when the route has another
// alternative; when every alternative is a proxy backing off, the hop is refused with
// upstream_unreachable, never sent DIRECT (principle A2 in docs/principles.md).
import { deny, type ReasonCode, type Verdict } from '../../core/index.js';
import type { RouteHop, UpstreamHealth } from '../../route/index.js';
import type { Hop } from '../hop/hop.js';

export type ProxyHop = RouteHop & { kind: 'proxy' };

/** The failures that mark a proxy down: it could not be connected to (not an answer such as a 407 or 403). */
function isProxyConnectionFailure(reason: ReasonCode): boolean {
  return reason === 'upstream_unreachable' || reason === 'upstream_timeout' || reason === 'upstream_tls_failed';
}

function healthOf(routeHop: RouteHop): UpstreamHealth | undefined {
  return routeHop.kind === 'proxy' ? routeHop.health : undefined;
}

/** The failures that are the proxy's own answer: it is up (a 407 is not a reason to try another proxy). */
function isProxyAnswer(reason: ReasonCode): boolean {
  return reason === 'upstream_auth_required' || reason === 'upstream_auth_failed' || reason === 'upstream_auth_unsupported' || reason === 'upstream_refused';
}

/** Records what an attempt through a proxy said about that proxy; a failure before any contact says nothing. */
function noteHealth(health: UpstreamHealth | undefined, verdict: Verdict<unknown>): void {
  if (health === undefined) return;
  if (verdict.ok || isProxyAnswer(verdict.reason)) health.markUp();
  else if (isProxyConnectionFailure(verdict.reason)) health.markFailed(`${verdict.reason}${verdict.detail === '' ? '' : ` (${verdict.detail})`}`);
}

function everyProxyDown(skipped: readonly UpstreamHealth[]): Verdict<never> {
  const each = skipped.map((h) => `${h.label} ${h.lastFailure === '' ? 'failed' : h.lastFailure}, retried in ${Math.ceil(h.retryInMs / 1000)} s`);
  return deny('upstream_unreachable', `every upstream proxy of the route is backing off after connection failures: ${each.join('; ')}`);
}

export async function overRoute<T>(hop: Hop, attempt: (routeHop: RouteHop) => Promise<Verdict<T>>, mayRetry: (failure: Verdict<T> & { ok: false }) => boolean): Promise<Verdict<T>> {
  const hops = hop.routeHops;
  // A route with one alternative always tries it: there is nothing to fail over to, and refusing
  // without trying would only lengthen an outage.
  const mayBackOff = hops.length > 1;
  let last: Verdict<T> | null = null;
  let skipped: UpstreamHealth[] | null = null;
  for (const routeHop of hops) {
    const health = healthOf(routeHop);
    if (mayBackOff && health?.isBackingOff === true) {
      (skipped ??= []).push(health);
      continue;
    }
    hop.usedHop = routeHop;
    last = await attempt(routeHop);
    noteHealth(health, last);
    if (last.ok || !mayRetry(last)) break;
  }
  if (last !== null) return last;
  if (skipped !== null) return everyProxyDown(skipped);
  return deny('route_none', 'no route alternative could carry the hop');
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
