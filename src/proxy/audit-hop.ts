// The one place that turns a hop into its audit records: one decision record when the hop is decided,
// one close record when its tunnel or response ends (STYLE §3.8).
import { Reasons, type CloseReason } from '../core/index.js';
import { isoTimestamp, redactTarget, type AuditSink } from '../audit/index.js';
import type { MetricsSink } from '../telemetry/index.js';
import type { ConnectionContext } from './connection-context.js';
import type { Hop } from './hop.js';
import { isAttested } from './decide.js';

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

export function recordDecision(sink: AuditSink, ctx: ConnectionContext, hop: Hop, metrics: MetricsSink): void {
  metrics.decision(hop.reason, hop.kind);
  if (hop.authorizeUs !== null) metrics.authorizeSeconds(hop.authorizeUs / 1e6);
  if (hop.dialUs !== null) metrics.dialSeconds((hop.dialUs - (hop.resolveUs ?? 0)) / 1e6);
  // Never report a pin for a hop an upstream proxy resolves: it was checked, not dialed (BRIEF scenario 3).
  const pinned = hop.dialed ?? (attestedOf(hop) === true ? (hop.pinned[0] ?? null) : null);
  sink.write({
    v: 1,
    kind: 'decision',
    ts: isoTimestamp(),
    connection: ctx.id,
    hop: hop.index,
    listener: ctx.listener,
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
    addresses: hop.addresses.map((a) => ({ address: a.address, class: a.class, allowed: a.allowed })),
    pinned: pinned === null ? null : pinned.address,
    route: hop.route?.label ?? null,
    upstream: hop.usedHop?.kind === 'proxy' ? hop.usedHop.proxy.label : null,
    attested: attestedOf(hop),
    credentialObserving: credentialObservingOf(hop),
    timings: { identifyUs: hop.identifyUs, authorizeUs: hop.authorizeUs, routeUs: hop.routeUs, resolveUs: hop.resolveUs, dialUs: hop.dialUs },
  });
}

export interface CloseFacts {
  readonly closedBy: CloseReason;
  readonly status: number | null;
  readonly bytesUp: number;
  readonly bytesDown: number;
}

export function recordClose(sink: AuditSink, ctx: ConnectionContext, hop: Hop, facts: CloseFacts, metrics: MetricsSink): void {
  metrics.bytes(facts.bytesUp, facts.bytesDown);
  metrics.closed(facts.closedBy);
  sink.write({
    v: 1,
    kind: 'close',
    ts: isoTimestamp(),
    connection: ctx.id,
    hop: hop.index,
    listener: ctx.listener,
    principal: hop.principal?.grantId ?? null,
    request: hop.kind,
    canonical: hop.canonical?.key ?? null,
    pinned: hop.dialed?.address ?? null,
    closedBy: facts.closedBy,
    status: facts.status,
    bytesUp: facts.bytesUp,
    bytesDown: facts.bytesDown,
    durationMs: Date.now() - hop.startedAtMs,
    firstByteUs: hop.firstByteUs,
  });
}
