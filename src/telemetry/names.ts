// The metric registry: each Sluice metric's name, type, help, label names and buckets, declared once,
// with the closed set of values each label may take. Never add a label that can hold a grant id, a
// host or an address. test/unit/telemetry/metrics-docs.test.ts checks docs/metrics.md against this table.
import { CloseReasons, Reasons, type CloseReason, type ReasonCode, type RequestKind } from '../core/index.js';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricSpec {
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  /** Histogram upper bounds in seconds, ascending; `+Inf` is implied. */
  readonly buckets?: readonly number[];
}

/** Authorization is pure, in-memory work: microseconds, with a tail to 10 ms. */
export const AUTHORIZE_BUCKETS_SECONDS = [
  1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
] as const;

/** A dial is a TCP (and maybe TLS) handshake: 100 µs on loopback to the 10 s dial timeout range. */
export const DIAL_BUCKETS_SECONDS = [
  1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
] as const;

/** A revocation travels the fleet in one notification or one 25 ms poll: milliseconds, with a tail. */
export const REVOCATION_LAG_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

export const MetricSpecs = {
  sluice_decisions_total: {
    type: 'counter',
    help: 'Decisions made, by reason code and request kind.',
    labelNames: ['reason', 'request'],
  },
  sluice_connections_active: {
    type: 'gauge',
    help: 'Client connections open now, by listener.',
    labelNames: ['listener'],
  },
  sluice_connections_total: {
    type: 'counter',
    help: 'Client connections accepted, by listener.',
    labelNames: ['listener'],
  },
  sluice_tunnels_active: {
    type: 'gauge',
    help: 'CONNECT tunnels open now, by listener.',
    labelNames: ['listener'],
  },
  sluice_bytes_total: {
    type: 'counter',
    help: 'Bytes relayed: up is client to destination, down is destination to client.',
    labelNames: ['direction'],
  },
  sluice_authorize_duration_seconds: {
    type: 'histogram',
    help: 'Time to decide whether a destination is granted (canonicalize and authorize).',
    labelNames: [],
    buckets: AUTHORIZE_BUCKETS_SECONDS,
  },
  sluice_dial_duration_seconds: {
    type: 'histogram',
    help: 'Time to open the egress connection to a pinned address or an upstream proxy.',
    labelNames: [],
    buckets: DIAL_BUCKETS_SECONDS,
  },
  sluice_dns_cache_lookups_total: {
    type: 'counter',
    help: 'DNS answer cache lookups, by result.',
    labelNames: ['result'],
  },
  sluice_pac_cache_lookups_total: {
    type: 'counter',
    help: 'PAC answer cache lookups, by result.',
    labelNames: ['result'],
  },
  sluice_decision_cache_lookups_total: {
    type: 'counter',
    help: 'Hop decision cache lookups (a repeated hop answered without running its stages: ADR 0018), by result.',
    labelNames: ['result'],
  },
  sluice_ledger_grants: {
    type: 'gauge',
    help: 'Grants in the ledger, by state.',
    labelNames: ['state'],
  },
  sluice_closes_total: {
    type: 'counter',
    help: 'Tunnels and forwarded responses that ended, by close reason.',
    labelNames: ['reason'],
  },
  sluice_ledger_store_up: {
    type: 'gauge',
    help: 'Whether the shared ledger store (ledger.store: redis) answered the last catch-up: 1 or 0.',
    labelNames: [],
  },
  sluice_ledger_store_staleness_seconds: {
    type: 'gauge',
    help: 'Time since the shared ledger store last answered a catch-up; past ledger.maxStaleMs every new hop is refused.',
    labelNames: [],
  },
  sluice_revocation_lag_seconds: {
    type: 'histogram',
    help: 'Time from a revocation on another instance (its clock) to this instance applying it.',
    labelNames: [],
    buckets: REVOCATION_LAG_BUCKETS_SECONDS,
  },
} as const satisfies Record<`sluice_${string}`, MetricSpec>;

export type MetricName = keyof typeof MetricSpecs;

// The closed value sets of the labels. `listener` is the one label whose values come from config;
// Metrics caps it at MAX_LISTENER_SERIES and counts any further name under LISTENER_OVERFLOW.

export const DecisionReasons = Object.keys(Reasons) as readonly ReasonCode[];
export const DecisionRequests = ['connect', 'forward'] as const satisfies readonly RequestKind[];
export const ByteDirections = ['up', 'down'] as const;
export const CacheResults = ['hit', 'miss'] as const;
export const LedgerStates = ['active', 'revoked', 'expired'] as const;

/** The `reason` of `sluice_closes_total` for a string that is not a CloseReason. */
export const CLOSE_REASON_OTHER = 'other';
export const MetricCloseReasons = [...(Object.keys(CloseReasons) as CloseReason[]), CLOSE_REASON_OTHER] as const;

/** Listener names are configured (`listeners[].name`), so they are few; this bounds them anyway. */
export const MAX_LISTENER_SERIES = 256;
/** Not a valid listener name (config allows only letters, digits, `_`, `.` and `-`). */
export const LISTENER_OVERFLOW = '(other)';

// Compile-time check: DecisionRequests lists every RequestKind (a new kind fails to compile here).
type MissingRequestKind = Exclude<RequestKind, (typeof DecisionRequests)[number]>;
const isEveryRequestKindListed: [MissingRequestKind] extends [never] ? true : never = true;
void isEveryRequestKindListed;
