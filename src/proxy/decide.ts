// The policy stages of one hop, in order, after the principal is known: check the grant is live,
// authorize the canonical destination, choose the route, then resolve, classify and pin. Nothing here
// dials; `sluice explain` runs exactly these stages.
import { authorize } from '../authority/index.js';
import { literalAnswer, pin, type Resolver } from '../resolve/index.js';
import type { RouteSelector } from '../route/index.js';
import type { Hop } from './hop.js';
import type { RuntimeGrant } from './grant-table.js';

export interface DecideDeps {
  readonly resolver: Resolver;
  readonly routes: RouteSelector;
  readonly now: () => number;
}

/** Returns true when the grant is usable now; otherwise records why on the hop. */
export function checkGrantLive(hop: Hop, grant: RuntimeGrant | undefined, now: number): grant is RuntimeGrant {
  if (grant === undefined) return hop.fail(hop.principal?.via === 'listener' ? 'grant_unknown' : 'token_invalid');
  if (grant.expiresAtMs !== null && now >= grant.expiresAtMs) return hop.fail('grant_expired');
  hop.grant = grant;
  return true;
}

/** Authorize → route → resolve/classify/pin. Destination authorization precedes routing (seed A6). */
export async function decideDestination(deps: DecideDeps, hop: Hop, grant: RuntimeGrant): Promise<boolean> {
  const dest = hop.canonical;
  if (dest === null) return hop.fail('destination_malformed');
  const authorized = authorize(grant.authority, hop.kind, dest);
  hop.authorizeUs = hop.elapsedUs();
  if (!authorized.ok) return hop.fail(authorized.reason, authorized.detail);
  hop.rule = authorized.value.text;

  const route = deps.routes.select(dest);
  if (!route.ok) return hop.fail(route.reason, route.detail);
  hop.route = route.value;

  const literal = literalAnswer(dest);
  let answers;
  if (literal !== null) answers = [literal];
  else {
    const resolved = await deps.resolver.resolve(dest.host);
    if (!resolved.ok) {
      hop.resolveUs = hop.elapsedUs();
      return hop.fail(resolved.reason, resolved.detail);
    }
    answers = resolved.value.answers;
  }
  const pinned = pin(dest, answers, grant.addressPolicy);
  hop.resolveUs = hop.elapsedUs();
  hop.addresses = pinned.classified;
  if (!pinned.verdict.ok) return hop.fail(pinned.verdict.reason, pinned.verdict.detail);
  hop.pinned = pinned.verdict.value;
  return true;
}
