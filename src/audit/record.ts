// AuditRecordV1: the fixed shape of the two audit records, one per decision and one per close. Field
// names are declared once here and documented in docs/audit-log.md (checked by a test). Records never
// hold tokens, credentials, query strings or header values (principle A8 in docs/principles.md).
import type { AddressClass, CloseReason, ReasonCode, RequestKind, Scheme } from '../core/index.js';

export interface AuditAddress {
  readonly address: string;
  readonly class: AddressClass;
  readonly allowed: boolean;
}

export interface AuditTimings {
  /** Microseconds from the request head being parsed to each stage finishing; null when not reached. */
  readonly identifyUs: number | null;
  readonly authorizeUs: number | null;
  readonly routeUs: number | null;
  readonly resolveUs: number | null;
  readonly dialUs: number | null;
}

export interface DecisionRecordV1 {
  readonly v: 1;
  readonly kind: 'decision';
  readonly ts: string;
  readonly connection: string;
  readonly hop: number;
  readonly listener: string;
  readonly principal: string | null;
  readonly via: 'listener' | 'token' | 'certificate' | null;
  readonly request: RequestKind;
  readonly method: string;
  readonly target: string;
  readonly scheme: Scheme | null;
  readonly canonical: string | null;
  readonly decision: 'allow' | 'deny';
  readonly reason: ReasonCode;
  readonly status: number;
  readonly detail: string | null;
  readonly rule: string | null;
  readonly addresses: readonly AuditAddress[];
  readonly pinned: string | null;
  readonly route: string | null;
  /** The upstream proxy that carried the hop (`http://corp:8080`), or null for direct. */
  readonly upstream: string | null;
  readonly attested: boolean | null;
  /**
   * The route passes through a proxy declared `inspectsTls`: it can observe credentials (principle A2 in
   * docs/principles.md).
   */
  readonly credentialObserving: boolean | null;
  readonly timings: AuditTimings;
  /**
   * The client's address: the one a PROXY protocol header carried (listeners[].proxyProtocol), else the
   * connection's peer; null on a Unix socket. Auth failures are counted against it.
   */
  readonly source: string | null;
}

export interface CloseRecordV1 {
  readonly v: 1;
  readonly kind: 'close';
  readonly ts: string;
  readonly connection: string;
  readonly hop: number;
  readonly listener: string;
  readonly principal: string | null;
  readonly request: RequestKind;
  readonly canonical: string | null;
  readonly pinned: string | null;
  readonly closedBy: CloseReason;
  readonly status: number | null;
  readonly bytesUp: number;
  readonly bytesDown: number;
  readonly durationMs: number;
  /** Microseconds from the request head to the first byte from the origin or upstream; null if none came. */
  readonly firstByteUs: number | null;
}

export type AuditRecordV1 = DecisionRecordV1 | CloseRecordV1;

export const DECISION_FIELDS = [
  'v', 'kind', 'ts', 'connection', 'hop', 'listener', 'principal', 'via', 'request', 'method', 'target', 'scheme',
  'canonical', 'decision', 'reason', 'status', 'detail', 'rule', 'addresses', 'pinned', 'route', 'upstream', 'attested',
  'credentialObserving', 'timings', 'source',
] as const satisfies readonly (keyof DecisionRecordV1)[];

export const CLOSE_FIELDS = [
  'v', 'kind', 'ts', 'connection', 'hop', 'listener', 'principal', 'request', 'canonical', 'pinned', 'closedBy', 'status',
  'bytesUp', 'bytesDown', 'durationMs', 'firstByteUs',
] as const satisfies readonly (keyof CloseRecordV1)[];

const MAX_TARGET = 256;
const NOTHING_TO_REDACT = /^[\x21\x22\x24-\x3e\x41-\x7e]*$/;

/**
 * The request target as it may be logged: userinfo replaced (a token could hide there), query and
 * fragment dropped, control characters escaped, length bounded.
 */
export function redactTarget(target: string): string {
  // Most targets (host:port, a plain URL) have nothing to redact: visible ASCII without ? # @.
  if (target.length <= MAX_TARGET && NOTHING_TO_REDACT.test(target)) return target;
  let out = target;
  const cut = out.search(/[?#]/);
  if (cut >= 0) out = out.slice(0, cut);
  const at = out.lastIndexOf('@');
  if (at >= 0) {
    const schemeEnd = out.indexOf('://');
    out = `${schemeEnd >= 0 && schemeEnd < at ? out.slice(0, schemeEnd + 3) : ''}***${out.slice(at)}`;
  }
  out = out.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return out.length > MAX_TARGET ? `${out.slice(0, MAX_TARGET)}…` : out;
}
