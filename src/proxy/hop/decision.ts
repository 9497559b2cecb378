// The decision of one hop: an immutable value, built from the decided hop only when something needs it.
// Proxy-Status and the denial body (respond.ts), `sluice explain` (explain.ts) and the capture sinks of
// tests read it. Its fields are the decision audit record's: the file sink writes that record from the
// same hop facts without building this value (audit/encode-record.ts), and a property test holds the
// two to the same bytes. The metrics (audit-hop.ts) read the hop.
import { isoTimestamp, redactTarget, type AuditPlace, type DecisionRecordV1 } from '../../audit/index.js';
import { Reasons } from '../../core/index.js';
import type { Hop } from './hop.js';

export type Decision = DecisionRecordV1;

/** Where a hop was decided: its connection and listener (ConnectionContext). */
export type DecisionPlace = AuditPlace;

/** The decision of `hop`, decided at `nowMs`: every field of the decision record, in order. */
export function decisionOf(hop: Hop, place: DecisionPlace, nowMs: number = Date.now()): Decision {
  return Object.freeze({
    v: 1,
    kind: 'decision',
    ts: isoTimestamp(nowMs),
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
    pinned: hop.recordedPin,
    route: hop.route?.label ?? null,
    upstream: hop.upstream,
    attested: hop.attested,
    credentialObserving: hop.credentialObserving,
    timings: Object.freeze({ identifyUs: hop.identifyUs, authorizeUs: hop.authorizeUs, routeUs: hop.routeUs, resolveUs: hop.resolveUs, dialUs: hop.dialUs }),
    source: place.auditSource ?? null,
  } as const);
}
