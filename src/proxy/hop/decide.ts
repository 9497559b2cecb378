// The policy stages of one hop, in order, after the principal is known: check the grant is live,
// authorize the canonical destination, choose the route, then resolve, classify and pin. Nothing here
// dials; `sluice explain` runs exactly these stages.
import { authorize } from '../../authority/index.js';
import { deny, ok, wantedRule, type LookupAnswer, type ReasonCode, type ResolvedAddress, type Verdict } from '../../core/index.js';
import { literalAnswer, pin, type Resolver } from '../../resolve/index.js';
import type { RouteHop, RouteSelector } from '../../route/index.js';
import type { MetricsSink } from '../../telemetry/index.js';
import type { Hop } from './hop.js';
import type { AskRegistry, RuntimeGrant } from '../../grant/index.js';

export interface DecideDeps {
  readonly resolver: Resolver;
  readonly routes: RouteSelector;
  readonly now: () => number;
  readonly metrics: MetricsSink;
  /** Holds a hop to a destination no rule names, for a grant with `ask` (absent: never asked, as in sluice explain). */
  readonly asks?: AskRegistry;
}

/** Returns true when the grant is usable now; otherwise records why on the hop. */
export function checkGrantLive(hop: Hop, grant: RuntimeGrant | undefined, now: number): grant is RuntimeGrant {
  if (grant === undefined) return hop.fail(hop.principal?.via === 'token' ? 'token_invalid' : 'grant_unknown');
  if (grant.revoked) return hop.fail('grant_revoked');
  if (grant.expiresAtMs !== null && now >= grant.expiresAtMs) return hop.fail('grant_expired');
  hop.grant = grant;
  return true;
}

function isCapacityRefusal(reason: ReasonCode): boolean {
  return reason === 'lookup_limit_reached' || reason === 'dns_busy';
}

/** A lookup this hop starts is charged to `grant`'s share of the lookup slots (limits.maxConcurrentLookupsPerGrant). */
async function resolveDestination(deps: DecideDeps, hop: Hop, grant: RuntimeGrant): Promise<Verdict<readonly (ResolvedAddress | LookupAnswer)[]>> {
  const dest = hop.canonical;
  if (dest === null) return deny('destination_malformed');
  const literal = literalAnswer(dest);
  if (literal !== null) {
    hop.answerTtlMs = Infinity;
    return ok([literal]);
  }
  const resolved = await deps.resolver.resolve(dest.host, grant.id);
  if (!resolved.ok) return resolved;
  if (resolved.value.source !== 'hosts') deps.metrics.dnsCache(resolved.value.source === 'cache');
  hop.answerTtlMs = resolved.value.ttlMs;
  return ok(resolved.value.answers);
}

/**
 * Whether Sluice itself checks the address the next hop dials: always for direct, for a proxy only
 * when it is sent the checked IP literal (sendResolvedAddress) or the destination is a literal already.
 * A proxy given a name resolves it itself: the decision is unattested (principle A6 in docs/principles.md).
 */
export function isAttested(routeHop: RouteHop, hop: Hop): boolean {
  return routeHop.kind === 'direct' || routeHop.proxy.sendResolvedAddress || hop.canonical?.hostKind !== 'name';
}

