// Writes a hop's two audit records and their metrics: the decision (and its event for GET /v1/events,
// when a supervisor watches), and the close of an allowed hop.
// A sink with the fast path (the file sink) gets the hop's facts and encodes each record from them
// with no record object; any other sink gets the record as a value, the same fields in the same order.
// Only run-hop.ts calls these, so each hop gets exactly one decision record and at most one close
// record, after it (docs/audit-log.md).
import { isoTimestamp, type AuditPlace, type AuditSink, type CloseOutcome, type CloseRecordV1 } from '../../audit/index.js';
import { Reasons, wantedRule } from '../../core/index.js';
import type { EventRing, MetricsSink } from '../../telemetry/index.js';
import { decisionOf } from './decision.js';
import type { Hop } from './hop.js';

/** How a relayed hop ended: the close record's own fields. */
export type CloseFacts = CloseOutcome;

/**
 * Writes the decision record of `hop`, decided at hop.decidedAtMs, then feeds the metrics from the hop,
 * then publishes a `decision` event when a reader watches (GET /v1/events; nothing is built otherwise).
 * The record is written first: a metrics or event fault must never cost a hop its record.
 */
export function recordDecision(sink: AuditSink, place: AuditPlace, hop: Hop, metrics: MetricsSink, events?: EventRing): void {
  if (sink.writeDecision !== undefined) sink.writeDecision(hop, place, hop.decidedAtMs);
  else sink.write((hop.decision ??= decisionOf(hop, place, hop.decidedAtMs)));
  metrics.decision(hop.reason, hop.kind);
  const { authorizeUs, dialUs, resolveUs } = hop;
  if (authorizeUs !== null) metrics.authorizeSeconds(authorizeUs / 1e6);
  if (dialUs !== null) metrics.dialSeconds((dialUs - (resolveUs ?? 0)) / 1e6);
  if (events?.wantsDecisions === true) publishDecision(events, place, hop);
}

/**
 * The decision as a supervisor reads it: outcome, reason, grant and its generation, and the canonical
 * destination as `scheme://host:port` (a CONNECT as https, the scheme nearly every client tunnels, as the
 * ask for it names it). Never the request target, a header value or a token.
 */
function publishDecision(events: EventRing, place: AuditPlace, hop: Hop): void {
  const grant = hop.principal?.grantId ?? null;
  const generation = hop.grant?.generation ?? null;
  events.publish('decision', { grant, generation }, {
    ts: isoTimestamp(hop.decidedAtMs),
    decision: hop.isAllowed ? 'allow' : 'deny',
    reason: hop.reason,
    grant,
    generation,
    destination: wantedRule({ request: hop.kind, scheme: hop.scheme, canonical: hop.canonical?.key ?? null }),
    request: hop.kind,
    listener: place.listener,
    connection: place.id,
    hop: hop.index,
    status: Reasons[hop.reason].status,
  });
}

/** The close record of `hop`, closed at `nowMs`: every field, in order. */
export function closeRecordOf(hop: Hop, place: AuditPlace, facts: CloseFacts, nowMs: number): CloseRecordV1 {
  return {
    v: 1,
    kind: 'close',
    ts: isoTimestamp(nowMs),
    connection: place.id,
    hop: hop.index,
    listener: place.listener,
    principal: hop.principal?.grantId ?? null,
    request: hop.kind,
    canonical: hop.canonical?.key ?? null,
    pinned: hop.dialed?.address ?? null,
    closedBy: facts.closedBy,
    status: facts.status,
    bytesUp: facts.bytesUp,
    bytesDown: facts.bytesDown,
    durationMs: nowMs - hop.startedAtMs,
    firstByteUs: hop.firstByteUs,
  };
}

export function recordClose(sink: AuditSink, place: AuditPlace, hop: Hop, facts: CloseFacts, metrics: MetricsSink): void {
  const nowMs = Date.now();
  if (sink.writeClose !== undefined) sink.writeClose(hop, place, facts, nowMs);
  else sink.write(closeRecordOf(hop, place, facts, nowMs));
  metrics.bytes(facts.bytesUp, facts.bytesDown);
  metrics.closed(facts.closedBy);
}
