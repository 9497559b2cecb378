// The decision of one hop: an immutable value, built once from the hop at its decision point. It is the
// decision audit record itself; Proxy-Status and the denial body (respond.ts), the metrics (audit-hop.ts)
// and `sluice explain` (explain.ts) all read this one value, so they cannot disagree.
import { isoTimestamp, redactTarget, type DecisionRecordV1 } from '../audit/index.js';
import { Reasons } from '../core/index.js';
import { isAttested } from './decide.js';
import type { Hop } from './hop.js';

export type Decision = DecisionRecordV1;

/** Where a hop was decided: its connection and listener (ConnectionContext). */
export interface DecisionPlace {
  readonly id: string;
  readonly listener: string;
  /** The client address, carried or the peer's (null on a Unix socket); absent when there is no connection. */
  readonly auditSource?: string | null;
}

/** Attested for the alternative that carried the hop; before dialing, only if every alternative is. */
export function attestedOf(hop: Hop): boolean | null {
  if (hop.usedHop !== null) return isAttested(hop.usedHop, hop);
  if (hop.routeHops.length === 0) return null;
  return hop.routeHops.every((h) => isAttested(h, hop));
}

function credentialObservingOf(hop: Hop): boolean | null {
  if (hop.usedHop !== null) return hop.usedHop.kind === 'proxy' && hop.usedHop.proxy.inspectsTls;
  if (hop.routeHops.length === 0) return null;
  return hop.routeHops.some((h) => h.kind === 'proxy' && h.proxy.inspectsTls);
}

export function decisionOf(hop: Hop, place: DecisionPlace): Decision {
  // Never report a pin for a hop an upstream proxy resolves: it was checked, not dialed (docs/scenarios.md scenario 3).
  const pinned = hop.dialed ?? (attestedOf(hop) === true ? (hop.pinned[0] ?? null) : null);
  return Object.freeze({
    v: 1,
    kind: 'decision',
    ts: isoTimestamp(),
    connection: place.id,
    hop: hop.index,
    listener: place.listener,
    principal: hop.principal?.grantId ?? null,
    via: hop.principal?.via ?? null,
    request: hop.kind,
    method: hop.method,
    target: redactTarget(hop.target),
    scheme: hop.scheme,
    canonical: hop.canonical?.key ?? null,
    decision: hop.isAllowed ? 'allow' : 'deny',
    reason: hop.reason,
    status: Reasons[hop.reason].status,
    detail: hop.detail === '' ? null : hop.detail,
    rule: hop.rule,
    addresses: Object.freeze(hop.addresses.map((a) => Object.freeze({ address: a.address, class: a.class, allowed: a.allowed }))),
    pinned: pinned === null ? null : pinned.address,
    route: hop.route?.label ?? null,
    upstream: hop.usedHop?.kind === 'proxy' ? hop.usedHop.proxy.label : null,
    attested: attestedOf(hop),
    credentialObserving: credentialObservingOf(hop),
    timings: Object.freeze({ identifyUs: hop.identifyUs, authorizeUs: hop.authorizeUs, routeUs: hop.routeUs, resolveUs: hop.resolveUs, dialUs: hop.dialUs }),
    source: place.auditSource ?? null,
  } as const);
}
