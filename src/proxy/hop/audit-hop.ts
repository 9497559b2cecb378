// Writes a hop's two audit records and their metrics: the decision, and the close of an allowed hop.
// A sink with the fast path (the file sink) gets the hop's facts and encodes each record from them
// with no record object; any other sink gets the record as a value, the same fields in the same order.
// Only run-hop.ts calls these, so each hop gets exactly one decision record and at most one close
// record, after it (docs/audit-log.md).
import { isoTimestamp, type AuditPlace, type AuditSink, type CloseOutcome, type CloseRecordV1 } from '../../audit/index.js';
import type { MetricsSink } from '../../telemetry/index.js';
import { decisionOf } from './decision.js';
import type { Hop } from './hop.js';

/** How a relayed hop ended: the close record's own fields. */
export type CloseFacts = CloseOutcome;

/**
 * Writes the decision record of `hop`, decided at hop.decidedAtMs, then feeds the metrics from the hop.
 * The record is written first: a metrics fault must never cost a hop its record.
 */
export function recordDecision(sink: AuditSink, place: AuditPlace, hop: Hop, metrics: MetricsSink): void {
  if (sink.writeDecision !== undefined) sink.writeDecision(hop, place, hop.decidedAtMs);
  else sink.write((hop.decision ??= decisionOf(hop, place, hop.decidedAtMs)));
  metrics.decision(hop.reason, hop.kind);
  const { authorizeUs, dialUs, resolveUs } = hop;
  if (authorizeUs !== null) metrics.authorizeSeconds(authorizeUs / 1e6);
  if (dialUs !== null) metrics.dialSeconds((dialUs - (resolveUs ?? 0)) / 1e6);
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
