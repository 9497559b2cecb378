// What the request handlers need, built once by app.ts and shared by every listener.
import type { AuditSink, OperationalLog } from '../../audit/index.js';
import type { DialOptions, UpstreamOptions } from '../../egress/index.js';
import type { BoundUpstreams, PrincipalPools, RelayLimits } from '../../relay/index.js';
import type { EventRing, MetricsSink } from '../../telemetry/index.js';
import type { DecideDeps } from './decide.js';
import type { HopCache } from './hop-cache.js';
import type { AuthThrottle, ConnectionGate, GrantRegistry, RuntimeGrant } from '../../grant/index.js';

export interface ProxyRuntime extends DecideDeps {
  readonly registry: GrantRegistry;
  readonly audit: AuditSink;
  readonly log: OperationalLog;
  /** Connections to origins, per principal (review 2026-12-04 finding 6). */
  readonly forwardAgent: PrincipalPools;
  /** Forwards absolute-form requests to configured upstream proxies only; per principal too. */
  readonly upstreamAgent: PrincipalPools;
  /** Connections to upstream proxies whose authentication binds the connection, kept per principal. */
  readonly boundUpstreams: BoundUpstreams;
  readonly dial: DialOptions;
  readonly upstream: UpstreamOptions;
  readonly relay: RelayLimits;
  readonly metrics: MetricsSink;
  readonly gate: ConnectionGate;
  readonly authThrottle: AuthThrottle;
  readonly maxHeaderCount: number;
  /** How long a client has to send its ClientHello when the grant checks SNI. */
  readonly handshakeTimeoutMs: number;
  /** False while a shared ledger store has not answered for longer than ledger.maxStaleMs (always true on the file store). */
  readonly ledgerFresh: () => boolean;
  /** Allowed outcomes of repeated hops (ADR 0018). */
  readonly hopCache: HopCache;
  /** The supervisor's event stream (GET /v1/events): decisions, asks, grant changes. */
  readonly events: EventRing;
}

/** A grant's relay limits: its own idle timeout when it is shorter than the proxy's, never longer. */
export function relayLimitsFor(rt: Pick<ProxyRuntime, 'relay'>, grant: Pick<RuntimeGrant, 'limits'>): RelayLimits {
  const idle = grant.limits.idleTimeoutMs;
  return idle === undefined || idle >= rt.relay.idleTimeoutMs ? rt.relay : { idleTimeoutMs: idle };
}