/** Authorize → route → resolve/classify/pin. Destination authorization precedes routing (principle A6 in docs/principles.md). */
export async function decideDestination(deps: DecideDeps, hop: Hop, grant: RuntimeGrant): Promise<boolean> {
  const dest = hop.canonical;
  if (dest === null) return hop.fail('destination_malformed');
  const authorized = authorize(grant.authority, hop.kind, dest);
  hop.authorizeUs = hop.elapsedUs();
  // A miss of a grant that asks goes on through route, resolve and pin first: an address class the
  // grant refuses is refused as ever, never asked about (issue 27). The ask is raised last, before dialing.
  let askFor: string | null = null;
  if (!authorized.ok) {
    askFor = authorized.reason === 'destination_not_granted' && grant.askTimeoutMs !== null && deps.asks !== undefined ? wantedRule({ request: hop.kind, scheme: hop.scheme, canonical: dest.key }) : null;
    if (askFor === null) return hop.fail(authorized.reason, authorized.detail);
    const standing = deps.asks?.standingAnswer(grant.id, askFor);
    if (standing === 'deny') return hop.fail('approval_denied', `${askFor} was denied for the grant’s life when asked`);
    hop.rule = standing === 'allow' ? `ask:${askFor}` : null;
  } else hop.rule = authorized.value.text;

  let resolution = deps.routes.resolvesFirst ? await resolveDestination(deps, hop, grant) : null;
  if (resolution !== null && !resolution.ok && isCapacityRefusal(resolution.reason)) return hop.fail(resolution.reason, resolution.detail);
  const selecting = performance.now();
  const route = await deps.routes.select(dest, hop.kind, hop.scheme, grant.id);
  // The answer aged while the PAC was evaluated: what is left of its TTL is what a later hop may rely on.
  if (resolution !== null && hop.answerTtlMs !== null) hop.answerTtlMs -= performance.now() - selecting;
  if (!route.ok) return hop.fail(route.reason, route.detail);
  hop.route = route.value;
  hop.routeUs = hop.elapsedUs();
  resolution ??= await resolveDestination(deps, hop, grant);
  hop.resolveUs = hop.elapsedUs();

  let candidates = route.value.hops;
  const unattested = candidates.filter((h) => !isAttested(h, hop));
  if (!resolution.ok) {
    // Behind a corporate proxy a name often does not resolve locally; only hops where the proxy
    // resolves can go on, unattested. Direct and sendResolvedAddress hops need the checked address.
    // A lookup refused for capacity is no answer at all: going on would let a principal that fills its
    // own lookup share skip the local forbidden-class check of an unattested route.
    if (unattested.length === 0 || isCapacityRefusal(resolution.reason)) return hop.fail(resolution.reason, resolution.detail);
    candidates = unattested;
  } else {
    const pinned = pin(dest, resolution.value, grant.addressPolicy);
    hop.addresses = pinned.classified;
    // A proxy that resolves the name itself may pick any answer: if one is forbidden, deny the hop.
    if (unattested.length > 0 && pinned.classified.some((a) => !a.allowed)) {
      const isSelf = pinned.classified.some((a) => a.class === 'self');
      return hop.fail(isSelf ? 'address_self' : 'address_class_denied', 'an upstream proxy could resolve the name to a forbidden address');
    }
    if (!pinned.verdict.ok) return hop.fail(pinned.verdict.reason, pinned.verdict.detail);
    hop.pinned = pinned.verdict.value;
  }
  if (grant.requireAttestedAddress) {
    candidates = candidates.filter((h) => isAttested(h, hop));
    if (candidates.length === 0) return hop.fail('route_unattested', `route ${route.value.label} lets an upstream proxy resolve the name`);
  }
  hop.routeHops = candidates;
  if (askFor !== null && hop.rule === null && deps.asks !== undefined) return heldOnAsk(deps, deps.asks, hop, grant, askFor);
  return true;
}

/** Holds the hop on the ask for `destination`; an allow goes on only while the grant is still live. */
async function heldOnAsk(deps: DecideDeps, asks: AskRegistry, hop: Hop, grant: RuntimeGrant, destination: string): Promise<boolean> {
  const outcome = await asks.raise(grant, destination);
  hop.askedBy = outcome.ask;
  if (!outcome.allowed) return hop.fail(outcome.reason, outcome.reason === 'grant_revoked' ? 'the grant was revoked while the hop waited on its ask' : `ask ${outcome.ask}`);
  if (grant.expiresAtMs !== null && deps.now() >= grant.expiresAtMs) return hop.fail('grant_expired', 'the grant expired while the hop waited on its ask');
  hop.rule = `ask:${outcome.ask}`;
  return true;
}
