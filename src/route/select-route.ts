// Chooses how an authorized destination is reached. The principal never influences this: the route comes
// from Sluice's own config (seed A2: the host network is a route, not a grant; A6: authorization first).
// Only `direct` is carried by this build; any other mode fails closed with route_unsupported rather
// than silently dialing direct.
import { deny, ok, type CanonicalDestination, type Verdict } from '../core/index.js';

export type RouteMode = 'direct' | 'proxy' | 'pac' | 'system';

export interface DirectRoute {
  readonly kind: 'direct';
  readonly label: 'direct';
  /** Sluice resolved, checked and dials the address itself. */
  readonly attested: true;
}

export type Route = DirectRoute;

const DIRECT: DirectRoute = { kind: 'direct', label: 'direct', attested: true };

export interface RouteSelector {
  readonly mode: RouteMode;
  select(dest: CanonicalDestination): Verdict<Route>;
}

export function createRouteSelector(mode: RouteMode): RouteSelector {
  if (mode === 'direct') return { mode, select: () => ok(DIRECT) };
  return { mode, select: () => deny('route_unsupported', `route.mode ${mode} is not available in this build`) };
}
