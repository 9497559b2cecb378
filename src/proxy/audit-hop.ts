// Writes a hop's two audit records and their metrics: the decision (the Decision value itself) and the
// close of an allowed hop. Only run-hop.ts calls these, so each hop gets exactly one decision record and
// at most one close record, after it (docs/audit-log.md).
import type { CloseReason } from '../core/index.js';
import { isoTimestamp, type AuditSink } from '../audit/index.js';
import type { MetricsSink } from '../telemetry/index.js';
import type { ConnectionContext } from './connection-context.js';
import type { Decision } from './decision.js';
import type { Hop } from './hop.js';

/** The record is written first: a metrics fault must never cost a hop its record. */
export function recordDecision(sink: AuditSink, decision: Decision, metrics: MetricsSink): void {
  sink.write(decision);
  const { authorizeUs, dialUs, resolveUs } = decision.timings;
  metrics.decision(decision.reason, decision.request);
  if (authorizeUs !== null) metrics.authorizeSeconds(authorizeUs / 1e6);
  if (dialUs !== null) metrics.dialSeconds((dialUs - (resolveUs ?? 0)) / 1e6);
}

export interface CloseFacts {
  readonly closedBy: CloseReason;
  readonly status: number | null;
  readonly bytesUp: number;
  readonly bytesDown: number;
}

export function recordClose(sink: AuditSink, ctx: ConnectionContext, hop: Hop, facts: CloseFacts, metrics: MetricsSink): void {
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
  metrics.bytes(facts.bytesUp, facts.bytesDown);
  metrics.closed(facts.closedBy);
}
